//! Load generator for `hack/bench-apply.sh`: server-side applies of CronTabs over N
//! keep-alive HTTPS connections (HTTP/1.1, client certificate), each connection on objects
//! of its own; prints applies/s with p50/p99 latency for applies that create, applies that
//! change a field, applies that change nothing, and (for comparison) merge patches.
//!
//! Usage: apply_bench --port P --ca CA.crt --cert C.crt --key C.key [--connections N]
//!        [--seconds S]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod bench_client;

use std::time::Duration;

use bench_client::{Request, connect, millis, percentile, phase, tls_config};

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

/// A server-side apply of `body`; a merge patch when it starts with `{"spec"`.
fn apply(path: String, body: Vec<u8>, expect: u16) -> Request {
    let content_type =
        if body.starts_with(b"{\"spec\"") { "application/merge-patch+json" } else { "application/apply-patch+yaml" };
    Request { content_type: Some(content_type), body, ..Request::new("PATCH", path, expect) }
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
    println!(
        "{phase:<13} conns={connections:<2} applies={n:<7} rate={:>8.0}/s p50={:>7.2}ms p99={:>7.2}ms",
        n as f64 / elapsed.as_secs_f64(),
        millis(percentile(&latencies, 0.50)),
        millis(percentile(&latencies, 0.99))
    );
}

#[tokio::main]
async fn main() {
    let a = args();
    let config = tls_config(&a.ca, &a.cert, &a.key);
    let mut senders = Vec::new();
    for _ in 0..a.connections {
        senders.push(connect(a.port, config.clone()).await);
    }
    let ns = format!("apply-{}-{}", std::process::id(), a.connections);
    let object =
        move |name: String| format!("/apis/stable.example.com/v1/namespaces/{ns}/crontabs/{name}?fieldManager=bench");

    let o = object.clone();
    let (lat, el, _) = phase(&mut senders, a.seconds, move |c, i| {
        let name = format!("c{c}-{i}");
        apply(o(name.clone()), crontab(&name, 1), 201)
    })
    .await;
    report("apply-create", a.connections, lat, el);

    let o = object.clone();
    let (lat, el, _) = phase(&mut senders, a.seconds, move |c, i| {
        let name = format!("c{c}-0");
        apply(o(name.clone()), crontab(&name, 2 + i % 2), 200)
    })
    .await;
    report("apply-change", a.connections, lat, el);

    let o = object.clone();
    let (lat, el, _) = phase(&mut senders, a.seconds, move |c, _| {
        let name = format!("c{c}-1");
        apply(o(name.clone()), crontab(&name, 1), 200)
    })
    .await;
    report("apply-noop", a.connections, lat, el);

    // For comparison: the same change as a JSON merge patch (an update, tracked too).
    let o = object.clone();
    let (lat, el, _) = phase(&mut senders, a.seconds, move |c, i| {
        let patch = serde_json::to_vec(&serde_json::json!({"spec": {"replicas": 2 + i % 2}})).unwrap();
        apply(o(format!("c{c}-2")), patch, 200)
    })
    .await;
    report("merge-patch", a.connections, lat, el);
}
