//! Conversion of objects between the versions of a definition.
//!
//! Owns the `None` strategy (only `apiVersion` changes) and the `Webhook` strategy
//! (ConversionReview over HTTPS, checked as Kubernetes checks it), and the bridge that lets the
//! synchronous read and write paths wait for a webhook. Callers prune the result with the
//! target version's schema, as Kubernetes' converter does. Must not touch storage or the API's
//! HTTP layer.

pub mod none;
pub mod review;
pub mod webhook;

use std::sync::Arc;

use serde_json::Value;

use crate::definitions::Definition;
use crate::definitions::conversion::Conversion;

/// Why objects could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("{group}/{version} is not a version of {kind}")]
    UnknownVersion { group: String, version: String, kind: String },
    #[error("{0}")]
    Invalid(String),
    /// A webhook call or its response failed (the message names the webhook and why).
    #[error("{0}")]
    Webhook(String),
}

/// Converts `object` (of some version of `definition`) to `version`, in place. A webhook is
/// called only when the object is in another version; the caller's thread waits for it.
pub fn convert(definition: &Definition, object: &mut Value, version: &str) -> Result<(), Error> {
    if !needs_webhook(definition, std::slice::from_ref(object), version) {
        return none::convert(definition, object, version);
    }
    let converted =
        wait_for(|clients| convert_all(definition, vec![object.clone()], version, clients, webhook::CALL_TIMEOUT))?;
    *object = converted.into_iter().next().ok_or_else(|| Error::Invalid("conversion returned no object".into()))?;
    Ok(())
}

/// Converts objects to `version`; with a webhook, one ConversionReview carries all of those in
/// another version (a list page costs one call, as in Kubernetes).
pub fn convert_many(definition: &Definition, mut objects: Vec<Value>, version: &str) -> Result<Vec<Value>, Error> {
    if !needs_webhook(definition, &objects, version) {
        for object in &mut objects {
            none::convert(definition, object, version)?;
        }
        return Ok(objects);
    }
    wait_for(|clients| convert_all(definition, objects, version, clients, webhook::CALL_TIMEOUT))
}

/// [`convert_many`] whose webhook call, if any, gives up after `timeout` (an impact analysis
/// calls the webhook with its own).
pub fn convert_many_within(
    definition: &Definition,
    mut objects: Vec<Value>,
    version: &str,
    timeout: std::time::Duration,
) -> Result<Vec<Value>, Error> {
    if !needs_webhook(definition, &objects, version) {
        for object in &mut objects {
            none::convert(definition, object, version)?;
        }
        return Ok(objects);
    }
    wait_for(|clients| convert_all(definition, objects, version, clients, timeout))
}

/// Refuses a version the definition does not have.
fn known_version(definition: &Definition, version: &str) -> Result<(), Error> {
    match definition.version(version) {
        Some(_) => Ok(()),
        None => Err(Error::UnknownVersion {
            group: definition.group.clone(),
            version: version.to_string(),
            kind: definition.kind.clone(),
        }),
    }
}

/// Whether converting `objects` to `version` calls the definition's webhook.
pub fn needs_webhook(definition: &Definition, objects: &[Value], version: &str) -> bool {
    matches!(definition.conversion, Conversion::Webhook(_))
        && definition.version(version).is_some()
        && !review::to_convert(objects, &format!("{}/{}", definition.group, version)).is_empty()
}

/// Which webhook clients a conversion may use.
#[derive(Clone, Copy)]
enum Clients {
    /// The process-wide clients, whose pooled connections live on the server's runtime.
    Shared,
    /// A client for this conversion only (its connections die with a temporary runtime).
    Own,
}

/// Runs a conversion to completion from synchronous code. On the server's multi-threaded
/// runtime the worker hands its other tasks away while it waits (`block_in_place`); anywhere
/// else (the offline commands, single-threaded test runtimes) a scoped thread runs the
/// conversion on a runtime of its own, with its own client.
fn wait_for<C, F>(conversion: C) -> Result<Vec<Value>, Error>
where
    C: FnOnce(Clients) -> F + Send,
    F: std::future::Future<Output = Result<Vec<Value>, Error>>,
{
    use tokio::runtime::{Builder, Handle, RuntimeFlavor};
    if let Ok(handle) = Handle::try_current()
        && handle.runtime_flavor() == RuntimeFlavor::MultiThread
    {
        return tokio::task::block_in_place(|| handle.block_on(conversion(Clients::Shared)));
    }
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            let runtime = Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::Webhook(format!("starting a runtime for the conversion webhook: {e}")))?;
            runtime.block_on(conversion(Clients::Own))
        });
        worker.join().unwrap_or_else(|_| Err(Error::Webhook("the conversion webhook call panicked".into())))
    })
}

