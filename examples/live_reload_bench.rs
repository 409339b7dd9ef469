//! Live definitions under load, for `hack/bench-live-definitions.sh`: how long after a
//! definition file is replaced (among many served) the change is served, and what the reloads
//! do to a concurrent get load (p50/p99 while idle, then while a definition changes every
//! half second).
//!
//! The change adds or removes a served version (`v1alpha9`) of one definition; the time is
//! taken from just before the file is renamed into place until a GET of that version's
//! collection answers as the new definition says (200 or 404), polled every millisecond over
//! a keep-alive connection.
//!
//! Usage: live_reload_bench --port P --ca CA --cert C --key K --file DEFINITION.json
//!        [--rounds N] [--seconds S] [--connections C]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod bench_client;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bench_client::{Request, connect, millis, percentile, phase, send, tls_config};
use serde_json::Value;

struct Args {
    port: u16,
    ca: String,
    cert: String,
    key: String,
    file: PathBuf,
    rounds: usize,
    seconds: u64,
    connections: usize,
}

fn args() -> Args {
    let mut a = Args {
        port: 8443,
        ca: String::new(),
        cert: String::new(),
        key: String::new(),
        file: PathBuf::new(),
        rounds: 20,
        seconds: 10,
        connections: 4,
    };
    let argv: Vec<String> = std::env::args().collect();
    for pair in argv[1..].chunks(2) {
        let v = pair[1].clone();
        match pair[0].as_str() {
            "--port" => a.port = v.parse().unwrap(),
            "--ca" => a.ca = v,
            "--cert" => a.cert = v,
            "--key" => a.key = v,
            "--file" => a.file = v.into(),
            "--rounds" => a.rounds = v.parse().unwrap(),
            "--seconds" => a.seconds = v.parse().unwrap(),
            "--connections" => a.connections = v.parse().unwrap(),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

/// The definition with or without the extra served version.
fn variant(original: &Value, with_extra: bool) -> Vec<u8> {
    let mut definition = original.clone();
    if with_extra {
        let mut extra = definition["spec"]["versions"][0].clone();
        extra["name"] = "v1alpha9".into();
        extra["storage"] = false.into();
        extra["deprecated"] = false.into();
        definition["spec"]["versions"].as_array_mut().unwrap().push(extra);
    }
    serde_json::to_vec_pretty(&definition).unwrap()
}

fn report(what: &str, mut latencies: Vec<Duration>, elapsed: Duration) -> Duration {
    latencies.sort();
    let p99 = percentile(&latencies, 0.99);
    println!(
        "get {what:<16} requests={:<7} rate={:>8.0}/s p50={:>7.2}ms p99={:>7.2}ms max={:>7.2}ms",
        latencies.len(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        millis(percentile(&latencies, 0.50)),
        millis(p99),
        millis(latencies.last().copied().unwrap_or_default())
    );
    p99
}

/// Replaces the file with `text` (written beside it, renamed over it) and waits until `path`
/// answers `expect`; returns the time from the rename to the answer.
async fn change(file: &PathBuf, text: &[u8], poll: &mut bench_client::Sender, path: &str, expect: u16) -> Duration {
    let staged = file.with_extension("staged");
    std::fs::write(&staged, text).unwrap();
    let start = Instant::now();
    std::fs::rename(&staged, file).unwrap();
    loop {
        let (status, _) = send(poll, Request::new("GET", path.to_string(), expect)).await;
        if status == expect {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the change was not served in ten seconds");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::main]
async fn main() {
    let a = args();
    let config = tls_config(&a.ca, &a.cert, &a.key);
    let original: Value = serde_json::from_slice(&std::fs::read(&a.file).unwrap()).unwrap();
    let group = original["spec"]["group"].as_str().unwrap().to_string();
    let plural = original["spec"]["names"]["plural"].as_str().unwrap().to_string();
    let probe = format!("/apis/{group}/v1alpha9/namespaces/default/{plural}");

    // Objects to get: the seed CronTab, a few per connection.
    let mut senders = Vec::new();
    for _ in 0..a.connections {
        senders.push(connect(a.port, config.clone()).await);
    }
    const SEEDED: usize = 50;
    let coll = "/apis/stable.example.com/v1/namespaces/live-bench/crontabs".to_string();
    for (c, sender) in senders.iter_mut().enumerate() {
        for i in 0..SEEDED {
            let body = serde_json::json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                "metadata": {"name": format!("c{c}-{i}")}, "spec": {"cronSpec": "* * * * *", "replicas": 1}});
            let status =
                send(sender, Request::new("POST", coll.clone(), 201).json(serde_json::to_vec(&body).unwrap())).await.0;
            assert!(status == 201 || status == 409, "seeding: {status}");
        }
    }
    let get = move |c: usize, i: usize| Request::new("GET", format!("{coll}/c{c}-{}", i % SEEDED), 200);

    // Reload latency alone.
    let mut poll = connect(a.port, config.clone()).await;
    let mut alone = Vec::new();
    for round in 0..a.rounds {
        let with_extra = round % 2 == 0;
        let took =
            change(&a.file, &variant(&original, with_extra), &mut poll, &probe, if with_extra { 200 } else { 404 })
                .await;
        alone.push(took);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    alone.sort();
    println!(
        "change served after   median={:>7.2}ms p90={:>7.2}ms max={:>7.2}ms ({} changes, from the rename to the answer)",
        millis(percentile(&alone, 0.5)),
        millis(percentile(&alone, 0.9)),
        millis(alone.last().copied().unwrap_or_default()),
        alone.len()
    );

    // Gets while idle, then while the definition changes every half second.
    let (lat, el, _) = phase(&mut senders, a.seconds, get.clone()).await;
    let idle = report("idle", lat, el);
    let file = a.file.clone();
    let changer = tokio::spawn(async move {
        let mut under_load = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(a.seconds);
        let mut round = 0;
        while Instant::now() + Duration::from_millis(600) < deadline {
            let with_extra = round % 2 == 0;
            let expect = if with_extra { 200 } else { 404 };
            under_load.push(change(&file, &variant(&original, with_extra), &mut poll, &probe, expect).await);
            round += 1;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // Back as it was.
        std::fs::write(&file, variant(&original, false)).unwrap();
        under_load
    });
    let (lat, el, _) = phase(&mut senders, a.seconds, get).await;
    let busy = report("during reloads", lat, el);
    let mut under_load = changer.await.unwrap();
    under_load.sort();
    println!(
        "change served (load)  median={:>7.2}ms p90={:>7.2}ms max={:>7.2}ms ({} changes)",
        millis(percentile(&under_load, 0.5)),
        millis(percentile(&under_load, 0.9)),
        millis(under_load.last().copied().unwrap_or_default()),
        under_load.len()
    );
    println!("get p99 during reloads / idle: {:.2}x", busy.as_secs_f64() / idle.as_secs_f64().max(1e-9));
}
