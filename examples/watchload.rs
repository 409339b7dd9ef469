//! Watch fan-out benchmark for `hack/bench.sh`: opens N watches on one collection, then
//! creates objects one at a time and measures, for every watcher, the time from sending the
//! write to receiving its event. Prints p50/p99/max delivery latency.
//!
//! Usage: watchload --port P --ca CA.crt --cert C.crt --key C.key --watchers N --writes W
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod bench_client;

use std::time::{Duration, Instant};

use bench_client::{TlsStream, tls, tls_config};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

fn arg(name: &str) -> String {
    let argv: Vec<String> = std::env::args().collect();
    let i = argv.iter().position(|a| a == name).unwrap_or_else(|| panic!("{name} is required"));
    argv[i + 1].clone()
}

/// Sends a create and reads its response.
async fn write(writer: &mut TlsStream, coll: &str, name: &str) {
    use tokio::io::AsyncReadExt;
    let body = format!(
        r#"{{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{{"name":"{name}"}},"spec":{{"image":"x"}}}}"#
    );
    let request = format!(
        "POST {coll} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    writer.write_all(request.as_bytes()).await.unwrap();
    // The response is small; one read holds the headers and the body.
    let mut buf = [0u8; 16384];
    let n = writer.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 201"), "{}", String::from_utf8_lossy(&buf[..n]));
}

#[tokio::main]
async fn main() {
    let port: u16 = arg("--port").parse().unwrap();
    let watchers: usize = arg("--watchers").parse().unwrap();
    let writes: usize = arg("--writes").parse().unwrap();
    let config = tls_config(&arg("--ca"), &arg("--cert"), &arg("--key"));
    let ns = format!("fanout-{}", std::process::id());
    let coll = format!("/apis/stable.example.com/v1/namespaces/{ns}/crontabs");
    // Each watcher reports (object name, arrival time) for every ADDED event.
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, Instant)>();
    for _ in 0..watchers {
        let mut stream = tls(port, config.clone()).await;
        let request = format!("GET {coll}?watch=1&resourceVersion=0 HTTP/1.1\r\nHost: localhost\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(start) = line.find("\"name\":\"w") {
                    let rest = &line[start + 8..];
                    let name = &rest[..rest.find('"').unwrap()];
                    let _ = tx.send((name.to_string(), Instant::now()));
                }
            }
        });
    }
    let mut writer = tls(port, config.clone()).await;
    // Warm up: every watcher must be registered (and see one event) before measuring.
    write(&mut writer, &coll, "wready").await;
    let mut ready = 0;
    while ready < watchers {
        let (name, _) =
            tokio::time::timeout(Duration::from_secs(60), rx.recv()).await.expect("watchers ready").unwrap();
        if name == "wready" {
            ready += 1;
        }
    }
    let mut sent = Vec::with_capacity(writes);
    let mut latencies = Vec::with_capacity(writes * watchers);
    for i in 0..writes {
        let started = Instant::now();
        write(&mut writer, &coll, &format!("w{i}")).await;
        sent.push(started);
        // Wait until every watcher has this event before the next write.
        let mut got = 0;
        while got < watchers {
            let (name, at) =
                tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("event in time").unwrap();
            if name == format!("w{i}") {
                latencies.push(at - started);
                got += 1;
            }
        }
        // Drain the write's response so the connection stays usable.
        let mut buf = [0u8; 8192];
        let _ =
            tokio::time::timeout(Duration::from_millis(50), tokio::io::AsyncReadExt::read(&mut writer, &mut buf)).await;
    }
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "fanout   watchers={watchers:<5} writes={writes} deliveries={} p50={:.2}ms p99={:.2}ms max={:.2}ms",
        latencies.len(),
        pct(0.5).as_secs_f64() * 1000.0,
        pct(0.99).as_secs_f64() * 1000.0,
        latencies.last().unwrap().as_secs_f64() * 1000.0
    );
}
