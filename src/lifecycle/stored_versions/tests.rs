//! The storedVersions record against a real sled store in a temporary directory.

use serde_json::json;

use super::*;
use crate::definitions::load::definition_from_value;
use crate::store::sled::{SledOptions, SledStore};

/// The seeds' CronTab with `versions` (name, storage), every one served.
fn crontab(versions: &[(&str, bool)]) -> Definition {
    let versions: Vec<_> = versions
        .iter()
        .map(|(name, storage)| {
            json!({"name": name, "served": true, "storage": storage,
                   "schema": {"openAPIV3Schema": {"type": "object"}}})
        })
        .collect();
    let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": versions}});
    definition_from_value(raw, "test").unwrap()
}

fn open(dir: &std::path::Path) -> SledStore {
    SledStore::open(dir, SledOptions::default()).unwrap()
}

#[tokio::test]
async fn storage_versions_accumulate_in_order_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    assert!(read(&store, "crontabs.stable.example.com").await.unwrap().is_empty());
    record_storage_versions(&store, [&crontab(&[("v1beta1", true), ("v1", false)])]).await.unwrap();
    // Serving the same set again changes nothing.
    record_storage_versions(&store, [&crontab(&[("v1beta1", true), ("v1", false)])]).await.unwrap();
    let revision = store.current_revision();
    record_storage_versions(&store, [&crontab(&[("v1beta1", true), ("v1", false)])]).await.unwrap();
    assert_eq!(store.current_revision(), revision, "an unchanged record is not rewritten");
    record_storage_versions(&store, [&crontab(&[("v1beta1", false), ("v1", true)])]).await.unwrap();
    store.close();
    drop(store);

    // sled allows one open handle per directory; wait for the writer thread to let go.
    let store = loop {
        match SledStore::open(dir.path(), SledOptions::default()) {
            Ok(s) => break s,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    };
    assert_eq!(read(&store, "crontabs.stable.example.com").await.unwrap(), ["v1beta1", "v1"]);
    let all = read_all(&store).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all["crontabs.stable.example.com"], ["v1beta1", "v1"]);
}

#[tokio::test]
async fn only_versions_left_empty_are_removed_and_never_the_storage_version() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let v1 = crontab(&[("v1beta1", false), ("v1", true)]);
    add(&store, &v1.name, "v1beta1").await.unwrap();
    add(&store, &v1.name, "v1").await.unwrap();
    remove(&store, &v1, "v1").await.unwrap();
    assert_eq!(read(&store, &v1.name).await.unwrap(), ["v1beta1", "v1"]);
    remove(&store, &v1, "v1beta1").await.unwrap();
    assert_eq!(read(&store, &v1.name).await.unwrap(), ["v1"]);
}

#[tokio::test]
async fn concurrent_additions_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let versions = ["v1", "v2", "v3", "v4", "v5", "v6"];
    futures_util::future::join_all(versions.iter().map(|v| add(&store, "things.example.com", v))).await;
    let mut stored = read(&store, "things.example.com").await.unwrap();
    stored.sort();
    assert_eq!(stored, versions);
}

#[test]
fn a_stored_version_missing_from_spec_versions_is_refused_as_kubernetes_words_it() {
    let definition = crontab(&[("v1", true)]);
    let stored = ["v1beta1".to_string(), "v1".to_string()];
    let errors = missing_from_versions(&stored, &definition);
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(texts, ["status.storedVersions[0]: Invalid value: \"v1beta1\": must appear in spec.versions"]);
    assert!(missing_from_versions(&["v1".to_string()], &definition).is_empty());
}
