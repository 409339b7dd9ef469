//! Tests of cost estimates and runtime costs as Kubernetes 1.36 (cel-go v0.26) computes them:
//! definitions Kubernetes refuses are refused here, with its words and field paths; sizes
//! follow the declared bounds along field paths, through literals, comprehensions and
//! library results; runtime costs follow cel-go's optimized programs and the lists, sets
//! and optional libraries' trackers. Each figure is worked out from cel-go's rules in the
//! comment beside it.

use serde_json::{Value, json};

use super::{RUNTIME_COST_BUDGET, Rules};
use crate::core::field::Path;

/// An object schema with `props`, carrying `rule` at its root.
fn schema(rule: &str, props: Value) -> Value {
    json!({"type": "object", "properties": props, "x-kubernetes-validations": [{"rule": rule}]})
}

/// The estimated cost of `rule` on an object with `props` (before cardinality).
fn estimate(rule: &str, props: Value) -> u64 {
    let (rules, _) = Rules::compile_node(&schema(rule, props), &Path::new("openAPIV3Schema"), false);
    rules.root_rule_costs().first().copied().flatten().unwrap_or_else(|| panic!("{rule} does not compile"))
}

/// What evaluating `rule` on `object` costs; the rule must hold.
fn runtime(rule: &str, props: Value, object: Value) -> i64 {
    let (rules, _) = Rules::compile_node(&schema(rule, props), &Path::new("openAPIV3Schema"), false);
    let out = rules.validate_at(&Path::nil(), &object, None, RUNTIME_COST_BUDGET);
    assert!(out.errors.is_empty(), "{rule}: {:?}", out.errors);
    RUNTIME_COST_BUDGET - out.remaining_budget
}

/// The load-time errors of a definition version's schema, rendered with their full paths.
fn load_errors(openapi: Value) -> Vec<String> {
    let path = Path::new("spec").child("versions").index(0).child("schema").child("openAPIV3Schema");
    let (_, errs) = Rules::compile(&openapi, &path);
    errs.iter().map(ToString::to_string).collect()
}

fn int() -> Value {
    json!({"type": "integer"})
}

fn string(max: u64) -> Value {
    json!({"type": "string", "maxLength": max})
}

const HINT: &str = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";

#[test]
fn a_message_built_from_string_conversions_is_refused_as_kubernetes_refuses_it() {
    // `string(int)` has no size bound, so neither has the concatenation: its traversal is
    // estimated at a tenth of 2^64.
    let with_message = |message: &str| {
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"maxLimit": int(), "limit": int()},
            "x-kubernetes-validations": [{"rule": "self.limit <= self.maxLimit", "messageExpression": message}]}}})
    };
    let at = "spec.versions[0].schema.openAPIV3Schema";
    let message = format!("{at}.properties[spec].x-kubernetes-validations[0].messageExpression");
    assert_eq!(
        load_errors(with_message("'limit ' + string(self.maxLimit)")),
        vec![
            format!(
                "{message}: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x {HINT}"
            ),
            format!(
                "{message}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            format!(
                "{at}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {HINT}"
            ),
        ]
    );
    // Formatting costs a traversal of the format string only: accepted.
    assert_eq!(load_errors(with_message("'limit %d'.format([self.maxLimit])")), Vec::<String>::new());
}

#[test]
fn a_message_expression_is_not_multiplied_by_the_values_it_may_run_for() {
    // The rule runs once per item of an unbounded list; its own estimate is, but the message's
    // (a few dozen) is checked and totalled as it is.
    let openapi = json!({"type": "object", "properties": {"items": {"type": "array", "items": {
        "type": "object", "properties": {"name": string(16)},
        "x-kubernetes-validations": [{"rule": "has(self.name)", "messageExpression": "'name of ' + self.name + ' missing'"}]}}}});
    assert_eq!(load_errors(openapi), Vec::<String>::new());
}

