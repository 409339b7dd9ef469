//! POST of a new object, and the insertion step that apply shares when it creates.

use http::{Response, StatusCode};
use serde_json::Value;

use super::Api;
use super::admit;
use super::body::{ReqBody, RespBody, add_warnings, read_limited};
use super::call::Call;
use super::codec;
use super::errors;
use super::negotiate::negotiate;
use super::objects::{self, Placement};
use super::ownership;
use super::present;
use super::write::{self, FieldValidation};
use crate::admission::Operation;
use crate::core::request_scope::{self, Phase};
use crate::core::status::ApiError;
use crate::store::Store;

pub async fn create(api: &Api, call: &Call, body: ReqBody) -> Result<Response<RespBody>, ApiError> {
    let output = negotiate(call.accept(), false)?;
    // Options are checked before the body is read, as Kubernetes' handlers check them.
    ownership::check_options(call, "CreateOptions", false)?;
    let bytes = read_limited(body).await?;
    let decoded = codec::decode_object(&bytes, call.content_type(), call.expected())?;
    let mut object = decoded.value;
    write::check_type_meta(&call.served, &object)?;
    let mode = FieldValidation::of(call)?;
    let dry_run = call.dry_run()?;
    let unknown = write::coerce(&call.served, &mut object)?;
    let mut warnings = write::field_validation(&call.served, mode, &decoded.duplicates, &unknown)?;
    ownership::track_create(call, &mut object);
    request_scope::end(Phase::Decode);
    let (response_object, written, more) = insert_written(api, call, object, dry_run).await?;
    warnings.extend(more);
    let mut response = match written {
        Some((encoded, revision)) => {
            present::written_response(call, output, StatusCode::CREATED, response_object, &encoded, revision)?
        }
        None => present::object_response(call, output, StatusCode::CREATED, response_object)?,
    };
    add_warnings(&mut response, &warnings);
    request_scope::end(Phase::Encode);
    Ok(response)
}

/// Prepares, validates and stores a new object (create, and apply to a missing object):
/// the object as stored, in the request version, with the validation warnings.
pub async fn insert(api: &Api, call: &Call, object: Value, dry_run: bool) -> Result<(Value, Vec<String>), ApiError> {
    insert_written(api, call, object, dry_run).await.map(|(object, _, warnings)| (object, warnings))
}

/// [`insert`], with the stored bytes and their revision when the object was written.
async fn insert_written(
    api: &Api,
    call: &Call,
    mut object: Value,
    dry_run: bool,
) -> Result<(Value, Option<(bytes::Bytes, u64)>, Vec<String>), ApiError> {
    // Admission comes before validation, as in Kubernetes: namespace lifecycle, then the
    // mutating webhooks (whose result is pruned and defaulted again), then, after the schema,
    // the validating webhooks.
    super::namespaces::check_create(api, call, objects::name(&object)).await?;
    let name = objects::name(&object).to_string();
    let admitting = admit::begin(api, call, admit::Write::new(Operation::Create, &name, dry_run));
    let (mut warnings, changed) = admit::mutate(admitting.as_ref(), call, Some(&mut object), None).await?;
    if changed {
        write::coerce(&call.served, &mut object)?;
    }
    let placement = Placement {
        namespace: call.namespace.as_deref(),
        status_subresource: call.served.version.status_subresource,
        status_write: false,
    };
    let errors = objects::prepare_create(&mut object, &placement)?;
    warnings.extend(write::validate(&call.served, false, &object, None, errors)?);
    warnings.extend(admit::validate(admitting.as_ref(), call, Some(&object), None).await?);
    request_scope::end(Phase::Admission);
    let name = objects::name(&object).to_string();
    let (stored, encoded) = write::into_storage(&call.served, object)?;
    if dry_run {
        let response_object = write::stored_to_response(call, stored, 0).map(|mut o| {
            if let Some(meta) = objects::metadata_mut(&mut o) {
                meta.remove("resourceVersion");
            }
            o
        })?;
        request_scope::end(Phase::Store);
        return Ok((response_object, None, warnings));
    }
    let revision =
        api.store().create(&call.key_of(&name), encoded.clone()).await.map_err(|e| errors::storage(e, call, &name))?;
    request_scope::end(Phase::Store);
    Ok((write::stored_to_response(call, stored, revision)?, Some((encoded, revision)), warnings))
}
