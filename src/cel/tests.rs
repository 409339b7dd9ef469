//! Tests of the CEL module: every example of the documentation's rule tables (a passing and a
//! failing object each), its compile errors word for word, cost rejections, the libraries,
//! list-type semantics, messages, reasons, field paths and ratcheting.

use serde_json::{Value, json};

use super::Rules;
use crate::core::field::Path;

/// Compile errors of a schema (at `openAPIV3Schema`), rendered.
fn compile_errors(schema: Value) -> Vec<String> {
    let (_, errs) = Rules::compile(&schema, &Path::new("openAPIV3Schema"));
    errs.iter().map(ToString::to_string).collect()
}

/// Runtime errors of validating `new` (and `old`) against a schema that compiles cleanly.
fn errors(schema: &Value, new: Value, old: Option<Value>) -> Vec<String> {
    let (rules, errs) = Rules::compile(schema, &Path::new("openAPIV3Schema"));
    assert!(errs.is_empty(), "unexpected compile errors for {schema}: {errs:?}");
    rules.validate(&new, old.as_ref()).errors.iter().map(ToString::to_string).collect()
}

/// A root schema whose `spec` holds `props` and carries `rule`.
fn spec_rule(rule: &str, props: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {
        "type": "object", "properties": props, "x-kubernetes-validations": [{"rule": rule}]}}})
}

/// Checks that `rule` on `spec` accepts `good` and rejects `bad` with `failed rule: <rule>`.
fn check(rule: &str, props: Value, good: Value, bad: Value) {
    let schema = spec_rule(rule, props);
    assert_eq!(errors(&schema, json!({"spec": good}), None), Vec::<String>::new(), "{rule} should pass");
    assert_eq!(
        errors(&schema, json!({"spec": bad}), None),
        vec![format!("spec: Invalid value: failed rule: {rule}")],
        "{rule}"
    );
}

/// Checks a rule evaluated on a scalar or list value at `spec.v`.
fn check_value(rule: &str, prop: Value, good: Value, bad: Value) {
    let mut prop = prop;
    prop["x-kubernetes-validations"] = json!([{"rule": rule}]);
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"v": prop}}}});
    assert_eq!(errors(&schema, json!({"spec": {"v": good}}), None), Vec::<String>::new(), "{rule} should pass");
    let errs = errors(&schema, json!({"spec": {"v": bad}}), None);
    assert_eq!(errs.len(), 1, "{rule} should fail once: {errs:?}");
    assert!(errs[0].starts_with("spec.v: Invalid value: "), "{errs:?}");
}

/// The result of one expression over `spec.v` (a scalar, list or object per `prop`).
fn truth(expr: &str, prop: Value, value: Value) -> bool {
    let mut prop = prop;
    prop["x-kubernetes-validations"] = json!([{"rule": expr}]);
    let schema = json!({"type": "object", "properties": {"v": prop}});
    let (rules, errs) = Rules::compile(&schema, &Path::new("openAPIV3Schema"));
    assert!(errs.is_empty(), "{expr}: {errs:?}");
    let out = rules.validate(&json!({"v": value}), None);
    match out.errors.as_slice() {
        [] => true,
        [e] if e.detail.starts_with("failed rule") => false,
        other => panic!("{expr}: {other:?}"),
    }
}

/// The result of a constant expression.
fn holds(expr: &str) -> bool {
    truth(expr, json!({"type": "string"}), json!("x"))
}

fn int() -> Value {
    json!({"type": "integer"})
}

fn string() -> Value {
    json!({"type": "string"})
}

