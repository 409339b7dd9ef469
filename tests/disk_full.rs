//! A full disk under the store: writes fail with 507 and change nothing, `/readyz` fails its
//! storage check while reads go on, and once space returns the server takes writes again by
//! itself, without reusing the failed write's revision or keeping it anywhere.
//!
//! The store lives on a small tmpfs mounted in a mount namespace of the server's own
//! (`unshare -m`), so the test fills a real file system without touching the machine's; the
//! test reaches that file system through `/proc/<pid>/root`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::http::Client;
use support::{CRONTAB_CRD, TestServer};

const COLLECTION: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn crontab(name: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name}, "spec": {"image": name}})
}

fn revision(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

/// Fills the file system holding `path` until a write fails for want of space.
fn fill(path: &PathBuf) {
    let mut file = std::fs::File::create(path).unwrap();
    for chunk in [1 << 20, 64 << 10, 4 << 10, 512] {
        let block = vec![0u8; chunk];
        loop {
            match file.write_all(&block) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(28) => break,
                Err(e) => panic!("filling the store's file system: {e}"),
            }
        }
    }
    let _ = file.sync_all();
}

fn names(client: &Client) -> Vec<String> {
    let list = client.get(COLLECTION).unwrap();
    assert_eq!(list.status, 200, "{}", list.text());
    list.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_full_disk_refuses_writes_and_the_store_recovers_when_space_returns() {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], None);
    let data = server.data_dir();
    std::fs::create_dir_all(&data).unwrap();
    server.launcher = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        r#"mount -t tmpfs -o size=32m tmpfs "$0" && exec "$@""#,
        data.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    server.spawn(&[]);
    let client = Client::admin(&server);
    let filler = PathBuf::from(format!("/proc/{}/root{}/filler", server.pid(), data.display()));

    let mut acknowledged = Vec::new();
    for i in 0..5 {
        let created = client.send_json("POST", COLLECTION, &crontab(&format!("before-{i}")));
        assert_eq!(created.status, 201, "{}", created.text());
        acknowledged.push(revision(&created.json()));
    }
    let last_good = *acknowledged.last().unwrap();
    fill(&filler);

    // sled buffers a little: the disk shows full at the latest by the time its buffer must
    // reach a file. Every write before that is acknowledged and kept.
    let mut kept = names(&client);
    let mut refused = None;
    for i in 0..200 {
        let name = format!("during-{i}");
        let created = client.send_json("POST", COLLECTION, &crontab(&name));
        match created.status {
            201 => kept.push(name),
            507 => {
                refused = Some((name, created.json()));
                break;
            }
            other => panic!("a write to a full disk answered {other}: {}", created.text()),
        }
    }
    let (refused, status) = refused.expect("no write was refused on a full disk");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "InsufficientStorage");
    assert_eq!(status["code"], 507);
    let message = status["message"].as_str().unwrap();
    assert_eq!(
        message,
        "the store's disk is full (No space left on device (os error 28)); writes resume by themselves once space is freed"
    );

    // Later writes fail at once with the same answer; reads go on and show only what was
    // acknowledged; the storage check fails.
    let started = Instant::now();
    let again = client.send_json("POST", COLLECTION, &crontab("while-full"));
    assert_eq!(again.status, 507, "{}", again.text());
    assert!(started.elapsed() < Duration::from_secs(5));
    let update_target = client.get(&format!("{COLLECTION}/before-0")).unwrap();
    assert_eq!(update_target.status, 200);
    let mut changed = update_target.json();
    changed["spec"]["image"] = json!("changed-while-full");
    assert_eq!(client.send_json("PUT", &format!("{COLLECTION}/before-0"), &changed).status, 507);
    assert_eq!(client.get(&format!("{COLLECTION}/before-0")).unwrap().json()["spec"]["image"], "before-0");
    assert_eq!(client.get(&format!("{COLLECTION}/{refused}")).unwrap().status, 404);
    let mut listed = names(&client);
    listed.sort();
    kept.sort();
    assert_eq!(listed, kept);
    let readyz = client.get("/readyz?verbose").unwrap();
    assert_eq!(readyz.status, 500);
    assert!(readyz.text().contains("[-]sled failed: reason withheld"), "{}", readyz.text());
    // The check alone says why (a check by name needs authorization, as in Kubernetes).
    let sled = client.get("/readyz/sled").unwrap();
    assert_eq!(sled.status, 500);
    assert!(sled.text().starts_with("internal server error: the store's disk is full"), "{}", sled.text());
    assert_eq!(client.get("/livez").unwrap().status, 200);

    // Space returns: the server takes writes again by itself.
    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.get("/readyz").unwrap().status != 200 {
        assert!(Instant::now() < deadline, "the store did not recover: {}", server.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let created = client.send_json("POST", COLLECTION, &crontab("after"));
    assert_eq!(created.status, 201, "{}", created.text());
    let after = revision(&created.json());
    // The refused write had taken the revision after the last acknowledged one.
    let last_acknowledged =
        kept.iter().map(|n| revision(&client.get(&format!("{COLLECTION}/{n}")).unwrap().json())).max();
    assert!(after > last_acknowledged.unwrap() + 1, "revision {after} reused after {last_acknowledged:?}");
    assert_eq!(client.get(&format!("{COLLECTION}/{refused}")).unwrap().status, 404);
    assert_eq!(client.get(&format!("{COLLECTION}/before-0")).unwrap().json()["spec"]["image"], "before-0");

    // The watch history since the fault holds what was acknowledged, and nothing refused.
    let watch = client.get(&format!("{COLLECTION}?watch=1&resourceVersion={last_good}&timeoutSeconds=2")).unwrap();
    assert_eq!(watch.status, 200);
    let events: Vec<Value> =
        watch.text().lines().filter(|l| !l.is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    let watched: Vec<&str> = events.iter().map(|e| e["object"]["metadata"]["name"].as_str().unwrap()).collect();
    let mut expected: Vec<&str> = kept.iter().filter(|n| n.starts_with("during-")).map(String::as_str).collect();
    expected.push("after");
    assert_eq!(watched, expected);
    assert!(events.iter().all(|e| e["type"] == "ADDED"));
    server.stop();
}
