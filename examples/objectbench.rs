//! Many objects, for `hack/bench-objects.sh`: loads N small CronTabs with concurrent creates,
//! then measures a paginated list of all of them, gets, and watches started from now.
//!
//! Usage: objectbench --port P --ca CA --cert C --key K load N CONNECTIONS
//!        objectbench ... list LIMIT | get COUNT N | watch ROUNDS
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod bench_client;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bench_client::{Request, Sender, TlsStream, millis, percentile, send, tls_config};
use bytes::Bytes;

const GROUP_VERSION: &str = "/apis/stable.example.com/v1";
const NAMESPACES: usize = 100;

struct Client {
    port: u16,
    config: Arc<rustls::ClientConfig>,
}

impl Client {
    fn from_args(argv: &[String]) -> (Client, Vec<String>) {
        let flag = |name: &str| argv[argv.iter().position(|a| a == name).unwrap() + 1].clone();
        let config = tls_config(&flag("--ca"), &flag("--cert"), &flag("--key"));
        let rest = argv.iter().skip(9).cloned().collect();
        (Client { port: flag("--port").parse().unwrap(), config }, rest)
    }

    async fn tls(&self) -> TlsStream {
        bench_client::tls(self.port, self.config.clone()).await
    }

    async fn connect(&self) -> Sender {
        bench_client::connect(self.port, self.config.clone()).await
    }
}

async fn call(sender: &mut Sender, method: &'static str, path: &str, body: Option<Vec<u8>>) -> (u16, Bytes) {
    let request = Request::new(method, path.to_string(), 0);
    send(
        sender,
        match body {
            Some(body) => request.json(body),
            None => request,
        },
    )
    .await
}

fn collection(namespace: usize) -> String {
    format!("{GROUP_VERSION}/namespaces/ns-{namespace}/crontabs")
}

fn crontab(i: usize) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{{"name":"o{i}","labels":{{"app":"bench"}}}},"spec":{{"cronSpec":"*/5 * * * *","image":"registry.example.com/team/cron-runner:1.2.3","replicas":3}}}}"#
    )
    .into_bytes()
}

fn percentiles(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |p: f64| millis(percentile(&samples, p));
    format!("p50={:.2}ms p99={:.2}ms max={:.2}ms", at(0.5), at(0.99), at(1.0))
}

/// Creates objects 0..n over `connections` connections; objects that exist already count.
async fn load(client: &Client, n: usize, connections: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let mut sender = client.connect().await;
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let (status, body) = call(&mut sender, "POST", &collection(i % NAMESPACES), Some(crontab(i))).await;
                assert!(status == 201 || status == 409, "create {i}: {status} {}", String::from_utf8_lossy(&body));
                if (i + 1) % (n / 10).max(1) == 0 {
                    let rate = (i + 1) as f64 / started.elapsed().as_secs_f64();
                    eprintln!("  {:>9} objects, {:>7.0} creates/s so far", i + 1, rate);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = started.elapsed();
    println!(
        "load     objects={n} connections={connections} time={:.1}s rate={:.0} creates/s",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64()
    );
}

/// Lists every object of the resource, `limit` per page, following continue tokens.
async fn list(client: &Client, limit: usize) {
    let mut sender = client.connect().await;
    let (started, mut token, mut items, mut pages, mut bytes) = (Instant::now(), String::new(), 0, 0, 0);
    let mut latencies = Vec::new();
    loop {
        let mut path = format!("{GROUP_VERSION}/crontabs?limit={limit}");
        if !token.is_empty() {
            path.push_str(&format!("&continue={token}"));
        }
        let t = Instant::now();
        let (status, body) = call(&mut sender, "GET", &path, None).await;
        latencies.push(t.elapsed());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let page: serde_json::Value = serde_json::from_slice(&body).unwrap();
        items += page["items"].as_array().unwrap().len();
        pages += 1;
        bytes += body.len();
        token = page["metadata"]["continue"].as_str().unwrap_or_default().to_string();
        if token.is_empty() {
            break;
        }
    }
    let elapsed = started.elapsed();
    println!(
        "list     limit={limit} items={items} pages={pages} time={:.1}s rate={:.0} items/s {:.0} MiB/s; per page {}",
        elapsed.as_secs_f64(),
        items as f64 / elapsed.as_secs_f64(),
        bytes as f64 / 1048576.0 / elapsed.as_secs_f64(),
        percentiles(latencies)
    );
}

/// Gets `count` objects spread over the first `n`, one connection.
async fn get(client: &Client, count: usize, n: usize) {
    let mut sender = client.connect().await;
    let mut latencies = Vec::with_capacity(count);
    let started = Instant::now();
    for k in 0..count {
        let i = (k * 7919 + 13) % n;
        let t = Instant::now();
        let (status, _) = call(&mut sender, "GET", &format!("{}/o{i}", collection(i % NAMESPACES)), None).await;
        latencies.push(t.elapsed());
        assert_eq!(status, 200);
    }
    let rate = count as f64 / started.elapsed().as_secs_f64();
    println!("get      count={count} rate={rate:.0}/s {}", percentiles(latencies));
}

/// Starts watches from the current revision and measures the time to the response headers
/// and from a create to its event.
async fn watch(client: &Client, rounds: usize) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut writer = client.connect().await;
    let (mut opened, mut delivered) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (_, body) = call(&mut writer, "GET", &format!("{GROUP_VERSION}/crontabs?limit=1"), None).await;
        let page: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let rv = page["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        let mut stream = client.tls().await;
        let t = Instant::now();
        let request = format!(
            "GET {}?watch=1&resourceVersion={rv} HTTP/1.1\r\nHost: localhost\r\n\r\n",
            collection(round % NAMESPACES)
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut lines = BufReader::new(stream).lines();
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.is_empty() {
                break;
            }
        }
        opened.push(t.elapsed());
        let name = format!("watched-{}-{round}", std::process::id());
        let body = String::from_utf8(crontab(0)).unwrap().replace("\"o0\"", &format!("\"{name}\""));
        let t = Instant::now();
        let (status, _) = call(&mut writer, "POST", &collection(round % NAMESPACES), Some(body.into_bytes())).await;
        assert_eq!(status, 201);
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains(&name) {
                break;
            }
        }
        delivered.push(t.elapsed());
    }
    println!("watch    rounds={rounds} from now: headers {}", percentiles(opened));
    println!("watch    rounds={rounds} create to event (create's own time included) {}", percentiles(delivered));
}

#[tokio::main]
async fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let (client, rest) = Client::from_args(&argv);
    let number = |i: usize| rest[i].parse::<usize>().unwrap();
    match rest[0].as_str() {
        "load" => load(&client, number(1), number(2)).await,
        "list" => list(&client, number(1)).await,
        "get" => get(&client, number(1), number(2)).await,
        "watch" => watch(&client, number(1)).await,
        other => panic!("unknown command {other}"),
    }
}