#[test]
fn docs_rule_examples() {
    let replicas = json!({"minReplicas": int(), "replicas": int(), "maxReplicas": int()});
    check(
        "self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas",
        replicas,
        json!({"minReplicas": 1, "replicas": 2, "maxReplicas": 3}),
        json!({"minReplicas": 0, "replicas": 20, "maxReplicas": 10}),
    );
    check(
        "'Available' in self.stateCounts",
        json!({"stateCounts": {"type": "object", "additionalProperties": int()}}),
        json!({"stateCounts": {"Available": 1}}),
        json!({"stateCounts": {"Pending": 1}}),
    );
    let two_lists =
        json!({"list1": {"type": "array", "items": string()}, "list2": {"type": "array", "items": string()}});
    check(
        "(size(self.list1) == 0) != (size(self.list2) == 0)",
        two_lists,
        json!({"list1": ["a"], "list2": []}),
        json!({"list1": ["a"], "list2": ["b"]}),
    );
    // The docs index `self` where they mean the map; on the map itself the rule reads so.
    check(
        "!('MY_KEY' in self.map1) || self.map1['MY_KEY'].matches('^[a-zA-Z]*$')",
        json!({"map1": {"type": "object", "additionalProperties": string()}}),
        json!({"map1": {"MY_KEY": "abc"}}),
        json!({"map1": {"MY_KEY": "a1"}}),
    );
    let envars = json!({"envars": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "maxItems": 100, "items": {"type": "object", "required": ["name"],
        "properties": {"name": string(), "value": {"type": "string", "maxLength": 256}}}}});
    // The docs' `filter(...).all(e, e.value...)` is refused by Kubernetes' estimate (see the
    // cost tests); the same check in one comprehension is not.
    check(
        "self.envars.all(e, e.name != 'MY_ENV' || e.value.matches('^[a-zA-Z]*$'))",
        envars,
        json!({"envars": [{"name": "MY_ENV", "value": "abc"}, {"name": "OTHER", "value": "1"}]}),
        json!({"envars": [{"name": "MY_ENV", "value": "a1"}]}),
    );
    let times = json!({"created": {"type": "string", "format": "date-time"}, "ttl": {"type": "string", "format": "duration"},
        "expired": {"type": "string", "format": "date-time"}});
    check(
        "has(self.expired) && self.created + self.ttl < self.expired",
        times,
        json!({"created": "2023-01-01T00:00:00Z", "ttl": "1h", "expired": "2023-01-01T02:00:00Z"}),
        json!({"created": "2023-01-01T00:00:00Z", "ttl": "3h", "expired": "2023-01-01T02:00:00Z"}),
    );
    check(
        "self.health.startsWith('ok')",
        json!({"health": string()}),
        json!({"health": "ok: fine"}),
        json!({"health": "bad"}),
    );
    let widgets = json!({"widgets": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"],
        "items": {"type": "object", "required": ["key"], "properties": {"key": string(), "foo": int()}}}});
    check(
        "self.widgets.exists(w, w.key == 'x' && w.foo < 10)",
        widgets,
        json!({"widgets": [{"key": "x", "foo": 5}]}),
        json!({"widgets": [{"key": "x", "foo": 50}, {"key": "y", "foo": 1}]}),
    );
    check_value(
        "type(self) == string ? self == '100%' : self == 1000",
        json!({"x-kubernetes-int-or-string": true}),
        json!("100%"),
        json!(999),
    );
    check_value(
        "type(self) == string ? self == '100%' : self == 1000",
        json!({"x-kubernetes-int-or-string": true}),
        json!(1000),
        json!("50%"),
    );
    // Comparing every item of one list with every item of another needs bounds (see the cost tests).
    let bounded = json!({"type": "string", "maxLength": 64});
    let sets = json!({"set1": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 100, "items": bounded},
        "set2": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 100, "items": bounded}});
    check(
        "self.set1.all(e, !(e in self.set2))",
        sets,
        json!({"set1": ["a"], "set2": ["b"]}),
        json!({"set1": ["a"], "set2": ["a"]}),
    );
    let names = json!({"names": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 100, "items": bounded},
        "details": {"type": "object", "maxProperties": 100, "additionalProperties": string()}});
    check(
        "size(self.names) == size(self.details) && self.names.all(n, n in self.details)",
        names,
        json!({"names": ["a"], "details": {"a": "x"}}),
        json!({"names": ["a"], "details": {"b": "x"}}),
    );
}

#[test]
fn docs_rules_written_with_mistakes_are_refused_at_load() {
    // The docs' table spells these with typos; Kubernetes refuses them, and so do we.
    let envars = json!({"envars": {"type": "array", "items": {"type": "object", "properties": {"name": string(), "value": string()}}}});
    let errs = compile_errors(spec_rule(
        "self.envars.filter(e, e.name = 'MY_ENV').all(e, e.value.matches('^[a-zA-Z]*$')",
        envars,
    ));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("compilation failed: ERROR: <input>:1:"), "{errs:?}");
    let map = json!({"map1": {"type": "object", "additionalProperties": string()}});
    let errs = compile_errors(spec_rule("!('MY_KEY' in self.map1) || self['MY_KEY'].matches('^[a-zA-Z]*$')", map));
    assert!(errs[0].contains("found no matching overload for '_[_]'"), "{errs:?}");
}

