//! Graceful termination as k8s.io/apiserver does it: `/readyz` fails first and everything else
//! is served during `--shutdown-delay-duration`; `--shutdown-send-retry-after` answers new
//! requests 429 while those in flight finish; and a rolling restart under load, through the
//! control-plane double, as a StatefulSet with one replica restarts it: the old server is sent
//! SIGTERM and stops; a new one starts on the same store (sled lets one process at a time open
//! it) and the aggregator is pointed at it.
//!
//! What one replica can honestly promise in a rolling restart, and what is checked here:
//! - crd-apiserver itself answers no request with a 5xx, before, during or after the restart
//!   (the double records every status the backend gave);
//! - during `--shutdown-delay-duration` the old server fails `/readyz` yet serves every
//!   request that still reaches it (the load balancer takes a moment to notice), and writes
//!   made then are acknowledged;
//! - requests in flight when it stops accepting finish (a create whose body is still being
//!   uploaded then is answered 201), and open watches end cleanly rather than being cut;
//! - every acknowledged write is readable after the restart, and no write was applied
//!   without being acknowledged (a retried create never meets its own earlier attempt).
//!
//! While no replica is ready, kube-aggregator itself answers 503 `service unavailable` (as the
//! double does here), and clients retry: that gap is what a single replica cannot avoid.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::http::Client;
use support::{CRONTAB_CRD, TestServer};

const COLLECTION: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";
const TOKEN: &str = "writer-token";
const DELAY: Duration = Duration::from_secs(3);
const FLAGS: [&str; 2] = ["--shutdown-delay-duration", "3s"];

fn crontab(name: &str) -> Value {
    json!({
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": name},
        "spec": {"cronSpec": "* * * * */5", "image": name}
    })
}

/// What the writers saw.
#[derive(Default)]
struct Record {
    /// Acknowledged creates: name and when the answer came.
    acknowledged: Vec<(String, Instant)>,
    /// When a create the aggregator answered 503 (no replica ready) was sent, and when the
    /// answer came.
    unavailable: Vec<(Instant, Instant)>,
    /// Anything else: status and body.
    unexpected: Vec<(u16, String)>,
}

/// Creates objects through the double without pause until `stop`, retrying a create the
/// aggregator could not deliver under the same name.
fn writer(port_client: Client, id: usize, stop: Arc<AtomicBool>, record: Arc<Mutex<Record>>) {
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        let name = format!("w{id}-{n}");
        loop {
            let sent = Instant::now();
            let answer =
                port_client.send("POST", COLLECTION, "application/json", serde_json::to_vec(&crontab(&name)).unwrap());
            let mut record = record.lock().unwrap();
            match answer {
                Ok(r) if r.status == 201 => {
                    record.acknowledged.push((name.clone(), Instant::now()));
                    break;
                }
                Ok(r) if r.status == 503 && r.text().starts_with("service unavailable") => {
                    record.unavailable.push((sent, Instant::now()));
                    drop(record);
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(r) => {
                    record.unexpected.push((r.status, r.text()));
                    break;
                }
                Err(e) => {
                    record.unexpected.push((0, e.to_string()));
                    break;
                }
            }
        }
        n += 1;
    }
}

/// A create sent in two parts by `client` (with `headers`, each ending in CRLF): headers and
/// half the body at once, the rest when `rest` fires. Returns the status and the answer's text.
fn slow_create(
    client: Client,
    name: &str,
    headers: &str,
    rest: tokio::sync::oneshot::Receiver<()>,
) -> std::thread::JoinHandle<(u16, String)> {
    let (sent, begun) = std::sync::mpsc::channel();
    let upload = slow_create_signalled(client, name, headers, rest, sent);
    // Once its headers and half its body are out, the request is the server's to finish.
    begun.recv_timeout(Duration::from_secs(60)).expect("the upload never began");
    upload
}

