//! What the control-plane double holds: users (tokens), the rule table, the registered
//! APIServices, core objects (the authentication ConfigMap, Namespaces) with a global
//! resourceVersion and an event log for watches, and counters tests read.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::rbac::{Rule, User};

/// Where an APIService sends a group version.
#[derive(Debug, Clone)]
pub struct ApiService {
    pub group: String,
    pub version: String,
    pub group_priority: u32,
    pub version_priority: u32,
    /// `<service>.<namespace>.svc` of `spec.service`: the TLS server name its proxy sends.
    pub server_name: String,
}

/// One download of the backend's `/openapi/v2` for an APIService.
#[derive(Debug, Clone)]
pub struct V2Download {
    pub api_service: String,
    pub server_name: String,
    pub status: u16,
    pub bytes: usize,
    /// The paths of a 200's document, before the aggregator filters them.
    pub paths: Vec<String>,
}

/// One change to a core object, as a watch reports it.
#[derive(Debug, Clone)]
pub struct Event {
    pub revision: u64,
    /// `configmaps` or `namespaces`.
    pub resource: &'static str,
    pub kind: &'static str,
    pub object: Value,
    /// The object before this change (CustomResourceDefinitions only: their watches filter by
    /// labels, and an object leaving or entering a selection is seen through it).
    pub previous: Option<Value>,
}

