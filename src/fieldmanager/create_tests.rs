//! The create fast path ([`FieldManager::update`] over the placeholder, one walk of the new
//! object) against the general compare path: the same managedFields, byte for byte, for
//! objects of every list and map type, and for generated objects.

use serde_json::{Value, json};

use super::managed::Managed;
use super::tests::OneVersion;
use super::*;

fn openapi() -> Value {
    let port = json!({"type": "object", "properties": {
        "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}, "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}}});
    json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "image": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "numbers": {"type": "array", "items": {"type": "number"}, "x-kubernetes-list-type": "set"},
                "args": {"type": "array", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["port", "protocol"], "items": port},
                "hosts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["host"],
                          "items": {"type": "object", "properties": {"host": {"type": "string"}, "ip": {"type": "string"}}}},
                "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "nested": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                    "a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "integer"}}}}},
                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "size": {"x-kubernetes-int-or-string": true},
                "any": {},
                "embedded": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
            }},
            "status": {"type": "object", "properties": {
                "ready": {"type": "boolean"},
                "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                               "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}},
            }},
        },
    })
}

/// The endpoints a create can come through: with and without a status subresource, and the
/// status subresource itself (whose ignored fields are spec and metadata).
fn endpoints() -> Vec<(&'static str, Set)> {
    let field = |name: &str| vec![PathElement::field(name)];
    vec![
        ("", Set::of(&[field("status")])),
        ("", Set::new()),
        ("status", Set::of(&[field("metadata"), field("spec")])),
        ("", Set::of(&[vec![PathElement::field("spec"), PathElement::field("ports")], field("status")])),
    ]
}

fn placeholder() -> Value {
    json!({"apiVersion": "g/v1", "kind": "K"})
}

/// The managedFields of creating `object`: through [`FieldManager::create`] and
/// [`FieldManager::update`] over the placeholder, which take the fast path when it applies
/// (whether it did is returned too), and through the general path.
fn both(versions: &OneVersion, subresource: &str, ignored: &Set, object: &Value) -> (Value, bool, Value) {
    let manager = FieldManager { versions, api_version: "g/v1", kind: "K", subresource, ignored };
    let at = jiff::Timestamp::from_second(1_700_000_000).unwrap();
    let fast = manager.created(object, "creator", at).is_some();
    let mut a = object.clone();
    manager.update(&placeholder(), &mut a, "creator", at);
    let mut created = object.clone();
    manager.create(&mut created, "creator", at);
    assert_eq!(created, a);
    let mut b = object.clone();
    manager.update_from(&placeholder(), &mut b, Managed::default(), "creator", at);
    (a, fast, b)
}

fn check(versions: &OneVersion, object: &Value, expect_fast: bool) {
    for (subresource, ignored) in endpoints() {
        let (fast, took_fast, general) = both(versions, subresource, &ignored, object);
        assert_eq!(took_fast, expect_fast, "fast path taken for {object}");
        assert_eq!(
            serde_json::to_string(&fast).unwrap(),
            serde_json::to_string(&general).unwrap(),
            "{subresource:?} ignoring {:?}, object {object}",
            ignored.paths()
        );
    }
}

fn object(spec: Value) -> Value {
    json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x", "namespace": "ns", "labels": {"app": "a"}}, "spec": spec})
}

