//! Tests of the typed walkers against a schema with every list and map type.

use serde_json::{Value, json};

use super::super::fieldsv1;
use super::super::path::path_string;
use super::super::schema::Schema;
use super::super::set::Set;
use super::*;

fn schema() -> Schema {
    Schema::custom_resource(Some(&json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "args": {"type": "array", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"],
                          "items": {"type": "object", "properties": {
                              "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}, "name": {"type": "string"}}}},
                "hosts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["host"],
                          "items": {"type": "object", "properties": {"host": {"type": "string"}, "ip": {"type": "string"}}}},
                "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "size": {"x-kubernetes-int-or-string": true},
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
        },
    })))
}

fn paths(set: &Set) -> Vec<String> {
    set.paths().iter().map(|p| path_string(p)).collect()
}

fn field_set(value: Value) -> Vec<String> {
    let s = schema();
    validate(&s, s.root(), &value, false).unwrap();
    paths(&to_field_set(&s, s.root(), &value))
}

fn merged(lhs: Value, rhs: Value) -> Value {
    let s = schema();
    merge(&s, s.root(), &lhs, &rhs).unwrap().unwrap()
}

#[test]
fn ownership_per_list_and_map_type() {
    let owned = field_set(json!({"spec": {
        "replicas": 1,
        "tags": ["a", "b"],
        "args": ["x", "y"],
        "ports": [{"port": 80, "name": "http"}],
        "selector": {"app": "web"},
        "env": {"A": "1"},
        "template": {"deep": {"x": 1}, "list": [1]},
        "size": "50%",
    }}));
    assert_eq!(
        owned,
        [
            ".spec.args",
            ".spec.replicas",
            ".spec.selector",
            ".spec.size",
            ".spec.env.A",
            ".spec.ports[port=80,protocol=\"TCP\"]",
            ".spec.ports[port=80,protocol=\"TCP\"].name",
            ".spec.ports[port=80,protocol=\"TCP\"].port",
            ".spec.tags[=\"a\"]",
            ".spec.tags[=\"b\"]",
            ".spec.template.deep",
            ".spec.template.list",
            ".spec.template.deep.x",
        ]
    );
}

#[test]
fn empty_and_null_fields_are_owned_as_members() {
    assert_eq!(field_set(json!({"spec": {}, "status": null})), [".spec", ".status"]);
    // An empty granular list owns nothing, as in Kubernetes.
    assert!(field_set(json!({"spec": {"tags": []}})).is_empty());
}

#[test]
fn fieldsv1_of_a_map_list_item() {
    let s = schema();
    let set = to_field_set(&s, s.root(), &json!({"spec": {"ports": [{"port": 80, "protocol": "UDP"}], "tags": ["a"]}}));
    assert_eq!(
        fieldsv1::encode(&set),
        json!({"f:spec": {
            "f:ports": {"k:{\"port\":80,\"protocol\":\"UDP\"}": {".": {}, "f:port": {}, "f:protocol": {}}},
            "f:tags": {"v:\"a\"": {}},
        }})
    );
}

#[test]
fn sets_merge_as_unions_keeping_order() {
    let out = merged(json!({"spec": {"tags": ["a", "b", "c"]}}), json!({"spec": {"tags": ["d", "b"]}}));
    assert_eq!(out["spec"]["tags"], json!(["a", "d", "b", "c"]));
}

#[test]
fn map_lists_merge_items_by_key() {
    let out = merged(
        json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}}),
        json!({"spec": {"ports": [{"port": 443, "name": "tls"}, {"port": 8080}]}}),
    );
    assert_eq!(
        out["spec"]["ports"],
        json!([{"port": 80, "name": "http"}, {"port": 443, "name": "tls"}, {"port": 8080}])
    );
}

#[test]
fn atomic_lists_and_maps_are_replaced_granular_maps_merged() {
    let out = merged(
        json!({"spec": {"args": ["a", "b"], "selector": {"x": "1", "y": "2"}, "env": {"A": "1", "B": "2"}}}),
        json!({"spec": {"args": ["c"], "selector": {"z": "3"}, "env": {"B": "3"}}}),
    );
    assert_eq!(out["spec"]["args"], json!(["c"]));
    assert_eq!(out["spec"]["selector"], json!({"z": "3"}));
    assert_eq!(out["spec"]["env"], json!({"A": "1", "B": "3"}));
}

