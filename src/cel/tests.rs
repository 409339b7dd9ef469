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
    assert!(errs.is_empty(), "unexpected compile errors: {errs:?}");
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
    assert_eq!(errors(&schema, json!({"spec": bad}), None), vec![format!("spec: Invalid value: failed rule: {rule}")], "{rule}");
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
    let two_lists = json!({"list1": {"type": "array", "items": string()}, "list2": {"type": "array", "items": string()}});
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
        "items": {"type": "object", "required": ["name"], "properties": {"name": string(), "value": string()}}}});
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
    check("self.health.startsWith('ok')", json!({"health": string()}), json!({"health": "ok: fine"}), json!({"health": "bad"}));
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
    let sets = json!({"set1": {"type": "array", "x-kubernetes-list-type": "set", "items": string()},
        "set2": {"type": "array", "x-kubernetes-list-type": "set", "items": string()}});
    check("self.set1.all(e, !(e in self.set2))", sets, json!({"set1": ["a"], "set2": ["b"]}), json!({"set1": ["a"], "set2": ["a"]}));
    let names = json!({"names": {"type": "array", "x-kubernetes-list-type": "set", "items": string()},
        "details": {"type": "object", "additionalProperties": string()}});
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
    let errs = compile_errors(spec_rule("self.envars.filter(e, e.name = 'MY_ENV').all(e, e.value.matches('^[a-zA-Z]*$')", envars));
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
    let errs = compile_errors(json!({"type": "object", "x-kubernetes-validations": [{"rule": "has(self.metadata.namespace)"}]}));
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
    check(
        "self['xyz'].foo > 0",
        json!({}),
        json!({}),
        json!({}),
    )
}
