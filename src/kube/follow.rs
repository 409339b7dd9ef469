//! Keeps a live copy of every object of one kind of the main apiserver (list, then watch from
//! the list's resourceVersion; listed again when a watch fails or expires), handing the whole
//! set to a callback after the first list and after every change, like an informer; or only
//! the objects a label or field selector picks (`follow_selected`). A kind the main apiserver
//! does not serve (404) is followed as an empty set.
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

/// Which objects a follower lists and watches: the API's label and field selectors.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub labels: Option<String>,
    pub fields: Option<String>,
}

impl Selection {
    fn list_params(&self) -> ListParams {
        let mut params = ListParams::default();
        if let Some(labels) = &self.labels {
            params = params.labels(labels);
        }
        if let Some(fields) = &self.fields {
            params = params.fields(fields);
        }
        params
    }

    fn watch_params(&self) -> WatchParams {
        let mut params = WatchParams::default().timeout(WATCH_SECONDS);
        if let Some(labels) = &self.labels {
            params = params.labels(labels);
        }
        if let Some(fields) = &self.fields {
            params = params.fields(fields);
        }
        params
    }
}

/// Follows every object of `api`'s kind forever, calling `on_change` with all of them
/// (ordered by namespace and name) whenever the set changes.
pub async fn follow<K>(api: Api<K>, what: &str, on_change: impl Fn(Vec<K>) + Send + Sync)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    follow_selected(api, &Selection::default(), what, on_change).await;
}

/// [`follow`] for the objects `selection` picks: an object that stops matching leaves the set
/// (the apiserver's watch says DELETED), one that starts matching joins it.
pub async fn follow_selected<K>(
    api: Api<K>,
    selection: &Selection,
    what: &str,
    on_change: impl Fn(Vec<K>) + Send + Sync,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut backoff = Duration::from_secs(1);
    loop {
        match relist_and_watch(&api, selection, &on_change).await {
            Ok(()) => backoff = Duration::from_secs(1),
            // The main apiserver does not serve this kind (an older release): there is none of
            // it to follow; look again later in case it is turned on.
            Err(Failure::NotServed) => {
                on_change(Vec::new());
                tokio::time::sleep(MAX_BACKOFF).await;
            }
            Err(Failure::Other(message)) => {
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

/// Why following stopped.
enum Failure {
    /// The list answered 404: the kind is not served.
    NotServed,
    Other(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Other(message)
    }
}

async fn relist_and_watch<K>(
    api: &Api<K>,
    selection: &Selection,
    on_change: &(impl Fn(Vec<K>) + Send + Sync),
) -> Result<(), Failure>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let list = match api.list(&selection.list_params()).await {
        Ok(list) => list,
        Err(e) if super::status_code(&e) == Some(404) => return Err(Failure::NotServed),
        Err(e) => return Err(Failure::Other(describe(&e))),
    };
    let mut version = list.metadata.resource_version.clone().unwrap_or_default();
    let mut objects: BTreeMap<(String, String), K> = list.items.into_iter().map(|o| (key_of(&o), o)).collect();
    on_change(objects.values().cloned().collect());
    loop {
        let params = selection.watch_params();
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
                WatchEvent::Error(status) => return Err(Failure::Other(status.message)),
            }
            on_change(objects.values().cloned().collect());
        }
    }
}