/// Converts objects (in any versions of `definition`) to `version`. With a webhook, one
/// ConversionReview carries every object not already in that version; objects already in it
/// are left as they are.
async fn convert_all(
    definition: &Definition,
    mut objects: Vec<Value>,
    version: &str,
    clients: Clients,
    timeout: std::time::Duration,
) -> Result<Vec<Value>, Error> {
    let Conversion::Webhook(hook) = &definition.conversion else {
        for object in &mut objects {
            none::convert(definition, object, version)?;
        }
        return Ok(objects);
    };
    known_version(definition, version)?;
    let desired = format!("{}/{}", definition.group, version);
    let indices = review::to_convert(&objects, &desired);
    let Some(first) = indices.first().and_then(|i| objects.get(*i)) else { return Ok(objects) };
    let source = format!(
        "{}, Kind={}",
        first.get("apiVersion").and_then(Value::as_str).unwrap_or_default(),
        first.get("kind").and_then(Value::as_str).unwrap_or_default()
    );
    let from_version = first
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.rsplit_once('/'))
        .map(|(_, v)| v.to_string())
        .unwrap_or_default();
    let started = std::time::Instant::now();
    let outcome = call_webhook(hook, objects, &indices, &desired, &source, clients, timeout).await;
    let elapsed = started.elapsed();
    let metrics = &crate::metrics::global().conversion;
    let failure = outcome.as_ref().err().map(|(_, failure)| *failure);
    metrics.requests.observe((if failure.is_some() { "failure" } else { "success" }, failure.unwrap_or("")), elapsed);
    if from_version != version {
        let key = (definition.name.clone(), from_version, version.to_string(), failure.is_none());
        metrics.by_definition.observe(key, elapsed);
    }
    outcome.map_err(|(error, _)| error)
}

/// Kubernetes' failure types of conversion webhook calls (the `failure_type` label).
const CALL_FAILURE: &str = "conversion_webhook_call_failure";
const MALFORMED_RESPONSE: &str = "conversion_webhook_malformed_response_failure";
const PARTIAL_RESPONSE: &str = "conversion_webhook_partial_response_failure";
const INVALID_CONVERTED_OBJECT: &str = "conversion_webhook_invalid_converted_object_failure";

/// One ConversionReview round trip for the objects at `indices`, checked as Kubernetes checks
/// the answer; a failure carries its failure type.
async fn call_webhook(
    hook: &crate::definitions::conversion::Webhook,
    mut objects: Vec<Value>,
    indices: &[usize],
    desired: &str,
    source: &str,
    clients: Clients,
    timeout: std::time::Duration,
) -> Result<Vec<Value>, (Error, &'static str)> {
    let fail = |why: String| Error::Webhook(format!("conversion webhook for {source} failed: {why}"));
    let client: Arc<webhook::Client> = match clients {
        Clients::Shared => webhook::shared_client(hook),
        Clients::Own => webhook::Client::new(hook).map(Arc::new),
    }
    .map_err(|why| (fail(why), CALL_FAILURE))?;
    let uid = uuid::Uuid::new_v4().to_string();
    let sent: Vec<Value> = indices.iter().filter_map(|i| objects.get(*i).cloned()).collect();
    let request = review::request(&hook.review_version, &uid, desired, sent);
    let response = client.call_within(&request, timeout).await.map_err(|why| (fail(why), CALL_FAILURE))?;
    let converted = review::converted_objects(&hook.review_version, &uid, &response)
        .map_err(|why| (fail(why), MALFORMED_RESPONSE))?;
    if converted.len() != indices.len() {
        let why =
            format!("conversion webhook for {source} returned {} objects, expected {}", converted.len(), indices.len());
        return Err((Error::Webhook(why), PARTIAL_RESPONSE));
    }
    for (position, (index, mut object)) in indices.iter().zip(converted).enumerate() {
        let Some(original) = objects.get(*index) else { continue };
        let invalid = |why: String| {
            let why =
                format!("conversion webhook for {source} returned invalid converted object at index {position}: {why}");
            (Error::Webhook(why), INVALID_CONVERTED_OBJECT)
        };
        let got_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        if got_version != desired {
            return Err(invalid(format!("invalid groupVersion (expected {desired}, received {got_version})")));
        }
        review::check_identity(original, &object).map_err(invalid)?;
        review::restore_metadata(original, &mut object).map_err(|why| {
            let why = format!(
                "conversion webhook for {source} returned invalid metadata in object at index {position}: {why}"
            );
            (Error::Webhook(why), INVALID_CONVERTED_OBJECT)
        })?;
        if let Some(slot) = objects.get_mut(*index) {
            *slot = object;
        }
    }
    Ok(objects)
}
