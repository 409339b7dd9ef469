//! PATCH with `application/apply-patch+yaml`: server-side apply. The configuration (YAML or
//! JSON) is merged into the live object by [`super::ownership::apply`], which also records
//! ownership; the result is committed like an update, or created when the object does not
//! exist yet (201). Conflicts between writers are retried as for any patch.

use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::Value;

use super::Api;
use super::body::{RespBody, add_warnings};
use super::call::{Call, Subresource};
use super::create;
use super::errors;
use super::negotiate::negotiate;
use super::objects;
use super::ownership;
use super::present;
use super::update::{self, Committed, check_name, merge_for_subresource, read_current};
use super::write;
use crate::core::request_scope::{self, Phase};
use crate::core::status::ApiError;

/// Attempts before a conflicting apply gives up.
const MAX_ATTEMPTS: usize = 5;

/// Reads an apply configuration: YAML (JSON is YAML) holding an object, as kube-apiserver reads
/// it (sigs.k8s.io/yaml's `Unmarshal` into a map), refused in its words (`error decoding YAML:
/// ...`).
pub fn decode_config(body: &Bytes) -> Result<Value, ApiError> {
    let refused = |why: String| ApiError::bad_request(format!("error decoding YAML: {why}"));
    let text = std::str::from_utf8(body)
        .map_err(|_| refused("error converting YAML to JSON: yaml: invalid leading UTF-8 octet".into()))?;
    // Clients (kubectl, client-go) send JSON, which reads the same as YAML and much faster;
    // whatever serde_json refuses is read as YAML, whose refusal is go-yaml's. That includes
    // JSON over serde_json's 128 levels: go-yaml's limit (10,000) is the one that refuses.
    let json = text.trim_start().starts_with('{').then(|| serde_json::from_str::<Value>(text).ok()).flatten();
    let value: Value = match json {
        Some(value) => value,
        None => {
            let document = super::go_yaml::first_document(text)
                .map_err(|e| refused(format!("error converting YAML to JSON: {e}")))?;
            document.value
        }
    };
    match value {
        Value::Object(_) => Ok(value),
        Value::Null => Ok(Value::Object(serde_json::Map::new())),
        other => Err(refused(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&other)
        ))),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        _ => "object",
    }
}

pub async fn apply(api: &Api, call: &Call, body: Bytes) -> Result<Response<RespBody>, ApiError> {
    ownership::check_options(call, "PatchOptions", true)?;
    let force = ownership::force(call);
    let config = decode_config(&body)?;
    request_scope::end(Phase::Decode);
    if call.subresource == Subresource::Scale {
        return super::scale::apply(api, call, &config, force).await;
    }
    let output = negotiate(call.accept(), false)?;
    let dry_run = call.dry_run()?;
    let conflict = || ApiError::conflict(&call.resource(), &call.name, errors::OPTIMISTIC_LOCK_MESSAGE);
    for _ in 0..MAX_ATTEMPTS {
        let current = match read_current(api, call).await {
            Ok(current) => Some(current),
            Err(e) if e.code == 404 && call.subresource == Subresource::None => None,
            Err(e) => return Err(e),
        };
        let Some((current, old)) = current else {
            match create_by_apply(api, call, &config, force, dry_run).await? {
                Some((created, warnings)) => {
                    let mut response = present::object_response(call, output, StatusCode::CREATED, created)?;
                    add_warnings(&mut response, &warnings);
                    request_scope::end(Phase::Encode);
                    return Ok(response);
                }
                None => continue,
            }
        };
        let mut object = ownership::apply(call, &old, &config, force)?;
        // A resourceVersion in the configuration is a precondition.
        let pinned = objects::resource_version(&object) != objects::resource_version(&old);
        if pinned {
            return Err(conflict());
        }
        check_placement(call, &object)?;
        // Applied configurations were type-checked against the schema; nothing unknown is
        // left for `fieldValidation` to report.
        write::coerce(&call.served, &mut object)?;
        let object = merge_for_subresource(call, object, &old);
        request_scope::end(Phase::Decode);
        match update::commit(api, call, &current, &old, object, dry_run, Some("PatchOptions")).await {
            Ok((committed, warnings)) => {
                let result = match committed {
                    Committed::Written(o) | Committed::Deleted(o) | Committed::Unchanged(o) => o,
                };
                let mut response = present::object_response(call, output, StatusCode::OK, result)?;
                add_warnings(&mut response, &warnings);
                request_scope::end(Phase::Encode);
                return Ok(response);
            }
            Err(Some(e)) => return Err(e),
            Err(None) => continue,
        }
    }
    Err(conflict())
}

/// Namespace and name of the applied object against the URL (`applyPatch`'s checks).
fn check_placement(call: &Call, object: &Value) -> Result<(), ApiError> {
    if let Some(ns) = &call.namespace {
        let body_ns = objects::namespace(object);
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    check_name(call, object)
}

/// Creates the object from the configuration. `None` when someone else created it first.
async fn create_by_apply(
    api: &Api,
    call: &Call,
    config: &Value,
    force: bool,
    dry_run: bool,
) -> Result<Option<(Value, Vec<String>)>, ApiError> {
    let mut object = ownership::apply(call, &ownership::placeholder(call), config, force)?;
    let uid = objects::uid(&object);
    if !uid.is_empty() {
        return Err(ApiError::conflict(
            &call.resource(),
            &call.name,
            &format!("uid mismatch: the provided object specified uid {uid}, and no existing object was found"),
        ));
    }
    check_placement(call, &object)?;
    write::coerce(&call.served, &mut object)?;
    request_scope::end(Phase::Decode);
    match create::insert(api, call, object, dry_run).await {
        Ok(created) => Ok(Some(created)),
        Err(e) if e.code == 409 && e.reason == "AlreadyExists" => Ok(None),
        Err(e) => Err(e),
    }
}
