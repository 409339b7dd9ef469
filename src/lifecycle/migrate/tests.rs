//! Migration passes against a real sled store in a temporary directory.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use serde_json::{Value, json};

use super::*;
use crate::api::present;
use crate::definitions::load::definition_from_value;
use crate::store::sled::{SledOptions, SledStore};

/// The seeds' CronTab in v1beta1 and v1, stored in `storage`; `replicas` has a default.
fn crontab(storage: &str) -> Definition {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"cronSpec": {"type": "string"}, "image": {"type": "string"},
                       "replicas": {"type": "integer", "default": 1}}}}}});
    let versions: Vec<Value> = ["v1beta1", "v1"]
        .iter()
        .map(|v| json!({"name": v, "served": true, "storage": *v == storage, "schema": schema}))
        .collect();
    let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": versions}});
    definition_from_value(raw, "test").unwrap()
}

fn key_of(name: &str) -> String {
    key::object_key("stable.example.com", "crontabs", Some("default"), name)
}

/// Every other object holds `replicas`: read unchanged, it is rewritten from its bytes
/// (`api::verbatim::with_api_version`); the others are defaulted on read (the general path).
fn stored(name: &str, version: &str, image: &str) -> Bytes {
    let mut object = json!({"apiVersion": format!("stable.example.com/{version}"), "kind": "CronTab",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "stable.example.com/v1beta1",
                "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:image": {}}}}]},
        "spec": {"cronSpec": "* * * * */5", "image": image}});
    if name.bytes().last().is_some_and(|b| b % 2 == 0) {
        object["spec"]["replicas"] = json!(2);
    }
    Bytes::from(serde_json::to_vec(&object).unwrap())
}

async fn store_with(objects: usize) -> (tempfile::TempDir, Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = Backend::Sled(SledStore::open(dir.path(), SledOptions::default()).unwrap());
    let writes = (0..objects).map(|i| {
        let store = store.clone();
        async move { store.create(&key_of(&format!("c{i:04}")), stored(&format!("c{i:04}"), "v1beta1", "old")).await }
    });
    for result in futures_util::future::join_all(writes).await {
        result.unwrap();
    }
    stored_versions::add(&store, "crontabs.stable.example.com", "v1beta1").await.unwrap();
    (dir, store)
}

/// Every object as read in `version`, without its resourceVersion.
async fn read_all(store: &Backend, definition: &Definition, version: &str) -> Vec<Value> {
    let prefix = key::resource_prefix("stable.example.com", "crontabs");
    let page = store.list(&prefix, ListOptions::default()).await.unwrap();
    let version = definition.version(version).unwrap();
    page.items
        .iter()
        .map(|kv| {
            let mut object = present::read_stored(definition, version, &kv.value, kv.revision).unwrap();
            object["metadata"].as_object_mut().unwrap().remove("resourceVersion");
            object
        })
        .collect()
}

fn small_pages() -> Options {
    Options { rate: 0, page_size: 100 }
}

#[tokio::test]
async fn every_object_moves_to_the_storage_version_and_reads_the_same_in_every_version() {
    let (_dir, store) = store_with(250).await;
    let old = crontab("v1beta1");
    let before_v1beta1 = read_all(&store, &old, "v1beta1").await;
    let before_v1 = read_all(&store, &old, "v1").await;
    let before_revision = store.get(&key_of("c0007")).await.unwrap().unwrap().revision;

    let new = crontab("v1");
    stored_versions::record_storage_versions(&store, [&new]).await.unwrap();
    assert_eq!(stored_versions::read(&store, &new.name).await.unwrap(), ["v1beta1", "v1"]);
    let progress = migrate(&store, &new, small_pages(), &|| true, &mut |_| {}).await.unwrap();

    assert_eq!(progress.state, State::Done);
    assert_eq!(progress.objects_per_version, [("v1".to_string(), 250)].into());
    assert_eq!(progress.last_objects_per_version, Some([("v1beta1".to_string(), 250)].into()));
    assert_eq!(stored_versions::read(&store, &new.name).await.unwrap(), ["v1"]);
    let after = store.get(&key_of("c0007")).await.unwrap().unwrap();
    assert!(after.revision > before_revision, "a migrated object gets a new resourceVersion");
    let raw: Value = serde_json::from_slice(&after.value).unwrap();
    assert_eq!(raw["apiVersion"], "stable.example.com/v1");
    assert_eq!(raw["metadata"]["generation"], 3);
    assert_eq!(raw["metadata"]["managedFields"][0]["apiVersion"], "stable.example.com/v1beta1");
    assert!(raw["metadata"].get("resourceVersion").is_none());
    assert_eq!(read_all(&store, &new, "v1beta1").await, before_v1beta1);
    assert_eq!(read_all(&store, &new, "v1").await, before_v1);
    // Done is remembered: nothing is left to do.
    assert!(!needs_pass(&store, &new).await.unwrap());
}

