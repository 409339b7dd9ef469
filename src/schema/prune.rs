//! Pruning: removing the fields a structural schema does not specify, as Kubernetes does
//! before storing an object, and reporting their paths (`spec.someRandomField`) for
//! `fieldValidation`.
//!
//! `x-kubernetes-preserve-unknown-fields` keeps a subtree, pruning again below specified
//! properties; embedded resources (and the object root) keep `apiVersion`, `kind` and
//! `metadata`, whose own rules apply elsewhere.

use serde_json::Value;

use super::node::{Cursor, Schema};

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Prunes `object` in place; returns the removed paths, sorted. `resource_root` marks the
/// object root, which keeps its type and object metadata.
pub fn prune(object: &mut Value, schema: Option<&Schema>, resource_root: bool) -> Vec<String> {
    let mut pruned = Vec::new();
    let mut path = String::new();
    // A resource root without a schema still keeps its type and metadata.
    let empty = Schema::default();
    let schema = if resource_root { Some(schema.unwrap_or(&empty)) } else { schema };
    prune_node(object, schema, resource_root, &mut path, &mut pruned);
    pruned.sort();
    pruned
}

fn embedded(s: Option<&Schema>, root: bool) -> bool {
    root || s.is_some_and(|s| s.embedded_resource)
}

fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

fn push_index(path: &mut String, i: usize) {
    use std::fmt::Write;
    let _ = write!(path, "[{i}]");
}

fn prune_node(x: &mut Value, s: Option<&Schema>, root: bool, path: &mut String, pruned: &mut Vec<String>) {
    if let Some(schema) = s
        && schema.preserve_unknown_fields
    {
        skip_prune(x, schema, root, path, pruned);
        return;
    }
    let start = path.len();
    match x {
        Value::Object(map) => {
            let Some(schema) = s else {
                for key in map.keys() {
                    push_key(path, key);
                    pruned.push(path.clone());
                    path.truncate(start);
                }
                map.clear();
                return;
            };
            let keep_meta = embedded(s, root);
            let mut properties = Cursor::new(&schema.properties);
            map.retain(|key, value| {
                if keep_meta && META_FIELDS.contains(&key.as_str()) {
                    return true;
                }
                let child = match (properties.get(key), &schema.additional_properties) {
                    (Some(property), _) => Some(Some(property)),
                    (None, Some(_)) => Some(schema.additional_schema()),
                    (None, None) => None,
                };
                push_key(path, key);
                let keep = match child {
                    Some(child) => {
                        prune_node(value, child, false, path, pruned);
                        true
                    }
                    None => {
                        // The root's own metadata fields are never reported.
                        if !(META_FIELDS.contains(&key.as_str()) && start == 0) {
                            pruned.push(path.clone());
                        }
                        false
                    }
                };
                path.truncate(start);
                keep
            });
        }
        Value::Array(items) => {
            let item_schema = s.and_then(Schema::items);
            for (i, item) in items.iter_mut().enumerate() {
                push_index(path, i);
                prune_node(item, item_schema, false, path, pruned);
                path.truncate(start);
            }
        }
        _ => {}
    }
}

