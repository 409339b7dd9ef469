//! Watch fan-out on sled (the etcd backend runs the same checks in `etcd_backend.rs`): a
//! watcher that stops reading is closed without slowing writers or other watchers, and every
//! reading watcher sees every change in order; Table watches; selected watches.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::http::Client;
use support::{CRONTAB_CRD, SHIRT_CRD, TestServer};
use tokio::io::{AsyncBufReadExt, BufReader};

const COLL: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";
/// Changes after which a watcher that stopped reading must have been closed (a hang guard).
const MOST_WRITES: usize = 6000;

#[test]
fn a_watcher_that_stops_reading_is_closed_and_slows_no_one() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    support::watches::check_a_watcher_that_stops_reading_is_closed(&server, MOST_WRITES);
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