#[test]
fn deduced_subtrees_merge_maps_and_replace_lists() {
    let out = merged(
        json!({"spec": {"template": {"a": {"x": 1}, "l": [1, 2]}}}),
        json!({"spec": {"template": {"a": {"y": 2}, "l": [3]}}}),
    );
    assert_eq!(out["spec"]["template"], json!({"a": {"x": 1, "y": 2}, "l": [3]}));
}

#[test]
fn compare_reports_added_modified_removed() {
    let s = schema();
    let before = json!({"spec": {"replicas": 1, "tags": ["a"], "env": {"A": "1"}}});
    let after = json!({"spec": {"replicas": 2, "tags": ["b"], "env": {"A": "1"}, "args": ["x"]}});
    let c = compare(&s, s.root(), &before, &after).unwrap();
    assert_eq!(paths(&c.modified), [".spec.replicas"]);
    assert_eq!(paths(&c.added), [".spec.args", ".spec.tags[=\"b\"]"]);
    assert_eq!(paths(&c.removed), [".spec.tags[=\"a\"]"]);
    assert!(compare(&s, s.root(), &before, &before).unwrap().removed.is_empty());
    // 1 and 1.0 are the same number.
    assert!(
        compare(&s, s.root(), &json!({"spec": {"replicas": 1}}), &json!({"spec": {"replicas": 1.0}}))
            .unwrap()
            .modified
            .is_empty()
    );
}

#[test]
fn remove_items_drops_members_and_their_insides() {
    let s = schema();
    let value = json!({"spec": {"replicas": 1, "tags": ["a", "b"], "env": {"A": "1"}}});
    let set = Set::of(&[
        vec![PathElement::field("spec"), PathElement::field("replicas")],
        vec![PathElement::field("spec"), PathElement::field("tags"), PathElement::Value(json!("a"))],
        vec![PathElement::field("spec"), PathElement::field("env"), PathElement::field("A")],
    ]);
    assert_eq!(remove_items(&s, s.root(), &value, &set), json!({"spec": {"tags": ["b"], "env": null}}));
}

#[test]
fn named_parents_become_members() {
    let s = schema();
    let set = Set::of(&[vec![PathElement::field("spec"), PathElement::field("env"), PathElement::field("A")]]);
    assert_eq!(paths(&ensure_named_fields_are_members(&s, s.root(), &set)), [".spec", ".spec.env", ".spec.env.A"]);
}

#[test]
fn granular_ownership_collapses_when_the_type_became_atomic() {
    let s = schema();
    // `.spec.selector` is atomic now; a set written when it was granular owns it whole.
    let set = Set::of(&[vec![PathElement::field("spec"), PathElement::field("selector"), PathElement::field("app")]]);
    let reconciled = reconcile_with_schema(&s, s.root(), &set).unwrap();
    assert_eq!(paths(&reconciled), [".spec.selector"]);
    assert!(reconcile_with_schema(&s, s.root(), &reconciled).is_none());
}

#[test]
fn validation_errors_read_like_kubernetes() {
    let s = schema();
    let check = |value: Value, duplicates: bool| validate(&s, s.root(), &value, duplicates).unwrap_err().to_string();
    assert_eq!(check(json!({"spec": {"nope": 1}}), false), ".spec.nope: field not declared in schema");
    assert_eq!(check(json!({"spec": {"tags": ["a", "a"]}}), false), ".spec.tags: duplicate entries for key [=\"a\"]");
    assert!(validate(&s, s.root(), &json!({"spec": {"tags": ["a", "a"]}}), true).is_ok());
    assert_eq!(
        check(json!({"spec": {"replicas": "x"}}), false),
        ".spec.replicas: expected numeric (int or float), got string"
    );
    // A key field with a default may be left out; one without may not.
    assert!(validate(&s, s.root(), &json!({"spec": {"ports": [{"name": "x"}]}}), false).is_ok());
    assert_eq!(
        check(json!({"spec": {"hosts": [{"ip": "x"}]}}), false),
        ".spec.hosts: element 0: associative list with keys has an element that omits all key fields [\"host\"] (and doesn't have default values for any key fields)"
    );
    assert_eq!(
        check(json!({"metadata": {"labels": {"a": 1}}, "spec": {"replicas": "x"}}), false),
        "errors:\n  .metadata.labels.a: expected string, got &value.valueUnstructured{Value:1}\n  .spec.replicas: expected numeric (int or float), got string"
    );
}
