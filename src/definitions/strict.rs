//! Strict decoding of definition files: the fields a manifest sets that the
//! CustomResourceDefinition type does not have (`additionalPrinterColums`, `servd`), named by
//! their path as kube-apiserver's strict field validation names them
//! (`unknown field "spec.versions[0].servd"`), so that a typo is an error rather than a
//! silently missing feature.
//!
//! Owns the comparison of a manifest with its typed decoding; never sees files or HTTP.

use serde_json::Value;

/// The paths set in `raw` that its typed decoding (`decoded`, serialized back) dropped, in
/// document order. A `null` is not a field set.
pub fn unknown_fields(raw: &Value, decoded: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    walk(raw, decoded, &mut String::new(), &mut unknown);
    unknown
}

fn walk(raw: &Value, decoded: &Value, path: &mut String, unknown: &mut Vec<String>) {
    match (raw, decoded) {
        (Value::Object(fields), Value::Object(known)) => {
            for (name, value) in fields {
                if value.is_null() {
                    continue;
                }
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(name);
                match known.get(name) {
                    Some(kept) => walk(value, kept, path, unknown),
                    None => unknown.push(path.clone()),
                }
                path.truncate(len);
            }
        }
        (Value::Array(items), Value::Array(kept)) => {
            for (i, (item, kept)) in items.iter().zip(kept).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(item, kept, path, unknown);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// Kubernetes' wording for the unknown fields of a document.
pub fn message(unknown: &[String]) -> String {
    let fields: Vec<String> =
        unknown.iter().map(|f| format!("unknown field {}", crate::core::field::go_quote(f))).collect();
    format!("strict decoding error: {}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_dropped_fields_by_path() {
        let raw = json!({"spec": {"group": "g", "subresource": {}, "versions": [
            {"name": "v1", "served": true}, {"name": "v2", "servd": true, "schema": {"openAPIV3Schema": {"typo": 1}}}],
            "names": {"plural": "xs", "shortNames": null}}});
        let decoded = json!({"spec": {"group": "g", "versions": [
            {"name": "v1", "served": true}, {"name": "v2", "schema": {"openAPIV3Schema": {}}}], "names": {"plural": "xs"}}});
        assert_eq!(
            unknown_fields(&raw, &decoded),
            ["spec.subresource", "spec.versions[1].schema.openAPIV3Schema.typo", "spec.versions[1].servd"]
        );
        assert_eq!(
            message(&["spec.subresource".into(), "spec.versions[1].servd".into()]),
            r#"strict decoding error: unknown field "spec.subresource", unknown field "spec.versions[1].servd""#
        );
        assert!(unknown_fields(&decoded, &decoded).is_empty());
    }
}
