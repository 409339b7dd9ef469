//! The etcd backend's watch-fed cache (`store::etcd::cache`) under the names of
//! kube-apiserver's watch cache: `apiserver_watch_cache_events_received_total`,
//! `apiserver_watch_cache_resource_version`, `apiserver_watch_cache_initializations_total`,
//! `apiserver_cache_list_total`, `apiserver_cache_list_fetched_objects_total` and
//! `apiserver_cache_list_returned_objects_total`, by group and resource. Only cached resources
//! appear, so the labels stay bounded by the served definitions.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

/// One cached resource's figures.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    /// Events the cache received from the replica's etcd watch.
    pub events: u64,
    /// The revision the cache has applied every event up to.
    pub revision: u64,
    /// Loads of the resource into the cache (its first read, again after a reset).
    pub initializations: u64,
    /// List pages answered from the cache, the objects they read and those they returned.
    pub lists: u64,
    pub fetched: u64,
    pub returned: u64,
}

/// Figures by `(group, resource)`.
#[derive(Debug, Default)]
pub struct WatchCache(Mutex<BTreeMap<(String, String), Figures>>);

impl WatchCache {
    /// Changes the figures of `group`/`resource` (the feed and the reads call this with the
    /// cache's own lock held: it never blocks for long).
    pub fn update(&self, group: &str, resource: &str, change: impl FnOnce(&mut Figures)) {
        let mut map = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match map.get_mut(&(group.to_string(), resource.to_string())) {
            Some(figures) => change(figures),
            None => change(map.entry((group.to_string(), resource.to_string())).or_default()),
        }
    }

    /// The figures of `group`/`resource` now.
    pub fn figures(&self, group: &str, resource: &str) -> Figures {
        let map = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        map.get(&(group.to_string(), resource.to_string())).copied().unwrap_or_default()
    }

    fn snapshot(&self) -> Vec<((String, String), Figures)> {
        let map = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        map.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }
}

/// Encodes the figures.
#[derive(Debug)]
pub struct WatchCacheCollector(pub &'static WatchCache);

type Fmt = Result<(), std::fmt::Error>;

/// One counter family: its name without `_total`, help, figure, and whether it has Kubernetes'
/// `index` label (empty: no index).
type Counter = (&'static str, &'static str, fn(&Figures) -> u64, bool);

impl Collector for WatchCacheCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Fmt {
        let all = self.0.snapshot();
        if all.is_empty() {
            return Ok(());
        }
        let counters: [Counter; 5] = [
            (
                "apiserver_watch_cache_events_received",
                "[ALPHA] Events the watch cache received from etcd, by resource.",
                |f| f.events,
                false,
            ),
            (
                "apiserver_watch_cache_initializations",
                "[ALPHA] Loads of a resource into the watch cache, by resource.",
                |f| f.initializations,
                false,
            ),
            ("apiserver_cache_list", "[ALPHA] List pages served from the watch cache.", |f| f.lists, true),
            (
                "apiserver_cache_list_fetched_objects",
                "[ALPHA] Objects read from the watch cache to serve lists.",
                |f| f.fetched,
                true,
            ),
            (
                "apiserver_cache_list_returned_objects",
                "[ALPHA] Objects the watch cache returned for lists.",
                |f| f.returned,
                false,
            ),
        ];
        for (name, help, value, indexed) in counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for ((group, resource), figures) in &all {
                let mut labels = vec![("group", group.as_str()), ("resource", resource.as_str())];
                if indexed {
                    labels.push(("index", ""));
                }
                family.encode_family(&labels)?.encode_counter::<NoLabelSet, _, u64>(&value(figures), None)?;
            }
        }
        let help = "[ALPHA] The revision the watch cache has applied every event up to, by resource.";
        let mut family =
            encoder.encode_descriptor("apiserver_watch_cache_resource_version", help, None, MetricType::Gauge)?;
        for ((group, resource), figures) in &all {
            // Kubernetes keeps the 15 lowest digits, so that the gauge's float stays exact.
            let revision = i64::try_from(figures.revision % 1_000_000_000_000_000).unwrap_or(0);
            family
                .encode_family(&[("group", group.as_str()), ("resource", resource.as_str())])?
                .encode_gauge(&revision)?;
        }
        Ok(())
    }
}
