//! Load generator for `hack/bench.sh`: creates, gets and lists CronTabs over N keep-alive
//! HTTPS connections (HTTP/1.1, client certificate), and prints requests/s with p50/p99
//! latency per phase.
//!
//! Usage: load --port P --ca CA.crt --cert C.crt --key C.key [--connections N] [--seconds S]
//!        [--list-objects N]
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
    list_objects: usize,
}

fn args() -> Args {
    let mut a = Args {
        port: 8443,
        ca: String::new(),
        cert: String::new(),
        key: String::new(),
        connections: 8,
        seconds: 5,
        list_objects: 2000,
    };
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
            "--list-objects" => a.list_objects = v.parse().unwrap(),
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

async fn call(sender: &mut Sender, method: &str, path: &str, body: Option<Vec<u8>>) -> (u16, usize) {
    sender.ready().await.unwrap();
    let mut req = http::Request::builder().method(method).uri(path).header("host", "localhost");
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let req = req.body(Full::new(Bytes::from(body.unwrap_or_default()))).unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let len = resp.into_body().collect().await.unwrap().to_bytes().len();
    (status, len)
}

fn crontab(name: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"cronSpec": "*/5 * * * *", "image": "registry.example.com/team/cron-runner:1.2.3", "replicas": 3}
    }))
    .unwrap()
}

fn report(phase: &str, connections: usize, mut latencies: Vec<Duration>, elapsed: Duration) {
    latencies.sort();
    let n = latencies.len();
    let pct = |p: f64| latencies.get(((n as f64 * p) as usize).min(n.saturating_sub(1))).copied().unwrap_or_default();
    println!(
        "{phase:<8} conns={connections:<2} requests={n:<7} rate={:>9.0}/s p50={:>8.2}ms p99={:>8.2}ms",
        n as f64 / elapsed.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1000.0,
        pct(0.99).as_secs_f64() * 1000.0
    );
}

/// Runs `op` on every connection for `seconds`, collecting latencies.
async fn phase<F>(senders: &mut Vec<Sender>, seconds: u64, op: F) -> (Vec<Duration>, Duration)
where
    F: Fn(usize, usize) -> (String, String, Option<Vec<u8>>, u16) + Send + Sync + Clone + 'static,
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
                let (method, path, body, expect) = op(c, i);
                let t = Instant::now();
                let (status, _) = call(&mut sender, &method, &path, body).await;
                assert_eq!(status, expect, "{method} {path}");
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
    let run = std::process::id();
    let mut senders = Vec::new();
    for _ in 0..a.connections {
        senders.push(connect(a.port, config.clone()).await);
    }
    let ns = format!("bench-{run}-{}", a.connections);
    let coll = format!("/apis/stable.example.com/v1/namespaces/{ns}/crontabs");
    let c2 = coll.clone();
    let (lat, el) = phase(&mut senders, a.seconds, move |c, i| {
        ("POST".into(), c2.clone(), Some(crontab(&format!("c{c}-{i}"))), 201)
    })
    .await;
    let created = lat.len();
    report("create", a.connections, lat, el);
    let per_conn = created / a.connections;
    let c3 = coll.clone();
    let (lat, el) = phase(&mut senders, a.seconds, move |c, i| {
        ("GET".into(), format!("{c3}/c{c}-{}", i % per_conn.max(1)), None, 200)
    })
    .await;
    report("get", a.connections, lat, el);

    // Lists of a fixed size, in their own namespace.
    let list_ns = format!("bench-list-{run}-{}", a.connections);
    let list_coll = format!("/apis/stable.example.com/v1/namespaces/{list_ns}/crontabs");
    let mut s0 = senders.pop().unwrap();
    for i in 0..a.list_objects {
        assert_eq!(call(&mut s0, "POST", &list_coll, Some(crontab(&format!("l{i}")))).await.0, 201);
    }
    senders.push(s0);
    let c4 = list_coll.clone();
    let (lat, el) = phase(&mut senders, a.seconds, move |_, _| ("GET".into(), c4.clone(), None, 200)).await;
    report(&format!("list{}", a.list_objects), a.connections, lat, el);
}