/// Below `x-kubernetes-preserve-unknown-fields`: keep everything, but prune inside the
/// properties (and `additionalProperties`) the schema specifies.
fn skip_prune(x: &mut Value, s: &Schema, root: bool, path: &mut String, pruned: &mut Vec<String>) {
    let start = path.len();
    match x {
        Value::Object(map) => {
            let keep_meta = embedded(Some(s), root);
            for (key, value) in map.iter_mut() {
                if keep_meta && META_FIELDS.contains(&key.as_str()) {
                    continue;
                }
                let child = match (s.properties.get(key), &s.additional_properties) {
                    (Some(property), _) => Some(property),
                    (None, Some(_)) => s.additional_schema(),
                    (None, None) => continue,
                };
                push_key(path, key);
                prune_node(value, child, false, path, pruned);
                path.truncate(start);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items() {
                for (i, item) in items.iter_mut().enumerate() {
                    push_index(path, i);
                    skip_prune(item, item_schema, false, path, pruned);
                    path.truncate(start);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::compile::compile;
    use serde_json::json;

    fn check(schema: Value, mut object: Value, root: bool, expected: Value, paths: &[&str]) {
        let compiled = compile(&schema);
        let s = (!schema.is_null()).then_some(&compiled);
        let got = prune(&mut object, s, root);
        assert_eq!(object, expected);
        assert_eq!(got, paths);
    }

    #[test]
    fn unknown_fields_go_and_are_reported() {
        check(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"image": {"type": "string"}}}}}),
            json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "x"}, "spec": {"image": "i", "someRandomField": 42}, "extra": 1}),
            true,
            json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "x"}, "spec": {"image": "i"}}),
            &["extra", "spec.someRandomField"],
        );
    }

    #[test]
    fn lists_and_missing_schemas() {
        check(
            json!({"items": {"properties": {"a": {}}}}),
            json!([{"a": 1}, {"b": 1}]),
            false,
            json!([{"a": 1}, {}]),
            &["[1].b"],
        );
        check(Value::Null, json!({"a": {"b": 1}}), false, json!({}), &["a"]);
    }

    #[test]
    fn preserving_subtrees_prune_again_below_specified_properties() {
        // The documentation's example.
        check(
            json!({"type": "object", "properties": {"json": {"x-kubernetes-preserve-unknown-fields": true, "type": "object",
                "properties": {"spec": {"type": "object", "properties": {"foo": {"type": "string"}, "bar": {"type": "string"}}}}}}}),
            json!({"json": {"spec": {"foo": "abc", "bar": "def", "something": "x"}, "status": {"something": "x"}}}),
            false,
            json!({"json": {"spec": {"foo": "abc", "bar": "def"}, "status": {"something": "x"}}}),
            &["json.spec.something"],
        );
    }

    #[test]
    fn a_boolean_additional_properties_keeps_the_keys_and_prunes_inside_them() {
        // Kubernetes' structural schema holds no schema for `additionalProperties: true` (or
        // false): every key is kept and pruned with no schema, so objects under it lose their
        // fields and lists keep their items, emptied the same way; scalars stay.
        let object = json!({"a": {"x": 1, "y": {"z": 2}}, "b": 2, "c": [{"x": 1}, 3], "d": null});
        let pruned = json!({"a": {}, "b": 2, "c": [{}, 3], "d": null});
        for allows in [true, false] {
            check(
                json!({"type": "object", "additionalProperties": allows}),
                object.clone(),
                false,
                pruned.clone(),
                &["a.x", "a.y", "c[0].x"],
            );
            // Below x-kubernetes-preserve-unknown-fields the same holds for the values it
            // reaches through additionalProperties.
            check(
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "additionalProperties": allows}),
                object.clone(),
                false,
                pruned.clone(),
                &["a.x", "a.y", "c[0].x"],
            );
        }
        // Beside properties (which `true` may be): declared keys by their schema, others kept
        // and pruned with no schema.
        check(
            json!({"type": "object", "additionalProperties": true,
                "properties": {"spec": {"type": "object", "properties": {"x": {"type": "integer"}}}}}),
            json!({"spec": {"x": 1, "y": 2}, "other": {"z": 3}, "n": 1}),
            false,
            json!({"spec": {"x": 1}, "other": {}, "n": 1}),
            &["other.z", "spec.y"],
        );
        // A schema for the values prunes by it instead.
        check(
            json!({"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "integer"}}}}),
            json!({"a": {"x": 1, "y": 2}}),
            false,
            json!({"a": {"x": 1}}),
            &["a.y"],
        );
    }

    #[test]
    fn embedded_resources_keep_their_type_and_metadata() {
        check(
            json!({"type": "object", "properties": {"e": {"type": "object", "x-kubernetes-embedded-resource": true,
                "properties": {"spec": {"type": "object"}}}}}),
            json!({"e": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "status": {}}}),
            false,
            json!({"e": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}),
            &["e.status"],
        );
    }
}
