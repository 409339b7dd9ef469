//! Namespace lifecycle, as Kubernetes' NamespaceLifecycle admission and namespace cleanup
//! apply it to custom resources: nothing is created in a namespace that does not exist (404) or
//! is terminating (403 NamespaceTerminating), and objects of a namespace that is gone are
//! removed by a periodic sweep.
//!
//! The cluster's namespaces come from outside (`Namespaces`); without a cluster (development
//! mode) every namespace exists.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::Api;
use super::call::Call;
use crate::core::gvr::GroupResource;
use crate::core::namespace::NamespaceState;
use crate::core::status::ApiError;
use crate::store::{ListOptions, Store, key};

/// Where namespace states come from.
pub trait Namespaces: Send + Sync {
    /// The state of a namespace, asking the cluster when the answer is not cached.
    fn state<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<NamespaceState, String>>;
    /// A cheap first test for sweeps: true only when the namespace is known to be gone.
    fn seems_missing(&self, name: &str) -> bool;
}

/// No cluster: every namespace exists.
pub struct EveryNamespace;

impl Namespaces for EveryNamespace {
    fn state<'a>(&'a self, _name: &'a str) -> BoxFuture<'a, Result<NamespaceState, String>> {
        Box::pin(async { Ok(NamespaceState::Active) })
    }

    fn seems_missing(&self, _name: &str) -> bool {
        false
    }
}

/// Refuses to create content in a missing or terminating namespace.
pub async fn check_create(api: &Api, call: &Call, name: &str) -> Result<(), ApiError> {
    let Some(namespace) = &call.namespace else { return Ok(()) };
    if !api.admission().plugins().namespace_lifecycle {
        return Ok(());
    }
    match api.namespaces().state(namespace).await {
        Ok(NamespaceState::Active) => Ok(()),
        Ok(NamespaceState::Missing) => Err(ApiError::not_found(&GroupResource::new("", "namespaces"), namespace)),
        Ok(NamespaceState::Terminating) => Err(ApiError::forbidden(
            &call.resource(),
            name,
            &format!("unable to create new content in namespace {namespace} because it is being terminated"),
        )
        .with_cause(
            "NamespaceTerminating",
            &format!("namespace {namespace} is being terminated"),
            "metadata.namespace",
        )),
        Err(e) => Err(ApiError::internal(e)),
    }
}

/// The namespaces holding objects of a resource, found by skipping from one to the next.
async fn namespaces_with_objects(api: &Api, group: &str, plural: &str) -> Vec<String> {
    let prefix = key::resource_prefix(group, plural);
    let mut found = Vec::new();
    let mut start_after: Option<String> = None;
    loop {
        let options = ListOptions { start_after: start_after.clone(), limit: Some(1), ..ListOptions::default() };
        let Ok(page) = api.store().list(&prefix, options).await else { return found };
        let Some(first) = page.items.first() else { return found };
        let Some(namespace) = key::relative_to_resource(&first.key).split('/').next().map(str::to_string) else {
            return found;
        };
        // '~' sorts after every character a name may hold: the next key is in the next namespace.
        start_after = Some(key::namespace_prefix(group, plural, &namespace) + "~");
        found.push(namespace);
    }
}

/// Deletes every object in namespaces that are gone. Returns how many were deleted.
pub async fn sweep(api: &Api) -> usize {
    let catalog = api.catalog();
    let mut deleted = 0;
    for definition in catalog.registry.definitions().iter().filter(|d| d.namespaced()) {
        for namespace in namespaces_with_objects(api, &definition.group, &definition.plural).await {
            if !api.namespaces().seems_missing(&namespace) {
                continue;
            }
            // Ask the cluster itself before deleting anything.
            if api.namespaces().state(&namespace).await != Ok(NamespaceState::Missing) {
                continue;
            }
            let prefix = key::namespace_prefix(&definition.group, &definition.plural, &namespace);
            let Ok(page) = api.store().list(&prefix, ListOptions::default()).await else { continue };
            for item in page.items {
                if api.store().delete(&item.key, Some(item.revision)).await.is_ok() {
                    deleted += 1;
                }
            }
            tracing::info!(namespace = %namespace, resource = %definition.name, "removed the objects of a deleted namespace");
        }
    }
    deleted
}

/// Sweeps every `interval`, forever.
pub fn spawn_sweeper(api: Arc<Api>, interval: Duration) {
    tokio::spawn(async move {
        // One replica sweeps (the store's leader); the others would only race it.
        let leadership = api.store().leadership();
        loop {
            tokio::time::sleep(interval).await;
            if leadership.is_leader() {
                sweep(&api).await;
            }
        }
    });
}
