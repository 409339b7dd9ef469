//! ConversionReview: the request sent to a conversion webhook and the checks of its response,
//! as Kubernetes' webhook converter makes them (with its messages): which objects are sent,
//! the response's kind, uid and result, the converted objects' version, kind and identity, and
//! the metadata restored from the originals (only labels and annotations may change).

use serde_json::{Map, Value, json};

use crate::core::field::{Path, aggregate, go_type};
use crate::schema::objectmeta::rules::validate_annotations;

const REVIEW_GROUP: &str = "apiextensions.k8s.io";

/// Indices of the objects a webhook must convert: those not already in `desired`.
pub fn to_convert(objects: &[Value], desired: &str) -> Vec<usize> {
    objects
        .iter()
        .enumerate()
        .filter(|(_, o)| o.get("apiVersion").and_then(Value::as_str) != Some(desired))
        .map(|(i, _)| i)
        .collect()
}

/// The ConversionReview request in `review_version` (`v1` or `v1beta1`).
pub fn request(review_version: &str, uid: &str, desired: &str, objects: Vec<Value>) -> Value {
    json!({
        "kind": "ConversionReview",
        "apiVersion": format!("{REVIEW_GROUP}/{review_version}"),
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    })
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// The converted objects of a response, or why the response is refused. v1beta1 responses
/// are not checked for their kind or uid, for compatibility, as Kubernetes does.
pub fn converted_objects(review_version: &str, uid: &str, response: &Value) -> Result<Vec<Value>, String> {
    if review_version == "v1" {
        let (api_version, kind) = (text(response, "/apiVersion"), text(response, "/kind"));
        if api_version != format!("{REVIEW_GROUP}/v1") || kind != "ConversionReview" {
            let got = match api_version.split_once('/') {
                Some((group, version)) => format!("{group}/{version}, Kind={kind}"),
                None => format!("/{api_version}, Kind={kind}"),
            };
            return Err(format!("expected webhook response of {REVIEW_GROUP}/v1, Kind=ConversionReview, got {got}"));
        }
    }
    let Some(body) = response.get("response").filter(|r| r.is_object()) else {
        return Err("no response provided".into());
    };
    if review_version == "v1" && text(body, "/uid") != uid {
        return Err(format!("expected response.uid={uid:?}, got {:?}", text(body, "/uid")));
    }
    let status = text(body, "/result/status");
    if status != "Success" {
        let message = text(body, "/result/message");
        return Err(if message.is_empty() {
            format!("response.result.status was '{status}', not 'Success'")
        } else {
            message.to_string()
        });
    }
    Ok(body.get("convertedObjects").and_then(Value::as_array).cloned().unwrap_or_default())
}

fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    text(object, &format!("/metadata/{field}"))
}

/// A converted object must keep the original's kind, name, namespace and uid.
pub fn check_identity(original: &Value, converted: &Value) -> Result<(), String> {
    let kind = |o: &Value| text(o, "/kind").to_string();
    if kind(original) != kind(converted) {
        return Err(format!("must have the same kind: {} != {}", kind(original), kind(converted)));
    }
    for (field, word) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
        let (a, b) = (meta_str(original, field), meta_str(converted, field));
        if a != b {
            return Err(format!("must have the same {word}: {a} != {b}"));
        }
    }
    Ok(())
}

