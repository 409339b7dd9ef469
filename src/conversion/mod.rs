//! Conversion of objects between the versions of a definition.
//!
//! Owns the `None` strategy (only `apiVersion` changes) and the `Webhook` strategy
//! (ConversionReview over HTTPS, checked as Kubernetes checks it). Callers prune the result with
//! the target version's schema, as Kubernetes' converter does. Must not touch storage or the
//! API's HTTP layer.

pub mod none;
pub mod review;
pub mod webhook;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

pub use none::convert;

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

/// The webhook clients of a registry's definitions, built once per registry.
#[derive(Default)]
pub struct Converters {
    /// By definition name; a client that could not be built keeps its reason.
    clients: HashMap<String, Result<Arc<webhook::Client>, String>>,
}

impl Converters {
    pub fn build<'a>(definitions: impl Iterator<Item = &'a Arc<Definition>>) -> Converters {
        let mut clients = HashMap::new();
        for definition in definitions {
            if let Conversion::Webhook(hook) = &definition.conversion {
                let client = webhook::Client::new(hook).map(Arc::new);
                if let Err(e) = &client {
                    tracing::error!(definition = %definition.name, error = %e, "conversion webhook client");
                }
                clients.insert(definition.name.clone(), client);
            }
        }
        Converters { clients }
    }

    /// Converts objects (in any versions of `definition`) to `version`. With a webhook, one
    /// ConversionReview carries every object not already in that version; objects already in
    /// it are left as they are.
    pub async fn convert_all(
        &self,
        definition: &Definition,
        mut objects: Vec<Value>,
        version: &str,
    ) -> Result<Vec<Value>, Error> {
        let Conversion::Webhook(hook) = &definition.conversion else {
            for object in &mut objects {
                none::convert(definition, object, version)?;
            }
            return Ok(objects);
        };
        if definition.version(version).is_none() {
            return Err(Error::UnknownVersion {
                group: definition.group.clone(),
                version: version.to_string(),
                kind: definition.kind.clone(),
            });
        }
        let desired = format!("{}/{}", definition.group, version);
        let indices = review::to_convert(&objects, &desired);
        let Some(first) = indices.first().and_then(|i| objects.get(*i)) else { return Ok(objects) };
        let source = format!(
            "{}, Kind={}",
            first.get("apiVersion").and_then(Value::as_str).unwrap_or_default(),
            first.get("kind").and_then(Value::as_str).unwrap_or_default()
        );
        let fail = |why: String| Error::Webhook(format!("conversion webhook for {source} failed: {why}"));
        let client = match self.clients.get(&definition.name) {
            Some(Ok(client)) => client.clone(),
            Some(Err(why)) => return Err(fail(why.clone())),
            None => return Err(fail("no client for the webhook".into())),
        };
        let uid = uuid::Uuid::new_v4().to_string();
        let sent: Vec<Value> = indices.iter().filter_map(|i| objects.get(*i).cloned()).collect();
        let request = review::request(&hook.review_version, &uid, &desired, sent);
        let response = client.call(&request).await.map_err(fail)?;
        let converted = review::converted_objects(&hook.review_version, &uid, &response).map_err(fail)?;
        if converted.len() != indices.len() {
            return Err(Error::Webhook(format!(
                "conversion webhook for {source} returned {} objects, expected {}",
                converted.len(),
                indices.len()
            )));
        }
        for (position, (index, mut object)) in indices.iter().zip(converted).enumerate() {
            let Some(original) = objects.get(*index) else { continue };
            let invalid = |why: String| {
                Error::Webhook(format!(
                    "conversion webhook for {source} returned invalid converted object at index {position}: {why}"
                ))
            };
            let got_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
            if got_version != desired {
                return Err(invalid(format!("invalid groupVersion (expected {desired}, received {got_version})")));
            }
            review::check_identity(original, &object).map_err(invalid)?;
            review::restore_metadata(original, &mut object).map_err(|why| {
                Error::Webhook(format!(
                    "conversion webhook for {source} returned invalid metadata in object at index {position}: {why}"
                ))
            })?;
            if let Some(slot) = objects.get_mut(*index) {
                *slot = object;
            }
        }
        Ok(objects)
    }

    /// Converts one object.
    pub async fn convert_one(&self, definition: &Definition, object: Value, version: &str) -> Result<Value, Error> {
        let mut converted = self.convert_all(definition, vec![object], version).await?;
        converted.pop().ok_or_else(|| Error::Invalid("conversion returned no object".into()))
    }
}