#[test]
fn creates_match_the_general_path() {
    let versions = OneVersion(Schema::custom_resource(Some(&openapi())));
    let mut full = object(json!({
        "replicas": 1, "image": "i", "tags": ["a", "b", "a"], "numbers": [1, 1.0, 2.5, -0.0, 0],
        "args": ["x", "x"],
        "ports": [{"port": 80, "name": "http", "tags": ["t"]}, {"port": 80, "protocol": "UDP"},
                  {"port": 443, "protocol": "TCP"}, {"port": 443}],
        "hosts": [{"host": "h1", "ip": "1"}, {"host": "h2"}],
        "selector": {"app": "web"}, "env": {"A": "1", "B": ""},
        "nested": {"x": {"a": 1, "b": [1, 2]}, "y": {}, "z": null},
        "template": {"deep": {"x": [1, {"y": 2}]}, "empty": {}, "null": null, "list": []},
        "size": "50%", "any": {"k": [1]},
        "embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
                     "spec": {"containers": [{"name": "c"}]}},
    }));
    full["metadata"]["annotations"] = json!({"note": "n", "empty": ""});
    full["metadata"]["finalizers"] = json!(["f1", "f2", "f1"]);
    full["metadata"]["ownerReferences"] = json!([{"uid": "u1", "name": "o", "kind": "K", "apiVersion": "v1"}]);
    full["metadata"]["generateName"] = json!("x-");
    full["metadata"]["uid"] = json!("u");
    full["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
    full["metadata"]["generation"] = json!(1);
    full["status"] = json!({"ready": true, "conditions": [{"type": "Ready", "status": "True"}]});
    for object in [
        full,
        object(json!({})),
        object(json!(null)),
        object(json!({"tags": [], "ports": [], "env": {}, "selector": {}, "template": {}})),
        object(json!({"ports": [{"port": 80}, {"port": 80}], "hosts": [{"host": "h"}, {"host": "h", "ip": "2"}]})),
        json!({"apiVersion": "g/v1", "kind": "K"}),
        json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x"}}),
        json!({"apiVersion": "g/v1", "kind": "K", "metadata": {}, "status": {"ready": false}}),
    ] {
        check(&versions, &object, true);
    }
    // What the general path refuses (and then leaves untracked) the fast path leaves to it.
    for object in [
        object(json!({"nope": 1})),
        object(json!({"replicas": "one"})),
        object(json!({"hosts": [{"ip": "no key"}]})),
        object(json!({"tags": [{"a": 1}]})),
        object(json!({"selector": {"app": 1}})),
        object(json!({"args": [1]})),
        object(json!({"tags": [1, 1]})),
        object(json!({"ports": [{"port": 80, "name": 1}, {"port": 80}]})),
        object(json!({"ports": [{"port": 80, "tags": [{}]}]})),
        object(json!({"env": {"A": []}})),
        json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": 5}}),
        json!({"apiVersion": "g/v1", "kind": "K", "status": {"ready": "yes"}}),
        json!({"apiVersion": "g/v1", "kind": "K", "status": {"nope": 1}}),
        json!({"apiVersion": "g/v1", "kind": "K", "status": {"conditions": [{"type": "A", "status": 1}]}}),
        json!({"apiVersion": "g/v2", "kind": "K", "spec": {"replicas": 1}}),
    ] {
        check(&versions, &object, false);
    }
}

#[test]
fn creates_without_a_schema_match_the_general_path() {
    let versions = OneVersion(Schema::custom_resource(None));
    let object = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x", "uid": "u"},
                        "spec": {"a": [1, 2], "b": {"c": {}, "d": null}, "e": "x"}, "status": {"s": 1}});
    check(&versions, &object, true);
}

/// A small deterministic generator (xorshift), so the comparison covers shapes nobody wrote.
struct Random(u64);

impl Random {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    /// A value fitting the OpenAPI `schema` (mostly): some fields absent, some null, lists
    /// with repeated items and items missing their keys.
    fn value(&mut self, schema: &Value, depth: u32) -> Value {
        if self.next(12) == 0 {
            return Value::Null;
        }
        match schema.get("type").and_then(Value::as_str).unwrap_or_default() {
            "object" => {
                let mut out = serde_json::Map::new();
                if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                    for (name, property) in properties {
                        if self.next(3) != 0 {
                            out.insert(name.clone(), self.value(property, depth + 1));
                        }
                    }
                }
                let free = schema.get("additionalProperties").filter(|a| a.is_object()).cloned().or_else(|| {
                    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
                    preserve.then(|| json!({}))
                });
                if let Some(free) = free {
                    for i in 0..self.next(3) {
                        out.insert(format!("k{}", self.next(4) + i), self.value(&free, depth + 1));
                    }
                }
                Value::Object(out)
            }
            "array" => {
                let items = schema.get("items").cloned().unwrap_or(json!({}));
                Value::Array((0..self.next(4)).map(|_| self.value(&items, depth + 1)).collect())
            }
            "integer" => json!(self.next(3)),
            "number" => [json!(1), json!(1.0), json!(2.5)][self.next(3) as usize].clone(),
            "string" => json!(["a", "b", "TCP"][self.next(3) as usize]),
            "boolean" => json!(self.next(2) == 0),
            _ if depth > 4 => json!(self.next(2)),
            _ => match self.next(4) {
                0 => json!("s"),
                1 => json!([1, {"x": 2}]),
                2 => json!({"m": {"n": self.next(2)}, "o": {}}),
                _ => json!(3),
            },
        }
    }
}

#[test]
fn generated_creates_match_the_general_path() {
    let openapi = openapi();
    let versions = OneVersion(Schema::custom_resource(Some(&openapi)));
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let mut fast = 0;
    for _ in 0..400 {
        let mut object = random.value(&openapi, 0);
        if !object.is_object() {
            continue;
        }
        object["apiVersion"] = json!("g/v1");
        object["kind"] = json!("K");
        object["metadata"] = json!({"name": "x", "labels": {"a": "b"}});
        for (subresource, ignored) in endpoints() {
            let (a, took_fast, b) = both(&versions, subresource, &ignored, &object);
            fast += usize::from(took_fast);
            assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap(), "{object}");
        }
    }
    // Most generated objects are valid: the fast path was exercised, not only the fallback.
    assert!(fast > 600, "fast path taken {fast} times");
}
