//! The main apiserver's CustomResourceDefinitions that the server serves besides its files
//! (`--cluster-definitions-selector`, `--cluster-definitions`): one follower (list+watch
//! through `follow`) for the label selector, and one per named definition (field selector
//! `metadata.name=<name>`, which RBAC can grant by resource name); the union of what they
//! hold, as JSON, taken by `snapshot` whenever `changed` says so. `/readyz`'s informer-sync
//! passes once the reloader served a snapshot in which every follower had listed.
//!
//! Owns the followers and their last sets. What the definitions mean, and whether they can be
//! served, is `definitions::cluster`'s and the reloader's business. While the main apiserver
//! cannot be reached, the last sets stay as they were (the followers retry).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ::kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

use super::follow::{self, Selection};

/// What the server is told to serve from the cluster.
#[derive(Debug, Clone, Default)]
pub struct Wanted {
    /// A label selector in the API's syntax.
    pub selector: Option<String>,
    /// Definition names (`<plural>.<group>`).
    pub names: Vec<String>,
}

impl Wanted {
    pub fn is_empty(&self) -> bool {
        self.selector.is_none() && self.names.is_empty()
    }

    /// One selection per follower: the label selector's, then one per name.
    fn selections(&self) -> Vec<Selection> {
        let by_labels = self.selector.iter().map(|s| Selection { labels: Some(s.clone()), fields: None });
        let by_name = self.names.iter().map(|n| Selection { labels: None, fields: Some(format!("metadata.name={n}")) });
        by_labels.chain(by_name).collect()
    }
}

/// The definitions the followers hold.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// By name, each as the main apiserver serves it (`apiVersion` and `kind` included).
    pub definitions: BTreeMap<String, Value>,
    /// Whether every follower has listed once.
    pub synced: bool,
}

/// The followers' last sets (`None` until a follower listed once).
pub struct ClusterDefinitions {
    sets: Mutex<Vec<Option<BTreeMap<String, Value>>>>,
    changed: tokio::sync::Notify,
    /// Told once what every follower listed is served (`/readyz`'s informer-sync).
    served: Box<dyn Fn() + Send + Sync>,
}

fn resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    ApiResource::from_gvk_with_plural(&gvk, "customresourcedefinitions")
}

/// A definition as JSON with its type (list items come without it).
fn as_json(object: &DynamicObject) -> Option<(String, Value)> {
    let name = object.metadata.name.clone()?;
    let mut value = serde_json::to_value(object).ok()?;
    let map = value.as_object_mut()?;
    map.insert("apiVersion".into(), Value::from("apiextensions.k8s.io/v1"));
    map.insert("kind".into(), Value::from("CustomResourceDefinition"));
    Some((name, value))
}

/// What serving a definition reads of it: spec, labels and annotations.
fn served_parts(value: &Value) -> [Option<&Value>; 3] {
    [value.get("spec"), value.pointer("/metadata/labels"), value.pointer("/metadata/annotations")]
}

fn resource_version(value: &Value) -> u64 {
    value.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|v| v.parse().ok()).unwrap_or(0)
}

impl ClusterDefinitions {
    /// Starts following what `wanted` names; `served` is called by
    /// [`ClusterDefinitions::mark_served`].
    pub fn start(client: ::kube::Client, wanted: &Wanted, served: impl Fn() + Send + Sync + 'static) -> Arc<Self> {
        let selections = wanted.selections();
        let this = Arc::new(ClusterDefinitions::new(selections.len(), Box::new(served)));
        let api: Api<DynamicObject> = Api::all_with(client, &resource());
        for (index, selection) in selections.into_iter().enumerate() {
            let (api, this) = (api.clone(), this.clone());
            tokio::spawn(async move {
                let what = match (&selection.labels, &selection.fields) {
                    (Some(labels), _) => format!("customresourcedefinitions selected by {labels}"),
                    (_, Some(fields)) => format!("customresourcedefinitions with {fields}"),
                    _ => "customresourcedefinitions".to_string(),
                };
                let follower = this.clone();
                follow::follow_selected(api, &selection, &what, move |objects: Vec<DynamicObject>| {
                    let set: BTreeMap<String, Value> = objects.iter().filter_map(as_json).collect();
                    follower.replace(index, set);
                })
                .await;
            });
        }
        this
    }

