//! The steps every write shares (create, update, patch): type checks of the body, coercion
//! (unknown fields), `fieldValidation`, validation into one 422, and encoding in the storage
//! version.
//!
//! The schema steps take the served resource (`Served`) rather than the request, so that the
//! offline `crd-apiserver validate` command runs exactly these functions.

use bytes::Bytes;
use serde_json::Value;

use super::call::Call;
use super::codec;
use super::errors;
use super::objects;
use super::replicas;
use crate::core::field::{FieldError, Path};
use crate::core::gvr::GroupKind;
use crate::core::status::ApiError;
use crate::definitions::registry::Served;
use crate::schema;
use crate::schema::objectmeta::rules as meta_rules;

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
pub fn check_type_meta(served: &Served, object: &Value) -> Result<(), ApiError> {
    let definition = &served.definition;
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind.is_empty() {
        return Err(ApiError::bad_request(format!("Object 'Kind' is missing in '{}'", codec::compact(object))));
    }
    if !crate::core::gvr::is_api_version(api_version, &definition.group, &served.version.name) {
        let expected = crate::core::gvr::join_api_version(&definition.group, &served.version.name);
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

/// Coerces a decoded body as Kubernetes' decoder does, with the request version's schema:
/// metadata through the ObjectMeta type, pruning, `null`s the schema does not allow, embedded
/// resources' metadata, then the version's defaults. Returns the unknown field paths
/// (`spec.someRandomField`, `metadata.foo`).
pub fn coerce(served: &Served, object: &mut Value) -> Result<Vec<String>, ApiError> {
    coerce_or(served, object, |detail| undecodable(served, detail))
}

/// [`coerce`], with the decoder's refusal (`json: cannot unmarshal ...`) worded by `refuse`: the
/// patch handler's is the 422 showing the patched document.
pub fn coerce_or(
    served: &Served,
    object: &mut Value,
    refuse: impl FnOnce(&str) -> ApiError,
) -> Result<Vec<String>, ApiError> {
    let schema = served.version.schema().map(std::sync::Arc::as_ref);
    let unknown = schema::coerce(object, schema, false).map_err(|e| refuse(&e.to_string()))?;
    objects::ensure_metadata(object)?;
    schema::default(object, schema);
    Ok(unknown)
}

/// The 400 of a body the decoder refuses (`<Kind> in version "v1" cannot be handled as a
/// <Kind>: ...`).
fn undecodable(served: &Served, detail: &str) -> ApiError {
    let kind = &served.definition.kind;
    ApiError::bad_request(format!(
        "{kind} in version \"{}\" cannot be handled as a {kind}: {detail}",
        served.version.name
    ))
}

/// Applies `fieldValidation` to duplicate and unknown fields: an error under Strict, warnings
/// under Warn, nothing under Ignore.
pub fn field_validation(
    served: &Served,
    mode: FieldValidation,
    duplicates: &[String],
    unknown: &[String],
) -> Result<Vec<String>, ApiError> {
    let texts: Vec<String> = duplicates
        .iter()
        .map(|p| format!("duplicate field \"{p}\""))
        .chain(unknown.iter().map(|p| format!("unknown field \"{p}\"")))
        .collect();
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    match mode {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(texts),
        FieldValidation::Strict => Err(undecodable(served, &format!("strict decoding error: {}", texts.join(", ")))),
    }
}

/// Validates a prepared object as the custom resource strategy does, in its order: metadata,
/// the OpenAPI schema (ratcheted against `old` on updates), the scale replicas, embedded
/// resources, list types, then CEL rules. `errors` holds what earlier steps found; every
/// problem is returned in one 422. `status_only` is a write through the status subresource,
/// which validates `status` alone. Returns the warnings of a valid write.
pub fn validate(
    served: &Served,
    status_only: bool,
    object: &Value,
    old: Option<&Value>,
    errors: Vec<FieldError>,
) -> Result<Vec<String>, ApiError> {
    let found = findings(served, status_only, object, old, errors);
    if !found.errors.is_empty() {
        let definition = &served.definition;
        return Err(ApiError::invalid(&definition.group_kind(), objects::name(object), &found.errors));
    }
    let mut warnings = found.warnings;
    let old_finalizers = old.map(objects::finalizers).unwrap_or_default();
    warnings.extend(meta_rules::finalizer_warnings(&objects::finalizers(object), &old_finalizers));
    Ok(warnings)
}

/// What [`validate`] finds, before it becomes a 422: every error, the warnings of ratcheted
/// CEL errors, and what the CEL rules cost (`impact` reads these for stored objects).
#[derive(Debug, Default)]
pub struct Findings {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
    /// The runtime cost of the CEL rules over the object (0 when they did not run).
    pub cel_cost: u64,
}

/// The checks of [`validate`], collected.
pub fn findings(
    served: &Served,
    status_only: bool,
    object: &Value,
    old: Option<&Value>,
    mut errors: Vec<FieldError>,
) -> Findings {
    let version = &served.version;
    let schema = version.schema().map(std::sync::Arc::as_ref);
    let no_metadata = serde_json::Map::new();
    let meta = objects::metadata(object).unwrap_or(&no_metadata);
    errors.extend(meta_rules::validate_details(meta, &Path::new("metadata"), old.is_none()));
    let scale = version.scale.as_ref();
    if status_only {
        let status_schema = schema.and_then(|s| s.properties.get("status"));
        if let (Some(status), Some(status_schema)) = (object.get("status"), status_schema) {
            let old_status = old.and_then(|o| o.get("status"));
            errors.extend(schema::validate_values(status_schema, status, old_status, &Path::new("status")));
        }
        errors.extend(replicas::validate_status(scale, object));
        if let Some(schema) = schema {
            errors.extend(schema::validate_lists(schema, object, old, &Path::nil()));
        }
    } else {
        if let Some(schema) = schema {
            errors.extend(schema::validate_values(schema, object, old, &Path::nil()));
        }
        errors.extend(replicas::validate_spec(scale, object));
        errors.extend(replicas::validate_status(scale, object));
        if let Some(schema) = schema {
            errors.extend(schema::validate_structure(schema, object, old, &Path::nil()));
        }
    }
    let mut found = Findings::default();
    if let Some(rules) = version.cel_rules() {
        // CEL: x-kubernetes-validations. Kubernetes skips the rules when earlier errors mean
        // the object is not what they expect, and says so; otherwise they run over the whole
        // object (with `old` for transition rules and ratcheting, whose suppressed errors
        // come back as warnings).
        if schema::blocks_rules(&errors) {
            errors.push(schema::rules_not_checked());
        } else {
            let outcome = rules.validate(object, old);
            errors.extend(outcome.errors);
            found.warnings = outcome.warnings;
            found.cel_cost =
                u64::try_from(crate::cel::RUNTIME_COST_BUDGET.saturating_sub(outcome.remaining_budget)).unwrap_or(0);
        }
    }
    found.errors = errors;
    found
}

/// The object in the storage version, encoded.
pub fn to_storage(served: &Served, object: &Value) -> Result<(Value, Bytes), ApiError> {
    into_storage(served, object.clone())
}

/// [`to_storage`] of an object the caller no longer needs.
pub fn into_storage(served: &Served, mut stored: Value) -> Result<(Value, Bytes), ApiError> {
    let definition = &served.definition;
    if let Some(meta) = objects::metadata_mut(&mut stored) {
        meta.remove("resourceVersion");
    }
    convert_to(definition, &mut stored, &definition.storage)?;
    let bytes = crate::core::json::to_vec(&stored).map_err(|e| ApiError::internal(format!("encoding object: {e}")))?;
    Ok((stored, Bytes::from(bytes)))
}

/// Converts an object to `target`; when its version changes, the target version's schema
/// then prunes it, as Kubernetes' converter does.
pub fn convert_to(
    definition: &crate::definitions::Definition,
    object: &mut Value,
    target: &crate::definitions::Version,
) -> Result<(), ApiError> {
    let before = object.get("apiVersion").and_then(Value::as_str).map(str::to_string);
    crate::conversion::convert(definition, object, &target.name).map_err(errors::conversion)?;
    prune_converted(before.as_deref(), object, target);
    Ok(())
}

/// [`convert_to`] of many objects: a conversion webhook converts them in one call.
pub fn convert_all_to(
    definition: &crate::definitions::Definition,
    objects: Vec<Value>,
    target: &crate::definitions::Version,
) -> Result<Vec<Value>, ApiError> {
    convert_all_to_within(definition, objects, target, crate::conversion::webhook::CALL_TIMEOUT)
}

/// [`convert_all_to`] whose webhook call, if any, gives up after `timeout`.
pub fn convert_all_to_within(
    definition: &crate::definitions::Definition,
    objects: Vec<Value>,
    target: &crate::definitions::Version,
    timeout: std::time::Duration,
) -> Result<Vec<Value>, ApiError> {
    let before: Vec<Option<String>> =
        objects.iter().map(|o| o.get("apiVersion").and_then(Value::as_str).map(str::to_string)).collect();
    let mut converted = crate::conversion::convert_many_within(definition, objects, &target.name, timeout)
        .map_err(errors::conversion)?;
    for (object, before) in converted.iter_mut().zip(&before) {
        prune_converted(before.as_deref(), object, target);
    }
    Ok(converted)
}

/// A converted object whose version changed is pruned with the target version's schema.
fn prune_converted(before: Option<&str>, object: &mut Value, target: &crate::definitions::Version) {
    let after = object.get("apiVersion").and_then(Value::as_str);
    if before != after
        && let Some(schema) = target.schema().map(std::sync::Arc::as_ref)
    {
        // Metadata was coerced on decode already; an error here leaves the object as it is.
        let _ = schema::coerce(object, Some(schema), true);
    }
}

/// The stored object, as the response to a write: stamped with its revision and converted to
/// the request version.
pub fn stored_to_response(call: &Call, mut stored: Value, revision: u64) -> Result<Value, ApiError> {
    objects::set_resource_version(&mut stored, revision);
    convert_to(&call.served.definition, &mut stored, &call.served.version)?;
    Ok(stored)
}
