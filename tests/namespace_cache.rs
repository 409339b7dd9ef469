//! The namespace cache against the control-plane double: it lists, follows the watch, sees
//! namespaces turn Terminating and disappear, and asks live for one it has not seen yet.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::Duration;

use crd_apiserver::kube::namespaces::{NamespaceCache, NamespaceState};
use support::control_plane::ControlPlane;

async fn eventually(cache: &NamespaceCache, name: &str, expected: NamespaceState) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while cache.cached(name) != Some(expected) {
        assert!(tokio::time::Instant::now() < deadline, "{name} never became {expected:?}: {:?}", cache.cached(name));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn the_cache_follows_namespaces() {
    let plane = ControlPlane::start();
    let kubeconfig = plane.server_kubeconfig();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async {
        let client = crd_apiserver::kube::connect(Some(&kubeconfig)).await.unwrap().unwrap();
        let cache = NamespaceCache::start(client);
        assert!(cache.wait_synced(Duration::from_secs(60)).await);
        assert_eq!(cache.cached("default"), Some(NamespaceState::Active));
        assert_eq!(cache.cached("team-a"), Some(NamespaceState::Missing));

        plane.state().create_namespace("team-a").unwrap();
        eventually(&cache, "team-a", NamespaceState::Active).await;
        plane.state().delete_namespace("team-a").unwrap();
        eventually(&cache, "team-a", NamespaceState::Terminating).await;
        assert_eq!(cache.lookup("team-a").await.unwrap(), NamespaceState::Terminating);
        plane.state().finalize_namespace("team-a");
        eventually(&cache, "team-a", NamespaceState::Missing).await;
        assert_eq!(cache.lookup("team-a").await.unwrap(), NamespaceState::Missing);
    });

    // Without the namespace-reader binding the cache never syncs, and lookups say why.
    plane.remove_binding("crd-apiserver:namespace-reader");
    runtime.block_on(async {
        let client = crd_apiserver::kube::connect(Some(&kubeconfig)).await.unwrap().unwrap();
        let cache = NamespaceCache::start(client);
        assert!(!cache.wait_synced(Duration::from_millis(500)).await);
        assert_eq!(cache.cached("default"), None);
        let err = cache.lookup("default").await.unwrap_err().to_string();
        assert_eq!(
            err,
            "namespaces \"default\" is forbidden: User \"system:serviceaccount:crd-apiserver:crd-apiserver\" cannot get resource \"namespaces\" in API group \"\" at the cluster scope"
        );
    });
}