#[test]
fn metadata_name_is_reachable_at_the_root() {
    let schema = json!({"type": "object", "properties": {"prefix": string()},
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith(self.prefix)"}]});
    assert!(errors(&schema, json!({"metadata": {"name": "ab-1"}, "prefix": "ab"}), None).is_empty());
    assert_eq!(
        errors(&schema, json!({"metadata": {"name": "x"}, "prefix": "ab"}), None),
        vec!["<nil>: Invalid value: failed rule: self.metadata.name.startsWith(self.prefix)"]
    );
    let errs = compile_errors(
        json!({"type": "object", "x-kubernetes-validations": [{"rule": "has(self.metadata.namespace)"}]}),
    );
    assert!(errs[0].contains("undefined field 'namespace'"), "{errs:?}");
}

#[test]
fn docs_scope_examples() {
    let root = json!({"type": "object",
        "x-kubernetes-validations": [{"rule": "self.status.actual <= self.spec.maxDesired"}],
        "properties": {"spec": {"type": "object", "properties": {"maxDesired": int()}},
                        "status": {"type": "object", "properties": {"actual": int()}}}});
    assert!(errors(&root, json!({"spec": {"maxDesired": 3}, "status": {"actual": 2}}), None).is_empty());
    assert_eq!(errors(&root, json!({"spec": {"maxDesired": 3}, "status": {"actual": 4}}), None).len(), 1);
    check(
        "self.components['Widget'].priority < 10",
        json!({"components": {"type": "object", "additionalProperties": {"type": "object", "properties": {"priority": int()}}}}),
        json!({"components": {"Widget": {"priority": 1}}}),
        json!({"components": {"Widget": {"priority": 10}}}),
    );
    // Without maxItems Kubernetes refuses this rule (see the cost tests): bound the list.
    check(
        "self.values.all(value, value >= 0 && value < 100)",
        json!({"values": {"type": "array", "maxItems": 100, "items": int()}}),
        json!({"values": [0, 99]}),
        json!({"values": [0, 100]}),
    );
    check_value("self.startsWith('kube')", string(), json!("kube-system"), json!("default"));
    check_value("size(self) == 1", json!({"type": "array", "items": string()}), json!(["a"]), json!([]));
    check_value("self > 0", int(), json!(1), json!(0));
    check("has(self.foo)", json!({"foo": int()}), json!({"foo": 1}), json!({}));
    check("has(self.foo)", json!({"foo": int()}), json!({"foo": 1}), json!({"foo": null}));
    let map_of_objects = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": "self['xyz'].foo > 0"}],
        "additionalProperties": {"type": "object", "properties": {"foo": int()}}}}});
    assert!(errors(&map_of_objects, json!({"spec": {"xyz": {"foo": 1}}}), None).is_empty());
    assert_eq!(errors(&map_of_objects, json!({"spec": {"xyz": {"foo": 0}}}), None).len(), 1);
}

#[test]
fn docs_compile_errors_word_for_word() {
    let on = |prop: Value, rule: &str| {
        let mut prop = prop;
        prop["x-kubernetes-validations"] = json!([{"rule": rule}]);
        compile_errors(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"f": prop}}}}))
    };
    let first_line =
        |errs: Vec<String>| errs.first().map(|e| e.lines().next().unwrap_or("").to_string()).unwrap_or_default();
    assert_eq!(
        first_line(on(int(), "self == true")),
        r#"openAPIV3Schema.properties[spec].properties[f].x-kubernetes-validations[0].rule: Invalid value: {"rule":"self == true"}: compilation failed: ERROR: <input>:1:6: found no matching overload for '_==_' applied to '(int, bool)'"#
    );
    // The rule as written, `<` and `&&` included (not Go's `\u003c`, `\u0026`), its fields in
    // ValidationRule's order.
    let mut prop = int();
    prop["x-kubernetes-validations"] =
        json!([{"rule": "self < 1 && self > 0 || self == true", "message": "m", "reason": "FieldValueInvalid"}]);
    let errs = compile_errors(json!({"type": "object", "properties": {"f": prop}}));
    assert!(
        first_line(errs).starts_with(
            r#"openAPIV3Schema.properties[f].x-kubernetes-validations[0].rule: Invalid value: {"rule":"self < 1 && self > 0 || self == true","message":"m","reason":"FieldValueInvalid"}: compilation failed"#
        )
    );
    let errs = on(json!({"type": "object", "properties": {"a": int()}}), "self.nonExistingField > 0");
    assert!(first_line(errs).ends_with("compilation failed: ERROR: <input>:1:5: undefined field 'nonExistingField'"));
    let errs = on(int(), "has(self)");
    assert!(first_line(errs).ends_with("compilation failed: ERROR: <input>:1:4: invalid argument to has() macro"));
    // A reserved word cannot name a field after `.`: cel-go points at the word.
    let errs = on(json!({"type": "object", "properties": {"a": int()}}), "self.true == 1");
    assert!(
        errs[0].ends_with("ERROR: <input>:1:6: Syntax error: mismatched input 'true' expecting IDENTIFIER\n | self.true == 1\n | .....^"),
        "{errs:?}"
    );
    // cel-go shows the source line and a caret under the error.
    let errs = on(int(), "self == true");
    assert!(errs[0].ends_with("\n | self == true\n | .....^"), "{errs:?}");
    assert!(on(string(), "self").iter().any(|e| e.ends_with("cel expression must evaluate to a bool")));
    assert!(
        on(string(), "authorizer.path('/healthz').check('get').allowed()")[0]
            .contains("undeclared reference to 'authorizer'")
    );
}

