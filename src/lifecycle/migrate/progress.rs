//! The migration progress record of one definition, kept in the store (outside every
//! resource's keys) after every page, so that a restarted or crashed server resumes the pass
//! from the last page it finished instead of from the beginning.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::store::{Error, Store};

/// Where the records live: resource keys always start with `/`, so no resource can reach them.
const MIGRATIONS: &str = "crd-apiserver/storage-migrations/";

/// Where a definition's migration stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    /// A pass over the definition's objects is under way (or was, when the server stopped).
    #[default]
    Running,
    /// The last pass found no object left in another version than `storageVersion`.
    Done,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Running => "Running",
            State::Done => "Done",
        }
    }
}

/// One definition's migration: the pass under way and what the last complete one counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// The version objects are being rewritten into.
    pub storage_version: String,
    pub state: State,
    /// The last key the pass finished (`None`: from the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_after: Option<String>,
    /// Objects this pass rewrote into the storage version.
    pub migrated: u64,
    /// Objects this pass found in another version (rewritten, or written meanwhile by a user).
    pub found_old: u64,
    /// Objects this pass left as a user's concurrent write had already changed them.
    pub yielded_to_writers: u64,
    /// Objects this pass looked at, per version they were stored in.
    pub objects_per_version: BTreeMap<String, u64>,
    /// What the last complete pass counted, per version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_objects_per_version: Option<BTreeMap<String, u64>>,
    /// Why the last attempt stopped, if it failed (a conversion webhook down, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

impl Progress {
    /// A pass starting from the first object; what `previous` counted is shown meanwhile.
    pub fn start(storage_version: &str, previous: Option<&Progress>) -> Progress {
        Progress {
            storage_version: storage_version.to_string(),
            state: State::Running,
            last_objects_per_version: previous.and_then(|p| p.counts().cloned()),
            started_at: crate::core::time::now_rfc3339(),
            ..Progress::default()
        }
    }

    /// Objects per version to show: the pass's own count once complete, the last complete
    /// pass's meanwhile.
    pub fn counts(&self) -> Option<&BTreeMap<String, u64>> {
        match self.state {
            State::Done => Some(&self.objects_per_version),
            State::Running => self.last_objects_per_version.as_ref(),
        }
    }
}

fn key_of(definition: &str) -> String {
    format!("{MIGRATIONS}{definition}")
}

/// The progress record of the definition named `definition`, if a pass ever started.
pub async fn read(store: &impl Store, definition: &str) -> Result<Option<Progress>, Error> {
    let key = key_of(definition);
    let Some(found) = store.get(&key).await? else { return Ok(None) };
    serde_json::from_slice(&found.value)
        .map(Some)
        .map_err(|e| Error::Backend(format!("{key}: not a migration progress record: {e}")))
}

/// Writes the progress record (one migrator per definition writes it, so last write wins).
pub async fn write(store: &impl Store, definition: &str, progress: &Progress) -> Result<(), Error> {
    let key = key_of(definition);
    let bytes = serde_json::to_vec(progress).map_err(|e| Error::Backend(format!("encoding {key}: {e}")))?;
    let bytes = Bytes::from(bytes);
    for _ in 0..4 {
        let written = match store.get(&key).await? {
            Some(current) => store.update(&key, current.revision, bytes.clone()).await,
            None => store.create(&key, bytes.clone()).await,
        };
        match written {
            Ok(_) => return Ok(()),
            Err(Error::Conflict { .. } | Error::AlreadyExists(_) | Error::NotFound(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::Backend(format!("{key}: too many concurrent changes")))
}

/// What asking for a migration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    /// A pass is recorded as under way: the migrator runs it from the first object.
    Started,
    /// A pass into this storage version was already under way; it goes on.
    AlreadyRunning,
}

/// Records that a pass over the definition's objects into `storage_version` must run (a
/// migration asked for through the API), unless one is under way. The record is the request:
/// it outlives a restart, and whichever server migrates sees it. Written by compare-and-swap on
/// the record read, so that a pass finishing meanwhile is not mistaken for this one.
pub async fn request(store: &impl Store, definition: &str, storage_version: &str) -> Result<Requested, Error> {
    let key = key_of(definition);
    for _ in 0..4 {
        let current = store.get(&key).await?;
        let previous = match &current {
            Some(found) => Some(
                serde_json::from_slice::<Progress>(&found.value)
                    .map_err(|e| Error::Backend(format!("{key}: not a migration progress record: {e}")))?,
            ),
            None => None,
        };
        if let Some(p) = &previous
            && p.storage_version == storage_version
            && p.state == State::Running
        {
            return Ok(Requested::AlreadyRunning);
        }
        let fresh = Progress::start(storage_version, previous.as_ref());
        let bytes =
            Bytes::from(serde_json::to_vec(&fresh).map_err(|e| Error::Backend(format!("encoding {key}: {e}")))?);
        let written = match &current {
            Some(found) => store.update(&key, found.revision, bytes).await,
            None => store.create(&key, bytes).await,
        };
        match written {
            Ok(_) => return Ok(Requested::Started),
            Err(Error::Conflict { .. } | Error::AlreadyExists(_) | Error::NotFound(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::Backend(format!("{key}: too many concurrent changes")))
}

/// Drops the record of a definition whose objects were all deleted.
pub async fn forget(store: &impl Store, definition: &str) -> Result<(), Error> {
    match store.delete(&key_of(definition), None).await {
        Ok(_) | Err(Error::NotFound(_)) => Ok(()),
        Err(e) => Err(e),
    }
}
