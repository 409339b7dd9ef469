//! Watcher memory benchmark for `hack/bench-watchers.sh`: what watches that never read cost
//! the server. Stores `--objects` CronTabs of `--object-bytes` each, then, per round, opens
//! `--watchers` watches that never read their bodies (each on its own HTTP/1.1 connection, or
//! `--http2`: up to 500 streams per connection, as client-go multiplexes), waits until the
//! server's resident memory settles, closes them all and waits again. Prints the server's
//! resident memory (`VmRSS` of `--server-pid`) before, while open, after each round and after
//! gets served then (what the allocator kept while idle and what it gives back once busy), and
//! how many watches the server still counted as registered while they were open.
//!
//! Usage: watchmem --port P --ca CA.crt --cert C.crt --key C.key --server-pid PID
//!        --watchers N [--objects 50] [--object-bytes 20000] [--rounds 2] [--http2] [--from-now]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod bench_client;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_client::{Request, connect, send, tls, tls_config};
use bytes::Bytes;
use http_body_util::Empty;
use tokio::io::AsyncWriteExt;

const NAMESPACE: &str = "watchmem";
/// Streams opened on one HTTP/2 connection (the server allows 1000).
const STREAMS_PER_CONNECTION: usize = 500;
/// How long after the memory settled the server's resident memory is read again.
const LATER: Duration = Duration::from_secs(10);
/// Gets served after the watchers went, in all, at each of which memory is read again.
const SERVED_AFTER: [usize; 3] = [100, 500, 2000];
/// Connections opened at once.
const CONNECTING: usize = 64;

fn arg(name: &str) -> Option<String> {
    let argv: Vec<String> = std::env::args().collect();
    argv.iter().position(|a| a == name).map(|i| argv.get(i + 1).cloned().unwrap_or_default())
}

fn required(name: &str) -> String {
    arg(name).unwrap_or_else(|| panic!("{name} is required"))
}

fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// The server's resident memory in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib / 1024.0
}

/// Waits until the server's resident memory moved less than 1 MiB over two seconds (at most
/// `limit`); returns it.
async fn settled_rss(pid: u32, limit: Duration) -> f64 {
    let deadline = Instant::now() + limit;
    let mut samples = vec![rss_mib(pid)];
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        samples.push(rss_mib(pid));
        let recent = &samples[samples.len().saturating_sub(5)..];
        let spread = recent.iter().cloned().fold(f64::MIN, f64::max) - recent.iter().cloned().fold(f64::MAX, f64::min);
        if (recent.len() == 5 && spread < 1.0) || Instant::now() > deadline {
            return *samples.last().unwrap();
        }
    }
}

/// `apiserver_registered_watchers` summed over its series, from `/metrics`, on a connection
/// of its own (one kept while thousands of watches open would sit idle past the server's
/// keep-alive limit). kube-apiserver v1.36 has no such series for a custom resource: against
/// it, the CronTab series of `apiserver_longrunning_requests` with verb WATCH are summed.
async fn registered_watchers(port: u16, config: &Arc<rustls::ClientConfig>) -> u64 {
    let mut sender = connect(port, config.clone()).await;
    let (status, body) = send(&mut sender, Request::new("GET", "/metrics".into(), 200)).await;
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&body);
    let sum = |wanted: &dyn Fn(&str) -> bool| {
        text.lines()
            .filter(|l| wanted(l))
            .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
            .sum::<f64>() as u64
    };
    match text.lines().any(|l| l.starts_with("apiserver_registered_watchers{")) {
        true => sum(&|l| l.starts_with("apiserver_registered_watchers{")),
        false => sum(&|l| {
            l.starts_with("apiserver_longrunning_requests{")
                && l.contains(r#"resource="crontabs""#)
                && l.contains(r#"verb="WATCH""#)
        }),
    }
}

/// Open watches (their connections, streams and responses), held unread until dropped.
type Held = Vec<Box<dyn std::any::Any + Send>>;

async fn open_http1(port: u16, config: Arc<rustls::ClientConfig>, path: &str, n: usize) -> Held {
    let mut streams: Held = Vec::with_capacity(n);
    let mut left = n;
    while left > 0 {
        let batch = left.min(CONNECTING);
        let opened = (0..batch).map(|_| {
            let config = config.clone();
            let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
            tokio::spawn(async move {
                let mut stream = tls(port, config).await;
                stream.write_all(request.as_bytes()).await.unwrap();
                stream
            })
        });
        for stream in futures_util::future::join_all(opened).await {
            streams.push(Box::new(stream.unwrap()));
        }
        left -= batch;
    }
    streams
}

async fn open_http2(port: u16, config: Arc<rustls::ClientConfig>, path: &str, n: usize) -> Held {
    let mut h2 = (*config).clone();
    h2.alpn_protocols = vec![b"h2".to_vec()];
    let config = Arc::new(h2);
    let mut connections: Held = Vec::new();
    let mut left = n;
    while left > 0 {
        let streams = left.min(STREAMS_PER_CONNECTION);
        let io = hyper_util::rt::TokioIo::new(tls(port, config.clone()).await);
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io).await.unwrap();
        tokio::spawn(connection);
        let mut responses = Vec::with_capacity(streams);
        for _ in 0..streams {
            sender.ready().await.unwrap();
            let request = http::Request::get(path).body(Empty::<Bytes>::new()).unwrap();
            let response = sender.send_request(request).await.unwrap();
            assert_eq!(response.status(), 200);
            responses.push(response);
        }
        connections.push(Box::new((sender, responses)));
        left -= streams;
    }
    connections
}

