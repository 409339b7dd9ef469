//! Load generator for `hack/bench.sh`: creates, gets, deletes and lists CronTabs over N
//! keep-alive HTTPS connections (HTTP/1.1, client certificate), and prints requests/s with
//! p50/p99 latency per phase. Deletes remove the objects the create phase made (each
//! connection its own, in the order it created them) and end early when none are left.
//!
//! Usage: load --port P --ca CA.crt --cert C.crt --key C.key [--connections N] [--seconds S]
//!        [--list-objects N] [--phases create,get,delete,list] [--table] [--cpu-of name=PID,...]
//!
//! With `--cpu-of`, each phase also prints the CPU time the named processes (the server,
//! etcd) and the client itself spent per request.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod bench_client;

use std::time::Duration;

use bench_client::{Cpu, Request, connect, millis, percentile, phase, phase_while, send, tls_config};

struct Args {
    port: u16,
    ca: String,
    cert: String,
    key: String,
    connections: usize,
    seconds: u64,
    list_objects: usize,
    phases: String,
    table: bool,
    cpu: Cpu,
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
        phases: "create,get,list".into(),
        table: false,
        cpu: Cpu::default(),
    };
    let argv: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < argv.len() {
        if argv[i] == "--table" {
            a.table = true;
            i += 1;
            continue;
        }
        let v = argv[i + 1].clone();
        match argv[i].as_str() {
            "--port" => a.port = v.parse().unwrap(),
            "--ca" => a.ca = v,
            "--cert" => a.cert = v,
            "--key" => a.key = v,
            "--connections" => a.connections = v.parse().unwrap(),
            "--seconds" => a.seconds = v.parse().unwrap(),
            "--list-objects" => a.list_objects = v.parse().unwrap(),
            "--phases" => a.phases = v,
            "--cpu-of" => a.cpu = Cpu::parse(&v),
            other => panic!("unknown flag {other}"),
        }
        i += 2;
    }
    a
}

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

fn crontab(name: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"cronSpec": "*/5 * * * *", "image": "registry.example.com/team/cron-runner:1.2.3", "replicas": 3}
    }))
    .unwrap()
}

/// Prints a phase's figures; the CPU per request when processes are watched (`ticks`: the
/// snapshot taken when the phase began).
fn report(phase: &str, connections: usize, mut latencies: Vec<Duration>, elapsed: Duration, cpu: &Cpu, ticks: &[u64]) {
    latencies.sort();
    let n = latencies.len();
    println!(
        "{phase:<8} conns={connections:<2} requests={n:<7} rate={:>9.0}/s p50={:>8.2}ms p99={:>8.2}ms {}",
        n as f64 / elapsed.as_secs_f64(),
        millis(percentile(&latencies, 0.50)),
        millis(percentile(&latencies, 0.99)),
        cpu.per_request(ticks, &cpu.snapshot(), n)
    );
}

#[tokio::main]
async fn main() {
    let a = args();
    let config = tls_config(&a.ca, &a.cert, &a.key);
    let run = std::process::id();
    let mut senders = Vec::new();
    for _ in 0..a.connections {
        senders.push(connect(a.port, config.clone()).await);
    }
    let phases: Vec<&str> = a.phases.split(',').collect();
    if phases.contains(&"create") {
        let ns = format!("bench-{run}-{}", a.connections);
        let coll = format!("/apis/stable.example.com/v1/namespaces/{ns}/crontabs");
        let c2 = coll.clone();
        let ticks = a.cpu.snapshot();
        let (lat, el, per_conn) = phase(&mut senders, a.seconds, move |c, i| {
            Request::new("POST", c2.clone(), 201).json(crontab(&format!("c{c}-{i}")))
        })
        .await;
        report("create", a.connections, lat, el, &a.cpu, &ticks);
        if phases.contains(&"get") {
            let c3 = coll.clone();
            let ticks = a.cpu.snapshot();
            let (lat, el, _) = phase(&mut senders, a.seconds, move |c, i| {
                Request::new("GET", format!("{c3}/c{c}-{}", i % per_conn.max(1)), 200)
            })
            .await;
            report("get", a.connections, lat, el, &a.cpu, &ticks);
        }
        if phases.contains(&"delete") {
            // Every connection created at least `per_conn` objects: c{c}-0 onwards.
            let c5 = coll.clone();
            let ticks = a.cpu.snapshot();
            let (lat, el, _) = phase_while(&mut senders, a.seconds, move |c, i| {
                (i < per_conn).then(|| Request::new("DELETE", format!("{c5}/c{c}-{i}"), 200))
            })
            .await;
            report("delete", a.connections, lat, el, &a.cpu, &ticks);
        }
    }
    if phases.contains(&"get") && !phases.contains(&"create") {
        // Gets alone: a few objects per connection, created untimed, then read in turn.
        const SEEDED: usize = 100;
        let coll = format!("/apis/stable.example.com/v1/namespaces/bench-get-{run}/crontabs");
        for (c, sender) in senders.iter_mut().enumerate() {
            for i in 0..SEEDED {
                let create = Request::new("POST", coll.clone(), 201).json(crontab(&format!("c{c}-{i}")));
                assert_eq!(send(sender, create).await.0, 201, "seeding objects to get");
            }
        }
        let ticks = a.cpu.snapshot();
        let (lat, el, _) =
            phase(&mut senders, a.seconds, move |c, i| Request::new("GET", format!("{coll}/c{c}-{}", i % SEEDED), 200))
                .await;
        report("get", a.connections, lat, el, &a.cpu, &ticks);
    }
    if phases.contains(&"list") {
        // Lists of a fixed size, in their own namespace (shared by runs with the same size).
        let list_coll = format!("/apis/stable.example.com/v1/namespaces/bench-list-{}/crontabs", a.list_objects);
        let mut s0 = senders.pop().unwrap();
        for i in 0..a.list_objects {
            let create = Request::new("POST", list_coll.clone(), 201).json(crontab(&format!("l{i}")));
            let status = send(&mut s0, create).await.0;
            assert!(status == 201 || status == 409, "creating list objects: {status}");
        }
        senders.push(s0);
        let c4 = list_coll.clone();
        let accept = a.table.then_some(TABLE);
        let ticks = a.cpu.snapshot();
        let (lat, el, _) =
            phase(&mut senders, a.seconds, move |_, _| Request { accept, ..Request::new("GET", c4.clone(), 200) })
                .await;
        let name = format!("list{}{}", a.list_objects, if a.table { "/table" } else { "" });
        report(&name, a.connections, lat, el, &a.cpu, &ticks);
    }
}
