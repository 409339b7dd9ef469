//! The reduced form of `hack/bench-peer.sh` (issue 32) through the control-plane double as
//! kube-aggregator: generated groups (every other one with two versions) served by the
//! project's server, one APIService per group version, each registered through its own Service
//! (`<name>-<10 hex of sha256("<group>/<version>")>`, as the chart's `apiService.openAPISlices`
//! does). What the real experiment measures is checked here: once the APIServices exist every
//! kind answers a list through the aggregator; each APIService's OpenAPI v2 download and each
//! Service's discovery fetch carry its group version alone; `kubectl api-resources` lists every
//! resource, `kubectl explain` and `kubectl create` work; a live change of one definition gives
//! its group's slice a new entity tag while every other APIService's re-download is a 304.
//! Prints `BENCH` lines (what `hack/bench-peer.sh --double` shows); `PEER_GROUPS` enlarges it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::{Duration, Instant};

use crd_apiserver::api::openapi::slices::version_suffix;
use support::control_plane::ControlPlane;
use support::control_plane::rbac::User;
use support::http::Client;
use support::{TestServer, kubectl_with};

fn group(i: usize) -> String {
    format!("g{i:03}.peer.example.com")
}

fn versions(i: usize) -> &'static [&'static str] {
    if i % 2 == 0 { &["v1", "v1beta1"] } else { &["v1"] }
}

fn slice_service(group: &str, version: &str) -> String {
    format!("crd-apiserver-{}", version_suffix(group, version))
}

/// Group `i`'s definition: kind `Thing`, namespaced for even `i`, with a described field.
fn definition(i: usize, description: &str) -> String {
    let versions: String = versions(i)
        .iter()
        .map(|v| {
            format!(
                "  - name: {v}\n    served: true\n    storage: {}\n    schema:\n      openAPIV3Schema:\n        \
                 type: object\n        properties:\n          spec:\n            type: object\n            \
                 properties:\n              size: {{type: string, description: \"{description}\"}}\n",
                *v == "v1"
            )
        })
        .collect();
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.{g}\nspec:\n  \
         group: {g}\n  scope: {scope}\n  names: {{plural: things, singular: thing, kind: Thing}}\n  versions:\n{versions}",
        g = group(i),
        scope = if i % 2 == 0 { "Namespaced" } else { "Cluster" },
    )
}

