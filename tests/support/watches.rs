//! Watch behaviour both backends must show, checked over raw HTTPS: what a watch with a label
//! or field selector reports as an object enters and leaves its selection (kube-apiserver's
//! cache watcher: ADDED with the new content on entering, DELETED with the previous content
//! at the event's resourceVersion on leaving); a watcher that stops reading while changes come
//! is closed (its stream ends cleanly where it stopped, the server counts it in
//! `apiserver_terminated_watchers_total` and no longer holds it), while a reading watcher of
//! the same changes sees every one.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use super::TestServer;
use super::http::Client;

const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";
const SHIRTS: &str = "/apis/stable.example.com/v1/namespaces/default/shirts";

/// The events of a raw watch as (type, object), read until the watch's timeout ends it.
pub fn events(client: &Client, path: &str) -> Vec<(String, Value)> {
    let response = client.get(path).unwrap();
    assert_eq!(response.status, 200, "{}", response.text());
    response
        .text()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|mut e| (e["type"].as_str().unwrap().to_string(), e["object"].take()))
        .collect()
}

fn resource_version(object: &Value) -> String {
    object["metadata"]["resourceVersion"].as_str().unwrap().to_string()
}

/// Writes `body` to `path` with `method` and returns the object answered.
fn write(client: &Client, method: &str, path: &str, content_type: &str, body: &Value) -> Value {
    let response = client.send(method, path, content_type, body.to_string()).unwrap();
    assert!(response.status == 200 || response.status == 201, "{} {}", response.status, response.text());
    response.json()
}

/// The list's resourceVersion now: a watch from it replays every later write.
fn now(client: &Client, collection: &str) -> String {
    resource_version(&client.get(collection).unwrap().json())
}

/// A CronTab labelled `tier=gold` leaves a `tier=gold` watch (label and image changed in one
/// patch), comes back, and is deleted; a Shirt leaves a `spec.color=teal` watch (color to
/// olive). Needs the CronTab and Shirt definitions of `manifests/examples`.
pub fn check_objects_leaving_a_selection(client: &Client) {
    let merge = "application/merge-patch+json";
    // A write first, so that the watch's resourceVersion is not "0" (any state).
    let other = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "other", "labels": {"tier": "bronze"}}, "spec": {"image": "x"}});
    write(client, "POST", CRONTABS, "application/json", &other);
    let from = now(client, CRONTABS);
    let crontab = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "c", "labels": {"tier": "gold"}}, "spec": {"image": "x"}});
    write(client, "POST", CRONTABS, "application/json", &crontab);
    let change = |tier: &str, image: &str| {
        let patch = json!({"metadata": {"labels": {"tier": tier}}, "spec": {"image": image}});
        resource_version(&write(client, "PATCH", &format!("{CRONTABS}/c"), merge, &patch))
    };
    let left_at = change("silver", "y");
    change("gold", "z");
    write(client, "DELETE", &format!("{CRONTABS}/c"), "application/json", &json!({}));
    let path = format!("{CRONTABS}?watch=1&labelSelector=tier%3Dgold&resourceVersion={from}&timeoutSeconds=2");
    let seen: Vec<(String, String, String, String)> = events(client, &path)
        .into_iter()
        .map(|(kind, object)| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            let tier = text(&object["metadata"]["labels"]["tier"]);
            (kind, tier, text(&object["spec"]["image"]), resource_version(&object))
        })
        .collect();
    let event =
        |kind: &str, image: &str, at: &str| (kind.to_string(), "gold".to_string(), image.to_string(), at.to_string());
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!((seen[0].0.as_str(), seen[0].2.as_str()), ("ADDED", "x"), "{seen:?}");
    // Leaving: the object as the watcher last saw it (gold, x), at the leaving change's
    // resourceVersion.
    assert_eq!(seen[1], event("DELETED", "x", &left_at), "{seen:?}");
    assert_eq!((seen[2].0.as_str(), seen[2].2.as_str()), ("ADDED", "z"), "{seen:?}");
    assert_eq!((seen[3].0.as_str(), seen[3].1.as_str(), seen[3].2.as_str()), ("DELETED", "gold", "z"), "{seen:?}");

    // The same through a field selector.
    let from = now(client, SHIRTS);
    let shirt = json!({"apiVersion": "stable.example.com/v1", "kind": "Shirt",
        "metadata": {"name": "s"}, "spec": {"color": "teal", "size": "M"}});
    write(client, "POST", SHIRTS, "application/json", &shirt);
    let patch = json!({"spec": {"color": "olive", "size": "L"}});
    let left_at = resource_version(&write(client, "PATCH", &format!("{SHIRTS}/s"), merge, &patch));
    let path = format!("{SHIRTS}?watch=1&fieldSelector=spec.color%3Dteal&resourceVersion={from}&timeoutSeconds=2");
    let seen: Vec<(String, Value, Value, String)> = events(client, &path)
        .into_iter()
        .map(|(kind, object)| {
            let at = resource_version(&object);
            (kind, object["spec"]["color"].clone(), object["spec"]["size"].clone(), at)
        })
        .collect();
    let expected = [
        ("ADDED".to_string(), json!("teal"), json!("M"), seen.first().map(|e| e.3.clone()).unwrap_or_default()),
        ("DELETED".to_string(), json!("teal"), json!("M"), left_at),
    ];
    assert_eq!(seen, expected);
}

