//! Keeps a live copy of every object of one kind of the main apiserver (list, then watch from
//! the list's resourceVersion; listed again when a watch fails or expires), handing the whole
//! set to a callback after the first list and after every change, like an informer.
//!
//! Owns the list+watch loop; what the objects mean is the callback's business.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use ::kube::Resource;
use ::kube::api::{Api, ListParams, WatchEvent, WatchParams};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;

use super::describe;

const WATCH_SECONDS: u32 = 290;
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Follows every object of `api`'s kind forever, calling `on_change` with all of them
/// (ordered by namespace and name) whenever the set changes.
pub async fn follow<K>(api: Api<K>, what: &'static str, on_change: impl Fn(Vec<K>) + Send + Sync)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut backoff = Duration::from_secs(1);
    loop {
        match relist_and_watch(&api, &on_change).await {
            Ok(()) => backoff = Duration::from_secs(1),
            Err(message) => {
                tracing::warn!(error = %message, "following {what} failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

fn key_of<K: Resource>(object: &K) -> (String, String) {
    let meta = object.meta();
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

async fn relist_and_watch<K>(api: &Api<K>, on_change: &(impl Fn(Vec<K>) + Send + Sync)) -> Result<(), String>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let list = api.list(&ListParams::default()).await.map_err(|e| describe(&e))?;
    let mut version = list.metadata.resource_version.clone().unwrap_or_default();
    let mut objects: BTreeMap<(String, String), K> = list.items.into_iter().map(|o| (key_of(&o), o)).collect();
    on_change(objects.values().cloned().collect());
    loop {
        let params = WatchParams::default().timeout(WATCH_SECONDS);
        let stream = api.watch(&params, &version).await.map_err(|e| describe(&e))?;
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event.map_err(|e| describe(&e))? {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                    version = o.meta().resource_version.clone().unwrap_or(version);
                    objects.insert(key_of(&o), o);
                }
                WatchEvent::Deleted(o) => {
                    version = o.meta().resource_version.clone().unwrap_or(version);
                    objects.remove(&key_of(&o));
                }
                WatchEvent::Bookmark(mark) => {
                    version = mark.metadata.resource_version;
                    continue;
                }
                // Too old (410) or anything else: list again.
                WatchEvent::Error(status) => return Err(status.message),
            }
            on_change(objects.values().cloned().collect());
        }
    }
}
