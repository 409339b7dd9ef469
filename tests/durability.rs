//! Acknowledged writes survive restarts and `kill -9`; revisions keep increasing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use support::http::Client;
use support::{CRONTAB_CRD, TestServer};

const COLLECTION: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn crontab(name: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name}, "spec": {"image": name}})
}

fn versions(client: &Client) -> Vec<(String, u64)> {
    let list = client.get(COLLECTION).unwrap().json();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_string(),
                o["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn restart_keeps_objects_and_resource_versions() {
    let mut server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    for i in 0..20 {
        assert_eq!(client.send_json("POST", COLLECTION, &crontab(&format!("c{i:02}"))).status, 201);
    }
    let deleted = client.request("DELETE", &format!("{COLLECTION}/c05"), None, None).unwrap();
    assert_eq!(deleted.status, 200);
    let before = versions(&client);
    let list_rv: u64 =
        client.get(COLLECTION).unwrap().json()["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    server.stop();
    server.spawn(&[]);
    let client = Client::admin(&server);
    assert_eq!(versions(&client), before);
    let created = client.send_json("POST", COLLECTION, &crontab("after"));
    let new_rv: u64 = created.json()["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert!(new_rv > list_rv, "new writes get higher revisions: {new_rv} > {list_rv}");
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    let mut server = TestServer::start(&[CRONTAB_CRD]);
    let mut acknowledged: Vec<String> = Vec::new();
    for round in 0..3 {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..6)
            .map(|w| {
                let client = Client::admin(&server);
                let acked = acked.clone();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let name = format!("r{round}-w{w}-{i}");
                        i += 1;
                        match client.send(
                            "POST",
                            COLLECTION,
                            "application/json",
                            serde_json::to_vec(&crontab(&name)).unwrap(),
                        ) {
                            Ok(r) if r.status == 201 => acked.lock().unwrap().push(name),
                            Ok(_) | Err(_) => {}
                        }
                    }
                })
            })
            .collect();
        // Killed once writes are being acknowledged (some are then in flight).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while acked.lock().unwrap().len() < 50 {
            assert!(std::time::Instant::now() < deadline, "no write was acknowledged: {}", server.log());
            std::thread::sleep(Duration::from_millis(10));
        }
        server.kill();
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        acknowledged.extend(acked.lock().unwrap().drain(..));
        assert!(!acknowledged.is_empty());
        server.spawn(&[]);
        let client = Client::admin(&server);
        let present: std::collections::HashSet<String> = versions(&client).into_iter().map(|(n, _)| n).collect();
        let lost: Vec<&String> = acknowledged.iter().filter(|n| !present.contains(*n)).collect();
        assert!(lost.is_empty(), "round {round}: {} acknowledged writes lost, e.g. {:?}", lost.len(), lost.first());
    }
}

#[test]
fn a_second_server_on_the_same_store_is_refused_in_plain_words() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let pid = std::fs::read_to_string(server.data_dir().join("crd-apiserver.pid")).unwrap();
    let out = std::process::Command::new(support::binary())
        .current_dir(server.dir.path())
        .args(["serve", "--bind-address", "127.0.0.1", "--dev", "--cert-dir", server.pki.dir.to_str().unwrap()])
        .args(["--secure-port", &support::free_port().to_string()])
        .args(["--storage", server.data_dir().to_str().unwrap()])
        .args(["--definitions", server.definitions_dir().to_str().unwrap()])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Logged as component-base's runner logs a failed command once logging runs.
    let expected = format!(
        "] \"command failed\" err=\"storage: storage failure: the store at {} is in use by another crd-apiserver (pid {})\"",
        server.data_dir().display(),
        pid.trim()
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("in use")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with('E') && lines[0].ends_with(&expected), "{stderr}");
    // Logs written to a pipe carry no colour codes.
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    // The first server is unharmed.
    assert_eq!(Client::admin(&server).get(COLLECTION).unwrap().status, 200);
}

/// A newcomer whose singular (`crontab`) clashes with the seed's, in a file that sorts first.
const CLASHING_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: cronjobs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: cronjobs, singular: crontab, kind: CronJob}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

#[test]
fn a_definition_served_first_keeps_its_names_across_restarts() {
    let mut server = TestServer::prepare(&[], None);
    std::fs::write(server.definitions_dir().join("50-crontabs.yaml"), CRONTAB_CRD).unwrap();
    server.spawn(&[]);
    let client = Client::admin(&server);
    assert_eq!(client.send_json("POST", COLLECTION, &crontab("kept")).status, 201);
    server.stop();

    // The newcomer sorts first, yet the definition served before keeps its names.
    std::fs::write(server.definitions_dir().join("00-cronjobs.yaml"), CLASHING_CRD).unwrap();
    server.spawn(&[]);
    assert_eq!(client.get(&format!("{COLLECTION}/kept")).unwrap().status, 200);
    assert_eq!(client.get("/apis/stable.example.com/v1/namespaces/default/cronjobs").unwrap().status, 404);
    assert!(server.log().contains("names not accepted: \\\"crontab\\\" is already in use"), "{}", server.log());
    server.stop();

    // Once the older definition is gone, its names are free for the newcomer.
    std::fs::remove_file(server.definitions_dir().join("50-crontabs.yaml")).unwrap();
    server.spawn(&[]);
    assert_eq!(client.get("/apis/stable.example.com/v1/namespaces/default/cronjobs").unwrap().status, 200);
}