/// The value of a sample of `/metrics` whose line starts with `series` (name and labels).
fn sample(client: &Client, series: &str) -> Option<f64> {
    let text = client.get("/metrics").unwrap().text();
    text.lines().find(|l| l.starts_with(series)).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Waits (at most a minute: a hang guard) until `condition` holds.
fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The events of a watch stream as (type, resourceVersion), read until the server ends it
/// (`true`) or `limit` events were seen (`false`; the stream stays open while `lines` lives).
async fn read_events<S: tokio::io::AsyncRead + Unpin>(
    lines: &mut tokio::io::Lines<BufReader<S>>,
    limit: usize,
) -> (Vec<(String, u64)>, bool) {
    let mut events = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await {
            Ok(Ok(Some(line))) => {
                // The zero-length chunk ends a chunked body: the server ended the watch.
                if line.trim() == "0" {
                    return (events, true);
                }
                let Some(start) = line.find('{') else { continue };
                let event: Value = serde_json::from_str(&line[start..]).unwrap();
                let revision = event["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
                events.push((event["type"].as_str().unwrap().to_string(), revision));
                if events.len() == limit {
                    return (events, false);
                }
            }
            Ok(Ok(None)) | Ok(Err(_)) => return (events, true),
            Err(_) => panic!("the watch neither sent nor ended for a minute"),
        }
    }
}

/// A watcher that stops reading while `writes` CronTabs of 8 KiB are created is closed; one
/// that reads sees every creation. Needs the CronTab definition.
pub fn check_a_watcher_that_stops_reading_is_closed(server: &TestServer, writes: usize) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = Client::admin(server);
    let watch_path = format!("{CRONTABS}?watch=1&resourceVersion=0&timeoutSeconds=600");
    let (stalled, reader) = runtime.block_on(async {
        let stalled = client.raw_get(&watch_path).await;
        let reading = client.raw_get(&watch_path).await;
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(reading).lines();
            let (seen, ended) = read_events(&mut lines, writes).await;
            (seen, ended, lines)
        });
        (stalled, reader)
    });
    let watchers = r#"apiserver_registered_watchers{group="stable.example.com",version="v1",kind="CronTab"}"#;
    wait_until("both watches are registered", || sample(&client, watchers) == Some(2.0));
    // Large objects, so that the stalled watcher's socket and queue fill well before the end.
    let padding = "x".repeat(8 * 1024);
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let client = Client::admin(server);
            let padding = padding.clone();
            std::thread::spawn(move || {
                for i in (w..writes).step_by(8) {
                    let body = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                        "metadata": {"name": format!("c{i}")}, "spec": {"image": padding}});
                    let response = client.send("POST", CRONTABS, "application/json", body.to_string()).unwrap();
                    assert_eq!(response.status, 201, "{}", response.text());
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let (seen, ended, _reading) = runtime.block_on(reader).unwrap();
    assert!(!ended, "the reading watch goes on");
    assert_eq!(seen.len(), writes, "the reading watcher saw every change");
    assert!(seen.windows(2).all(|w| w[0].1 < w[1].1), "in order");
    // The stalled one was closed, counted, and let go by the server while its client still
    // does not read.
    let terminated = r#"apiserver_terminated_watchers_total{group="stable.example.com",resource="crontabs"}"#;
    wait_until("the stalled watch is counted as terminated", || sample(&client, terminated) == Some(1.0));
    wait_until("only the reading watch is registered", || sample(&client, watchers) == Some(1.0));
    // Read now, its stream holds a gap-free prefix of the changes and ends cleanly.
    let (stalled_seen, ended) = runtime.block_on(async {
        let mut stalled = stalled;
        let mut head = [0u8; 1];
        stalled.read_exact(&mut head).await.unwrap();
        read_events(&mut BufReader::new(stalled).lines(), writes).await
    });
    assert!(ended, "the server ended the stalled watch");
    assert!(stalled_seen.len() < writes, "closed before the end ({} events)", stalled_seen.len());
    assert_eq!(stalled_seen[..], seen[..stalled_seen.len()], "a prefix of the changes, in order");
}