#[test]
fn transition_rules() {
    let transition = |prop: Value, rule: &str, old: Value, new: Value| -> Vec<String> {
        let mut prop = prop;
        prop["x-kubernetes-validations"] = json!([{"rule": rule}]);
        let schema = json!({"type": "object", "properties": {"v": prop}});
        errors(&schema, json!({"v": new}), Some(json!({"v": old})))
    };
    let obj = json!({"type": "object", "properties": {"foo": string(), "field": string()}});
    assert!(transition(obj.clone(), "self.foo == oldSelf.foo", json!({"foo": "a"}), json!({"foo": "a"})).is_empty());
    assert_eq!(transition(obj.clone(), "self.foo == oldSelf.foo", json!({"foo": "a"}), json!({"foo": "b"})).len(), 1);
    assert!(transition(string(), "oldSelf != 'bar' || self == 'bar'", json!("bar"), json!("bar")).is_empty());
    assert_eq!(transition(string(), "oldSelf != 'bar' || self == 'bar'", json!("bar"), json!("baz")).len(), 1);
    let keep = "!has(oldSelf.field) || has(self.field)";
    assert!(transition(obj.clone(), keep, json!({"field": "x"}), json!({"field": "y"})).is_empty());
    assert_eq!(transition(obj, keep, json!({"field": "x"}), json!({})).len(), 1);
    let set = json!({"type": "array", "x-kubernetes-list-type": "set", "maxItems": 100, "items": {"type": "string", "maxLength": 64}});
    assert!(
        transition(set.clone(), "self.all(element, element in oldSelf)", json!(["a", "b"]), json!(["b"])).is_empty()
    );
    assert_eq!(transition(set, "self.all(element, element in oldSelf)", json!(["a"]), json!(["a", "c"])).len(), 1);
    let from_x = "oldSelf != 'X' || self in ['A', 'B']";
    assert!(transition(string(), from_x, json!("X"), json!("A")).is_empty());
    assert_eq!(transition(string(), from_x, json!("X"), json!("Y")).len(), 1);
    assert!(transition(int(), "self >= oldSelf", json!(1), json!(2)).is_empty());
    assert_eq!(
        transition(int(), "self >= oldSelf", json!(2), json!(1)),
        vec!["v: Invalid value: 1: failed rule: self >= oldSelf"]
    );
    // The docs' enum example, with its message.
    let levels = json!({"type": "string", "enum": ["low", "medium", "high"], "x-kubernetes-validations": [{
        "rule": "!(self == 'high' && oldSelf == 'low') && !(self == 'low' && oldSelf == 'high')",
        "message": "cannot transition directly between 'low' and 'high'"}]});
    let schema = json!({"type": "object", "properties": {"level": levels}});
    assert!(errors(&schema, json!({"level": "medium"}), Some(json!({"level": "low"}))).is_empty());
    assert_eq!(
        errors(&schema, json!({"level": "high"}), Some(json!({"level": "low"}))),
        vec![r#"level: Invalid value: "high": cannot transition directly between 'low' and 'high'"#]
    );
    // Transition rules never run on create.
    assert!(errors(&schema, json!({"level": "high"}), None).is_empty());
}

#[test]
fn transition_rules_need_a_correlatable_node() {
    let errs = compile_errors(json!({"type": "object", "properties": {"l": {"type": "array", "maxItems": 10,
        "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}}));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].ends_with("oldSelf cannot be used on the uncorrelatable portion of the schema within openAPIV3Schema.properties[l].items"), "{errs:?}");
    let map_list = json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["k"], "items": {"type": "object", "required": ["k"],
        "properties": {"k": string(), "v": int()}, "x-kubernetes-validations": [{"rule": "self.v >= oldSelf.v"}]}}}});
    assert!(compile_errors(map_list.clone()).is_empty());
    // Items correlate by key, whatever their order.
    let old = json!({"l": [{"k": "a", "v": 1}, {"k": "b", "v": 5}]});
    assert!(errors(&map_list, json!({"l": [{"k": "b", "v": 6}, {"k": "a", "v": 1}]}), Some(old.clone())).is_empty());
    assert_eq!(
        errors(&map_list, json!({"l": [{"k": "b", "v": 4}]}), Some(old)),
        vec!["l[0]: Invalid value: failed rule: self.v >= oldSelf.v"]
    );
    let errs = compile_errors(json!({"type": "object", "properties": {"v": {"type": "string",
        "x-kubernetes-validations": [{"rule": "self == 'a'", "optionalOldSelf": true}]}}}));
    assert!(
        errs[0].contains("optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"),
        "{errs:?}"
    );
}

#[test]
fn optional_old_self_runs_on_create() {
    let schema = json!({"type": "object", "properties": {"v": {"type": "string", "x-kubernetes-validations": [{
        "rule": "!oldSelf.hasValue() || self == oldSelf.value()", "optionalOldSelf": true, "message": "immutable"}]}}});
    assert!(errors(&schema, json!({"v": "a"}), None).is_empty());
    assert!(errors(&schema, json!({"v": "a"}), Some(json!({"v": "a"}))).is_empty());
    assert_eq!(
        errors(&schema, json!({"v": "b"}), Some(json!({"v": "a"}))),
        vec![r#"v: Invalid value: "b": immutable"#]
    );
}

#[test]
fn standard_and_strings_libraries() {
    for expr in [
        "'hello'.contains('ell') && 'hello'.startsWith('he') && 'hello'.endsWith('lo')",
        "'abc'.matches('^[a-c]+$') && !'abd'.matches('^[a-c]+$')",
        "size('héllo') == 5 && int('42') == 42 && double('1.5') == 1.5 && string(12) == '12'",
        "duration('1h30m').getMinutes() == 90 && timestamp('2023-05-01T10:00:00Z').getHours() == 10",
        "timestamp('2023-05-01T10:00:00Z') + duration('1h') == timestamp('2023-05-01T11:00:00Z')",
        "'Rook takes'.charAt(1) == 'o' && 'a,b,c'.split(',') == ['a', 'b', 'c']",
        "' x '.trim() == 'x' && 'ABC'.lowerAscii() == 'abc' && 'abcabc'.lastIndexOf('b') == 4 && 'abc'.substring(1) == 'bc'",
        "'%s is %d'.format(['x', 3]) == 'x is 3' && strings.quote('a\"b') == '\"a\\\\\"b\"'",
        "sets.contains([1, 2, 3], [2]) && sets.equivalent([1, 2], [2, 1]) && sets.intersects([1], [1, 5])",
        "optional.of(1).orValue(2) == 1 && optional.none().orValue(2) == 2 && {'a': 1}[?'b'].hasValue() == false",
        "cel.bind(x, 2, x * x) == 4 && [1, 2].all(i, v, v > i) && {'a': 1}.exists(k, v, v == 1)",
        "[1, 2, 3].transformList(i, v, v * 2) == [2, 4, 6] && {'a': 1}.transformMap(k, v, v + 1) == {'a': 2}",
    ] {
        assert!(holds(expr), "{expr}");
    }
    assert!(!holds("'abc'.startsWith('b')"));
    // Joining needs bounds on the items (a literal list's items have none Kubernetes reads).
    let names = json!({"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 8}});
    assert!(truth("self.join('-') == 'a-b'", names, json!(["a", "b"])));
}

#[test]
fn kubernetes_libraries() {
    for expr in [
        // lists
        "[1, 2, 3].isSorted() && [3, 1, 2].sum() == 6 && [3, 1, 2].min() == 1 && [3, 1, 2].max() == 3",
        "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && ![2, 1].isSorted()",
        "lists.range(3) == [0, 1, 2] && [3, 1, 2].sort() == [1, 2, 3] && [1, 1, 2].distinct() == [1, 2]",
        "[[1], [2, 3]].flatten() == [1, 2, 3] && [1, 2, 3].slice(1, 3) == [2, 3] && [1, 2].reverse() == [2, 1]",
        "['bb', 'a'].sortBy(s, size(s)) == ['a', 'bb']",
        // regex
        "'abc 123 def 456'.find('[0-9]+') == '123' && 'abc 123 def 456'.findAll('[0-9]+') == ['123', '456']",
        "'a1b2c3'.findAll('[0-9]', 2) == ['1', '2']",
        // urls
        "url('https://example.com:8080/a%20b?x=1&x=2').getHost() == 'example.com:8080'",
        "url('https://example.com:8080/p').getPort() == '8080' && url('https://[::1]/').getHostname() == '::1'",
        "url('https://example.com/p?k=v&k=w').getQuery() == {'k': ['v', 'w']} && isURL('/path') && !isURL('nope')",
        "url('https://example.com/with space').getEscapedPath() == '/with%20space' && url('https://x.io').getScheme() == 'https'",
        // quantity
        "quantity('1Gi').isGreaterThan(quantity('1G')) && quantity('500m').isLessThan(quantity('1'))",
        "quantity('2k').asInteger() == 2000 && quantity('1.5').asApproximateFloat() == 1.5 && !quantity('1.5').isInteger()",
        "quantity('1k').add(quantity('500')) == quantity('1.5k') && quantity('1k').sub(1) == quantity('999')",
        "quantity('-1').sign() == -1 && isQuantity('10Mi') && !isQuantity('10 Mi') && quantity('1').compareTo(quantity('1000m')) == 0",
        // ip and cidr
        "ip('10.0.0.1').family() == 4 && ip('::1').isLoopback() && isIP('192.168.0.1') && !isIP('192.168.0.256')",
        "ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:DB8::1') && ip('169.254.1.1').isLinkLocalUnicast()",
        "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3')) && !cidr('10.0.0.0/8').containsIP('11.0.0.1')",
        "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8')",
        "cidr('10.0.0.0/8').prefixLength() == 8 && string(cidr('10.0.0.0/8').ip()) == '10.0.0.0' && isCIDR('::/0')",
        // format
        "!format.dns1123Label().validate('my-name').hasValue() && format.dns1123Label().validate('My_Name').hasValue()",
        "!format.named('uuid').value().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()",
        "!format.named('nope').hasValue() && !format.labelValue().validate('').hasValue()",
        // semver
        "semver('1.2.3').isLessThan(semver('1.10.0')) && semver('1.0.0-alpha').isLessThan(semver('1.0.0'))",
        "semver('2.3.4').major() == 2 && semver('2.3.4').minor() == 3 && semver('2.3.4').patch() == 4",
        "isSemver('1.2.3') && !isSemver('1.2') && isSemver('v1.2', true) && semver('1.2.3').compareTo(semver('1.2.3')) == 0",
    ] {
        assert!(holds(expr), "{expr}");
    }
}

#[test]
fn list_types_compare_and_concatenate_by_their_semantics() {
    let set = json!({"type": "array", "x-kubernetes-list-type": "set", "maxItems": 10, "items": int()});
    assert!(truth("self == [2, 1]", set.clone(), json!([1, 2])));
    assert!(truth("self + [2, 3] == [1, 2, 3]", set.clone(), json!([1, 2])));
    assert!(truth("(self + [3, 2])[2] == 3", set, json!([1, 2])));
    let atomic = json!({"type": "array", "maxItems": 10, "items": int()});
    assert!(!truth("self == [2, 1]", atomic.clone(), json!([1, 2])));
    assert!(truth("self + [2] == [1, 2, 2]", atomic, json!([1, 2])));
    let map = json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"], "maxItems": 10,
        "items": {"type": "object", "required": ["k"], "properties": {"k": string(), "v": int()}}});
    let items = json!([{"k": "a", "v": 1}, {"k": "b", "v": 2}]);
    assert!(truth("self == self.reverse()", map.clone(), items.clone()));
    // `+` keeps the positions of the left keys, takes the right values, appends new keys.
    let merged = "(self + [self[1]]).size() == 2";
    assert!(truth(merged, map.clone(), items.clone()));
    assert!(truth("[self[0]].size() == 1", map, items));
}

#[test]
fn escaped_property_names() {
    let props = json!({"type": "object", "properties": {
        "namespace": int(), "x-prop": int(), "redact__d": int(), "string": string()}});
    for expr in [
        "self.__namespace__ > 0",
        "self.x__dash__prop > 0",
        "self.redact__underscores__d > 0",
        "self.string.startsWith('kube')",
    ] {
        assert!(
            truth(expr, props.clone(), json!({"namespace": 1, "x-prop": 1, "redact__d": 1, "string": "kube-x"})),
            "{expr}"
        );
    }
}

#[test]
fn messages_reasons_and_field_paths() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
    "properties": {"replicas": int(), "maxReplicas": int()},
    "x-kubernetes-validations": [
        {"rule": "self.replicas <= self.maxReplicas", "message": "replicas should be smaller than or equal to maxReplicas."},
        {"rule": "self.replicas <= self.maxReplicas", "messageExpression": "'replicas %d is too many'.format([self.replicas])"},
        {"rule": "self.replicas <= self.maxReplicas", "reason": "FieldValueForbidden", "fieldPath": ".replicas"},
    ]}}});
    assert_eq!(
        errors(&schema, json!({"spec": {"replicas": 20, "maxReplicas": 10}}), None),
        vec![
            "spec: Invalid value: replicas should be smaller than or equal to maxReplicas.",
            "spec: Invalid value: replicas 20 is too many",
            "spec.replicas: Forbidden: failed rule: self.replicas <= self.maxReplicas",
        ]
    );
    let bad = compile_errors(
        json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": int()},
        "x-kubernetes-validations": [{"rule": "true", "reason": "Nope", "fieldPath": ".c", "messageExpression": "1"}]}}}),
    );
    assert!(bad.iter().any(|e| e.contains("reason: Unsupported value: \"Nope\"")), "{bad:?}");
    assert!(bad.iter().any(|e| e.contains("fieldPath: Invalid value: \".c\": must be a valid path")), "{bad:?}");
    assert!(bad.iter().any(|e| e.contains("messageExpression must evaluate to a string")), "{bad:?}");
}

