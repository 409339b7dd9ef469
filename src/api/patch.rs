//! PATCH: JSON patch (RFC 6902) and JSON merge patch (RFC 7386) applied to the current object
//! in the request version, then committed like an update, retried on conflicts unless the
//! patch itself pins a resourceVersion; server-side apply (`application/apply-patch+yaml`)
//! is handed to [`super::apply`]. Strategic merge patch is refused with 415, as Kubernetes
//! refuses it for custom resources.

use http::{Response, StatusCode};
use serde_json::Value;

use super::Api;
use super::body::{ReqBody, RespBody, add_warnings, read_limited};
use super::call::{Call, Subresource};
use super::errors;
use super::negotiate::{content_type_essence, negotiate};
use super::objects;
use super::patch_body::{self, Patched};
use super::present;
use super::update::{self, Committed, check_name, merge_for_subresource, read_current};
use super::write::{self, FieldValidation};
use crate::core::field::{FieldError, Path};
use crate::core::gvr::GroupKind;
use crate::core::request_scope::{self, Phase};
use crate::core::status::ApiError;
use crate::definitions::registry::Served;

/// Patch media types custom resources accept.
pub const PATCH_TYPES: &[&str] =
    &["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];
/// Attempts before a conflicting patch gives up.
const MAX_ATTEMPTS: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    /// Server-side apply.
    Apply,
}

pub fn patch_type(content_type: Option<&str>) -> Result<PatchType, ApiError> {
    match content_type_essence(content_type).as_str() {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/apply-patch+yaml" => Ok(PatchType::Apply),
        _ => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            PATCH_TYPES.join(", ")
        ))),
    }
}

/// Applies a JSON or merge patch document to a JSON value (`api::patch_body`).
pub fn apply_patch(kind: PatchType, patch: &[u8], target: &Value, mode: FieldValidation) -> Result<Patched, ApiError> {
    match kind {
        PatchType::Json => patch_body::json_patch(patch, target, mode),
        PatchType::Merge => patch_body::merge_patch(patch, target, mode),
        PatchType::Apply => Err(ApiError::internal("apply patches are merged by the field manager")),
    }
}

/// A patched document must still say what it is, as kube-apiserver's decoder of the patched
/// document requires: what the decoder refuses (`kind` or `apiVersion` not strings, no
/// `kind`) is the 422 showing the document; no `apiVersion`, the 500 its conversion answers.
fn check_patched_type(object: &Value) -> Result<(), ApiError> {
    let invalid = |why: &dyn Fn(&str) -> String| {
        let text = crate::core::field::go_json(object);
        let error = FieldError::invalid(Path::new("patch"), text.as_str(), why(&text));
        ApiError::invalid(&GroupKind::new("", ""), "", &[error])
    };
    let meta = super::codec::read_type_meta(object).map_err(|e| invalid(&|_| e.clone()))?;
    if meta.kind.is_empty() {
        return Err(invalid(&|text| format!("Object 'Kind' is missing in '{text}'")));
    }
    if meta.version.is_empty() {
        return Err(ApiError::internal("Object 'apiVersion' is missing in 'object has no apiVersion field'"));
    }
    Ok(())
}

/// The custom resource validator's `ValidateTypeMeta` on a patched document: a 422 under the
/// group and kind the document now claims, naming each wrong field (kind, then apiVersion).
fn validate_patched_type_meta(served: &Served, object: &Value) -> Result<(), ApiError> {
    let definition = &served.definition;
    let text = |field: &str| object.get(field).and_then(Value::as_str).unwrap_or_default();
    let (kind, api_version) = (text("kind"), text("apiVersion"));
    let expected = crate::core::gvr::join_api_version(&definition.group, &served.version.name);
    let mut errors = Vec::new();
    if kind != definition.kind {
        errors.push(FieldError::invalid(Path::new("kind"), kind, format!("must be {}", definition.kind)));
    }
    if api_version != expected {
        errors.push(FieldError::invalid(Path::new("apiVersion"), api_version, format!("must be {expected}")));
    }
    if errors.is_empty() {
        return Ok(());
    }
    let group = super::codec::read_type_meta(object).map(|meta| meta.group).unwrap_or_default();
    Err(ApiError::invalid(&GroupKind::new(&group, kind), objects::name(object), &errors))
}

/// kube-apiserver's refusal of a patched document its decoder refuses (`json: cannot unmarshal
/// ...`): a 422 of no kind, showing the document.
fn undecodable_patched(patched: &Value, detail: &str) -> ApiError {
    let text = crate::core::field::go_json(patched);
    let error = FieldError::invalid(Path::new("patch"), text, detail.to_string());
    ApiError::invalid(&GroupKind::new("", ""), "", &[error])
}

/// The strict-decoding errors of a patch and of the object it made (fields the schema does not
/// know), as `fieldValidation` has them: nothing, warnings, or (`Strict`) the 422 kube-apiserver
/// answers, showing the patched document.
fn strict_decoding(
    mode: FieldValidation,
    errors: Vec<String>,
    patched: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    match mode {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(errors),
        FieldValidation::Strict if errors.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => Err(undecodable_patched(
            patched.unwrap_or(&Value::Null),
            &format!("strict decoding error: {}", errors.join(", ")),
        )),
    }
}