#[tokio::main]
async fn main() {
    let port: u16 = required("--port").parse().unwrap();
    let pid: u32 = required("--server-pid").parse().unwrap();
    let watchers: usize = required("--watchers").parse().unwrap();
    let objects: usize = arg("--objects").map_or(50, |v| v.parse().unwrap());
    let object_bytes: usize = arg("--object-bytes").map_or(20_000, |v| v.parse().unwrap());
    let rounds: usize = arg("--rounds").map_or(2, |v| v.parse().unwrap());
    let (http2, from_now) = (flag("--http2"), flag("--from-now"));
    let config = tls_config(&required("--ca"), &required("--cert"), &required("--key"));
    let coll = format!("/apis/stable.example.com/v1/namespaces/{NAMESPACE}/crontabs");
    let mut client = connect(port, config.clone()).await;
    let padding = "x".repeat(object_bytes.saturating_sub(200));
    for i in 0..objects {
        let body = format!(
            r#"{{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{{"name":"m{i}"}},"spec":{{"image":"{padding}"}}}}"#
        );
        let (status, _) = send(&mut client, Request::new("POST", coll.clone(), 201).json(body.into_bytes())).await;
        assert!(status == 201 || status == 409, "create: {status}");
    }
    let (_, list) = send(&mut client, Request::new("GET", coll.clone(), 200)).await;
    let list: serde_json::Value = serde_json::from_slice(&list).unwrap();
    let stored = list["items"].as_array().unwrap().len();
    let revision = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let path = match from_now {
        true => format!("{coll}?watch=1&resourceVersion={revision}"),
        false => format!("{coll}?watch=1"),
    };
    let transport = if http2 { "http2" } else { "http1" };
    let start = if from_now { "now" } else { "initial-state" };
    println!("watchers={watchers} objects={stored} object_bytes={object_bytes} transport={transport} from={start}");
    let limit = Duration::from_secs(120);
    let before = settled_rss(pid, limit).await;
    println!("server rss before: {before:.0} MiB");
    for round in 1..=rounds {
        let began = Instant::now();
        let watches = match http2 {
            true => open_http2(port, config.clone(), &path, watchers).await,
            false => open_http1(port, config.clone(), &path, watchers).await,
        };
        let opened = began.elapsed();
        let open = settled_rss(pid, limit).await;
        let registered = registered_watchers(port, &config).await;
        drop(watches);
        // Every watch gone from the server's count, then memory settled.
        let deadline = Instant::now() + limit;
        while registered_watchers(port, &config).await > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let gone = rss_mib(pid);
        let closed = settled_rss(pid, limit).await;
        // Whether memory the allocator kept comes back by itself once the server is idle.
        tokio::time::sleep(LATER).await;
        let later = rss_mib(pid);
        // Whether it comes back once the server serves again: mimalloc frees and purges the
        // pages it kept on later allocations, not on a timer of its own.
        let mut getter = connect(port, config.clone()).await;
        let mut served = Vec::new();
        let mut done = 0;
        for upto in SERVED_AFTER {
            for _ in done..upto {
                send(&mut getter, Request::new("GET", format!("{coll}/m0"), 200)).await;
            }
            done = upto;
            let rss = settled_rss(pid, limit).await;
            served.push(format!("{upto}: {rss:.0} MiB ({:+.0})", rss - before));
        }
        let per_watcher = (open - before) * 1024.0 / watchers as f64;
        println!(
            "round {round}: opened in {:.1}s; rss open {open:.0} MiB (+{:.0} MiB, {per_watcher:.1} KiB per watcher), \
             {registered} still registered; rss when all gone {gone:.0} MiB, settled {closed:.0} MiB \
             ({:+.0} MiB against before), {} s later {later:.0} MiB ({:+.0} MiB); \
             after gets {}",
            opened.as_secs_f64(),
            open - before,
            closed - before,
            LATER.as_secs(),
            later - before,
            served.join(", "),
        );
    }
}