/// Puts the original's metadata back into the converted object, keeping only the converted
/// labels and annotations (which must be valid when they changed).
pub fn restore_metadata(original: &Value, converted: &mut Value) -> Result<(), String> {
    let Value::Object(converted_map) = converted else { return Err("missing metadata in converted object".into()) };
    let response_meta = match converted_map.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => return Err(format!("invalid metadata of type {} in converted object", go_type(other))),
    };
    let mut restored = match original.get("metadata") {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => return Err(format!("invalid metadata of type {} in input object", go_type(other))),
    };
    for field in ["labels", "annotations"] {
        let Some(value) = response_meta.get(field).filter(|v| !v.is_null()) else {
            restored.remove(field);
            continue;
        };
        let Value::Object(response_field) = value else {
            return Err(format!("invalid metadata.{field} of type {} in converted object", go_type(value)));
        };
        let original_field = match restored.get(field) {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                return Err(format!("invalid metadata.{field} of type {} in original object", go_type(other)));
            }
        };
        let mut changed = original_field.len() != response_field.len();
        for (key, v) in response_field {
            if !v.is_string() {
                return Err(format!(
                    "metadata.{field}[{key}] must be a string, but is {} in converted object",
                    go_type(v)
                ));
            }
            changed |= original_field.get(key) != Some(v);
        }
        if changed {
            let mut probe = Map::new();
            probe.insert(field.to_string(), value.clone());
            let errors = if field == "labels" {
                crate::schema::objectmeta::rules::validate_details(&probe, &Path::new("metadata"), false)
            } else {
                // Kubernetes names this path `metadata.annotation`.
                validate_annotations(&probe, &Path::new("metadata").child("annotation"))
            };
            if !errors.is_empty() {
                return Err(aggregate(&errors));
            }
        }
        restored.insert(field.to_string(), value.clone());
    }
    converted_map.insert("metadata".into(), Value::Object(restored));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_objects_in_other_versions_are_sent() {
        let objects = vec![json!({"apiVersion": "a/v1"}), json!({"apiVersion": "a/v2"}), json!({"apiVersion": "a/v1"})];
        assert_eq!(to_convert(&objects, "a/v2"), [0, 2]);
        assert!(to_convert(&objects[1..2], "a/v2").is_empty());
    }

    #[test]
    fn responses_are_checked() {
        let ok = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Success"}, "convertedObjects": [{"a": 1}]}});
        assert_eq!(converted_objects("v1", "u", &ok).unwrap(), [json!({"a": 1})]);
        assert_eq!(converted_objects("v1", "other", &ok).unwrap_err(), r#"expected response.uid="other", got "u""#);
        let wrong = json!({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview", "response": {}});
        assert_eq!(
            converted_objects("v1", "u", &wrong).unwrap_err(),
            "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got apiextensions.k8s.io/v1beta1, Kind=ConversionReview"
        );
        assert_eq!(converted_objects("v1beta1", "u", &json!({})).unwrap_err(), "no response provided");
        let failed = json!({"response": {"result": {"status": "Failure"}}});
        assert_eq!(
            converted_objects("v1beta1", "u", &failed).unwrap_err(),
            "response.result.status was 'Failure', not 'Success'"
        );
        let explained = json!({"response": {"result": {"status": "Failure", "message": "cannot convert"}}});
        assert_eq!(converted_objects("v1beta1", "u", &explained).unwrap_err(), "cannot convert");
    }

    #[test]
    fn metadata_comes_back_from_the_original() {
        let original = json!({"metadata": {"name": "x", "uid": "1", "labels": {"a": "b"}}, "spec": {}});
        let mut converted = json!({"metadata": {"name": "changed", "labels": {"a": "b", "c": "d"}, "annotations": {"n": "v"}}, "spec": {"x": 1}});
        restore_metadata(&original, &mut converted).unwrap();
        assert_eq!(
            converted["metadata"],
            json!({"name": "x", "uid": "1", "labels": {"a": "b", "c": "d"}, "annotations": {"n": "v"}})
        );
        let mut bad = json!({"metadata": {"labels": {"a": "not valid!"}}});
        assert!(
            restore_metadata(&original, &mut bad)
                .unwrap_err()
                .starts_with("metadata.labels: Invalid value: \"not valid!\"")
        );
        assert_eq!(
            restore_metadata(&original, &mut json!({"spec": {}})).unwrap_err(),
            "missing metadata in converted object"
        );
        assert_eq!(
            restore_metadata(&original, &mut json!({"metadata": ["foo"]})).unwrap_err(),
            "invalid metadata of type []interface {} in converted object"
        );
    }

    #[test]
    fn identity_is_kept() {
        let a = json!({"kind": "K", "metadata": {"name": "x", "namespace": "n", "uid": "1"}});
        assert!(check_identity(&a, &a).is_ok());
        let renamed = json!({"kind": "K", "metadata": {"name": "y", "namespace": "n", "uid": "1"}});
        assert_eq!(check_identity(&a, &renamed).unwrap_err(), "must have the same name: x != y");
    }
}