#[test]
fn rules_kubernetes_estimates_past_the_limit_are_refused() {
    // An unbounded list of integers may hold 1572863 items; two comparisons per item make 7,
    // a little over the limit of 10000000.
    let openapi = json!({"type": "object", "properties": {"values": {"type": "array", "items": int(),
        "x-kubernetes-validations": [{"rule": "self.all(v, v >= 0 && v < 100)"}]}}});
    let rule = "spec.versions[0].schema.openAPIV3Schema.properties[values].x-kubernetes-validations[0].rule";
    assert_eq!(
        load_errors(openapi),
        vec![format!("{rule}: Forbidden: estimated rule cost exceeds budget by factor of 1.101004x {HINT}")]
    );
    // Selecting a field of an item of a filtered list reads no declared bound (the filter's
    // result has no path), so matching it is unbounded.
    let envars = json!({"envars": {"type": "array", "maxItems": 100, "items": {"type": "object",
        "properties": {"name": string(64), "value": string(256)}}}});
    let refused = "self.envars.filter(e, e.name == 'A').all(e, e.value.matches('^[a-z]*$'))";
    assert!(estimate(refused, envars.clone()) > 10_000_000);
    assert!(estimate("self.envars.all(e, e.name != 'A' || e.value.matches('^[a-z]*$'))", envars) < 1_000_000);
    // The items of a literal list have no declared bound either: joining them is unbounded.
    assert!(estimate("['a', 'b'].join('-') == 'a-b'", json!({})) > 10_000_000);
    // Nor have optional values: comparing two of them is unbounded.
    assert!(estimate("self.?s == optional.of('a')", json!({"s": string(4)})) > 10_000_000);
}

#[test]
fn comparisons_traverse_only_strings_bytes_and_equal_operands() {
    // self.n (2) + double() (1) + self.d (2) + `<` of doubles (1).
    assert_eq!(estimate("double(self.n) < self.d", json!({"n": int(), "d": {"type": "number"}})), 6);
    // self.s (2) + `<` of strings: the smaller operand, one character, a tenth rounded up (1).
    assert_eq!(estimate("self.s < 'b'", json!({"s": string(5)})), 3);
    // Objects are declared with no size: their equality costs nothing beyond the reads (3 each).
    let objs = json!({"o": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {"a": int()}}}});
    assert_eq!(estimate("self.o[0] == self.o[1]", objs), 6);
    // A type name reads the rule's own node (an object, size 0): `==` costs nothing.
    assert_eq!(estimate("type(self.n) == int", json!({"n": int()})), 4);
}

#[test]
fn library_results_are_sized_as_kubernetes_sizes_them() {
    let props = json!({"s": string(5), "t": string(100), "l": {"type": "array", "maxItems": 50, "items": string(1)}});
    // `replace('a', 'bb')` on at most 20 characters: up to 20 replacements of 2, 40 characters;
    // compared with `t` (up to 400) that is 4. 2 + replace (20 * 0.2 = 4) + 2 + 4.
    assert_eq!(estimate("self.s.replace('a', 'bb') == self.t", props.clone()), 12);
    // A literal limit bounds the pieces: 3 against up to 50 items is 1. 2 + 4 + 2 + 1.
    assert_eq!(estimate("self.s.split(',', 3) == self.l", props.clone()), 9);
    // Without one, as many pieces as characters: 20 against 50 is 2.
    assert_eq!(estimate("self.s.split(',') == self.l", props), 10);
}

#[test]
fn comprehensions_cost_their_expansion_per_item() {
    let list = json!({"l": {"type": "array", "maxItems": 10, "items": int()}});
    // Range 2, result 1; per item the condition `@not_strictly_false(@result)` (2) and the
    // step `@result && x > 0` (3).
    assert_eq!(estimate("self.l.all(x, x > 0)", list.clone()), 53);
    // Range 2, `[]` 10, result 1; per item `@result + [v * 2]` (1 + 10 + 2 + 1); then size()
    // and `>`.
    assert_eq!(estimate("self.l.transformList(i, v, v * 2).size() > 0", list.clone()), 155);
    // Map keys are declared as unbounded strings (size 0): comparing one costs nothing. Range
    // 2, result 1; per key the condition `@not_strictly_false(!@result)` (3) and `@result || k == 'a'` (2).
    let map = json!({"m": {"type": "object", "maxProperties": 5, "additionalProperties": int()}});
    assert_eq!(estimate("self.m.exists(k, k == 'a')", map), 28);
    // `cel.bind` is a comprehension over `[]` (10): then the value (2) and the body (2).
    assert_eq!(estimate("cel.bind(x, self.s, x == 'a')", json!({"s": string(5)})), 14);
    // sortBy binds the list (10 + 2), reads it (1), maps it to keys (1 + 10 + 1 + 3 * (12 + 2)),
    // and sorts them (3 * 3 * 2 + 1 + 10); then size() and `>`.
    assert_eq!(
        estimate("self.l.sortBy(e, -e).size() > 0", json!({"l": {"type": "array", "maxItems": 3, "items": int()}})),
        98
    );
    // optMap costs its target twice: has (1 + 1), then of(bind([] 10, value (1 + 1), body 2)),
    // then hasValue (1).
    assert_eq!(estimate("optional.of(1).optMap(v, v + 1).hasValue()", json!({})), 18);
}

