//! etcd's own rate for the work the etcd backend asks of it, for `hack/bench-etcd.sh`: puts of
//! new keys (a create is a transaction comparing the key's absence, as ours), gets of one key,
//! deletes of the keys put (a transaction comparing the key's presence, deleting it with its
//! last value, else reading it, as ours), and ranges of a 2,000-key prefix, over N concurrent clients with values the size of the
//! server's stored objects, so that the server's creates/gets/lists can be set beside them.
//!
//! Usage: etcd_load --endpoint http://127.0.0.1:2379 [--connections N] [--seconds S]
//!        [--value-bytes B | --sample-prefix /crd-apiserver/] [--cpu-of etcd=PID]
//!
//! With `--cpu-of`, each phase also prints the CPU time etcd and this client spent per
//! operation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod bench_client;

use std::time::{Duration, Instant};

use bench_client::Cpu;

use etcd_client::{Client, Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp};

struct Args {
    endpoint: String,
    connections: usize,
    seconds: u64,
    value_bytes: usize,
    sample_prefix: Option<String>,
    cpu: Cpu,
}

fn args() -> Args {
    let mut a = Args {
        endpoint: "http://127.0.0.1:2379".into(),
        connections: 8,
        seconds: 5,
        value_bytes: 600,
        sample_prefix: None,
        cpu: Cpu::default(),
    };
    let argv: Vec<String> = std::env::args().collect();
    for pair in argv[1..].chunks(2) {
        let v = pair[1].clone();
        match pair[0].as_str() {
            "--endpoint" => a.endpoint = v,
            "--connections" => a.connections = v.parse().unwrap(),
            "--seconds" => a.seconds = v.parse().unwrap(),
            "--value-bytes" => a.value_bytes = v.parse().unwrap(),
            "--sample-prefix" => a.sample_prefix = Some(v),
            "--cpu-of" => a.cpu = Cpu::parse(&v),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

/// Runs `op` on `connections` clients (one gRPC connection each) for `seconds`, at most
/// `limit` times on each; returns the latencies of every operation, the fewest operations one
/// client did, and the time taken.
async fn phase<F, Fut>(clients: &[Client], seconds: u64, limit: usize, op: F) -> (Vec<Duration>, usize, Duration)
where
    F: Fn(Client, usize, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let started = Instant::now();
    let end = started + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        let (client, op) = (client.clone(), op.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = 0;
            while Instant::now() < end && i < limit {
                let began = Instant::now();
                op(client.clone(), c, i).await;
                latencies.push(began.elapsed());
                i += 1;
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    let mut fewest = usize::MAX;
    for task in tasks {
        let latencies = task.await.unwrap();
        fewest = fewest.min(latencies.len());
        all.extend(latencies);
    }
    (all, fewest, started.elapsed())
}

/// Prints a phase's figures, with the CPU per operation since `ticks` (the phase's start).
fn report(name: &str, connections: usize, mut latencies: Vec<Duration>, elapsed: Duration, cpu: &Cpu, ticks: &[u64]) {
    latencies.sort();
    let n = latencies.len();
    let at = |q: f64| latencies.get(((n as f64 * q) as usize).min(n.saturating_sub(1))).copied().unwrap_or_default();
    println!(
        "etcd {name:<9} conns={connections:<2} requests={n:<7} rate={:>9.0}/s p50={:>8.2}ms p99={:>8.2}ms {}",
        n as f64 / elapsed.as_secs_f64(),
        at(0.5).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0,
        cpu.per_request(ticks, &cpu.snapshot(), n)
    );
}

#[tokio::main]
async fn main() {
    let a = args();
    let mut clients = Vec::new();
    for _ in 0..a.connections {
        clients.push(Client::connect([a.endpoint.as_str()], None).await.unwrap());
    }
    let mut value_bytes = a.value_bytes;
    if let Some(prefix) = &a.sample_prefix {
        let mut client = clients[0].clone();
        let sample = client.get(prefix.as_str(), Some(GetOptions::new().with_prefix().with_limit(1))).await.unwrap();
        if let Some(kv) = sample.kvs().first() {
            value_bytes = kv.value().len();
        }
    }
    println!("etcd value size: {value_bytes} bytes (as the server stores an object)");
    let value = vec![b'x'; value_bytes];
    let run = format!("/etcd-load/{}-{}", std::process::id(), a.connections);

    // Creates: a put only if the key is absent, as the backend's create transaction.
    let (prefix, v) = (run.clone(), value.clone());
    let ticks = a.cpu.snapshot();
    let (lat, written, el) = phase(&clients, a.seconds, usize::MAX, move |mut client, c, i| {
        let (key, v) = (format!("{prefix}/c{c}-{i}"), v.clone());
        async move {
            let txn = Txn::new()
                .when([Compare::mod_revision(key.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(key, v, None)]);
            assert!(client.txn(txn).await.unwrap().succeeded());
        }
    })
    .await;
    report("create", a.connections, lat, el, &a.cpu, &ticks);

    // Gets of the keys just written, in turn.
    let prefix = run.clone();
    let ticks = a.cpu.snapshot();
    let (lat, _, el) = phase(&clients, a.seconds, usize::MAX, move |mut client, c, i| {
        let key = format!("{prefix}/c{c}-{}", i % written.max(1));
        async move {
            assert!(!client.get(key, None).await.unwrap().kvs().is_empty());
        }
    })
    .await;
    report("get", a.connections, lat, el, &a.cpu, &ticks);

    // Deletes of the keys put, each client its own in order, until none are left.
    let prefix = run.clone();
    let ticks = a.cpu.snapshot();
    let (lat, _, el) = phase(&clients, a.seconds, written, move |mut client, c, i| {
        let key = format!("{prefix}/c{c}-{i}");
        async move {
            let txn = Txn::new()
                .when([Compare::version(key.clone(), CompareOp::Greater, 0)])
                .and_then([TxnOp::delete(key.clone(), Some(DeleteOptions::new().with_prev_key()))])
                .or_else([TxnOp::get(key, None)]);
            assert!(client.txn(txn).await.unwrap().succeeded());
        }
    })
    .await;
    report("delete", a.connections, lat, el, &a.cpu, &ticks);

    // Ranges of 2,000 keys (a list of 2,000 objects).
    let list = format!("{run}-list/");
    let mut seeding = clients[0].clone();
    for i in 0..2000 {
        seeding.put(format!("{list}{i:05}"), value.clone(), None).await.unwrap();
    }
    let ticks = a.cpu.snapshot();
    let (lat, _, el) = phase(&clients, a.seconds, usize::MAX, move |mut client, _, _| {
        let list = list.clone();
        async move {
            let range = client.get(list, Some(GetOptions::new().with_prefix())).await.unwrap();
            assert_eq!(range.kvs().len(), 2000);
        }
    })
    .await;
    report("list2000", a.connections, lat, el, &a.cpu, &ticks);
}