    fn new(followers: usize, served: Box<dyn Fn() + Send + Sync>) -> ClusterDefinitions {
        ClusterDefinitions { sets: Mutex::new(vec![None; followers]), changed: tokio::sync::Notify::new(), served }
    }

    /// Called by the reloader once it serves a snapshot in which every follower had listed.
    pub fn mark_served(&self) {
        (self.served)();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<BTreeMap<String, Value>>>> {
        self.sets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps a follower's new set; whether every follower has now listed. Wakes the reloader
    /// when what a definition is served from changed (not for a new resourceVersion or status
    /// alone: the main apiserver's controllers write those).
    fn replace(&self, index: usize, set: BTreeMap<String, Value>) -> bool {
        let mut sets = self.lock();
        let Some(slot) = sets.get_mut(index) else { return false };
        let changed = match slot.as_ref() {
            None => true,
            Some(old) => {
                old.len() != set.len()
                    || old.iter().zip(&set).any(|((a, old), (b, new))| a != b || served_parts(old) != served_parts(new))
            }
        };
        *slot = Some(set);
        let synced = sets.iter().all(Option::is_some);
        drop(sets);
        if changed {
            self.changed.notify_one();
        }
        synced
    }

    /// The union of the followers' sets. A definition two followers hold (selected by labels
    /// and by name) is the same object; the later resourceVersion is kept.
    pub fn snapshot(&self) -> Snapshot {
        let sets = self.lock();
        let mut definitions: BTreeMap<String, Value> = BTreeMap::new();
        for (name, value) in sets.iter().flatten().flatten() {
            match definitions.get(name) {
                Some(held) if resource_version(held) >= resource_version(value) => {}
                _ => {
                    definitions.insert(name.clone(), value.clone());
                }
            }
        }
        Snapshot { definitions, synced: sets.iter().all(Option::is_some) }
    }

    /// Waits until a follower's set changed.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str, version: &str) -> Value {
        serde_json::json!({"metadata": {"name": name, "resourceVersion": version}})
    }

    #[test]
    fn the_union_keeps_the_later_copy_and_is_synced_once_everyone_listed() {
        let wanted = Wanted { selector: Some("serve=true".into()), names: vec!["a.example.com".into()] };
        assert_eq!(wanted.selections().len(), 2);
        let this = ClusterDefinitions::new(2, Box::new(|| {}));
        let first = BTreeMap::from([("a.example.com".to_string(), crd("a.example.com", "7"))]);
        assert!(!this.replace(0, first));
        assert!(!this.snapshot().synced);
        let second = BTreeMap::from([
            ("a.example.com".to_string(), crd("a.example.com", "9")),
            ("b.example.com".to_string(), crd("b.example.com", "3")),
        ]);
        assert!(this.replace(1, second.clone()));
        // A status write alone does not wake the reloader.
        let mut status_only = second.clone();
        if let Some(a) = status_only.get_mut("a.example.com") {
            a["metadata"]["resourceVersion"] = serde_json::json!("10");
            a["status"] = serde_json::json!({"storedVersions": ["v1"]});
        }
        assert!(this.replace(1, status_only));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        // The permit left by the first lists is taken; no other is left.
        runtime.block_on(this.changed());
        let again = runtime.block_on(async {
            tokio::time::timeout(std::time::Duration::from_millis(20), this.changed()).await.is_ok()
        });
        assert!(!again, "a status write woke the reloader");
        assert!(this.replace(1, second));
        let snapshot = this.snapshot();
        assert!(snapshot.synced);
        assert_eq!(snapshot.definitions.len(), 2);
        assert_eq!(snapshot.definitions.get("a.example.com").map(resource_version), Some(9));
    }
}
