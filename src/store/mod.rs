//! Storage: objects as bytes under string keys, one global revision, compare-and-swap writes,
//! consistent paginated lists, and watch.
//!
//! Owns durability and ordering. Never sees schemas, CEL, HTTP or Kubernetes object structure:
//! values are opaque bytes, and the only thing it knows of keys is how `key` builds them.
//!
//! Contract (every backend):
//! - one strictly increasing `u64` revision; each write gets the next one;
//! - `create` fails if the key exists, `update`/`delete` compare the expected revision;
//! - a successful write is durable (on disk) before it is acknowledged;
//! - `list` is consistent at one revision and pages by key;
//! - `watch` replays every event after a revision, then streams; a revision older than the
//!   retained window is `Error::Expired`.

pub mod backup;
pub mod etcd;
pub(crate) mod history;
pub mod key;
pub mod leadership;
pub mod sled;
pub(crate) mod watchers;
pub use watchers::Watch;

mod backend;
pub use backend::Backend;

#[cfg(test)]
pub mod conformance;

use std::future::Future;

use bytes::Bytes;

/// A point in the store's history; the `resourceVersion` of objects and lists.
pub type Revision = u64;

/// A stored value at the revision that last wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    pub revision: Revision,
    pub value: Bytes,
}

/// One entry of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub revision: Revision,
    pub value: Bytes,
}

/// One update of `Store::update_many`: `key` replaced by `value` if its revision is `expected`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub key: String,
    pub expected: Revision,
    pub value: Bytes,
}

/// How fresh a read of the latest state must be (Kubernetes' `resourceVersion` of gets and
/// lists without `resourceVersionMatch=Exact`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Freshness {
    /// Consistent (`resourceVersion=""`): every write acknowledged before the read began, by
    /// any replica, is in it.
    #[default]
    Consistent,
    /// Any state at or after this revision (`resourceVersion="N"`, NotOlderThan; `"0"`: any
    /// state at all). A backend that keeps a cache may answer from it without asking its
    /// server.
    NotOlderThan(Revision),
}

/// Which part of a prefix to list, and at which revision.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// List as of this revision; `None` lists the latest state (as fresh as `freshness`).
    pub revision: Option<Revision>,
    /// How fresh the latest state must be when `revision` is `None`.
    pub freshness: Freshness,
    /// Start strictly after this key (pagination).
    pub start_after: Option<String>,
    /// At most this many items; `None` for all.
    pub limit: Option<usize>,
    /// Count the items after the page when a limit cuts the list (`ListResult::remaining`),
    /// as Kubernetes does for `remainingItemCount`.
    pub count_remaining: bool,
}

/// A page of a list.
#[derive(Debug, Clone, Default)]
pub struct ListResult {
    /// The revision the list is consistent at.
    pub revision: Revision,
    pub items: Vec<KeyValue>,
    /// True when items after the last one returned exist.
    pub more: bool,
    /// How many items follow the page, when `more` and `ListOptions::count_remaining` asked.
    pub remaining: Option<u64>,
}

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change, as watchers receive it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventType,
    pub key: String,
    pub revision: Revision,
    /// The new value; for deletions the last value the key had.
    pub value: Bytes,
    /// The value before this change (`None` for additions).
    pub prev: Option<Bytes>,
}