/// Runs `probe` until it returns `Some`; thirty seconds is only a hang guard.
fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} did not happen");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn many_groups_behind_the_aggregator_each_version_through_its_own_service() {
    let groups: usize = std::env::var("PEER_GROUPS").ok().and_then(|n| n.parse().ok()).unwrap_or(12);
    let texts: Vec<String> = (0..groups).map(|i| definition(i, "How big.")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let plane = ControlPlane::start();
    let started = Instant::now();
    let server = TestServer::start_delegated(&refs, &plane.server_kubeconfig(), &[]);
    println!("BENCH groups={groups} ready_seconds={:.2}", started.elapsed().as_secs_f64());
    plane.register_backend(server.port, &server.pki.serving_ca());
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    plane.state().create_namespace("peer").ok();
    let raw = Client::to_plane(&plane, "admin-token");

    let created = Instant::now();
    for i in 0..groups {
        for version in versions(i) {
            plane.register_via(&group(i), version, &slice_service(&group(i), version));
        }
    }
    let kinds: Vec<String> =
        (0..groups).flat_map(|i| versions(i).iter().map(move |v| format!("/apis/{}/{v}/things", group(i)))).collect();
    for path in &kinds {
        eventually(path, || (raw.get(path).unwrap().status == 200).then_some(()));
    }
    println!("BENCH kinds={} usable_seconds={:.2}", kinds.len(), created.elapsed().as_secs_f64());

    // kube-apiserver's first /openapi/v2: one download per APIService, each its group version's slice.
    let (status, etag, merged) = plane.openapi_v2(None);
    assert_eq!(status, 200);
    let merged = merged.unwrap();
    let first = plane.openapi_v2_downloads();
    assert_eq!(first.len(), kinds.len(), "{first:?}");
    for download in &first {
        let (version, group) = download.api_service.split_once('.').unwrap();
        assert_eq!(download.server_name, format!("{}.crd-apiserver.svc", slice_service(group, version)));
        assert_eq!(download.status, 200);
        let prefix = format!("/apis/{group}/{version}/");
        assert!(download.paths.iter().all(|p| p.starts_with(&prefix)), "{download:?}");
        assert!(merged["paths"][format!("/apis/{group}/{version}/things")].is_object(), "{group}/{version}");
    }
    let downloaded: usize = first.iter().map(|d| d.bytes).sum();
    let (status, whole) = {
        let response = raw.clone().header("Accept", "application/json").get("/openapi/v2").unwrap();
        (response.status, response.text().len())
    };
    assert_eq!(status, 200);
    println!("BENCH v2_downloads={} v2_downloaded_bytes={downloaded} merged_v2_bytes={whole}", first.len());

    // Discovery: one fetch per Service, each answered with its group version alone.
    let (status, discovery) = plane.aggregated_discovery();
    assert_eq!(status, 200);
    let cached = plane.state().discovery_cache.lock().unwrap().clone();
    assert_eq!(cached.len(), kinds.len(), "{:?}", cached.keys());
    for i in 0..groups {
        for version in versions(i) {
            let name = format!("{}.crd-apiserver.svc", slice_service(&group(i), version));
            let items: Vec<(&str, Vec<&str>)> = cached[&name]
                .1
                .iter()
                .map(|i| {
                    let versions = i["versions"].as_array().unwrap().iter().filter_map(|v| v["version"].as_str());
                    (i["metadata"]["name"].as_str().unwrap(), versions.collect())
                })
                .collect();
            assert_eq!(items, [(group(i).as_str(), vec![*version])], "{name}");
        }
    }
    let discovered = discovery["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["metadata"]["name"].as_str().is_some_and(|n| n.ends_with(".peer.example.com")));
    assert_eq!(discovered.clone().count(), groups);
    let both = discovered.filter(|i| i["versions"].as_array().is_some_and(|v| v.len() == 2));
    assert_eq!(both.count(), groups.div_ceil(2), "the merged document has every version of a group");

    // Clients: api-resources lists every kind, explain and create work.
    let admin = plane.cert_kubeconfig("admin", &["system:masters"]);
    let kubectl = |args: &[&str], stdin: Option<&str>| {
        let out = kubectl_with(&admin, server.dir.path(), args, stdin);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "kubectl {args:?}: {text}{}", String::from_utf8_lossy(&out.stderr));
        text
    };
    let listed = kubectl(&["api-resources", "--no-headers", "-o", "name"], None);
    for i in 0..groups {
        assert!(listed.lines().any(|l| l == format!("things.{}", group(i))), "{}: {listed}", group(i));
    }
    let explained = kubectl(&["explain", "things.spec.size", "--api-version", &format!("{}/v1", group(1))], None);
    assert!(explained.contains("How big."), "{explained}");
    let thing = format!("apiVersion: {}/v1\nkind: Thing\nmetadata: {{name: t1}}\nspec: {{size: L}}\n", group(1));
    kubectl(&["create", "-f", "-"], Some(&thing));
    assert_eq!(raw.get(&format!("/apis/{}/v1/things/t1", group(1))).unwrap().status, 200);

    // A live change of group 0: only its APIServices download anew; every other one is a 304.
    let changed_at = Instant::now();
    let file = server.definitions_dir().join("00.yaml");
    let staged = file.with_extension("staged");
    std::fs::write(&staged, definition(0, "How big, changed.")).unwrap();
    std::fs::rename(&staged, &file).unwrap();
    let changed = group(0);
    eventually("the changed slice in the merged document", || {
        let (status, now, document) = plane.openapi_v2(Some(&etag));
        (status == 200 && now != etag && document.is_some_and(|d| d.to_string().contains("How big, changed.")))
            .then_some(())
    });
    println!("BENCH live_change_seen_seconds={:.3}", changed_at.elapsed().as_secs_f64());
    let later = plane.openapi_v2_downloads();
    let again = &later[first.len()..];
    assert!(!again.is_empty());
    for download in again {
        let group = download.api_service.split_once('.').unwrap().1;
        if group != changed {
            assert_eq!(download.status, 304, "{download:?}");
        }
    }
    assert!(again.iter().any(|d| d.api_service.ends_with(&changed) && d.status == 200), "{again:?}");
}