#[tokio::test]
async fn a_users_write_during_the_rewrite_always_wins() {
    let (_dir, store) = store_with(4).await;
    let definition = crontab("v1");
    let prefix = key::resource_prefix("stable.example.com", "crontabs");
    let page = store.list(&prefix, ListOptions::default()).await.unwrap().items;
    let revision = |name: &str| page.iter().find(|kv| kv.key == key_of(name)).unwrap().revision;
    // After the migrator read the page: one object rewritten by a user in the new version, one
    // in the old version (a request that started before the switch), one deleted.
    store.update(&key_of("c0000"), revision("c0000"), stored("c0000", "v1", "user-new")).await.unwrap();
    store.update(&key_of("c0001"), revision("c0001"), stored("c0001", "v1beta1", "user-old")).await.unwrap();
    store.delete(&key_of("c0002"), None).await.unwrap();
    let user_write = store.get(&key_of("c0000")).await.unwrap().unwrap();

    let outcome = rewrite::rewrite_page(&store, &definition, page).await.unwrap();

    assert_eq!(outcome, rewrite::Outcome { migrated: 2, yielded: 2 });
    assert_eq!(store.get(&key_of("c0000")).await.unwrap().unwrap(), user_write, "never overwritten");
    let c1: Value = serde_json::from_slice(&store.get(&key_of("c0001")).await.unwrap().unwrap().value).unwrap();
    assert_eq!(
        (c1["apiVersion"].as_str(), c1["spec"]["image"].as_str()),
        (Some("stable.example.com/v1"), Some("user-old"))
    );
    assert!(store.get(&key_of("c0002")).await.unwrap().is_none(), "a deleted object stays deleted");
    let c3: Value = serde_json::from_slice(&store.get(&key_of("c0003")).await.unwrap().unwrap().value).unwrap();
    assert_eq!(c3["apiVersion"], "stable.example.com/v1");
}

#[tokio::test]
async fn an_interrupted_pass_resumes_from_its_last_page() {
    let (_dir, store) = store_with(350).await;
    let definition = crontab("v1");
    let checks = AtomicUsize::new(0);
    // Two pages, then the definition "changes" (as a crash would stop the pass).
    let current = || checks.fetch_add(1, Ordering::SeqCst) < 2;
    let stopped = migrate(&store, &definition, small_pages(), &current, &mut |_| {}).await;
    assert_eq!(stopped.unwrap_err(), Stop::Superseded);
    let saved = progress::read(&store, &definition.name).await.unwrap().unwrap();
    assert_eq!((saved.state, saved.migrated), (State::Running, 200));
    assert_eq!(saved.continue_after.as_deref(), Some(key_of("c0199").as_str()));
    assert_eq!(stored_versions::read(&store, &definition.name).await.unwrap(), ["v1beta1", "v1"]);

    let mut reports = Vec::new();
    let done = migrate(&store, &definition, small_pages(), &|| true, &mut |p| reports.push(p.migrated)).await.unwrap();
    // The first page after resuming is the third: 300 migrated, not 100 of a fresh pass.
    assert_eq!(reports.first(), Some(&300));
    assert_eq!(done.state, State::Done);
    // The resumed pass counted each object once, as it found it.
    assert_eq!(done.last_objects_per_version, Some([("v1beta1".to_string(), 350)].into()));
    assert_eq!(stored_versions::read(&store, &definition.name).await.unwrap(), ["v1"]);
}

#[tokio::test]
async fn the_rate_limit_paces_the_rewrite() {
    let (_dir, store) = store_with(60).await;
    let definition = crontab("v1");
    let started = Instant::now();
    let options = Options { rate: 200, page_size: 20 };
    migrate(&store, &definition, options, &|| true, &mut |_| {}).await.unwrap();
    // 60 objects at 200 per second take at least 0.3 s.
    assert!(started.elapsed() >= Duration::from_millis(290), "{:?}", started.elapsed());
}

#[test]
fn a_rate_limit_bounds_the_page_to_a_tenth_of_a_seconds_worth() {
    let limit = |rate, page_size| Options { rate, page_size }.page_limit();
    assert_eq!(limit(0, 500), 500);
    assert_eq!(limit(200, 500), 20);
    assert_eq!(limit(10_000, 500), 500);
    assert_eq!(limit(5, 500), 1);
    assert_eq!(limit(0, 0), 1);
}
