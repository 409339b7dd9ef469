//! The client-side apply annotation (`kubectl.kubernetes.io/last-applied-configuration`)
//! seen from server-side apply (`lastappliedmanager.go`, `lastappliedupdater.go`): which
//! fields kubectl may take over without conflict when it moves from client-side to
//! server-side apply, and keeping the annotation in step with server-side applies.

use serde_json::Value;

use super::gojson;
use super::schema::Schema;
use super::set::Set;
use super::typed;

pub const ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// Annotations may total this many bytes (`TotalAnnotationSizeLimitB`).
const ANNOTATIONS_LIMIT: usize = 256 * 1024;

fn annotation(object: &Value) -> Option<&str> {
    object.pointer("/metadata/annotations")?.get(ANNOTATION)?.as_str().filter(|s| !s.is_empty())
}

/// Whether the object carries a non-empty annotation.
pub fn has(object: &Value) -> bool {
    annotation(object).is_some()
}

/// The fields the annotation claims and the live object still holds with those values:
/// conflicts on them are the client-side applier's own. `None` when there is nothing usable.
pub fn allowed_conflicts(schema: &Schema, api_version: &str, live: &Value) -> Option<Set> {
    let text = annotation(live)?;
    typed::validate(schema, schema.root(), live, false).ok()?;
    let last: Value = crate::core::nesting::from_str(text).ok()?;
    if last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return None;
    }
    typed::validate(schema, schema.root(), &last, false).ok()?;
    let set = typed::to_field_set(schema, schema.root(), &last);
    let comparison = typed::compare(schema, schema.root(), &last, live).ok()?;
    Some(set.difference(&comparison.modified).difference(&comparison.added).difference(&comparison.removed))
}

/// The annotation's value for an applied configuration: the configuration without the
/// annotation, as Go encodes it, with a final newline.
pub fn build(config: &Value) -> String {
    let mut config = config.clone();
    if let Some(meta) = config.get_mut("metadata").and_then(Value::as_object_mut) {
        let now_empty = match meta.get_mut("annotations").and_then(Value::as_object_mut) {
            Some(annotations) => {
                annotations.remove(ANNOTATION);
                annotations.is_empty()
            }
            None => false,
        };
        if now_empty {
            meta.remove("annotations");
        }
    }
    let mut text = gojson::to_string(&config);
    text.push('\n');
    text
}

/// Sets the annotation, unless that would make the annotations too large (then it is
/// dropped).
pub fn set(object: &mut Value, value: &str) {
    let Some(annotations) = object.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) else {
        return;
    };
    annotations.insert(ANNOTATION.to_string(), Value::String(value.to_string()));
    let total: usize = annotations.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
    if total > ANNOTATIONS_LIMIT {
        annotations.remove(ANNOTATION);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builds_the_annotation_like_kubectl_reads_it() {
        let config = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x", "annotations": {ANNOTATION: "old"}}, "spec": {"a": "<b>"}});
        assert_eq!(
            build(&config),
            "{\"apiVersion\":\"g/v1\",\"kind\":\"K\",\"metadata\":{\"name\":\"x\"},\"spec\":{\"a\":\"\\u003cb\\u003e\"}}\n"
        );
    }

    #[test]
    fn allows_fields_still_holding_their_applied_values() {
        let schema = Schema::custom_resource(Some(
            &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "string"}}}}}),
        ));
        let last = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"a": "1", "b": "2"}})
            .to_string();
        let live = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x", "annotations": {ANNOTATION: last}}, "spec": {"a": "1", "b": "changed"}});
        let allowed = allowed_conflicts(&schema, "g/v1", &live).unwrap();
        let paths: Vec<String> = allowed.paths().iter().map(|p| super::super::path::path_string(p)).collect();
        assert!(paths.contains(&".spec.a".to_string()));
        assert!(!paths.contains(&".spec.b".to_string()));
        assert!(allowed_conflicts(&schema, "g/v2", &live).is_none());
    }
}