fn slow_create_signalled(
    client: Client,
    name: &str,
    headers: &str,
    rest: tokio::sync::oneshot::Receiver<()>,
    begun: std::sync::mpsc::Sender<()>,
) -> std::thread::JoinHandle<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = serde_json::to_vec(&crontab(name)).unwrap();
    let headers = headers.to_string();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let mut tls = client.connect_tls().await.unwrap();
            let head = format!(
                "POST {COLLECTION} HTTP/1.1\r\nHost: localhost\r\n{headers}\
                 Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let (first, second) = body.split_at(body.len() / 2);
            tls.write_all(head.as_bytes()).await.unwrap();
            tls.write_all(first).await.unwrap();
            tls.flush().await.unwrap();
            begun.send(()).unwrap();
            rest.await.unwrap();
            tls.write_all(second).await.unwrap();
            tls.flush().await.unwrap();
            let mut answer = Vec::new();
            let _ = tls.read_to_end(&mut answer).await;
            let text = String::from_utf8_lossy(&answer).into_owned();
            let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            (status, text)
        })
    })
}

/// Waits until nothing listens on `port` any more; returns when that was seen.
fn wait_not_listening(port: u16, limit: Duration) -> Instant {
    let deadline = Instant::now() + limit;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(Instant::now() < deadline, "the old server never stopped listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    Instant::now()
}

/// SIGTERM, as the kubelet sends it.
fn terminate(server: &TestServer) {
    let status = std::process::Command::new("kill").args(["-TERM", &server.pid().to_string()]).status().unwrap();
    assert!(status.success());
}

fn acknowledged_after(record: &Mutex<Record>, at: Instant) -> usize {
    record.lock().unwrap().acknowledged.iter().filter(|(_, t)| *t > at).count()
}

/// Status and text of a GET.
fn answer(client: &Client, path: &str) -> (u16, String) {
    let response = client.get(path).unwrap();
    (response.status, response.text())
}

fn wait_for(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn readyz_fails_during_the_shutdown_delay_while_everything_else_is_served() {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], None);
    server.spawn(&["--shutdown-delay-duration", "6s"]);
    let client = Client::admin(&server);
    let created = client.send_json("POST", COLLECTION, &crontab("before"));
    assert_eq!(created.status, 201, "{}", created.text());

    let signalled = Instant::now();
    terminate(&server);
    let failing = loop {
        let response = client.get("/readyz").unwrap();
        if response.status != 200 {
            break response;
        }
        assert!(signalled.elapsed() < Duration::from_secs(6), "/readyz never failed: {}", server.log());
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(failing.status, 500);
    assert_eq!(
        failing.text(),
        "[+]ping ok\n[+]log ok\n[+]sled ok\n[+]informer-sync ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n"
    );
    assert_eq!(
        answer(&client, "/readyz/shutdown"),
        (500, "internal server error: process is shutting down\n".to_string())
    );
    assert_eq!(answer(&client, "/readyz?exclude=shutdown"), (200, "ok".to_string()));
    assert_eq!(answer(&client, "/livez"), (200, "ok".to_string()));
    assert_eq!(answer(&client, "/healthz"), (200, "ok".to_string()));

    // Requests are still served as usual: reads, writes, new connections.
    let during = client.send_json("POST", COLLECTION, &crontab("during-delay"));
    assert_eq!(during.status, 201, "{}", during.text());
    assert_eq!(client.get(&format!("{COLLECTION}/before")).unwrap().status, 200);
    let listed = client.get(COLLECTION).unwrap();
    assert_eq!(listed.json()["items"].as_array().unwrap().len(), 2);
    assert!(signalled.elapsed() < Duration::from_secs(6), "the checks above took the whole delay");

    assert!(server.wait_exit(Duration::from_secs(30)), "exit status: {}", server.log());
    assert!(signalled.elapsed() >= Duration::from_secs(6), "stopped before the delay passed: {}", server.log());
    let log = server.log();
    // Which check failed and why is in the log, not in the body.
    assert!(
        log.contains("readyz check failed") && log.contains("[-]shutdown failed: process is shutting down"),
        "{log}"
    );
    for step in ["shutdown initiated", "not accepting new requests", "stopped listening", "store closed"] {
        assert!(log.contains(&format!("[graceful-termination] {step}")), "{step}: {log}");
    }

    // What was acknowledged during the delay is there after a restart.
    server.spawn(&[]);
    let client = Client::admin(&server);
    assert_eq!(client.get(&format!("{COLLECTION}/during-delay")).unwrap().status, 200);
}

#[test]
fn with_send_retry_after_new_requests_get_429_while_those_in_flight_finish() {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], None);
    server.spawn(&["--shutdown-delay-duration", "1s", "--shutdown-send-retry-after"]);
    let client = Client::admin(&server);
    let (finish_upload, rest) = tokio::sync::oneshot::channel();
    let upload = slow_create(Client::admin(&server), "in-flight", "", rest);
    let signalled = Instant::now();
    terminate(&server);

    // Once the delay passed, new requests are refused as Kubernetes refuses them, on a listener
    // that stays open while a request is in flight; probes are still answered.
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let answer = client.get(COLLECTION).unwrap();
        if answer.status != 200 {
            break answer;
        }
        assert!(Instant::now() < deadline, "never refused: {}", server.log());
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(signalled.elapsed() >= Duration::from_secs(1), "refused before the delay");
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(refused.text(), "The apiserver is shutting down, please try again later.\n");
    assert_eq!(refused.headers["retry-after"], "5");
    assert_eq!(refused.headers["connection"], "close");
    assert_eq!(client.get("/readyz").unwrap().status, 500);
    assert_eq!(client.get("/livez").unwrap().status, 200);

    finish_upload.send(()).unwrap();
    let (status, answer) = upload.join().unwrap();
    assert_eq!(status, 201, "{answer}");
    wait_not_listening(server.port, Duration::from_secs(20));
    assert!(server.wait_exit(Duration::from_secs(30)), "exit status: {}", server.log());
    server.spawn(&[]);
    assert_eq!(Client::admin(&server).get(&format!("{COLLECTION}/in-flight")).unwrap().status, 200);
}

