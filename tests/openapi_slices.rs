//! Issue 32: kube-aggregator downloads `/openapi/v2` once per APIService, through that
//! APIService's Service. With one Service per group version (named `<anything>-<suffix of
//! "<group>/<version>">`, `api::openapi::slices`), each download is only that group version's
//! slice; a Service per group (`<anything>-<suffix of the group>`, as installs made before
//! slices were per group version) still gets its group's; re-downloads are 304 while a slice is
//! unchanged, and the cluster's merged document and `kubectl explain` are what they were with
//! the whole document.

mod support;

use crd_apiserver::api::openapi::slices::{suffix, version_suffix};
use support::control_plane::ControlPlane;
use support::http::Client;
use support::{CRONTAB_CRD, TENANT_CRD, TestServer, kubectl_with};

/// The Service `group`'s APIService goes through: stable.example.com's v1 has one of its own
/// (the chart's today), platform.example.com's group has one (an install of the chart before).
fn slice_service(group: &str) -> String {
    match group {
        "stable.example.com" => format!("crd-apiserver-{}", version_suffix(group, "v1")),
        _ => format!("crd-apiserver-{}", suffix(group)),
    }
}

struct Sliced {
    plane: ControlPlane,
    server: TestServer,
}

/// The server behind the double, its two groups each registered through a Service of their own
/// (`slice_service`) and its own group through the project's main Service (the whole document).
fn start() -> Sliced {
    start_with(&[])
}

fn start_with(flags: &[&str]) -> Sliced {
    let plane = ControlPlane::start();
    let server = TestServer::start_delegated(&[CRONTAB_CRD, TENANT_CRD], &plane.server_kubeconfig(), flags);
    plane.register_backend(server.port, &server.pki.serving_ca());
    for group in ["stable.example.com", "platform.example.com"] {
        plane.register_via(group, "v1", &slice_service(group));
    }
    plane.register("crd-apiserver.io", "v1alpha1");
    Sliced { plane, server }
}

/// Runs `kubectl explain` of a CronTab field through the double (it reads OpenAPI v3) and
/// checks its answer; returns the admin's kubeconfig.
fn explains_crontab_replicas(plane: &ControlPlane, server: &TestServer) -> std::path::PathBuf {
    let admin = plane.cert_kubeconfig("admin", &["system:masters"]);
    let out = kubectl_with(&admin, server.dir.path(), &["explain", "crontab.spec.replicas"], None);
    let explained = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && explained.contains("FIELD: replicas <integer>"),
        "{explained}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    admin
}

#[test]
fn each_apiservice_downloads_only_its_slice_and_then_304s() {
    let Sliced { plane, server } = start();
    let (status, etag, merged) = plane.openapi_v2(None);
    assert_eq!(status, 200);
    let merged = merged.unwrap();
    for path in [
        "/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}",
        "/apis/platform.example.com/v1/tenants",
        "/apis/crd-apiserver.io/v1alpha1/serveddefinitions",
    ] {
        assert!(
            merged["paths"][path].is_object(),
            "{path} missing from {:?}",
            merged["paths"].as_object().unwrap().keys()
        );
    }
    for definition in ["com.example.stable.v1.CronTab", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"] {
        assert!(merged["definitions"][definition].is_object(), "{definition}");
    }
    // Every shared parameter a merged path refers to is in the merged document.
    let text = merged.to_string();
    for reference in text.split("\"#/parameters/").skip(1) {
        let name = reference.split('"').next().unwrap();
        assert!(merged["parameters"][name].is_object(), "{name}");
    }
    // Each slice writes the parameters kube-apiserver shares once, under kube-apiserver's
    // names, and the merge keeps them.
    assert!(merged["parameters"]["pretty-tJGM1-ng"].is_object(), "{}", merged["parameters"]);

    let downloads = plane.openapi_v2_downloads();
    assert_eq!(downloads.len(), 3, "{downloads:?}");
    assert!(downloads.iter().all(|d| d.status == 200), "{downloads:?}");
    let whole = downloads.iter().find(|d| d.api_service == "v1alpha1.crd-apiserver.io").unwrap();
    assert_eq!(whole.server_name, "crd-apiserver.crd-apiserver.svc");
    for group in ["stable.example.com", "platform.example.com"] {
        let download = downloads.iter().find(|d| d.api_service == format!("v1.{group}")).unwrap();
        assert_eq!(download.server_name, format!("{}.crd-apiserver.svc", slice_service(group)));
        assert!(!download.paths.is_empty());
        let prefix = format!("/apis/{group}/");
        assert!(download.paths.iter().all(|p| p.starts_with(&prefix)), "{group}: {:?}", download.paths);
        assert!(download.bytes < whole.bytes, "{group}: {} bytes, the whole document {}", download.bytes, whole.bytes);
    }
    // The whole document has every group's paths: a name that picks no slice gets it.
    assert!(whole.paths.iter().any(|p| p.starts_with("/apis/stable.example.com/")));
    assert!(whole.paths.iter().any(|p| p.starts_with("/apis/platform.example.com/")));

    // Nothing changed: every APIService's download is a 304 and the merged document too.
    let (status, again, _) = plane.openapi_v2(Some(&etag));
    assert_eq!((status, again.as_str()), (304, etag.as_str()));
    let downloads = plane.openapi_v2_downloads();
    assert_eq!(downloads.len(), 6, "{downloads:?}");
    assert!(downloads[3..].iter().all(|d| d.status == 304), "{downloads:?}");

    // kubectl explain reads v3 through the double, as before.
    explains_crontab_replicas(&plane, &server);
    // kube-aggregator downloads the v3 index once per APIService and keeps each whole: a group
    // version's (or a group's) Service gets its own entries alone, the main Service every one.
    let indexes = plane.openapi_v3_indexes();
    for group in ["stable.example.com", "platform.example.com"] {
        let name = format!("{}.crd-apiserver.svc", slice_service(group));
        assert_eq!(indexes[&name], [format!("apis/{group}/v1")], "what {name} was answered");
    }
    let whole = &indexes["crd-apiserver.crd-apiserver.svc"];
    for path in ["apis/stable.example.com/v1", "apis/platform.example.com/v1", "apis/crd-apiserver.io/v1alpha1"] {
        assert!(whole.iter().any(|p| p == path), "{path} missing from {whole:?}");
    }
    // The document explain read came through the APIService's own Service.
    let stable = format!("{}.crd-apiserver.svc", slice_service("stable.example.com"));
    let via = plane.proxied_via();
    assert!(
        via.iter().any(|(name, path)| *name == stable && path == "/openapi/v3/apis/stable.example.com/v1"),
        "{via:?}"
    );
}

