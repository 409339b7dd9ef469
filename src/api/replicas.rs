//! The checks the scale subresource adds to every write of its resource
//! (`ValidateScaleSpec`, `ValidateScaleStatus`): replicas are int64 values between 0 and
//! 2147483647, and the label selector, when present, is a string.

use serde_json::Value;

use crate::core::field::{FieldError, Path, go_type};
use crate::definitions::Scale;

const MAX_INT32: i64 = 2_147_483_647;

/// Go's `%v` of an unstructured value.
fn go_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => crate::core::field::go_number(n),
        Value::Bool(b) => b.to_string(),
        Value::Null => "<nil>".to_string(),
        Value::Array(items) => format!("[{}]", items.iter().map(go_value).collect::<Vec<_>>().join(" ")),
        Value::Object(map) => {
            format!("map[{}]", map.iter().map(|(k, v)| format!("{k}:{}", go_value(v))).collect::<Vec<_>>().join(" "))
        }
    }
}

/// The value at a `.a.b` path as `unstructured.NestedFieldNoCopy` finds it; a non-object on
/// the way is an accessor error.
fn nested<'a>(object: &'a Value, path: &str, expected: &str) -> Result<Option<&'a Value>, String> {
    let mut node = object;
    let fields: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let shown = format!(".{}", fields.join("."));
    for (i, field) in fields.iter().enumerate() {
        let Value::Object(map) = node else {
            let at = format!(".{}", fields.get(..i).unwrap_or_default().join("."));
            return Err(format!(
                "{at} accessor error: {} is of the type {}, expected map[string]interface{{}}",
                go_value(node),
                go_type(node)
            ));
        };
        match map.get(*field) {
            Some(next) => node = next,
            None => return Ok(None),
        }
    }
    let matches = match expected {
        "int64" => node.as_i64().is_some(),
        _ => node.is_string(),
    };
    if matches || node.is_null() && expected == "string" {
        Ok(Some(node))
    } else {
        Err(format!("{shown} accessor error: {} is of the type {}, expected {expected}", go_value(node), go_type(node)))
    }
}

fn replicas(object: &Value, path: &str) -> Vec<FieldError> {
    let at = Path::new(path);
    match nested(object, path, "int64") {
        Err(e) => vec![FieldError::invalid(at, 0, e)],
        Ok(value) => {
            let n = value.and_then(Value::as_i64).unwrap_or(0);
            if n < 0 {
                vec![FieldError::invalid(at, n, "should be a non-negative integer")]
            } else if n > MAX_INT32 {
                vec![FieldError::invalid(at, n, format!("should be less than or equal to {MAX_INT32}"))]
            } else {
                Vec::new()
            }
        }
    }
}

/// The spec side: `specReplicasPath`.
pub fn validate_spec(scale: Option<&Scale>, object: &Value) -> Vec<FieldError> {
    scale.map(|s| replicas(object, &s.spec_replicas_path)).unwrap_or_default()
}

/// The status side: `statusReplicasPath` and `labelSelectorPath`.
pub fn validate_status(scale: Option<&Scale>, object: &Value) -> Vec<FieldError> {
    let Some(scale) = scale else { return Vec::new() };
    let mut errs = replicas(object, &scale.status_replicas_path);
    if let Some(selector) = &scale.label_selector_path
        && let Err(e) = nested(object, selector, "string")
    {
        errs.push(FieldError::invalid(Path::new(selector), "", e));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scale() -> Scale {
        Scale {
            spec_replicas_path: ".spec.replicas".into(),
            status_replicas_path: ".status.replicas".into(),
            label_selector_path: Some(".status.selector".into()),
        }
    }

    fn errors(object: Value) -> Vec<String> {
        let s = scale();
        validate_spec(Some(&s), &object)
            .into_iter()
            .chain(validate_status(Some(&s), &object))
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn replicas_must_be_int64_in_range() {
        assert!(errors(json!({"spec": {"replicas": 3}})).is_empty());
        assert!(errors(json!({})).is_empty());
        assert_eq!(
            errors(json!({"spec": {"replicas": -1}})),
            [".spec.replicas: Invalid value: -1: should be a non-negative integer"]
        );
        assert_eq!(
            errors(json!({"spec": {"replicas": "foo"}})),
            [
                ".spec.replicas: Invalid value: 0: .spec.replicas accessor error: foo is of the type string, expected int64"
            ]
        );
        assert_eq!(
            errors(json!({"status": {"replicas": 3000000000i64, "selector": 1}})),
            [
                ".status.replicas: Invalid value: 3000000000: should be less than or equal to 2147483647",
                r#".status.selector: Invalid value: "": .status.selector accessor error: 1 is of the type int64, expected string"#
            ]
        );
    }
}
