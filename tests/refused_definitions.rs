//! A definition file that a running server refuses is refused after a restart too, and by
//! `crd-apiserver migrate-storage` (issue 30 §1): the store keeps the last accepted definition,
//! a start checks the files as updates of it, the last accepted one goes on being served, the
//! refusal is reported (log, metrics, `serveddefinitions`), and no object is touched. On sled
//! and on a real etcd, driven with real kubectl.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::etcd::TestEtcd;
use support::http::Client;
use support::{TestServer, printed, stdout};

/// `widgets` with one version, the storage version, whose schema has `spec.<field>`.
fn widgets(version: &str, field: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {{plural: widgets, kind: Widget}}
  versions:
  - name: {version}
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              {field}: {{type: string}}
"
    )
}

const W1: &str = "/apis/stable.example.com/v1beta1/namespaces/default/widgets/w1";
const V1_WIDGETS: &str = "/apis/stable.example.com/v1/namespaces/default/widgets";
const STATUS: &str = "/apis/crd-apiserver.io/v1alpha1/serveddefinitions/widgets.stable.example.com";
const REFUSAL: &str = "status.storedVersions[0]: Invalid value: \\\"v1beta1\\\": missing from spec.versions; \
                       v1beta1 was previously a storage version";

/// Waits for `probe` (a condition, polled; the bound only guards against a hang).
fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Replaces the definition file at once (written beside it, renamed over it).
fn replace_definition(server: &TestServer, text: &str) {
    let path = server.definitions_dir().join("00.yaml");
    let staged = path.with_extension("staged");
    std::fs::write(&staged, text).unwrap();
    std::fs::rename(&staged, &path).unwrap();
}

/// The server serving only `v1beta1`, with `w1` holding `spec.foo: keep-me`.
fn serving_w1(extra: &[&str]) -> TestServer {
    let mut server = TestServer::prepare(&[&widgets("v1beta1", "foo")], None);
    server.spawn(extra);
    let object = "apiVersion: stable.example.com/v1beta1\nkind: Widget\nmetadata: {name: w1, namespace: default}\n\
                  spec: {foo: keep-me}\n";
    let out = server.kubectl_stdin(&["apply", "-f", "-"], object);
    assert!(out.status.success(), "{}", printed(&out));
    server
}

/// `w1` is intact and served in v1beta1, v1 is not served, and the definition's status says
/// why, once the lifecycle controller looked at it (its migration pass is done).
fn assert_w1_intact_and_refusal_reported(server: &TestServer) {
    let client = Client::admin(server);
    let status = eventually("the definition's status with its refusal and a finished pass", || {
        let status = client.get(STATUS).ok().filter(|r| r.status == 200)?.json()["status"].clone();
        let done = status["migration"]["state"] == "Done";
        (done && status["lastReloadError"].is_string()).then_some(status)
    });
    let error = status["lastReloadError"].as_str().unwrap();
    assert!(error.contains(&REFUSAL.replace("\\\"", "\"")), "{error}");
    assert_eq!(status["storedVersions"], serde_json::json!(["v1beta1"]), "{status}");
    assert_eq!(status["objectsPerVersion"], serde_json::json!({"v1beta1": 1}), "{status}");
    let w1 = server.kubectl_ok(&["get", "widgets.v1beta1.stable.example.com", "w1", "-n", "default", "-o", "json"]);
    let w1: Value = serde_json::from_str(&w1).unwrap();
    assert_eq!(
        (w1["apiVersion"].as_str(), w1["spec"]["foo"].as_str()),
        (Some("stable.example.com/v1beta1"), Some("keep-me"))
    );
    assert_eq!(client.get(W1).unwrap().status, 200);
    assert_eq!(client.get(V1_WIDGETS).unwrap().status, 404);
    let metrics = client.get("/metrics").unwrap().text();
    let errors = metrics.lines().find(|l| l.starts_with("crd_apiserver_definition_load_errors_total ")).unwrap();
    assert_ne!(errors, "crd_apiserver_definition_load_errors_total 0", "{metrics}");
}

/// The reproduction of issue 30 §1: the file that the running server refused, then a SIGTERM
/// and a start with the same files.
fn a_refused_file_stays_refused_across_a_restart(extra: &[&str]) {
    let mut server = serving_w1(extra);
    replace_definition(&server, &widgets("v1", "bar"));
    eventually("the running server's refusal", || server.log().contains(REFUSAL).then_some(()));
    assert_w1_intact_and_refusal_reported(&server);
    server.stop();
    let before = server.log().len();
    server.spawn(extra);
    let log = server.log();
    let started = &log[before..];
    assert!(started.contains(REFUSAL), "{started}");
    assert!(started.contains("the definition goes on being served as it was"), "{started}");
    assert_w1_intact_and_refusal_reported(&server);
    // Fixed, the file is served again as it says, with its object.
    replace_definition(&server, &widgets("v1beta1", "foo"));
    let client = Client::admin(&server);
    eventually("the error gone", || {
        let status = client.get(STATUS).ok()?.json()["status"].clone();
        status.get("lastReloadError").is_none().then_some(())
    });
    assert_eq!(client.get(W1).unwrap().json()["spec"]["foo"], "keep-me");
}

#[test]
fn a_refused_file_stays_refused_across_a_restart_on_sled() {
    a_refused_file_stays_refused_across_a_restart(&[]);
}

#[test]
fn a_refused_file_stays_refused_across_a_restart_on_etcd() {
    let etcd = TestEtcd::start();
    let servers = format!("--etcd-servers={}", etcd.endpoint());
    a_refused_file_stays_refused_across_a_restart(&["--storage-backend=etcd3", &servers]);
}

#[test]
fn migrate_storage_refuses_what_the_server_would_refuse() {
    let mut server = serving_w1(&[]);
    server.stop();
    replace_definition(&server, &widgets("v1", "bar"));
    let out = std::process::Command::new(support::binary())
        .args(["migrate-storage", "--storage", server.data_dir().to_str().unwrap()])
        .args(["--definitions", server.definitions_dir().to_str().unwrap()])
        .output()
        .unwrap();
    let text = printed(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(&REFUSAL.replace("\\\"", "\"")), "{text}");
    assert!(stdout(&out).contains("widgets.stable.example.com: not migrated: its definition was refused"), "{text}");
    assert!(!text.contains("objects migrated"), "{text}");
    server.spawn(&[]);
    assert_w1_intact_and_refusal_reported(&server);
}

#[test]
fn a_definition_added_back_is_checked_against_its_last_accepted_form() {
    let server = serving_w1(&[]);
    let file = server.definitions_dir().join("00.yaml");
    std::fs::remove_file(&file).unwrap();
    let client = Client::admin(&server);
    eventually("widgets no longer served", || (client.get(W1).unwrap().status == 404).then_some(()));
    // Its objects stayed: a form that would drop the version they are stored in is refused.
    replace_definition(&server, &widgets("v1", "bar"));
    eventually("the refusal", || server.log().contains(REFUSAL).then_some(()));
    assert_eq!(client.get(V1_WIDGETS).unwrap().status, 404);
    assert_eq!(client.get(W1).unwrap().status, 404);
    replace_definition(&server, &widgets("v1beta1", "foo"));
    eventually("widgets served again", || (client.get(W1).unwrap().status == 200).then_some(()));
    assert_eq!(client.get(W1).unwrap().json()["spec"]["foo"], "keep-me");
}
