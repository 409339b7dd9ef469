//! Backup and restore across backends with a real etcd: a backup read from etcd directly (at
//! one revision, while the server on it runs) restored into sled; a sled server's online
//! backup restored into etcd, where resourceVersions go on above the backup's (etcd's own
//! revision cannot be set: the store keeps an offset) and old ones are 410 Expired; a
//! non-empty etcd prefix refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};
use support::etcd::TestEtcd;
use support::http::Client;
use support::{CRONTAB_CRD, TestServer, printed, run_binary};

const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn crontab(name: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name},
           "spec": {"cronSpec": "* * * * */5", "image": format!("image-of-{name}")}})
}

fn rv(value: &Value) -> u64 {
    value["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

/// Every CronTab by name, without its resourceVersion.
fn objects(client: &Client) -> BTreeMap<String, Value> {
    let list = client.get(CRONTABS).unwrap().json();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let mut o = o.clone();
            o["metadata"].as_object_mut().unwrap().remove("resourceVersion");
            (o["metadata"]["name"].as_str().unwrap().to_string(), o)
        })
        .collect()
}

fn on_etcd(etcd: &TestEtcd) -> Vec<String> {
    vec!["--storage-backend=etcd3".to_string(), format!("--etcd-servers={}", etcd.endpoint())]
}

fn header(file: &Path) -> Value {
    serde_json::from_str(std::fs::read_to_string(file).unwrap().lines().next().unwrap()).unwrap()
}

fn fill(client: &Client, prefix: &str, count: usize) {
    for i in 0..count {
        let created = client.send_json("POST", CRONTABS, &crontab(&format!("{prefix}{i}")));
        assert_eq!(created.status, 201, "{}", created.text());
    }
}

#[test]
fn etcd_to_sled() {
    let etcd = TestEtcd::start();
    let mut source = TestServer::prepare(&[CRONTAB_CRD], None);
    let flags = on_etcd(&etcd);
    source.spawn(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    let admin = Client::admin(&source);
    fill(&admin, "e", 40);
    let expected = objects(&admin);
    let list_rv = rv(&admin.get(CRONTABS).unwrap().json());
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("etcd.backup");
    // Read from etcd directly while the server on it runs.
    let mut args = vec!["backup".to_string(), "-o".into(), file.to_str().unwrap().into()];
    args.extend(flags.clone());
    let out = run_binary(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", printed(&out));
    let taken = header(&file);
    assert_eq!(taken["backend"], "etcd");
    assert!(taken["state"].as_array().unwrap().len() >= 2, "storedVersions and accepted names: {taken}");
    assert!(taken["revision"].as_u64().unwrap() >= list_rv);

    let mut target = TestServer::prepare(&[CRONTAB_CRD], None);
    let out = run_binary(&["restore", file.to_str().unwrap(), "--storage", target.data_dir().to_str().unwrap()]);
    assert!(out.status.success(), "{}", printed(&out));
    target.spawn(&[]);
    let client = Client::admin(&target);
    assert_eq!(objects(&client), expected);
    let created = client.send_json("POST", CRONTABS, &crontab("after"));
    assert!(rv(&created.json()) > list_rv + 1_000_000);
}

#[test]
fn sled_to_etcd() {
    let source = TestServer::start(&[CRONTAB_CRD]);
    let admin = Client::admin(&source);
    fill(&admin, "s", 40);
    // Enough writes that the backup's revision is far above a fresh etcd's.
    for i in 0..40 {
        let path = format!("{CRONTABS}/s{i}");
        let mut object = admin.get(&path).unwrap().json();
        object["spec"]["replicas"] = json!(i);
        assert_eq!(admin.send_json("PUT", &path, &object).status, 200);
    }
    let expected = objects(&admin);
    let old_rv = rv(&admin.get(CRONTABS).unwrap().json());
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("sled.backup");
    let pki = &source.pki;
    let out = run_binary(&[
        "backup",
        "--server",
        &format!("https://127.0.0.1:{}", source.port),
        "--certificate-authority",
        pki.serving_ca().to_str().unwrap(),
        "--client-certificate",
        pki.path("admin.crt").to_str().unwrap(),
        "--client-key",
        pki.path("admin.key").to_str().unwrap(),
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", printed(&out));
    let revision = header(&file)["revision"].as_u64().unwrap();

    let etcd = TestEtcd::start();
    let flags = on_etcd(&etcd);
    let restore = |extra: &[&str]| {
        let mut args = vec!["restore".to_string(), file.to_str().unwrap().into(), "--bump-revision=5000".into()];
        args.extend(flags.clone());
        args.extend(extra.iter().map(|s| s.to_string()));
        run_binary(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let out = restore(&[]);
    assert!(out.status.success(), "{}", printed(&out));
    let mut target = TestServer::prepare(&[CRONTAB_CRD], None);
    target.spawn(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    let client = Client::admin(&target);
    assert_eq!(objects(&client), expected);
    let list = client.get(CRONTABS).unwrap().json();
    assert!(rv(&list) > revision + 5000, "the list's resourceVersion {} is above the backup's", rv(&list));
    for item in list["items"].as_array().unwrap() {
        assert!(rv(item) > revision + 5000, "{item}");
    }
    // Clients holding older resourceVersions are told 410 and list again.
    let watch = client.get(&format!("{CRONTABS}?watch=1&resourceVersion={old_rv}&timeoutSeconds=2")).unwrap();
    let first: Value = serde_json::from_str(watch.text().lines().next().unwrap()).unwrap();
    assert_eq!((first["type"].as_str(), first["object"]["code"].as_u64()), (Some("ERROR"), Some(410)), "{first}");
    let exact = client.get(&format!("{CRONTABS}?resourceVersion={old_rv}&resourceVersionMatch=Exact")).unwrap();
    assert_eq!(exact.status, 410, "{}", exact.text());
    // Writes and watches go on in the new numbering.
    let from = rv(&list);
    let created = client.send_json("POST", CRONTABS, &crontab("after"));
    assert_eq!(created.status, 201, "{}", created.text());
    assert!(rv(&created.json()) > from);
    let watch = client.get(&format!("{CRONTABS}?watch=1&resourceVersion={from}&timeoutSeconds=2")).unwrap();
    let first: Value = serde_json::from_str(watch.text().lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ADDED", "{first}");
    assert_eq!(first["object"]["metadata"]["name"], "after");
    let mut changed = created.json();
    changed["spec"]["image"] = json!("changed");
    assert_eq!(client.send_json("PUT", &format!("{CRONTABS}/after"), &changed).status, 200);

    // The prefix now holds keys: refused without --replace, replaced with it.
    let refused = restore(&[]);
    assert!(!refused.status.success() && printed(&refused).contains("--replace"), "{}", printed(&refused));
    let newest = rv(&client.get(CRONTABS).unwrap().json());
    let mut target = target;
    target.stop();
    let out = restore(&["--replace"]);
    assert!(out.status.success(), "{}", printed(&out));
    target.spawn(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    let client = Client::admin(&target);
    assert_eq!(objects(&client), expected, "the object written after the first restore is gone");
    assert!(rv(&client.get(CRONTABS).unwrap().json()) > newest, "revisions never go back");
}