pub async fn patch(api: &Api, call: &Call, body: ReqBody) -> Result<Response<RespBody>, ApiError> {
    let kind = patch_type(call.content_type())?;
    if kind == PatchType::Apply {
        let bytes = read_limited(body).await?;
        return super::apply::apply(api, call, bytes).await;
    }
    super::ownership::check_options(call, "PatchOptions", false)?;
    if call.subresource == Subresource::Scale {
        let bytes = read_limited(body).await?;
        return super::scale::patch(api, call, kind, &bytes).await;
    }
    let output = negotiate(call.accept(), false)?;
    let patch = read_limited(body).await?;
    request_scope::end(Phase::Decode);
    let mode = FieldValidation::of(call)?;
    let dry_run = call.dry_run()?;
    let conflict = || ApiError::conflict(&call.resource(), &call.name, errors::OPTIMISTIC_LOCK_MESSAGE);
    for _ in 0..MAX_ATTEMPTS {
        let (current, old) = read_current(api, call).await?;
        let Patched { mut object, mut strict_errors } = apply_patch(kind, &patch, &old, mode)?;
        if !object.is_object() {
            return Err(ApiError::bad_request("the patched document is not an object"));
        }
        check_patched_type(&object)?;
        validate_patched_type_meta(&call.served, &object)?;
        // A refusal under Strict shows the document as patched, before pruning.
        let patched = (mode == FieldValidation::Strict).then(|| object.clone());
        // The patched document is decoded before its name is compared with the URL's; what the
        // decoder refuses is the 422 showing the document (made again: coercion changed it).
        let unknown = write::coerce_or(&call.served, &mut object, |detail| {
            let again = apply_patch(kind, &patch, &old, mode).map(|p| p.object).unwrap_or_default();
            undecodable_patched(&again, detail)
        })?;
        strict_errors.extend(unknown.iter().map(|path| format!("unknown field \"{path}\"")));
        let mut warnings = strict_decoding(mode, strict_errors, patched.as_ref())?;
        check_name(call, &object)?;
        // A resourceVersion in the patch is a precondition; otherwise the current one is.
        let pinned = objects::resource_version(&object) != objects::resource_version(&old);
        if pinned {
            let rv = objects::resource_version(&object);
            if rv.is_empty() {
                return Err(update::missing_resource_version(call));
            }
            if update::object_revision(rv)? != current.revision {
                return Err(conflict());
            }
        }
        let mut object = merge_for_subresource(call, object, &old);
        super::ownership::track_update(call, &old, &mut object);
        request_scope::end(Phase::Decode);
        match update::commit(api, call, &current, &old, object, dry_run, Some("PatchOptions")).await {
            Ok((committed, more)) => {
                warnings.extend(more);
                let result = match committed {
                    Committed::Written(o) | Committed::Deleted(o) | Committed::Unchanged(o) => o,
                };
                let mut response = present::object_response(call, output, StatusCode::OK, result)?;
                add_warnings(&mut response, &warnings);
                request_scope::end(Phase::Encode);
                return Ok(response);
            }
            Err(Some(e)) => return Err(e),
            Err(None) if pinned => return Err(conflict()),
            Err(None) => continue,
        }
    }
    Err(conflict())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_is_refused() {
        let err = patch_type(Some("application/strategic-merge-patch+json")).unwrap_err();
        assert_eq!(err.code, 415);
        assert_eq!(
            err.message,
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        );
    }

    #[test]
    fn json_and_merge_patches() {
        let doc = json!({"spec": {"a": 1, "b": 2}});
        let warn = FieldValidation::Warn;
        let merged = apply_patch(PatchType::Merge, br#"{"spec":{"a":null,"c":3}}"#, &doc, warn).unwrap();
        assert_eq!(merged.object, json!({"spec": {"b": 2, "c": 3}}));
        let patched =
            apply_patch(PatchType::Json, br#"[{"op":"replace","path":"/spec/a","value":5}]"#, &doc, warn).unwrap();
        assert_eq!(patched.object["spec"]["a"], 5);
        let failed =
            apply_patch(PatchType::Json, br#"[{"op":"test","path":"/spec/a","value":9}]"#, &doc, warn).unwrap_err();
        assert_eq!(failed.code, 422);
        assert_eq!(apply_patch(PatchType::Json, b"{", &doc, warn).unwrap_err().code, 400);
    }

    #[test]
    fn strict_errors_are_warnings_or_the_422_showing_the_patched_document() {
        let errors = || vec!["json patch unknown field \"[0].x\"".to_string()];
        assert_eq!(strict_decoding(FieldValidation::Warn, errors(), None).unwrap(), errors());
        assert!(strict_decoding(FieldValidation::Ignore, errors(), None).unwrap().is_empty());
        assert!(strict_decoding(FieldValidation::Strict, Vec::new(), None).unwrap().is_empty());
        let refused = strict_decoding(FieldValidation::Strict, errors(), Some(&json!({"a": "<"}))).unwrap_err();
        assert_eq!(refused.code, 422);
        assert_eq!(
            refused.message,
            r#" "" is invalid: patch: Invalid value: "{\"a\":\"\\u003c\"}": strict decoding error: json patch unknown field "[0].x""#
        );
    }
}