#[test]
fn clients_with_nothing_in_flight_do_not_hold_up_shutdown() {
    let mut server = TestServer::start(&[CRONTAB_CRD]);
    // One client connected without a TLS handshake (the server would wait 10 s for it), one
    // with a kept-alive HTTP/1.1 connection between requests.
    let silent = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let (answered, idle_now) = std::sync::mpsc::channel();
    let idle = std::thread::spawn({
        let client = Client::admin(&server);
        move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut tls = client.connect_tls().await.unwrap();
                tls.write_all(b"GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
                let mut answer = Vec::new();
                let mut chunk = [0u8; 4096];
                // The server closes the kept-alive connection at shutdown: the read ends.
                while let Ok(read @ 1..) = tls.read(&mut chunk).await {
                    answer.extend_from_slice(&chunk[..read]);
                    if answer.ends_with(b"\r\n\r\nok") {
                        answered.send(()).unwrap();
                    }
                }
                String::from_utf8_lossy(&answer).into_owned()
            })
        }
    });
    // The request answered, the connection idle.
    idle_now.recv_timeout(Duration::from_secs(60)).expect("/livez never answered");
    let signalled = Instant::now();
    terminate(&server);
    assert!(server.wait_exit(Duration::from_secs(30)), "exit status: {}", server.log());
    // Well below the 10 s a silent client's handshake may take: it did not hold shutdown up.
    assert!(signalled.elapsed() < Duration::from_secs(9), "shutdown took {:?}", signalled.elapsed());
    assert!(idle.join().unwrap().starts_with("HTTP/1.1 200 OK"));
    drop(silent);
}

