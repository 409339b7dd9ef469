//! `apiserver_storage_objects`, `apiserver_resource_objects` and `apiserver_storage_size_bytes`:
//! figures counted by a periodic check (as kube-apiserver counts objects once a minute), kept
//! here until the next check replaces them whole.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

/// One check's figures.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counts {
    /// Objects per `(group, resource)`; -1 when counting failed, as Kubernetes reports it.
    pub objects: BTreeMap<(String, String), i64>,
    /// Bytes the store occupies on disk.
    pub size_bytes: Option<u64>,
    /// What identifies the storage (`storage_cluster_id`).
    pub cluster_id: String,
}

/// The last check.
#[derive(Debug, Default)]
pub struct Storage(Mutex<Counts>);

impl Storage {
    pub fn replace(&self, counts: Counts) {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = counts;
    }

    pub fn counts(&self) -> Counts {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

/// Encodes the last check.
#[derive(Debug)]
pub struct StorageCollector(pub &'static Storage);

impl Collector for StorageCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let counts = self.0.counts();
        let help = "[STABLE] (Deprecated in Kubernetes 1.34 for apiserver_resource_objects) Stored objects at \
                    the last check, by resource; -1 when counting failed.";
        let mut family = encoder.encode_descriptor("apiserver_storage_objects", help, None, MetricType::Gauge)?;
        for ((group, resource), n) in &counts.objects {
            let name = if group.is_empty() { resource.clone() } else { format!("{resource}.{group}") };
            family.encode_family(&[("resource", name.as_str())])?.encode_gauge(n)?;
        }
        let help = "[ALPHA] Stored objects at the last check, by group and resource; -1 when counting failed.";
        let mut family = encoder.encode_descriptor("apiserver_resource_objects", help, None, MetricType::Gauge)?;
        for ((group, resource), n) in &counts.objects {
            family.encode_family(&[("group", group.as_str()), ("resource", resource.as_str())])?.encode_gauge(n)?;
        }
        if let Some(size) = counts.size_bytes {
            let help = "[STABLE] Size of the storage files on disk in bytes.";
            let mut family =
                encoder.encode_descriptor("apiserver_storage_size_bytes", help, None, MetricType::Gauge)?;
            let size = i64::try_from(size).unwrap_or(i64::MAX);
            family.encode_family(&[("storage_cluster_id", counts.cluster_id.as_str())])?.encode_gauge(&size)?;
        }
        Ok(())
    }
}
