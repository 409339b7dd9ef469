//! PUT of an existing object (main resource and status subresource), and the commit step
//! that updates share with patches.

use http::{Response, StatusCode};
use serde_json::Value;

use super::Api;
use super::admit;
use super::body::{ReqBody, RespBody, add_warnings, read_limited};
use super::call::{Call, Subresource};
use super::codec;
use super::errors;
use super::negotiate::negotiate;
use super::objects::{self, Placement};
use super::ownership;
use super::present;
use super::write::{self, FieldValidation};
use crate::admission::Operation;
use crate::core::field::{FieldError, Path};
use crate::core::gvr::GroupKind;
use crate::core::request_scope::{self, Phase};
use crate::core::status::ApiError;
use crate::store::{self, Store, Versioned};

use super::scale;

/// Checks that a body names the object of the URL (`checkName`).
pub fn check_name(call: &Call, object: &Value) -> Result<(), ApiError> {
    let name = objects::name(object);
    if name != call.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            call.name
        )));
    }
    if let Some(ns) = &call.namespace {
        let body_ns = objects::namespace(object);
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(format!(
                "the namespace of the object ({body_ns}) does not match the namespace on the URL ({ns})"
            )));
        }
    }
    Ok(())
}

/// Reads the addressed object: its stored form and its form in the request version.
pub async fn read_current(api: &Api, call: &Call) -> Result<(Versioned, Value), ApiError> {
    let current = api
        .store()
        .get(&call.key())
        .await
        .map_err(|e| errors::storage(e, call, &call.name))?
        .ok_or_else(|| ApiError::not_found(&call.resource(), &call.name))?;
    let object = present::from_storage(call, &current.value, current.revision)?;
    request_scope::end(Phase::Store);
    Ok((current, object))
}

/// How the request's object becomes the new object: whole (main resource) or only its
/// status (status subresource).
pub fn merge_for_subresource(call: &Call, object: Value, old: &Value) -> Value {
    if call.subresource != Subresource::Status {
        return object;
    }
    let mut merged = old.clone();
    if let (Value::Object(target), Value::Object(source)) = (&mut merged, object) {
        match source.get("status") {
            Some(status) => {
                target.insert("status".into(), status.clone());
            }
            None => {
                target.remove("status");
            }
        }
        // The field manager's record of this write stays (statusStrategy keeps it too).
        if let Some(managed) = source.get("metadata").and_then(|m| m.get("managedFields"))
            && let Some(meta) = target.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert("managedFields".into(), managed.clone());
        }
    }
    merged
}

/// What a write ended as.
pub enum Committed {
    Written(Value),
    /// The last finalizer went away on a deleting object: it is gone now.
    Deleted(Value),
    Unchanged(Value),
}

/// Prepares, validates and stores an update of `current` to `object` (both in the request
/// version). `Conflict` from the store comes back as `Err(None)` so callers can retry.
/// `admission` names the options kind webhooks see (`UpdateOptions`, `PatchOptions`); `None`
/// when the caller admitted the write itself (the scale subresource).
pub async fn commit(
    api: &Api,
    call: &Call,
    current: &Versioned,
    old: &Value,
    mut object: Value,
    dry_run: bool,
    admission: Option<&'static str>,
) -> Result<(Committed, Vec<String>), Option<ApiError>> {
    let placement = Placement {
        namespace: call.namespace.as_deref(),
        status_subresource: call.served.version.status_subresource && call.subresource == Subresource::None,
        status_write: call.subresource == Subresource::Status,
    };
    // Mutating admission sees the object before the update strategy prepares it, validating
    // admission after the schema validated it, as in Kubernetes.
    let options_kind = admission.unwrap_or("UpdateOptions");
    let write = admit::Write { options_kind, ..admit::Write::new(Operation::Update, &call.name, dry_run) };
    let admitting = admission.and_then(|_| admit::begin(api, call, write));
    let (mut warnings, changed) =
        admit::mutate(admitting.as_ref(), call, Some(&mut object), Some(old)).await.map_err(Some)?;
    if changed {
        write::coerce(&call.served, &mut object).map_err(Some)?;
    }
    let errors = objects::prepare_update(&mut object, old, &placement).map_err(Some)?;
    super::ownership::keep_times_of_unchanged(old, &mut object);
    let status_only = call.subresource == Subresource::Status;
    warnings.extend(write::validate(&call.served, status_only, &object, Some(old), errors).map_err(Some)?);
    warnings.extend(admit::validate(admitting.as_ref(), call, Some(&object), Some(old)).await.map_err(Some)?);
    request_scope::end(Phase::Admission);
    let stored = store_update(api, call, current, old, &object, dry_run).await;
    request_scope::end(Phase::Store);
    Ok((stored?, warnings))
}