#[test]
fn a_rolling_restart_under_load_loses_no_acknowledged_write_and_answers_no_5xx() {
    let mut cluster = TestCluster::start_with(&[CRONTAB_CRD], &FLAGS);
    cluster.user("writer", &[]);
    cluster.grant("writer", &["create", "get", "list", "watch"], "stable.example.com", &["crontabs"], None);
    let plane = &cluster.plane;
    let started = Instant::now();

    let stop = Arc::new(AtomicBool::new(false));
    let record = Arc::new(Mutex::new(Record::default()));
    let writers: Vec<_> = (0..4)
        .map(|id| {
            let (client, stop, record) = (Client::to_plane(plane, TOKEN), stop.clone(), record.clone());
            std::thread::spawn(move || writer(client, id, stop, record))
        })
        .collect();
    wait_for("twenty acknowledged writes", Duration::from_secs(20), || acknowledged_after(&record, started) >= 20);

    // A watch through the aggregator, open across the shutdown, from the first write on.
    let first = record.lock().unwrap().acknowledged[0].0.clone();
    let watcher = Client::to_plane(plane, TOKEN);
    let from = watcher.get(&format!("{COLLECTION}/{first}")).unwrap().json()["metadata"]["resourceVersion"].clone();
    let watch = std::thread::spawn(move || {
        let answer = watcher.get(&format!("{COLLECTION}?watch=1&resourceVersion={}", from.as_str().unwrap()));
        (answer, Instant::now())
    });
    // A create still uploading its body when the old server stops accepting.
    let (finish_upload, rest) = tokio::sync::oneshot::channel();
    let bearer = format!("Authorization: Bearer {TOKEN}\r\n");
    let upload = slow_create(Client::to_plane(plane, TOKEN), "uploaded-across-shutdown", &bearer, rest);

    // SIGTERM, as the kubelet sends it to the old replica's pod.
    let old = Client::new(&cluster.server, None);
    let signalled = Instant::now();
    terminate(&cluster.server);
    // The kubelet's probe sees /readyz fail; the endpoints drop the replica a moment later.
    wait_for("/readyz failing", DELAY, || old.get("/readyz").map(|r| r.status == 500).unwrap_or(false));
    let not_ready = Instant::now();
    let failing = old.get("/readyz?verbose").unwrap();
    assert!(failing.text().contains("[-]shutdown failed: reason withheld\n"), "{}", failing.text());
    // Until they do, writes are still served.
    wait_for("a write served while /readyz fails", DELAY, || acknowledged_after(&record, not_ready) > 0);
    let unregistered = Instant::now();
    plane.unregister_backend();

    // After the delay the old server stops listening; the upload in flight then finishes.
    let closed = wait_not_listening(cluster.server.port, Duration::from_secs(20));
    assert!(closed - signalled >= DELAY, "stopped listening {:?} after SIGTERM", closed - signalled);
    finish_upload.send(()).unwrap();
    let (status, answer) = upload.join().unwrap();
    assert_eq!(status, 201, "{answer}");
    let (watched, watch_ended) = watch.join().unwrap();
    let watched = watched.expect("the watch was cut instead of ending");
    assert_eq!(watched.status, 200);
    assert!(watch_ended - signalled >= DELAY, "the watch ended {:?} after SIGTERM", watch_ended - signalled);
    let events: Vec<Value> = watched.text().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(events.iter().all(|e| e["type"] == "ADDED"), "{}", watched.text());
    let delivered: BTreeSet<&str> = events.iter().filter_map(|e| e["object"]["metadata"]["name"].as_str()).collect();
    let during_delay: Vec<String> = record
        .lock()
        .unwrap()
        .acknowledged
        .iter()
        .filter(|(_, t)| *t > signalled && *t < unregistered)
        .map(|(n, _)| n.clone())
        .collect();
    assert!(during_delay.iter().any(|n| delivered.contains(n.as_str())), "the watch saw nothing of the delay");
    assert!(cluster.server.wait_exit(Duration::from_secs(30)), "the old server failed: {}", cluster.server.log());

    // The new replica on the same store; the endpoints add it once it is ready.
    cluster.server.spawn(&FLAGS);
    plane.register_backend(cluster.server.port, &cluster.server.pki.serving_ca());
    let back = Instant::now();
    wait_for("twenty writes on the new replica", Duration::from_secs(20), || acknowledged_after(&record, back) >= 20);
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        writer.join().unwrap();
    }

    let record = record.lock().unwrap();
    assert!(record.unexpected.is_empty(), "unexpected answers: {:?}", record.unexpected);
    assert!(
        record.unavailable.iter().all(|(sent, answered)| *answered >= unregistered && *sent <= back),
        "the aggregator found no replica outside the restart"
    );
    let statuses = plane.backend_statuses();
    assert!(statuses.iter().all(|s| *s < 500), "crd-apiserver answered 5xx: {statuses:?}");

    // Every acknowledged write is there, and nothing else.
    let mut acknowledged: BTreeSet<String> = record.acknowledged.iter().map(|(n, _)| n.clone()).collect();
    acknowledged.insert("uploaded-across-shutdown".into());
    let listed = Client::to_plane(plane, TOKEN).get(COLLECTION).unwrap();
    assert_eq!(listed.status, 200, "{}", listed.text());
    let stored: BTreeSet<String> = listed.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(stored.len(), acknowledged.len(), "stored and acknowledged differ");
    assert_eq!(stored, acknowledged);
    eprintln!(
        "rolling restart: {} writes acknowledged ({} during the shutdown delay), {} answered 503 by the aggregator while no replica was ready",
        acknowledged.len(),
        during_delay.len(),
        record.unavailable.len()
    );
}
