//! The steps every write shares (create, update, patch): type checks of the body, coercion
//! (unknown fields), `fieldValidation`, validation into one 422, and encoding in the storage
//! version.

use bytes::Bytes;
use serde_json::Value;

use super::call::Call;
use super::codec;
use super::errors;
use super::objects;
use crate::core::field::FieldError;
use crate::core::gvr::GroupKind;
use crate::core::status::ApiError;

/// How unknown and duplicate fields are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn of(call: &Call) -> Result<FieldValidation, ApiError> {
        match call.query.get("fieldValidation") {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "invalid fieldValidation value: {other}, must be one of Ignore, Warn, or Strict"
            ))),
        }
    }
}

/// Checks `apiVersion` and `kind` of a body against the endpoint, as Kubernetes' create and
/// update handlers and the custom resource validator do.
pub fn check_type_meta(call: &Call, object: &Value) -> Result<(), ApiError> {
    let definition = &call.served.definition;
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind.is_empty() {
        return Err(ApiError::bad_request(format!("Object 'Kind' is missing in '{}'", codec::compact(object))));
    }
    if api_version.is_empty() {
        return Err(ApiError::bad_request(format!("Object 'apiVersion' is missing in '{}'", codec::compact(object))));
    }
    let expected = call.api_version();
    if api_version != expected {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({expected})"
        )));
    }
    if kind != definition.kind {
        let error =
            FieldError::invalid(crate::core::field::Path::new("kind"), kind, format!("must be {}", definition.kind));
        return Err(ApiError::invalid(&GroupKind::new(&definition.group, kind), objects::name(object), &[error]));
    }
    Ok(())
}

/// Coerces a decoded body: drops fields the object cannot hold and reports their paths as
/// unknown fields.
pub fn coerce(object: &mut Value) -> Result<Vec<String>, ApiError> {
    let meta = objects::ensure_metadata(object)?;
    Ok(objects::drop_unknown_metadata(meta))
}

/// Applies `fieldValidation` to unknown fields: an error under Strict, warnings under Warn.
pub fn field_validation(call: &Call, mode: FieldValidation, unknown: &[String]) -> Result<Vec<String>, ApiError> {
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let texts: Vec<String> = unknown.iter().map(|p| format!("unknown field \"{p}\"")).collect();
    match mode {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(texts),
        FieldValidation::Strict => {
            let kind = &call.served.definition.kind;
            Err(ApiError::bad_request(format!(
                "{kind} in version \"{}\" cannot be handled as a {kind}: strict decoding error: {}",
                call.served.version.name,
                texts.join(", ")
            )))
        }
    }
}

/// Validates a prepared object. `errors` holds what earlier steps found; every problem is
/// returned in one 422.
pub fn validate(
    call: &Call,
    object: &Value,
    old: Option<&Value>,
    mut errors: Vec<FieldError>,
) -> Result<Vec<String>, ApiError> {
    // --- CEL (issue 5): x-kubernetes-validations, after the other checks. The schema work
    // adds Kubernetes' "skip CEL when a blocking error exists" rule here.
    let mut warnings = Vec::new();
    if let Some(rules) = &call.served.version.cel_rules {
        let outcome = rules.validate(object, old);
        errors.extend(outcome.errors);
        warnings = outcome.warnings;
    }
    // --- end CEL
    if errors.is_empty() {
        return Ok(warnings);
    }
    let definition = &call.served.definition;
    Err(ApiError::invalid(&definition.group_kind(), objects::name(object), &errors))
}

/// The object in the storage version, encoded.
pub fn to_storage(call: &Call, object: &Value) -> Result<(Value, Bytes), ApiError> {
    let definition = &call.served.definition;
    let mut stored = object.clone();
    if let Some(meta) = objects::metadata_mut(&mut stored) {
        meta.remove("resourceVersion");
    }
    crate::conversion::convert(definition, &mut stored, &definition.storage.name).map_err(errors::conversion)?;
    let bytes = serde_json::to_vec(&stored).map_err(|e| ApiError::internal(format!("encoding object: {e}")))?;
    Ok((stored, Bytes::from(bytes)))
}

/// The stored object, as the response to a write: stamped with its revision and converted to
/// the request version.
pub fn stored_to_response(call: &Call, mut stored: Value, revision: u64) -> Result<Value, ApiError> {
    objects::set_resource_version(&mut stored, revision);
    crate::conversion::convert(&call.served.definition, &mut stored, &call.served.version.name)
        .map_err(errors::conversion)?;
    Ok(stored)
}
