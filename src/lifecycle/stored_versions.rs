//! `status.storedVersions`: every version a definition's objects were ever stored in and may
//! still be, kept in the store (one record per definition, by definition name, outside every
//! resource's keys) so that it survives restarts and is shared by every replica of a store.
//!
//! As in Kubernetes, a version joins the list when a definition starts being served with it as
//! the storage version ([`record_storage_versions`], before any object can be written in it),
//! and leaves it only when no object is left in it ([`remove`], which the migrator calls).
//! A definition removed from the files keeps its record, as its objects stay in the store.
//! Never touches objects.

use std::collections::HashMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::core::field::{FieldError, Path};
use crate::definitions::Definition;
use crate::store::{Error, ListOptions, Store};

/// Where the records live: resource keys always start with `/`, so no resource can reach them.
const STORED_VERSIONS: &str = "crd-apiserver/stored-versions/";

/// How many times a compare-and-swap that lost a race is tried again before giving up.
const ATTEMPTS: usize = 16;

/// The stored form of one record.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    #[serde(rename = "storedVersions")]
    stored_versions: Vec<String>,
}

fn key_of(definition: &str) -> String {
    format!("{STORED_VERSIONS}{definition}")
}

fn decode(key: &str, bytes: &[u8]) -> Result<Record, Error> {
    serde_json::from_slice(bytes).map_err(|e| Error::Backend(format!("{key}: not a storedVersions record: {e}")))
}

fn encode(record: &Record) -> Result<Bytes, Error> {
    serde_json::to_vec(record).map(Bytes::from).map_err(|e| Error::Backend(format!("encoding storedVersions: {e}")))
}

/// The stored versions of the definition named `definition` (`metadata.name`), oldest first;
/// empty when it was never served.
pub async fn read(store: &impl Store, definition: &str) -> Result<Vec<String>, Error> {
    let key = key_of(definition);
    match store.get(&key).await? {
        Some(found) => Ok(decode(&key, &found.value)?.stored_versions),
        None => Ok(Vec::new()),
    }
}

/// The stored versions of every definition ever served, by definition name.
pub async fn read_all(store: &impl Store) -> Result<HashMap<String, Vec<String>>, Error> {
    let page = store.list(STORED_VERSIONS, ListOptions::default()).await?;
    let mut all = HashMap::with_capacity(page.items.len());
    for kv in page.items {
        let Some(name) = kv.key.strip_prefix(STORED_VERSIONS) else { continue };
        all.insert(name.to_string(), decode(&kv.key, &kv.value)?.stored_versions);
    }
    Ok(all)
}

/// Adds each definition's storage version to its stored versions (at the end, as Kubernetes
/// appends it), creating the record of a definition served for the first time. Called whenever
/// a set of definitions starts being served, before any object is written through it.
pub async fn record_storage_versions<'a>(
    store: &impl Store,
    definitions: impl IntoIterator<Item = &'a Definition>,
) -> Result<(), Error> {
    // All at once, so that the store commits them together.
    let writes = definitions.into_iter().map(|d| add(store, &d.name, &d.storage.name));
    futures_util::future::join_all(writes).await.into_iter().collect()
}

/// Adds `version` to the stored versions of `definition`, if it is not there yet.
pub async fn add(store: &impl Store, definition: &str, version: &str) -> Result<(), Error> {
    change(store, definition, |versions| {
        if versions.iter().any(|v| v == version) {
            return false;
        }
        versions.push(version.to_string());
        true
    })
    .await
}

/// Drops `version` from the stored versions of `definition` (once no object is stored in it).
/// The definition's current storage version is never dropped: objects are written in it.
pub async fn remove(store: &impl Store, definition: &Definition, version: &str) -> Result<(), Error> {
    if definition.storage.name == version {
        return Ok(());
    }
    change(store, &definition.name, |versions| {
        let before = versions.len();
        versions.retain(|v| v != version);
        versions.len() != before
    })
    .await
}

/// Drops the record of a definition whose objects were all deleted (`crd-apiserver
/// delete-objects`): served again, it starts from its storage version then, as a new CRD does.
pub async fn forget(store: &impl Store, definition: &str) -> Result<(), Error> {
    match store.delete(&key_of(definition), None).await {
        Ok(_) | Err(Error::NotFound(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Applies `edit` (which says whether it changed anything) by compare-and-swap, re-reading
/// after a lost race.
async fn change(
    store: &impl Store,
    definition: &str,
    mut edit: impl FnMut(&mut Vec<String>) -> bool,
) -> Result<(), Error> {
    let key = key_of(definition);
    let mut last = Error::Backend(format!("{key}: too many concurrent changes"));
    for _ in 0..ATTEMPTS {
        let current = store.get(&key).await?;
        let mut record = match &current {
            Some(found) => decode(&key, &found.value)?,
            None => Record::default(),
        };
        if !edit(&mut record.stored_versions) {
            return Ok(());
        }
        let written = match &current {
            Some(found) => store.update(&key, found.revision, encode(&record)?).await,
            None => store.create(&key, encode(&record)?).await,
        };
        match written {
            Ok(_) => return Ok(()),
            Err(e @ (Error::Conflict { .. } | Error::AlreadyExists(_) | Error::NotFound(_))) => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// What Kubernetes' update validation says of a definition whose `spec.versions` lacks a version
/// still in `status.storedVersions` (`stored`): one error per such version, with its index.
pub fn missing_from_versions(stored: &[String], definition: &Definition) -> Vec<FieldError> {
    let path = Path::new("status").child("storedVersions");
    stored
        .iter()
        .enumerate()
        .filter(|(_, v)| definition.version(v).is_none())
        .map(|(i, v)| FieldError::invalid(path.index(i), v.as_str(), "must appear in spec.versions"))
        .collect()
}

#[cfg(test)]
mod tests;
