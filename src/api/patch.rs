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
use super::present;
use super::update::{self, Committed, check_name, merge_for_subresource, read_current};
use super::write::{self, FieldValidation};
use crate::core::request_scope::{self, Phase};
use crate::core::status::ApiError;

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

/// Applies a patch document to a JSON value.
pub fn apply_patch(kind: PatchType, patch: &[u8], target: &Value) -> Result<Value, ApiError> {
    match kind {
        PatchType::Json => {
            let operations: json_patch::Patch =
                serde_json::from_slice(patch).map_err(|e| ApiError::bad_request(e.to_string()))?;
            Ok(crate::core::bounded_patch::apply(&operations, target)?)
        }
        PatchType::Merge => {
            let patch: Value = serde_json::from_slice(patch).map_err(|e| ApiError::bad_request(e.to_string()))?;
            let mut doc = target.clone();
            json_patch::merge(&mut doc, &patch);
            Ok(doc)
        }
        PatchType::Apply => Err(ApiError::internal("apply patches are merged by the field manager")),
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
        let mut object = apply_patch(kind, &patch, &old)?;
        if !object.is_object() {
            return Err(ApiError::bad_request("the patched document is not an object"));
        }
        write::check_type_meta(&call.served, &object)?;
        check_name(call, &object)?;
        let unknown = write::coerce(&call.served, &mut object)?;
        let mut warnings = write::field_validation(&call.served, mode, &[], &unknown)?;
        // A resourceVersion in the patch is a precondition; otherwise the current one is.
        let pinned = objects::resource_version(&object) != objects::resource_version(&old);
        if pinned {
            let rv = objects::resource_version(&object);
            if super::list::parse_revision(rv).ok() != Some(current.revision) {
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
        let merged = apply_patch(PatchType::Merge, br#"{"spec":{"a":null,"c":3}}"#, &doc).unwrap();
        assert_eq!(merged, json!({"spec": {"b": 2, "c": 3}}));
        let patched = apply_patch(PatchType::Json, br#"[{"op":"replace","path":"/spec/a","value":5}]"#, &doc).unwrap();
        assert_eq!(patched["spec"]["a"], 5);
        let failed = apply_patch(PatchType::Json, br#"[{"op":"test","path":"/spec/a","value":9}]"#, &doc).unwrap_err();
        assert_eq!(failed.code, 422);
        assert_eq!(apply_patch(PatchType::Json, b"{", &doc).unwrap_err().code, 400);
    }
}
