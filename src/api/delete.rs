//! DELETE of one object (preconditions, finalizers, propagation policy) and of a collection.

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::Api;
use super::admit;
use super::body::{self, ReqBody, RespBody, read_limited};
use super::call::Call;
use super::delete_options::DeleteOptions;
use super::errors;
use super::list::Filter;
use super::negotiate::{Encoding, negotiate};
use super::objects;
use super::present;
use super::update::read_current;
use crate::admission::Operation;
use crate::core::request_scope::{self, Phase};
use crate::core::status::{ApiError, StatusDetails, success_status};
use crate::store::{self, ListOptions, Store};

/// Attempts before a delete that keeps conflicting gives up.
const MAX_ATTEMPTS: usize = 5;

/// What deleting one object did.
enum Outcome {
    /// Gone; the last state.
    Deleted(Value),
    /// Finalizers remain: marked for deletion; the current state.
    Pending(Value),
}

async fn delete_one(api: &Api, call: &Call, name: &str, options: &DeleteOptions) -> Result<Outcome, ApiError> {
    let call = Call { name: name.to_string(), ..call.clone() };
    let resource = call.resource();
    // Preconditions fail early as `rest.BeforeDelete` words them: on the kind, not the resource.
    let definition = &call.served.definition;
    let kind = crate::core::gvr::GroupResource::new(&definition.group, &definition.kind);
    for _ in 0..MAX_ATTEMPTS {
        let (current, mut object) = read_current(api, &call).await?;
        if let Some(uid) = &options.uid
            && uid != objects::uid(&object)
        {
            let why = format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                objects::uid(&object)
            );
            return Err(ApiError::conflict(&kind, name, &why));
        }
        if let Some(rv) = &options.resource_version
            && rv != objects::resource_version(&object)
        {
            let why = format!(
                "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                objects::resource_version(&object)
            );
            return Err(ApiError::conflict(&kind, name, &why));
        }
        // Deletes pass admission too: webhooks see the object as oldObject.
        let write = admit::Write::new(Operation::Delete, name, options.dry_run);
        let admitting = admit::begin(api, &call, write);
        admit::mutate(admitting.as_ref(), &call, None, Some(&object)).await?;
        admit::validate(admitting.as_ref(), &call, None, Some(&object)).await?;
        request_scope::end(Phase::Admission);
        let mut finalizers = objects::finalizers(&object);
        let policy_finalizer = match options.propagation_policy.as_deref() {
            Some("Orphan") => Some("orphan"),
            Some("Foreground") => Some("foregroundDeletion"),
            _ => None,
        };
        if let Some(f) = policy_finalizer
            && !finalizers.iter().any(|x| x == f)
            && (!finalizers.is_empty() || !objects::is_deleting(&object))
        {
            finalizers.push(f.to_string());
        }
        if finalizers.is_empty() {
            if options.dry_run {
                return Ok(Outcome::Deleted(object));
            }
            let deleted = api.store().delete(&call.key(), Some(current.revision)).await;
            request_scope::end(Phase::Store);
            return match deleted {
                Ok((revision, _)) => {
                    objects::set_resource_version(&mut object, revision);
                    Ok(Outcome::Deleted(object))
                }
                Err(store::Error::Conflict { .. }) => continue,
                Err(e) => Err(errors::storage(e, &call, name)),
            };
        }
        if objects::is_deleting(&object) && finalizers == objects::finalizers(&object) {
            return Ok(Outcome::Pending(object));
        }
        let meta = objects::ensure_metadata(&mut object)?;
        if meta.get("deletionTimestamp").is_none_or(|v| v.is_null()) {
            // Marking an object as deleting is a change of its desired state (`markAsDeleting`).
            let generation = meta.get("generation").and_then(Value::as_i64).unwrap_or(0);
            if generation > 0 {
                meta.insert("generation".into(), json!(generation + 1));
            }
            meta.insert("deletionTimestamp".into(), json!(crate::core::time::now_rfc3339()));
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        }
        meta.insert("finalizers".into(), json!(finalizers));
        if options.dry_run {
            return Ok(Outcome::Pending(object));
        }
        let (stored, encoded) = super::write::to_storage(&call.served, &object)?;
        let updated = api.store().update(&call.key(), current.revision, encoded).await;
        request_scope::end(Phase::Store);
        match updated {
            Ok(revision) => {
                return Ok(Outcome::Pending(super::write::stored_to_response(&call, stored, revision)?));
            }
            Err(store::Error::Conflict { .. }) => continue,
            Err(e) => return Err(errors::storage(e, &call, name)),
        }
    }
    Err(ApiError::conflict(&resource, name, errors::OPTIMISTIC_LOCK_MESSAGE))
}

pub async fn delete(api: &Api, call: &Call, body: ReqBody) -> Result<Response<RespBody>, ApiError> {
    let output = negotiate(call.accept(), false)?;
    let bytes = read_limited(body).await?;
    let options = DeleteOptions::parse(call, &bytes)?;
    request_scope::end(Phase::Decode);
    let response = match delete_one(api, call, &call.name, &options).await? {
        Outcome::Pending(object) => present::object_response(call, output, StatusCode::OK, object),
        Outcome::Deleted(object) => {
            let details = StatusDetails {
                name: call.name.clone(),
                group: call.served.definition.group.clone(),
                kind: call.served.definition.plural.clone(),
                uid: objects::uid(&object).to_string(),
                ..StatusDetails::default()
            };
            let encoding = if output.encoding == Encoding::Yaml { Encoding::Yaml } else { Encoding::Json };
            Ok(body::status_response(&success_status(Some(details)), encoding))
        }
    };
    request_scope::end(Phase::Encode);
    response
}

pub async fn delete_collection(api: &Api, call: &Call, body: ReqBody) -> Result<Response<RespBody>, ApiError> {
    let output = negotiate(call.accept(), true)?;
    let bytes = read_limited(body).await?;
    let options = DeleteOptions::parse(call, &bytes)?;
    request_scope::end(Phase::Decode);
    let filter = Filter::of(call)?;
    let page =
        api.store().list(&call.prefix(), ListOptions::default()).await.map_err(|e| errors::storage(e, call, ""))?;
    let mut deleted = Vec::new();
    for kv in page.items {
        let object = present::from_storage(call, &kv.value, kv.revision)?;
        if !filter.matches(&object) {
            continue;
        }
        let item_call =
            Call { namespace: Some(objects::namespace(&object).to_string()).filter(|n| !n.is_empty()), ..call.clone() };
        match delete_one(api, &item_call, objects::name(&object), &options).await {
            Ok(Outcome::Deleted(o) | Outcome::Pending(o)) => deleted.push(o),
            // Deleted meanwhile by someone else: nothing left to do.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let response = present::list_response(
        call,
        output,
        deleted,
        present::list_metadata(api.store().current_revision(), None, None),
    );
    request_scope::end(Phase::Encode);
    response
}
