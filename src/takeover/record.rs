//! The progress of a takeover, kept in our store (one record per definition name, outside
//! every resource's keys) so that a takeover interrupted by a crash is resumed or rolled back
//! by running the command again, and so that a restarted server still answers the
//! resourceVersions clients hold from the main apiserver as expired (the floor).

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Error;
use crate::store::{ListOptions, Revision, Store};

/// Where the records live: resource keys always start with `/`, so no resource reaches them.
const TAKEOVERS: &str = "crd-apiserver/takeovers/";

/// How far a takeover has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// Writes are frozen in the main apiserver and objects are being copied: a rerun copies
    /// again from the start.
    Copying,
    /// Every object is in our store; the APIServices are not switched yet.
    Copied,
    /// The APIServices point at us; the freeze is still on.
    Switched,
    /// Done: we serve the resource.
    Done,
    /// Handed back: the main apiserver serves it again.
    HandedBack,
}

/// One definition's takeover.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub phase: Phase,
    pub group: String,
    pub plural: String,
    /// The main apiserver's resourceVersion of the copy.
    pub main_revision: Revision,
    /// Our revision before the first copied object: resourceVersions below it are expired.
    pub floor: Revision,
    pub objects: u64,
    pub bytes: u64,
    /// When writes were frozen (RFC 3339), for the report after a resumed run.
    pub frozen_at: String,
    /// The APIServices as they were before the switch, to roll back or hand back.
    #[serde(default)]
    pub api_services: Vec<Value>,
}

fn key_of(definition: &str) -> String {
    format!("{TAKEOVERS}{definition}")
}

fn store_error(e: crate::store::Error) -> Error {
    Error::Store(e.to_string())
}

/// The record of `definition` and its revision, if any.
pub async fn read(store: &impl Store, definition: &str) -> Result<Option<(Record, Revision)>, Error> {
    let key = key_of(definition);
    match store.get(&key).await.map_err(store_error)? {
        Some(found) => {
            let record = serde_json::from_slice(&found.value)
                .map_err(|e| Error::Store(format!("{key}: not a takeover record: {e}")))?;
            Ok(Some((record, found.revision)))
        }
        None => Ok(None),
    }
}

/// Every record, by definition name.
pub async fn read_all(store: &impl Store) -> Result<Vec<(String, Record)>, Error> {
    let page = store.list(TAKEOVERS, ListOptions::default()).await.map_err(store_error)?;
    let mut all = Vec::with_capacity(page.items.len());
    for kv in page.items {
        let Some(name) = kv.key.strip_prefix(TAKEOVERS) else { continue };
        match serde_json::from_slice::<Record>(&kv.value) {
            Ok(record) => all.push((name.to_string(), record)),
            Err(e) => tracing::warn!(key = %kv.key, error = %e, "not a takeover record; ignored"),
        }
    }
    Ok(all)
}

/// Writes `record` (created, or replaced whatever its revision).
pub async fn write(store: &impl Store, definition: &str, record: &Record) -> Result<(), Error> {
    let key = key_of(definition);
    let bytes = Bytes::from(serde_json::to_vec(record).map_err(|e| Error::Store(e.to_string()))?);
    for _ in 0..16 {
        let result = match store.get(&key).await.map_err(store_error)? {
            Some(found) => store.update(&key, found.revision, bytes.clone()).await,
            None => store.create(&key, bytes.clone()).await,
        };
        match result {
            Ok(_) => return Ok(()),
            Err(crate::store::Error::Conflict { .. } | crate::store::Error::AlreadyExists(_)) => continue,
            Err(e) => return Err(store_error(e)),
        }
    }
    Err(Error::Store(format!("{key}: kept losing races to another writer")))
}

/// Removes the record of `definition`.
pub async fn remove(store: &impl Store, definition: &str) -> Result<(), Error> {
    match store.delete(&key_of(definition), None).await {
        Ok(_) | Err(crate::store::Error::NotFound(_)) => Ok(()),
        Err(e) => Err(store_error(e)),
    }
}
