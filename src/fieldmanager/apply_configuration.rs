//! An apply configuration merged into an object without tracking ownership, as a
//! MutatingAdmissionPolicy's `ApplyConfiguration` mutation merges it (k8s.io/apiserver's
//! `ApplyStructuredMergeDiff`): the configuration must fit the schema, may not set anything
//! inside an atomic list or map (a CRD's lists are atomic unless `x-kubernetes-list-type` says
//! otherwise: setting one item would drop the others), and is merged by the list and map types.
//!
//! Owns that merge and its error texts; no managedFields are touched.

use serde_json::Value;

use super::path::{PathElement, path_string};
use super::schema::{Schema, TypeId};
use super::typed;

/// `live` with `configuration` merged in.
pub fn merge(schema: &Schema, live: &Value, configuration: &Value) -> Result<Value, String> {
    let root = schema.root();
    typed::validate(schema, root, configuration, false)
        .map_err(|e| format!("failed to convert patch object to typed object: {e}"))?;
    let mut atomics = Vec::new();
    find_atomics(schema, root, configuration, &mut Vec::new(), &mut atomics);
    if !atomics.is_empty() {
        return Err(format!(
            "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
            atomics.join(", ")
        ));
    }
    let merged = typed::merge(schema, root, live, configuration).map_err(|e| format!("failed to merge patch: {e}"))?;
    Ok(merged.unwrap_or_else(|| Value::Object(Default::default())))
}

/// The paths of the atomic lists and maps a value sets (`findAtomics`): maps are followed
/// through their declared fields only, lists through every item.
fn find_atomics(schema: &Schema, t: TypeId, value: &Value, path: &mut Vec<PathElement>, found: &mut Vec<String>) {
    let atom = schema.atom(t);
    match (value, &atom.map, &atom.list) {
        (Value::Object(fields), Some(map), _) => {
            if map.atomic {
                found.push(path_string(path));
            }
            for (key, field) in fields {
                if let Some((field_type, _)) = map.fields.get(key) {
                    path.push(PathElement::Field(key.clone()));
                    find_atomics(schema, *field_type, field, path, found);
                    path.pop();
                }
            }
        }
        (Value::Array(items), _, Some(list)) => {
            if !list.associative {
                found.push(path_string(path));
            }
            for (i, item) in items.iter().enumerate() {
                path.push(PathElement::Index(i64::try_from(i).unwrap_or(i64::MAX)));
                find_atomics(schema, list.element, item, path, found);
                path.pop();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Schema {
        Schema::custom_resource(Some(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "replicas": {"type": "integer"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
                    "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                        "properties": {"app": {"type": "string"}}}
                }}
            }
        })))
    }

    #[test]
    fn merges_by_list_type_and_keeps_the_rest() {
        let live = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "a", "labels": {"x": "1"}},
            "spec": {"replicas": 1, "tags": ["t"], "ports": [{"name": "http", "port": 80}]}});
        let configuration = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"labels": {"y": "2"}},
            "spec": {"replicas": 2, "ports": [{"name": "https", "port": 443}]}});
        let merged = merge(&schema(), &live, &configuration).unwrap();
        assert_eq!(merged["metadata"]["labels"], json!({"x": "1", "y": "2"}));
        assert_eq!(merged["spec"]["replicas"], 2);
        assert_eq!(merged["spec"]["tags"], json!(["t"]));
        assert_eq!(merged["spec"]["ports"], json!([{"name": "http", "port": 80}, {"name": "https", "port": 443}]));
    }

    #[test]
    fn atomic_lists_and_maps_are_refused() {
        let live = json!({"spec": {}});
        let err = merge(&schema(), &live, &json!({"spec": {"tags": ["a"], "selector": {"app": "x"}}})).unwrap_err();
        assert_eq!(
            err,
            "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.selector, .spec.tags"
        );
        let err = merge(&schema(), &live, &json!({"spec": {"replicas": "two"}})).unwrap_err();
        assert!(err.starts_with("failed to convert patch object to typed object: .spec.replicas: "), "{err}");
    }
}
