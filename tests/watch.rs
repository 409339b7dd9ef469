//! Watch fan-out: a watcher that stops reading is dropped without slowing writers or other
//! watchers; every reading watcher sees every change in order.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::http::Client;
use support::{CRONTAB_CRD, TestServer};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

const COLL: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";
const WRITES: usize = 6000;

/// Counts ADDED events on a watch connection until the stream ends or `limit` is reached.
async fn count_added(stream: impl tokio::io::AsyncRead + Unpin, limit: usize) -> (usize, bool) {
    let mut lines = BufReader::new(stream).lines();
    let mut added = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await {
            Ok(Ok(Some(line))) => {
                if line.contains("\"type\":\"ADDED\"") {
                    added += 1;
                    if added == limit {
                        return (added, false);
                    }
                }
                // The zero-length chunk ends a chunked body: the server ended the watch.
                if line.trim() == "0" {
                    return (added, true);
                }
            }
            Ok(Ok(None)) | Ok(Err(_)) => return (added, true),
            Err(_) => return (added, false),
        }
    }
}

#[test]
fn a_watcher_that_stops_reading_is_dropped_and_slows_no_one() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let watch_path = format!("{COLL}?watch=1&resourceVersion={}&timeoutSeconds=600", 0);
    let client = Client::admin(&server);
    let (slow, reader) = runtime.block_on(async {
        let slow = client.raw_get(&watch_path).await;
        let active = client.raw_get(&watch_path).await;
        let reader = tokio::spawn(count_added(active, WRITES));
        (slow, reader)
    });
    // Writers: big objects, so that the slow watcher's buffers fill well before the end.
    let padding = "x".repeat(8 * 1024);
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let client = Client::admin(&server);
            let padding = padding.clone();
            std::thread::spawn(move || {
                for i in (w..WRITES).step_by(8) {
                    let body = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": format!("c{i}")}, "spec": {"image": padding}});
                    let response = client.send("POST", COLL, "application/json", serde_json::to_vec(&body).unwrap()).unwrap();
                    assert_eq!(response.status, 201);
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let (active_added, _) = runtime.block_on(reader).unwrap();
    assert_eq!(active_added, WRITES, "the reading watcher saw every change");
    // Now read the slow watcher: it was dropped, so its stream ends short.
    let (slow_added, ended) = runtime.block_on(async {
        let mut slow = slow;
        let mut head = [0u8; 1];
        slow.read_exact(&mut head).await.unwrap();
        count_added(slow, WRITES).await
    });
    assert!(ended, "the server ended the slow watch");
    assert!(slow_added < WRITES, "the slow watcher was dropped before the end ({slow_added} events)");
}

#[test]
fn table_watches_send_column_definitions_once() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    for name in ["a", "b"] {
        let body = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name}, "spec": {"image": "x"}});
        assert_eq!(client.send_json("POST", COLL, &body).status, 201);
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let events: Vec<serde_json::Value> = runtime.block_on(async {
        let stream = client
            .raw_get_accepting(
                &format!("{COLL}?watch=1&timeoutSeconds=2"),
                "application/json;as=Table;v=v1;g=meta.k8s.io",
            )
            .await;
        let mut lines = BufReader::new(stream).lines();
        let mut events = Vec::new();
        while let Ok(Ok(Some(line))) = tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await {
            if let Some(start) = line.find('{') {
                events.push(serde_json::from_str(&line[start..]).unwrap());
            }
        }
        events
    });
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["kind"], "Table");
    assert!(events[0]["object"]["columnDefinitions"].is_array());
    assert!(events[1]["object"].get("columnDefinitions").is_none());
    assert_eq!(events[1]["object"]["rows"][0]["cells"][0], "b");
}

#[test]
fn a_selected_watch_sees_objects_leave_with_their_new_state() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let crontab = |name: &str, tier: &str| {
        json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": name, "labels": {"tier": tier}}, "spec": {"image": "x"}})
    };
    // An unselected object first, so that the list's resourceVersion is not "0" (any).
    assert_eq!(client.send_json("POST", COLL, &crontab("other", "bronze")).status, 201);
    let revision = client.get(COLL).unwrap().json()["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    assert_eq!(client.send_json("POST", COLL, &crontab("c", "gold")).status, 201);
    let relabel = |tier: &str| {
        let patch = json!({"metadata": {"labels": {"tier": tier}}});
        let response = client.send("PATCH", &format!("{COLL}/c"), "application/merge-patch+json", patch.to_string());
        assert_eq!(response.unwrap().status, 200);
    };
    relabel("silver");
    relabel("gold");
    assert_eq!(client.send("DELETE", &format!("{COLL}/c"), "application/json", String::new()).unwrap().status, 200);
    // Replayed from before the writes: the watch ends after its timeout with every event.
    let path = format!("{COLL}?watch=1&labelSelector=tier%3Dgold&resourceVersion={revision}&timeoutSeconds=2");
    let body = client.get(&path).unwrap().text();
    let events: Vec<(String, String)> = body
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|e| (e["type"].as_str().unwrap().to_string(), e["object"]["metadata"]["labels"]["tier"].to_string()))
        .collect();
    // Leaving the selection is a DELETED event carrying the object as it now is.
    let expected = [("ADDED", "gold"), ("DELETED", "silver"), ("ADDED", "gold"), ("DELETED", "gold")];
    let expected: Vec<(String, String)> = expected.iter().map(|(t, l)| (t.to_string(), format!("\"{l}\""))).collect();
    assert_eq!(events, expected, "{body}");
}
