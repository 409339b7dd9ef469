//! Watch fan-out: a watcher that stops reading is dropped without slowing writers or other
//! watchers; every reading watcher sees every change in order.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::http::Client;
use support::{CRONTAB_CRD, SHIRT_CRD, TestServer};
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
fn a_selected_watch_sees_objects_leave_with_their_previous_content() {
    let server = TestServer::start(&[CRONTAB_CRD, SHIRT_CRD]);
    support::watches::check_objects_leaving_a_selection(&Client::admin(&server));
}