#[test]
fn unchanged_nodes_ratchet_to_warnings() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "string", "x-kubernetes-validations": [{"rule": "self == 'ok'"}]},
        "b": {"type": "string", "x-kubernetes-validations": [{"rule": "self == 'ok'"}]}}});
    let (rules, _) = Rules::compile(&schema, &Path::nil());
    let out = rules.validate(&json!({"a": "bad", "b": "bad"}), Some(&json!({"a": "bad", "b": "ok"})));
    assert_eq!(
        out.errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec![r#"b: Invalid value: "bad": failed rule: self == 'ok'"#]
    );
    assert_eq!(out.warnings, vec![r#"a: Invalid value: "bad": failed rule: self == 'ok'"#]);
}

#[test]
fn docs_cost_examples() {
    let unbounded = json!({"type": "object", "properties": {"foo": {"type": "array", "items": string(),
        "x-kubernetes-validations": [{"rule": "self.all(x, x.contains('a string'))"}]}}});
    let errs = compile_errors(unbounded);
    assert!(
        errs.contains(&"openAPIV3Schema.properties[foo].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)".to_string()),
        "{errs:?}"
    );
    let bounded = json!({"type": "object", "properties": {"foo": {"type": "array", "maxItems": 25,
        "items": {"type": "string", "maxLength": 10}, "x-kubernetes-validations": [{"rule": "self.all(x, x.contains('a string'))"}]}}});
    assert_eq!(compile_errors(bounded), Vec::<String>::new());
    let on_items = json!({"type": "object", "properties": {"foo": {"type": "array", "maxItems": 25,
        "items": {"type": "string", "maxLength": 10, "x-kubernetes-validations": [{"rule": "self.contains('a string')"}]}}}});
    assert_eq!(compile_errors(on_items), Vec::<String>::new());
    let flat = json!({"type": "object", "properties": {"foo": {"type": "array", "items": int(),
        "x-kubernetes-validations": [{"rule": "self.all(x, x == 5)"}]}}});
    assert_eq!(compile_errors(flat), Vec::<String>::new());
    let nested = json!({"type": "object", "properties": {"foo": {"type": "array", "items": {"type": "array", "items": int(),
        "x-kubernetes-validations": [{"rule": "self.all(x, x == 5)"}]}}}});
    let errs = compile_errors(nested);
    assert!(
        errs.iter().any(|e| e.contains(
            "properties[foo].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget"
        )),
        "{errs:?}"
    );
}

#[test]
fn runtime_cost_limit_stops_evaluation() {
    let schema = json!({"type": "object", "properties": {"l": {"type": "array", "maxItems": 10, "items": string(),
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x.matches(y)))"}]}}});
    let (rules, _) = Rules::compile(&schema, &Path::nil());
    let out = rules.validate_with_limits(&Path::nil(), &json!({"l": ["a", "b", "c"]}), None, 10_000_000, 5);
    assert_eq!(out.errors.len(), 1, "{:?}", out.errors);
    assert!(
        out.errors[0]
            .detail
            .contains("no further validation rules will be run due to call cost exceeds limit for rule")
    );
    let out = rules.validate_with_limits(&Path::nil(), &json!({"l": ["a", "b", "c"]}), None, 3, 1_000_000);
    assert!(out.errors[0].detail.contains("validation failed due to running out of cost budget"));
}

#[test]
fn runtime_costs_follow_cel_gos_optimized_programs() {
    // The cost each rule leaves of a budget of 100, as Kubernetes' programs (planned with
    // cel-go's OptOptimize) charge it: literal lists cost nothing, `in` a literal set costs
    // nothing, indexing a computed value costs two, a call is charged even when an argument
    // failed.
    let remaining = |rule: &str, object: Value| {
        let schema = json!({"type": "object", "properties": {"s": {"type": "string", "maxLength": 10}},
            "x-kubernetes-validations": [{"rule": rule}]});
        let (rules, errs) = Rules::compile(&schema, &Path::nil());
        assert!(errs.is_empty(), "{rule}: {errs:?}");
        100 - rules.validate_with_limits(&Path::nil(), &object, None, 100, 1_000_000).remaining_budget
    };
    let object = json!({"s": "Pending"});
    assert_eq!(remaining("self.s in ['Pending', 'Available']", object.clone()), 2);
    assert_eq!(remaining("self.s in [self.s, 'Available']", object.clone()), 2 + 10 + 2 + 2);
    assert_eq!(remaining("['a', 'b'][1] == 'b'", object.clone()), 2 + 1);
    assert_eq!(remaining("size(['a'][1]) == 1", object), 2 + 1 + 1);
}

#[test]
fn comprehension_costs_follow_their_macro_expansions() {
    // Two-variable comprehensions cost what their fold expansions cost in cel-go: a loop
    // condition per item, the step's reads, the result; a ternary's attribute branch is free.
    let cost = |rule: &str| {
        let schema = json!({"type": "object", "properties": {"l": {"type": "array", "maxItems": 10,
            "items": {"type": "integer"}}}, "x-kubernetes-validations": [{"rule": rule}]});
        let (rules, errs) = Rules::compile(&schema, &Path::nil());
        assert!(errs.is_empty(), "{rule}: {errs:?}");
        let out = rules.validate_with_limits(&Path::nil(), &json!({"l": [1, 1, 2, 2, 3, 3, 4, 5]}), None, 1000, 1000);
        assert!(out.errors.is_empty(), "{rule}: {:?}", out.errors);
        1000 - out.remaining_budget
    };
    // 8 x (condition 2 + accu 1 + `e > 0` 2) + range 2 + result 1
    assert_eq!(cost("self.l.all(e, e > 0)"), 43);
    assert_eq!(cost("self.l.all(i, e, e > 0)"), 43);
    // 8 x `e > 4` 2 + one `accu + 1` 2 + range 2 + `accu == 1` 2
    assert_eq!(cost("self.l.exists_one(e, e > 4)"), 22);
    assert_eq!(cost("self.l.existsOne(i, e, e > 4)"), 22);
    // 8 x (accu 1 + [f] 10 + add 1 + `e * 2` 2) + range 2 + result 1, then size and `>`
    assert_eq!(cost("self.l.transformList(i, e, e * 2).size() > 0"), 117);
}

#[test]
fn a_rule_seen_before_is_checked_again_against_each_schema() {
    // The parse of a text is remembered across definitions (issue 32); its type check and its
    // errors are each schema's own.
    let rule = "self.replicasOfTheMemoTest > 1";
    let on =
        |replicas: Value| compile_errors(spec_rule(rule, json!({"replicasOfTheMemoTest": replicas, "other": int()})));
    assert_eq!(on(int()), Vec::<String>::new());
    let errs = on(string());
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].ends_with(
            "compilation failed: ERROR: <input>:1:28: found no matching overload for '_>_' applied to '(string, int)'\n | self.replicasOfTheMemoTest > 1\n | ...........................^"
        ),
        "the error has its position though the text was not parsed for this schema: {errs:?}"
    );
    let errs = compile_errors(spec_rule(rule, json!({"other": int()})));
    assert!(errs[0].contains("ERROR: <input>:1:5: undefined field 'replicasOfTheMemoTest'"), "{errs:?}");
    assert_eq!(on(int()), Vec::<String>::new(), "and the text still compiles where it fits");
    // A text that does not parse is refused every time, with its syntax error.
    for _ in 0..2 {
        let errs = compile_errors(spec_rule("self.true == 1", json!({"a": int()})));
        assert!(errs[0].contains("Syntax error: mismatched input 'true' expecting IDENTIFIER"), "{errs:?}");
    }
}
