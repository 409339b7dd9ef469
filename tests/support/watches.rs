//! Watch behaviour both backends must show, checked over raw HTTPS: what a watch with a label
//! or field selector reports as an object enters and leaves its selection (kube-apiserver's
//! cache watcher: ADDED with the new content on entering, DELETED with the previous content
//! at the event's resourceVersion on leaving); a watcher that stops reading while changes come
//! is closed (its stream ends cleanly where it stopped, the server counts it in
//! `apiserver_terminated_watchers_total` and no longer holds it), while a reading watcher of
//! the same changes sees every one.

use std::sync::{Arc, Mutex};
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

/// An event of a watch stream, as (type, resourceVersion, name).
type Seen = (String, u64, String);

/// Reads the events of a raw HTTP/1.1 watch response into `seen` until the server ends it
/// (`true`) or `last` names the object of an event (`false`; the stream stays open while
/// `reader` lives). The body is chunked and an event may span chunks (the server sends large
/// objects as slices of the stored bytes), so chunks are joined before lines are split.
async fn read_events<S: tokio::io::AsyncRead + Unpin>(
    reader: &mut BufReader<S>,
    seen: &Mutex<Vec<Seen>>,
    last: Option<&str>,
) -> bool {
    let guard = Duration::from_secs(60);
    let mut line = String::new();
    // The response head, up to its empty line.
    loop {
        line.clear();
        match tokio::time::timeout(guard, reader.read_line(&mut line)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) if line == "\r\n" => break,
            Ok(Ok(_)) => {}
            Err(_) => panic!("the watch sent no head for a minute"),
        }
    }
    let mut body = Vec::new();
    loop {
        line.clear();
        let size = match tokio::time::timeout(guard, reader.read_line(&mut line)).await {
            // A connection cut in the middle of a size line ends the watch as well.
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) if !line.ends_with('\n') => return true,
            Ok(Ok(_)) => usize::from_str_radix(line.trim().split(';').next().unwrap_or_default(), 16).unwrap(),
            Err(_) => panic!("the watch neither sent nor ended for a minute"),
        };
        // The zero-length chunk ends a chunked body: the server ended the watch.
        if size == 0 {
            return true;
        }
        let mut chunk = vec![0u8; size + 2];
        match tokio::time::timeout(guard, reader.read_exact(&mut chunk)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return true,
            Err(_) => panic!("a chunk of the watch did not arrive for a minute"),
        }
        assert_eq!(&chunk[size..], b"\r\n", "a chunk ends with CRLF");
        body.extend_from_slice(&chunk[..size]);
        while let Some(end) = body.iter().position(|b| *b == b'\n') {
            let event: Value = serde_json::from_slice(&body[..end]).unwrap();
            body.drain(..=end);
            let object = &event["object"]["metadata"];
            let revision = object["resourceVersion"].as_str().unwrap().parse().unwrap();
            let name = object["name"].as_str().unwrap().to_string();
            let done = last == Some(name.as_str());
            seen.lock().unwrap().push((event["type"].as_str().unwrap().to_string(), revision, name));
            if done {
                return false;
            }
        }
    }
}

/// A watcher that stops reading while CronTabs of 8 KiB are created is closed; one that reads
/// sees every creation. Creations go on in rounds until the server reports the stalled watcher
/// closed, which must happen within `most` of them: its socket's receive buffer is small and
/// the server's queue per watcher bounded, so it fills after a bounded number of changes. Each
/// round waits until the reading watcher has seen it, so that one is never far behind. Needs
/// the CronTab definition.
pub fn check_a_watcher_that_stops_reading_is_closed(server: &TestServer, most: usize) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = Client::admin(server);
    let watch_path = format!("{CRONTABS}?watch=1&resourceVersion=0&timeoutSeconds=600");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (stalled, reader) = runtime.block_on(async {
        let stalled = client.raw_get_with_receive_buffer(&watch_path, 16 * 1024).await;
        let reading = client.raw_get(&watch_path).await;
        let seen = seen.clone();
        let reader = tokio::spawn(async move {
            let mut reader = BufReader::new(reading);
            let ended = read_events(&mut reader, &seen, Some("last")).await;
            (ended, reader)
        });
        (stalled, reader)
    });
    let watchers = r#"apiserver_registered_watchers{group="stable.example.com",version="v1",kind="CronTab"}"#;
    let terminated = r#"apiserver_terminated_watchers_total{group="stable.example.com",resource="crontabs"}"#;
    wait_until("both watches are registered", || sample(&client, watchers) == Some(2.0));
    // Large objects, so that the stalled watcher's socket and queue fill in few changes.
    let padding = "x".repeat(8 * 1024);
    let create = |client: &Client, name: &str| {
        let body = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": name}, "spec": {"image": padding}});
        let response = client.send("POST", CRONTABS, "application/json", body.to_string()).unwrap();
        assert_eq!(response.status, 201, "{}", response.text());
    };
    let (writers, per_writer) = (8, 25);
    let mut created = 0;
    while sample(&client, terminated).is_none() {
        assert!(created < most, "the stalled watcher is still open after {created} changes");
        std::thread::scope(|scope| {
            for w in 0..writers {
                let client = Client::admin(server);
                let create = &create;
                scope.spawn(move || {
                    for i in 0..per_writer {
                        create(&client, &format!("c{}", created + w * per_writer + i));
                    }
                });
            }
        });
        created += writers * per_writer;
        wait_until("the reading watcher saw the round", || seen.lock().unwrap().len() == created);
    }
    assert_eq!(sample(&client, terminated), Some(1.0), "only the stalled watcher was closed");
    create(&client, "last");
    let (ended, _reading) = runtime.block_on(reader).unwrap();
    assert!(!ended, "the reading watch goes on");
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(seen.len(), created + 1, "the reading watcher saw every change");
    assert!(seen.iter().all(|(kind, ..)| kind == "ADDED"));
    assert!(seen.windows(2).all(|w| w[0].1 < w[1].1), "in order");
    // The server no longer holds the stalled one, while its client still does not read.
    wait_until("only the reading watch is registered", || sample(&client, watchers) == Some(1.0));
    // Read now, its stream holds a gap-free prefix of the changes and ends cleanly.
    let stalled_seen = Mutex::new(Vec::new());
    let ended = runtime.block_on(async {
        let mut stalled = stalled;
        let mut head = [0u8; 1];
        stalled.read_exact(&mut head).await.unwrap();
        read_events(&mut BufReader::new(stalled), &stalled_seen, None).await
    });
    let stalled_seen = stalled_seen.into_inner().unwrap();
    assert!(ended, "the server ended the stalled watch");
    assert!(stalled_seen.len() < created, "closed before the end ({} events)", stalled_seen.len());
    assert_eq!(stalled_seen[..], seen[..stalled_seen.len()], "a prefix of the changes, in order");
}
