//! Load generator for `hack/bench-apply.sh`: server-side applies of CronTabs over N
//! keep-alive HTTPS connections (HTTP/1.1, client certificate), each connection on objects
//! of its own; prints applies/s with p50/p99 latency for applies that create, applies that
//! change a field, applies that change nothing, and (for comparison) merge patches.
//!
//! Usage: apply_bench --port P --ca CA.crt --cert C.crt --key C.key [--connections N]
//!        [--seconds S]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

struct Args {
    port: u16,
    ca: String,
    cert: String,
    key: String,
    connections: usize,
    seconds: u64,
}

fn args() -> Args {
    let mut a =
        Args { port: 8443, ca: String::new(), cert: String::new(), key: String::new(), connections: 8, seconds: 5 };
    let argv: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i + 1 < argv.len() {
        let v = argv[i + 1].clone();
        match argv[i].as_str() {
            "--port" => a.port = v.parse().unwrap(),
            "--ca" => a.ca = v,
            "--cert" => a.cert = v,
            "--key" => a.key = v,
            "--connections" => a.connections = v.parse().unwrap(),
            "--seconds" => a.seconds = v.parse().unwrap(),
            other => panic!("unknown flag {other}"),
        }
        i += 2;
    }
    a
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(port: u16, config: Arc<rustls::ClientConfig>) -> Sender {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    sender
}

async fn apply(sender: &mut Sender, path: &str, body: Vec<u8>) -> u16 {
    // A merge patch is told apart by its leading `{"spec"`; everything else is an apply.
    let content_type =
        if body.starts_with(b"{\"spec\"") { "application/merge-patch+json" } else { "application/apply-patch+yaml" };
    sender.ready().await.unwrap();
    let req = http::Request::builder()
        .method("PATCH")
        .uri(path)
        .header("host", "localhost")
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    resp.into_body().collect().await.unwrap();
    status
}

/// A CronTab configuration as `kubectl apply --server-side` would send it.
fn crontab(name: &str, replicas: usize) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": name, "labels": {"app": "bench", "tier": "batch"}, "annotations": {"owner": "team-a"}},
        "spec": {"cronSpec": "*/5 * * * *", "image": "registry.example.com/team/cron-runner:1.2.3", "replicas": replicas}
    }))
    .unwrap()
}

fn report(phase: &str, connections: usize, mut latencies: Vec<Duration>, elapsed: Duration) {
    latencies.sort();
    let n = latencies.len();
    let pct = |p: f64| latencies.get(((n as f64 * p) as usize).min(n.saturating_sub(1))).copied().unwrap_or_default();
    println!(
        "{phase:<13} conns={connections:<2} applies={n:<7} rate={:>8.0}/s p50={:>7.2}ms p99={:>7.2}ms",
        n as f64 / elapsed.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1000.0,
        pct(0.99).as_secs_f64() * 1000.0
    );
}

/// Runs `op(connection, i)` -> (path, body, expected status) on every connection for
/// `seconds`.
async fn phase<F>(senders: &mut Vec<Sender>, seconds: u64, op: F) -> (Vec<Duration>, Duration)
where
    F: Fn(usize, usize) -> (String, Vec<u8>, u16) + Send + Sync + Clone + 'static,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (c, mut sender) in std::mem::take(senders).into_iter().enumerate() {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = 0;
            while Instant::now() < deadline {
                let (path, body, expect) = op(c, i);
                let t = Instant::now();
                let status = apply(&mut sender, &path, body).await;
                assert_eq!(status, expect, "PATCH {path}");
                lat.push(t.elapsed());
                i += 1;
            }
            (sender, lat)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        let (sender, lat) = t.await.unwrap();
        senders.push(sender);
        all.extend(lat);
    }
    (all, start.elapsed())
}

#[tokio::main]
async fn main() {
    let a = args();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(&a.ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let certs: Vec<_> = CertificateDer::pem_file_iter(&a.cert).unwrap().map(|c| c.unwrap()).collect();
    let config = Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, PrivateKeyDer::from_pem_file(&a.key).unwrap())
            .unwrap(),
    );
    let mut senders = Vec::new();
    for _ in 0..a.connections {
        senders.push(connect(a.port, config.clone()).await);
    }
    let ns = format!("apply-{}-{}", std::process::id(), a.connections);
    let object =
        move |name: String| format!("/apis/stable.example.com/v1/namespaces/{ns}/crontabs/{name}?fieldManager=bench");

    let o = object.clone();
    let (lat, el) = phase(&mut senders, a.seconds, move |c, i| {
        let name = format!("c{c}-{i}");
        (o(name.clone()), crontab(&name, 1), 201)
    })
    .await;
    report("apply-create", a.connections, lat, el);

    let o = object.clone();
    let (lat, el) = phase(&mut senders, a.seconds, move |c, i| {
        let name = format!("c{c}-0");
        (o(name.clone()), crontab(&name, 2 + i % 2), 200)
    })
    .await;
    report("apply-change", a.connections, lat, el);

    let o = object.clone();
    let (lat, el) = phase(&mut senders, a.seconds, move |c, _| {
        let name = format!("c{c}-1");
        (o(name.clone()), crontab(&name, 1), 200)
    })
    .await;
    report("apply-noop", a.connections, lat, el);

    // For comparison: the same change as a JSON merge patch (an update, tracked too).
    let o = object.clone();
    let (lat, el) = phase(&mut senders, a.seconds, move |c, i| {
        let patch = serde_json::to_vec(&serde_json::json!({"spec": {"replicas": 2 + i % 2}})).unwrap();
        (o(format!("c{c}-2")), patch, 200)
    })
    .await;
    report("merge-patch", a.connections, lat, el);
}
