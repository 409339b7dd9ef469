//! The etcd backend (`--storage-backend=etcd3`): objects under `--etcd-prefix` in etcd, whose
//! revision is the store's revision, so that several replicas on one etcd serve the same
//! history.
//!
//! The one seam of the `etcd` cargo feature: with it, `EtcdStore` talks to etcd (writes are
//! transactions comparing `mod_revision`, and one etcd watch per replica feeds the shared
//! `history` window that every client watch is served from, and the `cache` that gets and
//! lists are answered from where Kubernetes' consistency rules allow it (`reads`; etcd
//! ranges otherwise)); without it, `EtcdStore` cannot be built and `open` says so.
//!
//! Owns talking to etcd. Never sees schemas, CEL, HTTP or Kubernetes object structure.

use std::path::PathBuf;
use std::time::Duration;

#[cfg(feature = "etcd")]
mod cache;
#[cfg(feature = "etcd")]
mod connect;
#[cfg(feature = "etcd")]
mod election;
#[cfg(feature = "etcd")]
mod feed;
#[cfg(feature = "etcd")]
mod members;
#[cfg(feature = "etcd")]
mod reads;
#[cfg(feature = "etcd")]
mod restore;
#[cfg(feature = "etcd")]
mod store;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
#[cfg(feature = "etcd")]
mod upkeep;
#[cfg(feature = "etcd")]
pub use cache::{ENTRY_OVERHEAD, Stats as CachedObjects};
#[cfg(feature = "etcd")]
pub use restore::restore;
#[cfg(feature = "etcd")]
pub use store::{CacheStats, EtcdStore};

#[cfg(not(feature = "etcd"))]
mod disabled;
#[cfg(not(feature = "etcd"))]
pub use disabled::{EtcdStore, restore};

/// The prefix kube-apiserver puts its keys under; ours default elsewhere (see `EtcdOptions`).
pub const DEFAULT_PREFIX: &str = "/crd-apiserver";

/// How the etcd backend reaches etcd, from kube-apiserver's `--etcd-*` flags.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// Endpoints (`http://host:2379`, `https://host:2379`).
    pub servers: Vec<String>,
    /// Every key is stored under this prefix. Not kube-apiserver's `/registry`, so that a
    /// shared etcd never mixes our objects with the main apiserver's custom resources.
    pub prefix: String,
    /// CA bundle that signs etcd's serving certificate.
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key presented to etcd.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// How often the replicas compact etcd's history (0: never; someone else does).
    pub compaction_interval: Duration,
    /// Answer reads from the watch-fed cache where allowed (`--watch-cache`).
    pub watch_cache: bool,
    /// Longest time one etcd call may take before the request fails (504).
    pub request_timeout: Duration,
    /// How the replicas elect the one that runs the run-once work; `None`: this one always
    /// leads (`--leader-elect=false`, and tools that open the store without serving it).
    pub election: Option<crate::store::leadership::ElectionTiming>,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            servers: Vec::new(),
            prefix: DEFAULT_PREFIX.to_string(),
            ca_file: None,
            cert_file: None,
            key_file: None,
            compaction_interval: Duration::from_secs(300),
            election: None,
            watch_cache: true,
            request_timeout: Duration::from_secs(10),
        }
    }
}