/// kube-aggregator's proxy for an APIService dials its own Service, and its discovery manager
/// fetches `/apis` once per Service and keeps each answer whole: a group version's (or a
/// group's) Service name gets that group's aggregated discovery alone (not every group's, kept once per Service), and a
/// list through it answers as through the main Service.
#[test]
fn requests_and_discovery_go_through_each_apiservices_own_service() {
    let Sliced { plane, server } = start();
    let (status, discovery) = plane.aggregated_discovery();
    assert_eq!(status, 200);
    let listed: Vec<&str> =
        discovery["items"].as_array().unwrap().iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    for group in ["stable.example.com", "platform.example.com", "crd-apiserver.io"] {
        assert!(listed.contains(&group), "{group} missing from {listed:?}");
    }
    let cached = plane.state().discovery_cache.lock().unwrap().clone();
    assert_eq!(cached.len(), 3, "one fetch per Service: {:?}", cached.keys());
    for group in ["stable.example.com", "platform.example.com"] {
        let name = format!("{}.crd-apiserver.svc", slice_service(group));
        let groups: Vec<&str> = cached[&name].1.iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
        assert_eq!(groups, [group], "what {name} was answered");
    }
    let whole = &cached["crd-apiserver.crd-apiserver.svc"].1;
    assert!(whole.len() >= 3, "the main Service gets every group: {whole:?}");

    let admin = plane.cert_kubeconfig("admin", &["system:masters"]);
    let out = kubectl_with(&admin, server.dir.path(), &["get", "crontabs", "-A", "-o", "name"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let via = plane.proxied_via();
    let crontabs: Vec<&String> =
        via.iter().filter(|(_, path)| path.starts_with("/apis/stable.example.com/v1/")).map(|(name, _)| name).collect();
    assert!(!crontabs.is_empty(), "{via:?}");
    let expected = format!("{}.crd-apiserver.svc", slice_service("stable.example.com"));
    assert!(crontabs.iter().all(|name| **name == expected), "{crontabs:?}");
}

/// The paths of the cluster's merged v2 document that are ours (our groups'), in order.
fn our_paths(merged: &serde_json::Value) -> Vec<&String> {
    let ours = |path: &&String| path.contains(".example.com/") || path.contains("crd-apiserver.io/");
    let mut paths: Vec<&String> =
        merged["paths"].as_object().map(|p| p.keys().filter(ours).collect()).unwrap_or_default();
    paths.sort();
    paths
}

/// `--openapi-v2=empty`: every APIService's download is a valid document with nothing in it, so
/// the cluster's merged /openapi/v2 holds none of our paths or definitions; re-downloads are
/// 304; OpenAPI v3 (`kubectl explain`) and requests are as before.
#[test]
fn an_empty_v2_document_leaves_the_merged_one_without_our_resources() {
    let Sliced { plane, server } = start_with(&["--openapi-v2=empty"]);
    let (status, etag, merged) = plane.openapi_v2(None);
    assert_eq!(status, 200);
    let merged = merged.unwrap();
    let ours = our_paths(&merged);
    assert!(ours.is_empty(), "{ours:?}");
    assert!(merged["definitions"].get("com.example.stable.v1.CronTab").is_none(), "{}", merged["definitions"]);
    let downloads = plane.openapi_v2_downloads();
    assert_eq!(downloads.len(), 3, "{downloads:?}");
    assert!(downloads.iter().all(|d| d.status == 200 && d.paths.is_empty()), "{downloads:?}");
    let (status, again, _) = plane.openapi_v2(Some(&etag));
    assert_eq!((status, again.as_str()), (304, etag.as_str()));
    let downloads = plane.openapi_v2_downloads();
    assert!(downloads[3..].iter().all(|d| d.status == 304), "{downloads:?}");

    // Asked directly (as kube-aggregator forwards an admin's request): the same empty document
    // in both forms, each with an entity tag of its own.
    let proxy = &plane.front_proxy_client;
    let (cert, key) = (server.write("proxy.crt", &proxy.cert), server.write("proxy.key", &proxy.key));
    let client = || Client::new(&server, Some((&cert, &key))).header("X-Remote-User", "system:admin");
    let direct = client().get("/openapi/v2").unwrap();
    assert_eq!(direct.status, 200);
    let document = direct.json();
    assert_eq!(document["swagger"], "2.0");
    assert_eq!(
        (document["paths"].as_object().map(|p| p.len()), document["definitions"].as_object().map(|d| d.len())),
        (Some(0), Some(0))
    );
    let etag = direct.headers["etag"].to_str().unwrap().to_string();
    assert_eq!(client().header("if-none-match", &etag).get("/openapi/v2").unwrap().status, 304);
    let proto = client()
        .header("accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
        .get("/openapi/v2")
        .unwrap();
    assert_eq!(proto.status, 200);
    assert_eq!(proto.headers["content-type"], "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
    assert!(proto.body.windows(b"2.0".len()).any(|w| w == b"2.0"), "{:?}", proto.body);
    assert!(!proto.body.windows(b"CronTab".len()).any(|w| w == b"CronTab"));
    assert_ne!(proto.headers["etag"], direct.headers["etag"]);

    // The schemas are in OpenAPI v3, which kubectl explain reads; requests work.
    let admin = explains_crontab_replicas(&plane, &server);
    let out = kubectl_with(&admin, server.dir.path(), &["get", "crontabs", "-A", "-o", "name"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `--openapi-v2=definitions`: every APIService's download has its group version's definitions
/// and one path, its discovery path (kube-aggregator merges nothing of a document that brings
/// no new path, and keeps definitions no path used), so the cluster's merged /openapi/v2 has our
/// kinds (what v2 readers look up by group-version-kind) and none of their paths; re-downloads
/// are 304, and `kubectl explain` reads both documents.
#[test]
fn a_definitions_v2_document_gives_the_merged_one_our_kinds_without_their_paths() {
    let Sliced { plane, server } = start_with(&["--openapi-v2=definitions"]);
    let (status, etag, merged) = plane.openapi_v2(None);
    assert_eq!(status, 200);
    let merged = merged.unwrap();
    let ours = our_paths(&merged);
    let discovery =
        ["/apis/crd-apiserver.io/v1alpha1/", "/apis/platform.example.com/v1/", "/apis/stable.example.com/v1/"];
    assert_eq!(ours, discovery);
    let definitions = merged["definitions"].as_object().unwrap();
    assert_eq!(
        definitions["com.example.stable.v1.CronTab"]["x-kubernetes-group-version-kind"],
        serde_json::json!([{"group": "stable.example.com", "kind": "CronTab", "version": "v1"}])
    );
    for name in [
        "com.example.stable.v1.CronTabList",
        "com.example.platform.v1.Tenant",
        "io.crd-apiserver.v1alpha1.ServedDefinition",
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
        "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
    ] {
        assert!(definitions.contains_key(name), "{name} missing from {:?}", definitions.keys());
    }
    let downloads = plane.openapi_v2_downloads();
    assert_eq!(downloads.len(), 3, "{downloads:?}");
    for download in &downloads {
        let (version, group) = download.api_service.split_once('.').unwrap();
        assert_eq!(download.status, 200);
        if group != "crd-apiserver.io" {
            assert_eq!(download.paths, [format!("/apis/{group}/{version}/")], "{download:?}");
        }
    }
    let (status, again, _) = plane.openapi_v2(Some(&etag));
    assert_eq!((status, again.as_str()), (304, etag.as_str()));
    assert!(plane.openapi_v2_downloads()[3..].iter().all(|d| d.status == 304));

    // Asked directly: the definitions and the Kubernetes types they refer to, nothing that
    // only paths use.
    let proxy = &plane.front_proxy_client;
    let (cert, key) = (server.write("proxy.crt", &proxy.cert), server.write("proxy.key", &proxy.key));
    let direct = Client::new(&server, Some((&cert, &key))).header("X-Remote-User", "system:admin").get("/openapi/v2");
    let document = direct.unwrap().json();
    let paths: Vec<&String> = document["paths"].as_object().unwrap().keys().collect();
    assert_eq!(paths, discovery);
    assert_eq!(document.get("parameters"), None);
    let names: Vec<&String> = document["definitions"].as_object().unwrap().keys().collect();
    assert!(names.iter().any(|n| *n == "com.example.stable.v1.CronTab"), "{names:?}");
    for only_paths_use in ["DeleteOptions", "Status", "Patch"] {
        let name = format!("io.k8s.apimachinery.pkg.apis.meta.v1.{only_paths_use}");
        assert!(!names.contains(&&name), "{name} in {names:?}");
    }

    // kubectl explain finds the kind in v2 (from the cluster's merged document) and in v3.
    let admin = explains_crontab_replicas(&plane, &server);
    let out = kubectl_with(
        &admin,
        server.dir.path(),
        &["explain", "--output", "plaintext-openapiv2", "crontab.spec.replicas"],
        None,
    );
    let explained = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && explained.contains("FIELD:    replicas <integer>"),
        "{explained}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A definition of 1.7 MB (as Crossplane's firehose `deliverystreams` is) among others: served,
/// its group version's slice downloaded and merged beside the others', explained and written,
/// with `--openapi-v2=definitions` as with `full`.
#[test]
fn a_definition_of_1_7_mb_is_served_and_documented_beside_the_others() {
    let fields: serde_json::Map<String, serde_json::Value> = (0..1500)
        .map(|i| {
            let description =
                format!("Field {i} of the stream's destination. {}", "Words that describe it. ".repeat(46));
            (format!("field{i:04}"), serde_json::json!({"type": "string", "description": description}))
        })
        .collect();
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "deliverystreams.big.example.com"},
        "spec": {"group": "big.example.com", "scope": "Namespaced",
            "names": {"plural": "deliverystreams", "singular": "deliverystream", "kind": "DeliveryStream", "listKind": "DeliveryStreamList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": fields}}}}}]}
    })
    .to_string();
    assert!(crd.len() > 1_700_000, "{} bytes", crd.len());
    for mode in ["--openapi-v2=full", "--openapi-v2=definitions"] {
        let plane = ControlPlane::start();
        let server = TestServer::start_delegated(&[CRONTAB_CRD, &crd], &plane.server_kubeconfig(), &[mode]);
        plane.register_backend(server.port, &server.pki.serving_ca());
        plane.register_via("stable.example.com", "v1", &slice_service("stable.example.com"));
        plane.register_via(
            "big.example.com",
            "v1",
            &format!("crd-apiserver-{}", version_suffix("big.example.com", "v1")),
        );
        let (status, _, merged) = plane.openapi_v2(None);
        assert_eq!(status, 200, "{mode}");
        let merged = merged.unwrap();
        let big = &merged["definitions"]["com.example.big.v1.DeliveryStream"];
        assert_eq!(big["properties"]["spec"]["properties"].as_object().map(|p| p.len()), Some(1500), "{mode}");
        assert!(merged["definitions"]["com.example.stable.v1.CronTab"].is_object(), "{mode}");
        let downloads = plane.openapi_v2_downloads();
        let big_download = downloads.iter().find(|d| d.api_service == "v1.big.example.com").unwrap();
        assert!(big_download.status == 200 && big_download.bytes > 1_700_000, "{mode}: {big_download:?}");

        let admin = explains_crontab_replicas(&plane, &server);
        let out = kubectl_with(&admin, server.dir.path(), &["explain", "deliverystream.spec.field1499"], None);
        let explained = String::from_utf8_lossy(&out.stdout);
        assert!(explained.contains("FIELD: field1499 <string>"), "{mode}: {explained}");
        let object = "apiVersion: big.example.com/v1\nkind: DeliveryStream\nmetadata:\n  name: s1\n  namespace: default\nspec:\n  field0007: seven\n";
        let out = kubectl_with(&admin, server.dir.path(), &["create", "-f", "-"], Some(object));
        assert!(out.status.success(), "{mode}: {}", String::from_utf8_lossy(&out.stderr));
        let out = kubectl_with(
            &admin,
            server.dir.path(),
            &["get", "deliverystreams", "s1", "-n", "default", "-o", "jsonpath={.spec.field0007}"],
            None,
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "seven", "{mode}");
    }
}
