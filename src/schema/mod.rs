//! The schema engine of custom resources: a version's `openAPIV3Schema` compiled once into a
//! [`Schema`] tree, and everything Kubernetes does with it on the write and read paths —
//! coercion of decoded objects (ObjectMeta, pruning, nulls, embedded resources), defaulting,
//! OpenAPI v3 value validation with ratcheting, list-type checks — plus the checks a schema
//! must pass when its definition loads (`check`).
//!
//! Owns schemas and values only. Must not touch HTTP, storage or the API layer; errors are
//! field errors or this module's [`Error`], which the API layer turns into `Status`es.

pub mod check;
pub mod compile;
pub mod defaults;
pub mod formats;
pub mod listtype;
pub mod node;
pub mod objectmeta;
pub mod openapi;
pub mod pattern;
pub mod prune;
pub mod ratchet;

use serde_json::Value;

pub use compile::compile;
pub use node::Schema;

use crate::core::field::{ErrorType, FieldError, Path};

/// Why a decoded object cannot be coerced (Kubernetes fails the decode with these).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// `metadata` is not an ObjectMeta.
    #[error("{0}")]
    Metadata(String),
    /// An embedded resource's `apiVersion`, `kind` or `metadata` is ill-typed.
    #[error("{0}")]
    Embedded(FieldError),
}

/// Coerces a decoded object as Kubernetes' decoder does (`unstructuredSchemaCoercer`): the
/// root `metadata` through the ObjectMeta type, pruning of unknown fields, removal of `null`s
/// the schema does not allow, and the metadata of embedded resources. Returns the unknown
/// field paths (metadata's first, then pruned ones, then embedded metadata's), for
/// `fieldValidation`. With `drop_invalid_metadata` (objects read from storage), ill-typed
/// metadata fields are dropped instead of failing.
pub fn coerce(object: &mut Value, schema: Option<&Schema>, drop_invalid_metadata: bool) -> Result<Vec<String>, Error> {
    let mut unknown = Vec::new();
    let meta = match object.get("metadata") {
        // As the server writes it (every stored object, nearly): kept aside as it is rather
        // than rebuilt field by field, and put back as the rebuilt one would be.
        Some(raw) if objectmeta::is_normal(raw) => match object {
            Value::Object(root) => root.remove("metadata").and_then(|m| match m {
                Value::Object(m) => Some(m),
                _ => None,
            }),
            _ => None,
        },
        Some(raw) => {
            let coerced = objectmeta::coerce(raw, "metadata", drop_invalid_metadata).map_err(Error::Metadata)?;
            unknown.extend(coerced.unknown);
            Some(coerced.meta)
        }
        None => None,
    };
    unknown.extend(prune::prune(object, schema, true));
    defaults::prune_nulls(object, schema);
    let embedded = objectmeta::embedded::coerce(&Path::nil(), object, schema, false, drop_invalid_metadata)
        .map_err(Error::Embedded)?;
    unknown.extend(embedded);
    if let (Some(meta), Value::Object(root)) = (meta, object) {
        root.insert("metadata".to_string(), Value::Object(meta));
    }
    Ok(unknown)
}

/// Applies the schema's defaults (request decode, and every read from storage).
pub fn default(object: &mut Value, schema: Option<&Schema>) {
    defaults::apply(object, schema);
}

/// The schema checks of an object, in Kubernetes' order after TypeMeta and ObjectMeta: OpenAPI
/// validation ([`validate_values`]), then embedded resources and list types
/// ([`validate_structure`]). Paths start at `prefix`.
pub fn validate(schema: &Schema, object: &Value, old: Option<&Value>, prefix: &Path) -> Vec<FieldError> {
    let mut errs = validate_values(schema, object, old, prefix);
    errs.extend(validate_structure(schema, object, old, prefix));
    errs
}

/// OpenAPI value validation, ratcheted against `old` on updates.
pub fn validate_values(schema: &Schema, object: &Value, old: Option<&Value>, prefix: &Path) -> Vec<FieldError> {
    match old {
        Some(old) => openapi::validate_update(schema, object, old, prefix),
        None => openapi::validate(schema, object, prefix),
    }
}

/// Embedded resources, then list types (on updates only when the old object passed them).
pub fn validate_structure(schema: &Schema, object: &Value, old: Option<&Value>, prefix: &Path) -> Vec<FieldError> {
    let mut errs = objectmeta::embedded::validate(prefix, object, Some(schema), false);
    errs.extend(validate_lists(schema, object, old, prefix));
    errs
}

/// List types, reported on updates only when the old object passed them.
pub fn validate_lists(schema: &Schema, object: &Value, old: Option<&Value>, prefix: &Path) -> Vec<FieldError> {
    let errs = listtype::validate(prefix, Some(schema), object);
    if errs.is_empty() || old.is_some_and(|o| !listtype::validate(prefix, Some(schema), o).is_empty()) {
        return Vec::new();
    }
    errs
}

/// Whether earlier errors keep CEL rules from running (`hasBlockingErr`): any error of a kind
/// that means the object is not what the rules expect.
pub fn blocks_rules(errors: &[FieldError]) -> bool {
    errors.iter().any(|e| {
        matches!(
            e.kind,
            ErrorType::NotSupported
                | ErrorType::Required
                | ErrorType::TooLong
                | ErrorType::TooMany
                | ErrorType::TypeInvalid
        )
    })
}

/// The error that replaces the CEL rules' results when they were not run.
pub fn rules_not_checked() -> FieldError {
    FieldError::invalid(
        Path::nil(),
        Value::Null,
        "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn coercion_reports_unknown_fields_in_kubernetes_order() {
        let schema = compile(&json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "e": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
            "n": {"type": "string"},
        }}}}));
        let mut object = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x", "foo": 1},
            "spec": {"someRandomField": 42, "n": null, "e": {"apiVersion": "v1", "kind": "Pod", "metadata": {"bar": 2}}}});
        let unknown = coerce(&mut object, Some(&schema), false).unwrap();
        assert_eq!(unknown, ["metadata.foo", "spec.someRandomField", "spec.e.metadata.bar"]);
        assert_eq!(
            object,
            json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"},
                "spec": {"e": {"apiVersion": "v1", "kind": "Pod", "metadata": {}}}})
        );
    }

    #[test]
    fn ill_typed_metadata_fails_the_decode() {
        let mut object = json!({"metadata": {"labels": []}});
        assert_eq!(
            coerce(&mut object, None, false).unwrap_err().to_string(),
            "json: cannot unmarshal array into Go struct field ObjectMeta.labels of type map[string]string"
        );
    }

    #[test]
    fn list_errors_ratchet_when_the_old_object_had_them() {
        let schema =
            compile(&json!({"type": "object", "properties": {"s": {"type": "array", "x-kubernetes-list-type": "set",
            "items": {"type": "string"}}}}));
        let bad = json!({"s": ["a", "a"]});
        assert_eq!(validate(&schema, &bad, None, &Path::nil()).len(), 1);
        assert!(validate(&schema, &json!({"s": ["b", "b"]}), Some(&bad), &Path::nil()).is_empty());
        assert_eq!(validate(&schema, &bad, Some(&json!({"s": []})), &Path::nil()).len(), 1);
    }

    #[test]
    fn only_some_errors_block_rules() {
        assert!(blocks_rules(&[FieldError::required(Path::new("a"), "")]));
        assert!(!blocks_rules(&[FieldError::invalid(Path::new("a"), 1, "x")]));
        assert_eq!(
            rules_not_checked().to_string(),
            "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
        );
    }
}
