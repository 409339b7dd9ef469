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
    check(
        "self.envars.filter(e, e.name == 'MY_ENV').all(e, e.value.matches('^[a-zA-Z]*$'))",
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
    check(
        "self.values.all(value, value >= 0 && value < 100)",
        json!({"values": {"type": "array", "items": int()}}),
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
    let errs = on(json!({"type": "object", "properties": {"a": int()}}), "self.nonExistingField > 0");
    assert!(first_line(errs).ends_with("compilation failed: ERROR: <input>:1:5: undefined field 'nonExistingField'"));
    let errs = on(int(), "has(self)");
    assert!(first_line(errs).ends_with("compilation failed: ERROR: <input>:1:4: invalid argument to has() macro"));
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
