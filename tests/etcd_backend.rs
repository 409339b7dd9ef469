//! The server on the etcd backend (`--storage-backend=etcd3`), against a real etcd: objects'
//! resourceVersions are etcd revisions; `/readyz` follows etcd's reachability and requests
//! fail in time during an outage; a server started while etcd is down waits for it; a value
//! over etcd's request limit and a compaction under a paginated list answer as
//! kube-apiserver does; two replicas on one etcd see each other's writes; a selected watch
//! reports an object leaving its selection with its previous content; a watcher that stops
//! reading is closed while a reading one sees every change.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use support::etcd::TestEtcd;
use support::http::Client;
use support::{CRONTAB_CRD, SHIRT_CRD, TestServer};

const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn etcd_flags(etcd: &TestEtcd, extra: &[&str]) -> Vec<String> {
    let mut flags = vec!["--storage-backend=etcd3".to_string(), format!("--etcd-servers={}", etcd.endpoint())];
    flags.extend(extra.iter().map(|s| s.to_string()));
    flags
}

fn start_on(etcd: &TestEtcd, extra: &[&str]) -> TestServer {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], None);
    let flags = etcd_flags(etcd, extra);
    server.spawn(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    server
}

fn crontab(name: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name},
           "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image"}})
}

/// The mod_revision etcd holds for `key`, read through etcd's own JSON gateway.
fn etcd_mod_revision(etcd: &TestEtcd, key: &str) -> Option<u64> {
    let body = json!({"key": base64::engine::general_purpose::STANDARD.encode(key)}).to_string();
    let address = etcd.endpoint().trim_start_matches("http://").to_string();
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    write!(
        stream,
        "POST /v3/kv/range HTTP/1.0\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let json: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    json["kvs"][0]["mod_revision"].as_str().map(|r| r.parse().unwrap())
}

fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn objects_live_in_etcd_and_an_outage_fails_requests_in_time() {
    let mut etcd = TestEtcd::start();
    let server = start_on(&etcd, &["--request-timeout=8s"]);
    let admin = Client::admin(&server);
    let anonymous = Client::new(&server, None);
    let ready = anonymous.get("/readyz?verbose").unwrap();
    assert_eq!(ready.status, 200);
    assert!(ready.text().contains("[+]etcd ok"), "{}", ready.text());

    let created = admin.send_json("POST", CRONTABS, &crontab("a"));
    assert_eq!(created.status, 201, "{}", created.text());
    let rv: u64 = created.json()["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let key = "/crd-apiserver/stable.example.com/crontabs/default/a";
    assert_eq!(etcd_mod_revision(&etcd, key), Some(rv), "resourceVersion is etcd's revision");
    let listed = admin.get(CRONTABS).unwrap().json();
    assert!(listed["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap() >= rv);

    etcd.kill();
    wait_until("/readyz to fail", Duration::from_secs(60), || {
        let r = anonymous.get("/readyz?verbose").unwrap();
        r.status == 500 && r.text().contains("[-]etcd failed")
    });
    let began = Instant::now();
    let refused = admin.send_json("POST", CRONTABS, &crontab("during"));
    assert!(refused.status >= 500, "{} {}", refused.status, refused.text());
    assert_eq!(refused.json()["kind"], "Status");
    assert!(began.elapsed() < Duration::from_secs(9), "answered after {:?}", began.elapsed());

    etcd.resume();
    wait_until("/readyz to recover", Duration::from_secs(15), || anonymous.get("/readyz").unwrap().status == 200);
    assert_eq!(admin.get(&format!("{CRONTABS}/during")).unwrap().status, 404, "nothing half-written");
    assert_eq!(admin.get(&format!("{CRONTABS}/a")).unwrap().status, 200);
    assert_eq!(admin.send_json("POST", CRONTABS, &crontab("after")).status, 201);
}

#[test]
fn a_server_started_while_etcd_is_down_waits_for_it() {
    let mut etcd = TestEtcd::start();
    etcd.kill();
    let mut server = TestServer::prepare(&[CRONTAB_CRD], None);
    let flags = etcd_flags(&etcd, &[]);
    server.launch(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    wait_until("the retry to be logged", Duration::from_secs(60), || {
        server.log().contains("etcd is unreachable; retrying")
    });
    let anonymous = Client::new(&server, None);
    assert!(anonymous.get("/readyz").map(|r| r.status != 200).unwrap_or(true), "ready without etcd");
    etcd.resume();
    wait_until("/readyz", Duration::from_secs(20), || anonymous.get("/readyz").is_ok_and(|r| r.status == 200));
}

#[test]
fn a_value_over_etcds_limit_and_a_compaction_under_a_paginated_list() {
    let etcd = TestEtcd::start_with(&["--max-request-bytes", "65536"]);
    let server = start_on(&etcd, &["--etcd-compaction-interval=1s"]);
    let admin = Client::admin(&server);

    let mut large = crontab("large");
    large["spec"]["image"] = json!("x".repeat(100_000));
    let refused = admin.send_json("POST", CRONTABS, &large);
    assert_eq!(refused.status, 500, "{}", refused.text());
    assert_eq!(refused.json()["message"], "etcdserver: request is too large");
    assert_eq!(admin.get(&format!("{CRONTABS}/large")).unwrap().status, 404);

    for name in ["p1", "p2", "p3"] {
        assert_eq!(admin.send_json("POST", CRONTABS, &crontab(name)).status, 201);
    }
    let first = admin.get(&format!("{CRONTABS}?limit=1")).unwrap().json();
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    // Later writes move etcd on; the compactor then removes the page's revision.
    assert_eq!(admin.send_json("POST", CRONTABS, &crontab("p4")).status, 201);
    let mut answer = None;
    wait_until("the continue token to expire", Duration::from_secs(15), || {
        let r = admin.get(&format!("{CRONTABS}?limit=1&continue={token}")).unwrap();
        let expired = r.status == 410;
        answer = Some(r);
        expired
    });
    let status = answer.unwrap().json();
    assert_eq!(status["reason"], "Expired");
    assert!(status["message"].as_str().unwrap().starts_with("The provided continue parameter is too old"), "{status}");
}

#[test]
fn two_replicas_on_one_etcd_see_each_others_writes() {
    let etcd = TestEtcd::start();
    let a = start_on(&etcd, &[]);
    let b = start_on(&etcd, &[]);
    let (on_a, on_b) = (Client::admin(&a), Client::admin(&b));
    let before = on_b.get(CRONTABS).unwrap().json()["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let created = on_a.send_json("POST", CRONTABS, &crontab("shared"));
    assert_eq!(created.status, 201);
    let rv = created.json()["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    // A watch on the other replica from before the write replays it with the same version.
    let watched = on_b.get(&format!("{CRONTABS}?watch=1&resourceVersion={before}&timeoutSeconds=2")).unwrap();
    let first: Value = serde_json::from_str(watched.text().lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["metadata"]["resourceVersion"], rv.as_str());
    // Optimistic concurrency holds across replicas.
    let mut stale = created.json();
    stale["spec"]["image"] = json!("b");
    assert_eq!(on_b.send_json("PUT", &format!("{CRONTABS}/shared"), &stale).status, 200);
    stale["spec"]["image"] = json!("a");
    assert_eq!(on_a.send_json("PUT", &format!("{CRONTABS}/shared"), &stale).status, 409);
}

#[test]
fn a_selected_watch_sees_objects_leave_with_their_previous_content() {
    let etcd = TestEtcd::start();
    let mut server = TestServer::prepare(&[CRONTAB_CRD, SHIRT_CRD], None);
    let flags = etcd_flags(&etcd, &[]);
    server.spawn(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    support::watches::check_objects_leaving_a_selection(&Client::admin(&server));
}

#[test]
fn a_watcher_that_stops_reading_is_closed_and_slows_no_one() {
    let etcd = TestEtcd::start();
    let server = start_on(&etcd, &[]);
    support::watches::check_a_watcher_that_stops_reading_is_closed(&server, 6000);
}

#[test]
fn etcd_over_tls_with_client_certificates_and_wrong_credentials_refused_at_start() {
    use crd_apiserver::cli::pki::{Authority, Leaf};
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let ca = Authority::new("etcd-ca").unwrap();
    let localhost = Leaf { ips: vec!["127.0.0.1".parse().unwrap()], server: true, client: true, ..Leaf::default() };
    let serving = ca.issue(&Leaf { common_name: "etcd".into(), ..localhost.clone() }).unwrap();
    let client = ca.issue(&Leaf { common_name: "crd-apiserver".into(), client: true, ..Leaf::default() }).unwrap();
    let stranger = Authority::new("another-ca")
        .unwrap()
        .issue(&Leaf { common_name: "crd-apiserver".into(), client: true, ..Leaf::default() })
        .unwrap();
    let ca_file = write("ca.crt", &ca.pem.cert);
    let etcd = TestEtcd::start_tls(&support::etcd::EtcdTls {
        ca: &ca_file,
        cert: &write("etcd.crt", &serving.cert),
        key: &write("etcd.key", &serving.key),
    });
    let tls_flags = |cert: &str, key: &str| {
        vec![
            format!("--etcd-cafile={}", ca_file.display()),
            format!(
                "--etcd-certfile={}",
                write(cert, if cert == "good.crt" { &client.cert } else { &stranger.cert }).display()
            ),
            format!(
                "--etcd-keyfile={}",
                write(key, if key == "good.key" { &client.key } else { &stranger.key }).display()
            ),
        ]
    };
    let good = tls_flags("good.crt", "good.key");
    let server = start_on(&etcd, &good.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(Client::admin(&server).send_json("POST", CRONTABS, &crontab("tls")).status, 201);

    let wrong = tls_flags("wrong.crt", "wrong.key");
    let mut refused = TestServer::prepare(&[CRONTAB_CRD], None);
    let mut flags = etcd_flags(&etcd, &[]);
    flags.extend(wrong);
    refused.launch(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    // etcd's refusal reaches the client as a TLS alert (the start fails) or, with TLS 1.3, as
    // a connection closed after the handshake (the start waits, saying what it likely means).
    wait_until("the refusal to be logged", Duration::from_secs(60), || {
        let log = refused.log();
        log.contains("refused this server's credentials") || log.contains("it may refuse this client certificate")
    });
    let anonymous = Client::new(&refused, None);
    assert!(anonymous.get("/readyz").map(|r| r.status != 200).unwrap_or(true), "ready without etcd");
    assert!(refused.log().contains("--etcd-certfile"));
}

#[test]
fn reads_on_one_replica_show_what_another_acknowledged_with_kubernetes_resource_version_rules() {
    let etcd = TestEtcd::start();
    let a = start_on(&etcd, &[]);
    let b = start_on(&etcd, &[]);
    let direct = start_on(&etcd, &["--watch-cache=false"]);
    let (on_a, on_b, on_direct) = (Client::admin(&a), Client::admin(&b), Client::admin(&direct));
    // The first read of the resource makes b cache it; later reads are answered by its cache.
    assert_eq!(on_b.get(CRONTABS).unwrap().status, 200);
    for i in 0..30 {
        let name = format!("ryw-{i}");
        let created = on_a.send_json("POST", CRONTABS, &crontab(&name));
        assert_eq!(created.status, 201);
        let rv = created.json()["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        for (server, client) in [("b", &on_b), ("direct", &on_direct)] {
            // resourceVersion unset: consistent, so the write acknowledged by a is there.
            let got = client.get(&format!("{CRONTABS}/{name}")).unwrap();
            assert_eq!(got.status, 200, "{server}, write {i}: {}", got.text());
            assert_eq!(got.json()["metadata"]["resourceVersion"], rv.as_str(), "{server}, write {i}");
            let list = client.get(CRONTABS).unwrap().json();
            let list_rv: u64 = list["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
            assert!(list_rv >= rv.parse().unwrap(), "{server}, write {i}");
            assert!(list["items"].as_array().unwrap().iter().any(|o| o["metadata"]["name"] == name.as_str()));
            // resourceVersion="N": not older than N.
            let at_least = client.get(&format!("{CRONTABS}/{name}?resourceVersion={rv}")).unwrap();
            assert_eq!(at_least.status, 200, "{server}, write {i}");
        }
    }
    // resourceVersion="0": any state the cache holds; the object is there by now.
    let any = on_b.get(&format!("{CRONTABS}/ryw-0?resourceVersion=0")).unwrap();
    assert_eq!(any.status, 200);
    // A revision no replica has reached: Kubernetes' "Too large resource version" after a wait.
    let began = Instant::now();
    let future = on_b.get(&format!("{CRONTABS}/ryw-0?resourceVersion=99999999")).unwrap();
    assert_eq!(future.status, 504, "{}", future.text());
    assert_eq!(future.json()["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
    assert!(began.elapsed() >= Duration::from_secs(2), "answered after {:?}", began.elapsed());
    // Pages of a list at one revision, across replicas, while a writes on.
    let first = on_b.get(&format!("{CRONTABS}?limit=7")).unwrap().json();
    let list_rv = first["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut names: Vec<String> =
        first["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap().into()).collect();
    let mut token = first["metadata"]["continue"].as_str().filter(|t| !t.is_empty()).map(str::to_string);
    let mut n = 0;
    while let Some(next) = token {
        n += 1;
        assert_eq!(on_a.send_json("POST", CRONTABS, &crontab(&format!("later-{n}"))).status, 201);
        let reader = if n % 2 == 0 { &on_b } else { &on_direct };
        let page = reader.get(&format!("{CRONTABS}?limit=7&continue={next}")).unwrap().json();
        assert_eq!(page["metadata"]["resourceVersion"], list_rv.as_str(), "page {n}: {page}");
        names.extend(page["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap().into()));
        token = page["metadata"]["continue"].as_str().filter(|t| !t.is_empty()).map(str::to_string);
    }
    let mut expected: Vec<String> = (0..30).map(|i| format!("ryw-{i}")).collect();
    expected.sort();
    assert_eq!(names, expected, "the pages hold the list at its revision, none of the later writes");
}