/// The store step of [`commit`]: the validated object in the storage version, written
/// unless nothing changed or it is a dry run.
async fn store_update(
    api: &Api,
    call: &Call,
    current: &Versioned,
    old: &Value,
    object: &Value,
    dry_run: bool,
) -> Result<Committed, Option<ApiError>> {
    let (stored, encoded) = write::to_storage(&call.served, object).map_err(Some)?;
    if encoded == current.value {
        return Ok(Committed::Unchanged(old.clone()));
    }
    if dry_run {
        return Ok(Committed::Written(write::stored_to_response(call, stored, current.revision).map_err(Some)?));
    }
    let key = call.key();
    if objects::is_deleting(object) && objects::finalizers(object).is_empty() {
        return match api.store().delete(&key, Some(current.revision)).await {
            Ok((revision, _)) => {
                Ok(Committed::Deleted(write::stored_to_response(call, stored, revision).map_err(Some)?))
            }
            Err(store::Error::Conflict { .. }) => Err(None),
            Err(e) => Err(Some(errors::storage(e, call, &call.name))),
        };
    }
    match api.store().update(&key, current.revision, encoded).await {
        Ok(revision) => Ok(Committed::Written(write::stored_to_response(call, stored, revision).map_err(Some)?)),
        Err(store::Error::Conflict { .. }) => Err(None),
        Err(e) => Err(Some(errors::storage(e, call, &call.name))),
    }
}

/// The 422 of an update (or a patch) whose object has no `resourceVersion`.
pub fn missing_resource_version(call: &Call) -> ApiError {
    let error =
        FieldError::invalid(Path::new("metadata").child("resourceVersion"), 0, "must be specified for an update");
    let d = &call.served.definition;
    ApiError::invalid(&GroupKind::new(&d.group, &d.plural), &call.name, &[error])
}

/// An object's `metadata.resourceVersion` as a precondition: one that is not a revision is
/// the 500 without a reason kube-apiserver's storage answers (`strconv.ParseUint: ...`).
pub fn object_revision(text: &str) -> Result<crate::store::Revision, ApiError> {
    crate::core::strconv::parse_uint(text).map_err(ApiError::unknown)
}

pub async fn update(api: &Api, call: &Call, body: ReqBody) -> Result<Response<RespBody>, ApiError> {
    if call.subresource == Subresource::Scale {
        return scale::update(api, call, body).await;
    }
    let output = negotiate(call.accept(), false)?;
    ownership::check_options(call, "UpdateOptions", false)?;
    let bytes = read_limited(body).await?;
    let decoded = codec::decode_object(&bytes, call.content_type(), call.expected())?;
    let mut object = decoded.value;
    write::check_type_meta(&call.served, &object)?;
    let mode = FieldValidation::of(call)?;
    let dry_run = call.dry_run()?;
    let unknown = write::coerce(&call.served, &mut object)?;
    let mut warnings = write::field_validation(&call.served, mode, &decoded.duplicates, &unknown)?;
    // What the decoder refuses is refused before the name is compared with the URL's.
    check_name(call, &object)?;
    request_scope::end(Phase::Decode);
    // A missing object is NotFound whatever the body says (the update finds nothing to update
    // before it checks the resourceVersion).
    let (current, old) = read_current(api, call).await?;
    let rv = objects::resource_version(&object).to_string();
    if rv.is_empty() {
        return Err(missing_resource_version(call));
    }
    let expected = object_revision(&rv)?;
    let conflict = || ApiError::conflict(&call.resource(), &call.name, errors::OPTIMISTIC_LOCK_MESSAGE);
    if current.revision != expected {
        return Err(conflict());
    }
    let mut object = merge_for_subresource(call, object, &old);
    ownership::track_update(call, &old, &mut object);
    let (committed, more) = commit(api, call, &current, &old, object, dry_run, Some("UpdateOptions"))
        .await
        .map_err(|e| e.unwrap_or_else(conflict))?;
    warnings.extend(more);
    let result = match committed {
        Committed::Written(o) | Committed::Deleted(o) | Committed::Unchanged(o) => o,
    };
    let mut response = present::object_response(call, output, StatusCode::OK, result)?;
    add_warnings(&mut response, &warnings);
    request_scope::end(Phase::Encode);
    Ok(response)
}