#[derive(Default)]
pub struct Objects {
    pub revision: u64,
    /// The authentication ConfigMap (`None`: missing).
    pub auth_configmap: Option<Value>,
    pub namespaces: BTreeMap<String, Value>,
    /// Admission configurations and ResourceQuotas by (resource, namespace, name).
    pub stored: BTreeMap<(&'static str, String, String), Value>,
    /// CustomResourceDefinitions by name (`crd_api`).
    pub crds: BTreeMap<String, Value>,
    /// Custom objects the double serves itself (`custom_resources`).
    pub custom: super::custom_resources::Custom,
    pub log: Vec<Event>,
}

pub struct State {
    pub tokens: Mutex<BTreeMap<String, User>>,
    pub rules: Mutex<Vec<Rule>>,
    pub services: Mutex<Vec<ApiService>>,
    pub objects: Mutex<Objects>,
    pub events: broadcast::Sender<Event>,
    pub sar_calls: AtomicUsize,
    pub token_review_calls: AtomicUsize,
    pub sar_outage: AtomicBool,
    /// While set, every ConfigMap read waits (a slow apiserver, held until the test lets go).
    pub configmaps_held: AtomicBool,
    /// Every SubjectAccessReview spec received, in order.
    pub sar_log: Mutex<Vec<Value>>,
    /// The backend's aggregated discovery as last fetched through each Service (by its TLS
    /// server name): its ETag and items.
    pub discovery_cache: Mutex<HashMap<String, (String, Vec<Value>)>>,
    /// How often the backend answered the discovery fetch with 304 Not Modified.
    pub discovery_not_modified: AtomicUsize,
    /// Per APIService name, its slice of the backend's OpenAPI v2 document as last
    /// downloaded: the ETag and the paths of its group version with the definitions they use.
    pub openapi_v2_cache: Mutex<HashMap<String, (String, Value)>>,
    /// Every download of `/openapi/v2` from the backend, in order.
    pub openapi_v2_downloads: Mutex<Vec<V2Download>>,
    /// The paths of the backend's `/openapi/v3` index as last downloaded through each Service
    /// (by its TLS server name).
    pub openapi_v3_indexes: Mutex<HashMap<String, Vec<String>>>,
    /// Headers of the requests proxied to the backend (name, value), per request.
    pub proxied: Mutex<Vec<Vec<(String, String)>>>,
    /// The TLS server name and path of every request sent to the backend, in order.
    pub proxied_via: Mutex<Vec<(String, String)>>,
    /// The status of every answer the backend gave to a proxied request, in order.
    pub backend_statuses: Mutex<Vec<u16>>,
    /// How many status updates of stored objects (ResourceQuota) arrived.
    pub status_updates: AtomicUsize,
    /// How many of the next status updates lose a race to another writer (409 Conflict).
    pub status_races: AtomicUsize,
    /// Stored resources this double does not serve (404), as an older kube-apiserver.
    pub unserved: Mutex<Vec<&'static str>>,
    /// While set, the CustomResourceDefinition API answers 503 and its watches end (the main
    /// apiserver unreachable, as the project's server sees it).
    pub crd_outage: AtomicBool,
    /// How often a CustomResourceDefinition watch that allows bookmarks gets one (kube-apiserver:
    /// about every minute).
    pub crd_bookmark_ms: std::sync::atomic::AtomicU64,
    /// The revision up to which CustomResourceDefinition history was compacted (etcd's
    /// compaction): watches and pages from before it answer 410 Expired.
    pub crd_compacted: std::sync::atomic::AtomicU64,
    /// Bumped to end every open CustomResourceDefinition watch (as an apiserver restart does).
    pub crd_watch_epoch: std::sync::atomic::AtomicU64,
    /// Requests held at the door, an outage, the log of requests (`faults`).
    pub faults: super::faults::Faults,
    /// The impersonation mode that last allowed each requestor (`impersonation`).
    pub impersonation_modes: Mutex<BTreeMap<String, usize>>,
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl State {
    pub fn new() -> State {
        State {
            tokens: Mutex::new(BTreeMap::new()),
            rules: Mutex::new(Vec::new()),
            services: Mutex::new(Vec::new()),
            objects: Mutex::new(Objects { revision: 100, ..Objects::default() }),
            events: broadcast::channel(1024).0,
            sar_calls: AtomicUsize::new(0),
            token_review_calls: AtomicUsize::new(0),
            sar_outage: AtomicBool::new(false),
            configmaps_held: AtomicBool::new(false),
            sar_log: Mutex::new(Vec::new()),
            discovery_cache: Mutex::new(HashMap::new()),
            discovery_not_modified: AtomicUsize::new(0),
            openapi_v2_cache: Mutex::new(HashMap::new()),
            openapi_v2_downloads: Mutex::new(Vec::new()),
            openapi_v3_indexes: Mutex::new(HashMap::new()),
            proxied: Mutex::new(Vec::new()),
            proxied_via: Mutex::new(Vec::new()),
            backend_statuses: Mutex::new(Vec::new()),
            status_updates: AtomicUsize::new(0),
            status_races: AtomicUsize::new(0),
            unserved: Mutex::new(Vec::new()),
            crd_outage: AtomicBool::new(false),
            crd_bookmark_ms: std::sync::atomic::AtomicU64::new(60_000),
            crd_compacted: std::sync::atomic::AtomicU64::new(0),
            crd_watch_epoch: std::sync::atomic::AtomicU64::new(0),
            faults: super::faults::Faults::default(),
            impersonation_modes: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn record(
        &self,
        objects: &mut Objects,
        resource: &'static str,
        kind: &'static str,
        mut object: Value,
    ) -> Value {
        objects.revision += 1;
        object["metadata"]["resourceVersion"] = json!(objects.revision.to_string());
        let event = Event { revision: objects.revision, resource, kind, object: object.clone(), previous: None };
        objects.log.push(event.clone());
        let _ = self.events.send(event);
        object
    }

    /// Creates, replaces or (with `None`) deletes the authentication ConfigMap.
    pub fn set_auth_configmap(&self, data: Option<BTreeMap<String, String>>) {
        let mut objects = lock(&self.objects);
        match (data, objects.auth_configmap.take()) {
            (Some(data), previous) => {
                let kind = if previous.is_some() { "MODIFIED" } else { "ADDED" };
                let uid = previous
                    .as_ref()
                    .map(|p| p["metadata"]["uid"].clone())
                    .unwrap_or(json!(uuid::Uuid::new_v4().to_string()));
                let map = json!({
                    "kind": "ConfigMap", "apiVersion": "v1",
                    "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system", "uid": uid, "creationTimestamp": now()},
                    "data": data,
                });
                let stored = self.record(&mut objects, "configmaps", kind, map);
                objects.auth_configmap = Some(stored);
            }
            (None, Some(previous)) => {
                self.record(&mut objects, "configmaps", "DELETED", previous);
            }
            (None, None) => {}
        }
    }

    /// Creates a namespace (Active); returns it.
    pub fn create_namespace(&self, name: &str) -> Result<Value, ()> {
        let mut objects = lock(&self.objects);
        if objects.namespaces.contains_key(name) {
            return Err(());
        }
        let ns = json!({
            "kind": "Namespace", "apiVersion": "v1",
            "metadata": {"name": name, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": now(), "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        let stored = self.record(&mut objects, "namespaces", "ADDED", ns);
        objects.namespaces.insert(name.to_string(), stored.clone());
        Ok(stored)
    }

    /// Deletes a namespace as kube-apiserver does: it turns Terminating (deletionTimestamp set)
    /// and stays until finalized.
    pub fn delete_namespace(&self, name: &str) -> Option<Value> {
        let mut objects = lock(&self.objects);
        let mut ns = objects.namespaces.get(name)?.clone();
        if ns["metadata"].get("deletionTimestamp").is_some() {
            return Some(ns);
        }
        ns["metadata"]["deletionTimestamp"] = json!(now());
        ns["status"]["phase"] = json!("Terminating");
        let stored = self.record(&mut objects, "namespaces", "MODIFIED", ns);
        objects.namespaces.insert(name.to_string(), stored.clone());
        Some(stored)
    }

    /// Removes a Terminating namespace (what the namespace controller does once it is empty).
    pub fn finalize_namespace(&self, name: &str) {
        let mut objects = lock(&self.objects);
        if let Some(ns) = objects.namespaces.remove(name) {
            self.record(&mut objects, "namespaces", "DELETED", ns);
        }
    }

    /// Creates or replaces a stored object (`resource` is one of `stored_api::RESOURCES`),
    /// stamping uid, creationTimestamp, generation and resourceVersion as kube-apiserver does;
    /// returns it.
    pub fn put_object(&self, resource: &'static str, object: Value) -> Value {
        let mut objects = lock(&self.objects);
        self.put_locked(&mut objects, resource, object)
    }

    /// Replaces a stored object only while its resourceVersion is still `expected` (empty:
    /// unconditionally), checked and written under one lock as etcd's transaction does;
    /// `None` is a conflict.
    pub fn replace_object_if(&self, resource: &'static str, expected: &str, object: Value) -> Option<Value> {
        let mut objects = lock(&self.objects);
        let current = objects.stored.get(&Self::key(resource, &object))?;
        if !expected.is_empty() && expected != current["metadata"]["resourceVersion"] {
            return None;
        }
        Some(self.put_locked(&mut objects, resource, object))
    }

    fn put_locked(&self, objects: &mut Objects, resource: &'static str, mut object: Value) -> Value {
        let key = Self::key(resource, &object);
        let previous = objects.stored.get(&key).cloned();
        let meta = &mut object["metadata"];
        match &previous {
            Some(p) => {
                meta["uid"] = p["metadata"]["uid"].clone();
                meta["creationTimestamp"] = p["metadata"]["creationTimestamp"].clone();
                let generation = p["metadata"]["generation"].as_i64().unwrap_or(1);
                let spec_changed = p.get("spec") != object.get("spec") || p.get("webhooks") != object.get("webhooks");
                object["metadata"]["generation"] = json!(generation + i64::from(spec_changed));
            }
            None => {
                meta["uid"] = json!(uuid::Uuid::new_v4().to_string());
                meta["creationTimestamp"] = json!(now());
                meta["generation"] = json!(1);
            }
        }
        let kind = if previous.is_some() { "MODIFIED" } else { "ADDED" };
        let stored = self.record(objects, resource, kind, object);
        objects.stored.insert(key, stored.clone());
        stored
    }

    /// Deletes a stored object; returns it.
    pub fn delete_object(&self, resource: &'static str, namespace: &str, name: &str) -> Option<Value> {
        let mut objects = lock(&self.objects);
        let object = objects.stored.remove(&(resource, namespace.to_string(), name.to_string()))?;
        Some(self.record(&mut objects, resource, "DELETED", object))
    }

    pub fn get_object(&self, resource: &'static str, namespace: &str, name: &str) -> Option<Value> {
        lock(&self.objects).stored.get(&(resource, namespace.to_string(), name.to_string())).cloned()
    }

    fn key(resource: &'static str, object: &Value) -> (&'static str, String, String) {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        (resource, text(&object["metadata"]["namespace"]), text(&object["metadata"]["name"]))
    }

    pub fn count(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }
}
