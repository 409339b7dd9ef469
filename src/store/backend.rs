//! The store the server runs on, chosen at start-up from `--storage-backend`.

use bytes::Bytes;

use super::etcd::EtcdStore;
use super::sled::SledStore;
use super::{Freshness, ListOptions, ListResult, Result, Revision, Store, Versioned, Watch};

/// One of the storage backends, dispatched statically.
#[derive(Clone)]
pub enum Backend {
    Sled(SledStore),
    Etcd(EtcdStore),
}

impl Backend {
    /// Kubernetes' name of the backend, as its health check is named.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sled(_) => "sled",
            Backend::Etcd(_) => "etcd",
        }
    }

    /// Writes a backup of every key into `sink`, consistent at the current revision, while
    /// writes go on (sled keeps the revision readable meanwhile; etcd keeps it until a
    /// compaction passes it).
    pub async fn backup(
        &self,
        sink: &super::backup::Sink,
    ) -> std::result::Result<super::backup::Summary, super::backup::Error> {
        match self {
            Backend::Sled(s) => {
                let pinned = s.pin();
                super::backup::dump(s, self.name(), pinned.revision(), sink).await
            }
            // etcd's revision, not the feed's: a write acknowledged before the backup began may
            // not have reached the feed yet.
            Backend::Etcd(s) => super::backup::dump(s, self.name(), s.committed_revision().await?, sink).await,
        }
    }

    /// Whether this server runs the work that must run once per store (always, on sled).
    pub fn leadership(&self) -> super::leadership::Leadership {
        match self {
            Backend::Sled(_) => super::leadership::Leadership::sole(),
            Backend::Etcd(s) => s.leadership(),
        }
    }

    /// Moves the store's revision to at least `at_least` while it serves, so that every
    /// revision handed out afterwards is above it (what a takeover needs: none of ours may equal
    /// or precede one the main apiserver gave out). sled moves its counter; etcd's revision
    /// cannot be set, so the etcd store raises the offset its revisions have over etcd's for
    /// every later revision (`store::etcd::restore`), on every replica. Returns the store's
    /// revision.
    pub async fn advance_revision(&self, at_least: Revision) -> Result<Revision> {
        match self {
            Backend::Sled(s) => s.advance_revision(at_least).await,
            Backend::Etcd(s) => s.advance_revision(at_least).await,
        }
    }

    /// Stops accepting writes and waits until what was accepted is on disk.
    pub fn close(&self) {
        match self {
            Backend::Sled(s) => s.close(),
            Backend::Etcd(s) => s.close(),
        }
    }
}

impl Store for Backend {
    fn current_revision(&self) -> Revision {
        match self {
            Backend::Sled(s) => s.current_revision(),
            Backend::Etcd(s) => s.current_revision(),
        }
    }

    async fn wait_for_revision(&self, revision: Revision, limit: std::time::Duration) -> bool {
        match self {
            Backend::Sled(s) => s.wait_for_revision(revision, limit).await,
            Backend::Etcd(s) => s.wait_for_revision(revision, limit).await,
        }
    }

    async fn get(&self, key: &str) -> Result<Option<Versioned>> {
        match self {
            Backend::Sled(s) => s.get(key).await,
            Backend::Etcd(s) => s.get(key).await,
        }
    }

    async fn get_fresh(&self, key: &str, freshness: Freshness) -> Result<Option<Versioned>> {
        match self {
            Backend::Sled(s) => s.get_fresh(key, freshness).await,
            Backend::Etcd(s) => s.get_fresh(key, freshness).await,
        }
    }

    async fn list(&self, prefix: &str, options: ListOptions) -> Result<ListResult> {
        match self {
            Backend::Sled(s) => s.list(prefix, options).await,
            Backend::Etcd(s) => s.list(prefix, options).await,
        }
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        match self {
            Backend::Sled(s) => s.create(key, value).await,
            Backend::Etcd(s) => s.create(key, value).await,
        }
    }

    async fn update(&self, key: &str, expected: Revision, value: Bytes) -> Result<Revision> {
        match self {
            Backend::Sled(s) => s.update(key, expected, value).await,
            Backend::Etcd(s) => s.update(key, expected, value).await,
        }
    }

    async fn update_many(&self, updates: Vec<super::Update>) -> Vec<Result<Revision>> {
        match self {
            Backend::Sled(s) => s.update_many(updates).await,
            Backend::Etcd(s) => s.update_many(updates).await,
        }
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, Bytes)> {
        match self {
            Backend::Sled(s) => s.delete(key, expected).await,
            Backend::Etcd(s) => s.delete(key, expected).await,
        }
    }

    async fn watch(&self, prefix: &str, from: Revision) -> Result<Watch> {
        match self {
            Backend::Sled(s) => s.watch(prefix, from).await,
            Backend::Etcd(s) => s.watch(prefix, from).await,
        }
    }

    fn health(&self) -> Result<()> {
        match self {
            Backend::Sled(s) => s.health(),
            Backend::Etcd(s) => s.health(),
        }
    }

    async fn count(&self, prefix: &str) -> Result<u64> {
        match self {
            Backend::Sled(s) => s.count(prefix).await,
            Backend::Etcd(s) => s.count(prefix).await,
        }
    }

    fn size_on_disk(&self) -> Option<u64> {
        match self {
            Backend::Sled(s) => s.size_on_disk(),
            Backend::Etcd(s) => s.size_on_disk(),
        }
    }
}
