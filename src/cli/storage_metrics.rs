//! The periodic check behind `apiserver_storage_objects`, `apiserver_resource_objects` and
//! `apiserver_storage_size_bytes`: counts the objects of every served resource and the store's
//! size on disk, as kube-apiserver's storage object count tracker does once a minute.

use std::sync::Arc;
use std::time::Duration;

use crate::api::Api;
use crate::metrics::storage::Counts;
use crate::store::{Store, key};

/// Counts now, then every `interval`.
pub fn spawn(api: Arc<Api>, interval: Duration, cluster_id: String) {
    tokio::spawn(async move {
        loop {
            let counts = count(&api, &cluster_id).await;
            crate::metrics::global().storage.replace(counts);
            tokio::time::sleep(interval).await;
        }
    });
}

async fn count(api: &Api, cluster_id: &str) -> Counts {
    let catalog = api.catalog();
    let mut counts = Counts { cluster_id: cluster_id.to_string(), ..Counts::default() };
    for definition in catalog.registry.definitions() {
        let prefix = key::resource_prefix(&definition.group, &definition.plural);
        let objects = match api.store().count(&prefix).await {
            Ok(n) => i64::try_from(n).unwrap_or(i64::MAX),
            Err(e) => {
                tracing::warn!(definition = %definition.name, error = %e, "counting stored objects failed");
                -1
            }
        };
        counts.objects.insert((definition.group.clone(), definition.plural.clone()), objects);
    }
    counts.size_bytes = api.store().size_on_disk();
    counts
}