/// Errors of the storage contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("key {0} not found")]
    NotFound(String),
    #[error("key {0} already exists")]
    AlreadyExists(String),
    /// The expected revision did not match; carries the current one.
    #[error("key {key}: expected revision {expected}, found {current}")]
    Conflict { key: String, expected: Revision, current: Revision },
    /// The requested revision is older than the retained history.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired { requested: Revision, oldest: Revision },
    /// The requested revision is newer than the store's.
    #[error("resource version {requested} is newer than the store's {current}")]
    TooLarge { requested: Revision, current: Revision },
    #[error("storage is closed")]
    Closed,
    /// The store's file system is full: writes fail until space is freed, then resume.
    #[error("the store's disk is full: {0}")]
    NoSpace(String),
    #[error("storage failure: {0}")]
    Backend(String),
    /// The backend's server cannot be reached (etcd down, no leader): nothing was written.
    #[error("storage is unavailable: {0}")]
    Unavailable(String),
    /// The backend did not answer in time: a write may or may not have been applied.
    #[error("storage request timed out: {0}")]
    Timeout(String),
    /// The value is over the backend's request size limit (etcd's `--max-request-bytes`).
    #[error("{0}")]
    RequestTooLarge(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// The storage contract. `Send` futures so that handlers can await them on any worker.
pub trait Store: Send + Sync + 'static {
    /// The latest durable revision whose events watchers have been handed (every one up to
    /// it). A backend may acknowledge a write before its revision is current (etcd: the
    /// replica's watch delivers it just after); `wait_for_revision` waits for one.
    fn current_revision(&self) -> Revision;

    /// Waits at most `limit` until `current_revision()` reaches `revision` (one a client holds
    /// from a write or a read, here or on another replica); false when it did not in time.
    fn wait_for_revision(&self, revision: Revision, limit: std::time::Duration) -> impl Future<Output = bool> + Send;

    /// The latest value of `key`, consistent (`Freshness::Consistent`).
    fn get(&self, key: &str) -> impl Future<Output = Result<Option<Versioned>>> + Send;

    /// The value of `key` in a state at least as fresh as `freshness` asks. Backends whose
    /// reads are always the latest state answer as `get` does.
    fn get_fresh(&self, key: &str, freshness: Freshness) -> impl Future<Output = Result<Option<Versioned>>> + Send {
        let _ = freshness;
        self.get(key)
    }

    /// Lists keys starting with `prefix`, in key order, consistent at one revision.
    fn list(&self, prefix: &str, options: ListOptions) -> impl Future<Output = Result<ListResult>> + Send;

    /// Creates `key`; fails with `AlreadyExists` if present. Returns the new revision.
    fn create(&self, key: &str, value: Bytes) -> impl Future<Output = Result<Revision>> + Send;

    /// Replaces `key` if its revision is `expected`. Returns the new revision.
    fn update(&self, key: &str, expected: Revision, value: Bytes) -> impl Future<Output = Result<Revision>> + Send;

    /// Each update as `update` makes it (each succeeds or fails on its own), committed
    /// together where the backend can (sled: one batch, one sync; etcd: concurrent
    /// transactions); results in the order of `updates`, whose keys must be distinct (two
    /// updates of one key are decided in no particular order). For writers of many objects at
    /// once (the storage-version migrator's pages).
    fn update_many(&self, updates: Vec<Update>) -> impl Future<Output = Vec<Result<Revision>>> + Send {
        async move {
            let writes = updates.iter().map(|u| self.update(&u.key, u.expected, u.value.clone()));
            futures_util::future::join_all(writes).await
        }
    }

    /// Deletes `key` (if its revision is `expected`, when given). Returns the deletion's
    /// revision and the last value.
    fn delete(&self, key: &str, expected: Option<Revision>) -> impl Future<Output = Result<(Revision, Bytes)>> + Send;

    /// Every event on keys under `prefix` after revision `from`, then live events.
    fn watch(&self, prefix: &str, from: Revision) -> impl Future<Output = Result<Watch>> + Send;

    /// Why writes cannot succeed right now (a full disk, a failed sync), or `Ok` when they can.
    /// The backend recovers by itself once the cause goes away.
    fn health(&self) -> Result<()>;

    /// How many keys start with `prefix` now. A scan: for periodic checks
    /// (`apiserver_storage_objects`), never for requests.
    fn count(&self, prefix: &str) -> impl Future<Output = Result<u64>> + Send;

    /// Bytes the store's files occupy on disk, when the backend can tell.
    fn size_on_disk(&self) -> Option<u64>;
}
