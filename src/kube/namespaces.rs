//! A cache of the cluster's Namespaces (list, then watch; relisted when a watch fails), to
//! answer "does namespace X exist, and is it terminating?" without a call per request.
//! Deletions are seen: a deleted namespace is Missing once the watch delivers the event.
//! Labels are kept too, for admission webhooks' `namespaceSelector`s.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use ::kube::api::{Api, ListParams, WatchEvent, WatchParams};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Namespace;

use super::{Error, describe};

pub use crate::core::namespace::NamespaceState;

/// What the cache keeps of a namespace.
type Entry = (NamespaceState, Arc<BTreeMap<String, String>>);

fn entry_of(namespace: &Namespace) -> Entry {
    (state_of(namespace), Arc::new(namespace.metadata.labels.clone().unwrap_or_default()))
}

fn state_of(namespace: &Namespace) -> NamespaceState {
    let phase = namespace.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase == Some("Terminating") || namespace.metadata.deletion_timestamp.is_some() {
        NamespaceState::Terminating
    } else {
        NamespaceState::Active
    }
}

const WATCH_SECONDS: u32 = 290;
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub struct NamespaceCache {
    /// `None` when there is no cluster: every namespace is taken to exist.
    api: Option<Api<Namespace>>,
    states: RwLock<HashMap<String, Entry>>,
    synced: AtomicBool,
}

impl NamespaceCache {
    /// Starts following the cluster's namespaces in the background.
    pub fn start(client: ::kube::Client) -> Arc<NamespaceCache> {
        let cache = Arc::new(NamespaceCache {
            api: Some(Api::all(client)),
            states: RwLock::new(HashMap::new()),
            synced: AtomicBool::new(false),
        });
        let follower = cache.clone();
        tokio::spawn(async move { follower.follow().await });
        cache
    }

    /// Without a cluster (development mode): every namespace is Active.
    pub fn without_cluster() -> Arc<NamespaceCache> {
        Arc::new(NamespaceCache { api: None, states: RwLock::new(HashMap::new()), synced: AtomicBool::new(true) })
    }

    /// Whether the first list has arrived.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::SeqCst)
    }

    /// The cached state; `None` before the first list arrived.
    pub fn cached(&self, name: &str) -> Option<NamespaceState> {
        if self.api.is_none() {
            return Some(NamespaceState::Active);
        }
        if !self.is_synced() {
            return None;
        }
        let states = self.states.read().unwrap_or_else(|p| p.into_inner());
        Some(states.get(name).map(|(state, _)| *state).unwrap_or(NamespaceState::Missing))
    }

    /// The state of a namespace: from the cache when it knows the namespace, else asked live
    /// (a namespace created a moment ago may not have reached the cache yet).
    pub async fn lookup(&self, name: &str) -> Result<NamespaceState, Error> {
        let Some(api) = &self.api else {
            return Ok(NamespaceState::Active);
        };
        if let Some(state) = self.cached(name).filter(|s| *s != NamespaceState::Missing) {
            return Ok(state);
        }
        match api.get_opt(name).await {
            Ok(Some(namespace)) => Ok(state_of(&namespace)),
            Ok(None) => Ok(NamespaceState::Missing),
            Err(e) => Err(Error::Request(describe(&e))),
        }
    }

    /// The labels of a namespace (`None`: it does not exist), from the cache or asked live;
    /// without a cluster, only `kubernetes.io/metadata.name`.
    pub async fn labels(&self, name: &str) -> Result<Option<Arc<BTreeMap<String, String>>>, Error> {
        let Some(api) = &self.api else {
            return Ok(Some(Arc::new([("kubernetes.io/metadata.name".to_string(), name.to_string())].into())));
        };
        if self.is_synced() {
            let states = self.states.read().unwrap_or_else(|p| p.into_inner());
            if let Some((_, labels)) = states.get(name) {
                return Ok(Some(labels.clone()));
            }
        }
        match api.get_opt(name).await {
            Ok(Some(namespace)) => Ok(Some(entry_of(&namespace).1)),
            Ok(None) => Ok(None),
            Err(e) => Err(Error::Request(describe(&e))),
        }
    }

    /// Whether the cache, once synced, holds no such namespace (a cheap first test before a
    /// live `lookup`). Never true without a cluster or before the first list.
    pub fn seems_missing(&self, name: &str) -> bool {
        self.api.is_some() && self.cached(name) == Some(NamespaceState::Missing)
    }

    /// Waits until the first list arrived, at most `limit`; returns whether it did.
    pub async fn wait_synced(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.is_synced() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    fn set(&self, namespace: &Namespace, entry: Option<Entry>) {
        let Some(name) = namespace.metadata.name.clone() else {
            return;
        };
        let mut states = self.states.write().unwrap_or_else(|p| p.into_inner());
        match entry {
            Some(entry) => states.insert(name, entry),
            None => states.remove(&name),
        };
    }

    async fn follow(&self) {
        let Some(api) = &self.api else {
            return;
        };
        let mut backoff = Duration::from_secs(1);
        loop {
            match self.relist_and_watch(api).await {
                Ok(()) => backoff = Duration::from_secs(1),
                Err(message) => {
                    tracing::warn!(error = %message, "following namespaces failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Lists every namespace, then watches from the list's resourceVersion until the watch
    /// ends; the next round lists again.
    async fn relist_and_watch(&self, api: &Api<Namespace>) -> Result<(), String> {
        let list = api.list(&ListParams::default()).await.map_err(|e| describe(&e))?;
        let mut version = list.metadata.resource_version.clone().unwrap_or_default();
        {
            let fresh: HashMap<String, Entry> =
                list.items.iter().filter_map(|n| Some((n.metadata.name.clone()?, entry_of(n)))).collect();
            *self.states.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        }
        self.synced.store(true, Ordering::SeqCst);
        loop {
            let params = WatchParams::default().timeout(WATCH_SECONDS);
            let stream = api.watch(&params, &version).await.map_err(|e| describe(&e))?;
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event.map_err(|e| describe(&e))? {
                    WatchEvent::Added(n) | WatchEvent::Modified(n) => {
                        self.set(&n, Some(entry_of(&n)));
                        version = n.metadata.resource_version.unwrap_or(version);
                    }
                    WatchEvent::Deleted(n) => {
                        self.set(&n, None);
                        version = n.metadata.resource_version.unwrap_or(version);
                    }
                    WatchEvent::Bookmark(mark) => version = mark.metadata.resource_version,
                    // Too old (410) or anything else: list again.
                    WatchEvent::Error(status) => return Err(status.message),
                }
            }
        }
    }
}