#[test]
fn list_library_calls_cost_the_lists_they_build() {
    // Literal 10, reverse (3 + 1 + 10), literal 10, `==` of 3 items (1).
    assert_eq!(estimate("[1, 2, 3].reverse() == [3, 2, 1]", json!({})), 35);
    // Sorting compares every pair of the 4 items twice: 16 * 2 + 11.
    assert_eq!(
        estimate("self.l.sort().size() > 0", json!({"l": {"type": "array", "maxItems": 4, "items": int()}})),
        47
    );
}

#[test]
fn conversions_of_constants_are_folded_and_cost_nothing() {
    assert_eq!(runtime("double(5) < 10.0", json!({}), json!({})), 1);
    // The folded values make the list constant too: only format (1) and `==` (1) are charged.
    assert_eq!(runtime("'%s'.format([duration('1m')]) == '60s'", json!({}), json!({})), 1 + 1);
    // A conversion of a constant that fails fails the program, as cel-go's planner reports it.
    let (_, errs) = Rules::compile_node(&schema("int('x') == 1", json!({})), &Path::new("o"), false);
    assert!(errs.iter().any(|e| e.detail.starts_with("program instantiation failed: ")), "{errs:?}");
}

#[test]
fn optional_calls_are_charged_as_cel_go_runs_them() {
    // `or` evaluates its argument only when needed and costs nothing itself: of (1), hasValue (1).
    assert_eq!(runtime("optional.of(1).or(optional.of(2)).hasValue()", json!({}), json!({})), 2);
    // An absent optional field is not charged: self (1), hasValue (1), `==` (1).
    assert_eq!(runtime("self.?missing.hasValue() == false", json!({"missing": int()}), json!({})), 3);
    // optMap: of (1), hasValue (1), value (1 + 1), body (2), of (1); value (1); `==` (1).
    assert_eq!(runtime("optional.of(2).optMap(v, v * 2).value() == 4", json!({}), json!({})), 9);
}

#[test]
fn list_and_set_libraries_charge_what_their_trackers_charge() {
    // Sorting 3 items: 9 pairs twice, the call and the list (29); `==` (1).
    assert_eq!(runtime("[3, 1, 2].sort() == [1, 2, 3]", json!({}), json!({})), 30);
    // Deduplicating strings: 4 pairs at 2.1 is 8, plus 11; size() (1) and `==` (1).
    assert_eq!(runtime("['b', 'a'].distinct().size() == 2", json!({}), json!({})), 21);
    // sortBy: 3 reads, 2 map steps of 12 plus the key (1), 4 pairs twice plus 11; `==` (1).
    assert_eq!(runtime("[2, 1].sortBy(x, x) == [1, 2]", json!({}), json!({})), 49);
    // sets.contains: the list (2), the call (1) and 3 * 1 comparisons.
    let list = json!({"l": {"type": "array", "items": int()}});
    assert_eq!(runtime("sets.contains(self.l, [1])", list, json!({"l": [1, 2, 3]})), 6);
}

#[test]
fn a_call_dispatched_at_run_time_costs_one() {
    // Two int-or-string operands match every `+` overload, so cel-go dispatches at run time
    // and charges 1 rather than a traversal of the strings: reads (2 + 2), `+` (1), `==` of
    // 24 characters (3).
    let props = json!({"a": {"x-kubernetes-int-or-string": true}, "b": {"x-kubernetes-int-or-string": true}});
    let twelve = "aaaaaaaaaaaa";
    let rule = format!("self.a + self.b == '{twelve}{twelve}'");
    assert_eq!(runtime(&rule, props, json!({"a": twelve, "b": twelve})), 8);
}
