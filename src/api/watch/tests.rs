//! Watch rendering (verbatim lines against the general path) and what a watch holds while its
//! connection takes nothing: the API in process on a sled store, the response body read (or
//! not) frame by frame.

use http::Request;
use http_body_util::BodyExt;
use serde_json::json;

use super::*;
use crate::api::ApiOptions;
use crate::api::body::{RespBody, request_body};
use crate::api::present::tests::{call, stored};
use crate::core::request_info::{Query, RequestInfo};
use crate::core::user::UserInfo;
use crate::definitions::Registry;
use crate::store::Backend;
use crate::store::sled::{SledOptions, SledStore};

#[test]
fn verbatim_lines_are_the_encoded_events() {
    let call = call();
    let mut written = 0;
    for (i, bytes) in stored().into_iter().enumerate() {
        for kind in [EventType::Added, EventType::Modified, EventType::Deleted] {
            let revision = i as u64 + 1;
            let event = store::Event { kind, key: String::new(), revision, value: bytes.clone().into(), prev: None };
            let Some(Line::Rendered(line)) = verbatim_line(&call.served, &event) else { continue };
            // A stalled watch holds its line: reserved once, never grown (and doubled).
            assert!(line.capacity() <= bytes.len() + VERBATIM_FRAMING_BYTES, "{} for {}", line.capacity(), line.len());
            let object = present::from_storage(&call, &bytes, revision).unwrap();
            let name = match kind {
                EventType::Added => "ADDED",
                EventType::Modified => "MODIFIED",
                EventType::Deleted => "DELETED",
            };
            assert_eq!(line, encode_event(name, &object));
            written += 1;
        }
    }
    assert_eq!(written, 6, "the defaulted objects are written from their bytes");
}

#[test]
fn verbatim_lines_of_large_objects_share_the_stored_bytes() {
    let call = call();
    let padding = "x".repeat(SHARED_FROM_BYTES);
    let mut written = 0;
    for (i, bytes) in stored().into_iter().enumerate() {
        // The stored objects with a long member added where pruning keeps it.
        let mut object: Value = serde_json::from_slice(&bytes).unwrap();
        object["metadata"]["annotations"] = json!({"padding": padding});
        let value = Bytes::from(crate::core::json::to_vec(&object).unwrap());
        let revision = i as u64 + 1;
        let event = store::Event { kind: EventType::Modified, key: String::new(), revision, value, prev: None };
        let Some(line) = verbatim_line(&call.served, &event) else { continue };
        let Line::Pieces(pieces) = line else { panic!("a line of {} bytes was copied", event.value.len()) };
        let expected = encode_event("MODIFIED", &present::from_storage(&call, &event.value, revision).unwrap());
        assert_eq!(pieces.concat(), expected);
        // Every byte of the stored object is a slice of the stored value; what was written
        // besides is the framing and the resourceVersion.
        let stored = event.value.as_ptr_range();
        let (shared, copied): (Vec<&Bytes>, Vec<&Bytes>) =
            pieces.iter().partition(|piece| stored.contains(&piece.as_ptr()));
        assert_eq!(shared.iter().map(|piece| piece.len()).sum::<usize>(), event.value.len(), "{pieces:?}");
        assert!(copied.iter().map(|piece| piece.len()).sum::<usize>() <= VERBATIM_FRAMING_BYTES);
        written += 1;
    }
    assert_eq!(written, 2, "the defaulted objects are written from their bytes");
}

/// The CronTabs of namespace `ns`.
fn collection() -> String {
    let version = crate::core::gvr::GroupVersion::new("stable.example.com", "v1");
    crate::core::paths::collection_path(&version, Some("ns"), "crontabs")
}

/// The API over a sled store in `dir`, serving the CronTab of `present::tests::call`.
fn api(dir: &std::path::Path) -> Api {
    let (registry, problems) = Registry::build(vec![(*call().served.definition).clone()]);
    assert!(problems.is_empty());
    let store = SledStore::open(dir, SledOptions::default()).unwrap();
    Api::new(Backend::Sled(store), registry, ApiOptions::default())
}

async fn serve(api: &Api, method: http::Method, target: &str, body: String) -> Response<RespBody> {
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    let query = Query::parse(target.split_once('?').map(|(_, q)| q));
    let mut request = Request::builder()
        .method(method.clone())
        .uri(target)
        .header(header::CONTENT_TYPE, "application/json")
        .body(request_body(body))
        .unwrap();
    request.extensions_mut().insert(RequestInfo::parse(&method, path, &query).unwrap());
    request.extensions_mut().insert(UserInfo::new("tester", vec!["system:masters".into()]));
    api.serve_resource(request).await
}

/// Lets every other task of this (current-thread) runtime run until it waits: the watch's
/// task renders and queues with no I/O of its own, but takes room in its budget and then
/// queues each line (two waits per event, each a turn or more under tokio's cooperative
/// budget), so a batch of events takes many turns: twenty thousand settle the largest here.
async fn settle() {
    for _ in 0..20_000 {
        tokio::task::yield_now().await;
    }
}

/// The lines the body has ready now, each as the frames it came in, kept (as a connection
/// that has not written them yet keeps them).
fn ready_lines(body: &mut RespBody) -> Vec<Vec<Bytes>> {
    let mut lines = Vec::new();
    let mut line = Vec::new();
    while let Some(Some(frame)) = futures_util::FutureExt::now_or_never(body.frame()) {
        let frame = frame.unwrap().into_data().unwrap();
        let ends = frame.ends_with(b"\n");
        line.push(frame);
        if ends {
            lines.push(std::mem::take(&mut line));
        }
    }
    assert!(line.is_empty(), "a line was handed over in part: {line:?}");
    lines
}

/// The lines the body has ready now, each joined from its frames.
fn ready_frames(body: &mut RespBody) -> Vec<Bytes> {
    ready_lines(body).into_iter().map(|frames| Bytes::from(frames.concat())).collect()
}

#[tokio::test(flavor = "current_thread")]
async fn the_initial_state_is_rendered_only_as_the_connection_takes_it() {
    let dir = tempfile::tempdir().unwrap();
    let api = api(dir.path());
    let objects = 40;
    let padding = "x".repeat(20_000);
    for i in 0..objects {
        let object = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": format!("c{i:02}")}, "spec": {"image": padding, "replicas": 1}});
        let created = serve(&api, http::Method::POST, &collection(), object.to_string()).await;
        assert_eq!(created.status(), StatusCode::CREATED);
    }
    let target = format!("{}?watch=1&timeoutSeconds=3600", collection());
    let response = serve(&api, http::Method::GET, &target, String::new()).await;
    // Marked for the connection, which seals its TLS records small (`server::connection`).
    assert!(response.extensions().get::<crate::api::body::Streamed>().is_some());
    let mut body = response.into_body();
    let mut names = Vec::new();
    let mut most_held = 0;
    while names.len() < objects {
        settle().await;
        // What the watch handed over while the connection kept everything before: never more
        // than its budget, and at least one line (each line here is over half the budget).
        let held = ready_lines(&mut body);
        assert!(!held.is_empty(), "the watch stalled after {} objects", names.len());
        let bytes: usize = held.iter().flatten().map(Bytes::len).sum();
        assert!(bytes <= pipe::BUDGET, "{} lines of {bytes} bytes handed over at once", held.len());
        most_held = most_held.max(held.len());
        for frames in &held {
            // A 20 KB object comes in pieces (slices of the stored bytes, checked by
            // `verbatim_lines_of_large_objects_share_the_stored_bytes`) around what was rendered.
            assert!(frames.len() > 1, "a 20 KB object copied into one line");
            let line = frames.concat();
            let event: Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(event["type"], "ADDED");
            names.push(event["object"]["metadata"]["name"].as_str().unwrap().to_string());
        }
        // The connection writes them: their share of the budget comes back.
    }
    assert_eq!(most_held, 1, "one 20 KB line at a time under a 32 KiB budget");
    let expected: Vec<String> = (0..objects).map(|i| format!("c{i:02}")).collect();
    assert_eq!(names, expected);
}

/// A CronTab named `name`, as a create's body.
fn crontab(name: &str) -> String {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name},
        "spec": {"image": "nginx", "replicas": 1}})
    .to_string()
}

#[tokio::test(flavor = "current_thread")]
async fn a_watch_whose_connection_takes_nothing_is_closed_once_its_queue_fills() {
    let dir = tempfile::tempdir().unwrap();
    let api = api(dir.path());
    let target = format!("{}?watch=1&timeoutSeconds=3600", collection());
    // Never polled: its lines stay queued for a connection that takes none.
    let mut stalled = serve(&api, http::Method::GET, &target, String::new()).await.into_body();
    let mut reading = serve(&api, http::Method::GET, &target, String::new()).await.into_body();
    // The stalled watch's task fills the body's line queue and waits on the next line; the
    // store then queues its events up to the limit and drops it on the one after: at most
    // this many changes, whatever the order the tasks ran in.
    let writes = pipe::LINES + 1 + store::watchers::WATCHER_EVENTS + 1;
    let mut seen = Vec::new();
    let mut created = 0;
    while created < writes {
        let batch = (created..writes.min(created + 50)).map(|i| {
            let api = &api;
            async move { serve(api, http::Method::POST, &collection(), crontab(&format!("c{i:04}"))).await.status() }
        });
        let statuses = futures_util::future::join_all(batch).await;
        assert!(statuses.iter().all(|s| *s == StatusCode::CREATED), "{statuses:?}");
        created += statuses.len();
        settle().await;
        for line in ready_frames(&mut reading) {
            let event: Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(event["type"], "ADDED");
            seen.push(event["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap());
        }
    }
    assert_eq!(seen.len(), writes, "the reading watch saw every change and goes on");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order");
    assert!(futures_util::FutureExt::now_or_never(reading.frame()).is_none(), "the reading watch is open");
    // The stalled watch ended: what was handed to its connection is a prefix of the changes,
    // then the body ends.
    let mut stalled_seen = Vec::new();
    for line in ready_frames(&mut stalled) {
        let event: Value = serde_json::from_slice(&line).unwrap();
        stalled_seen.push(event["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap());
    }
    assert!(
        matches!(futures_util::FutureExt::now_or_never(stalled.frame()), Some(None)),
        "the stalled watch's body ended"
    );
    // Its budget (or its line queue) bounded what it was handed; the line it waited to hand
    // over was let go with the rest.
    assert!((1..=pipe::LINES).contains(&stalled_seen.len()), "{} lines handed over", stalled_seen.len());
    assert_eq!(stalled_seen[..], seen[..stalled_seen.len()], "a prefix of the changes, in order");
}

#[tokio::test(flavor = "current_thread")]
async fn watches_that_start_from_the_same_list_share_its_objects() {
    let dir = tempfile::tempdir().unwrap();
    let api = api(dir.path());
    let padding = "x".repeat(20_000);
    for i in 0..3 {
        let object = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": format!("c{i}")}, "spec": {"image": padding, "replicas": 1}});
        assert_eq!(
            serve(&api, http::Method::POST, &collection(), object.to_string()).await.status(),
            StatusCode::CREATED
        );
    }
    let target = format!("{}?watch=1&timeoutSeconds=3600", collection());
    // Two watches whose connections take nothing yet, and a third after a change.
    let mut first = serve(&api, http::Method::GET, &target, String::new()).await.into_body();
    let mut second = serve(&api, http::Method::GET, &target, String::new()).await.into_body();
    settle().await;
    let Ok([shared]) = <[_; 1]>::try_from(api.initial_states().in_use()) else { panic!("one state in use") };
    assert_eq!(shared.objects.len(), 3);
    // The two watches' handles and this one: one list for both watches.
    assert_eq!(Arc::strong_count(&shared), 3);
    assert_eq!(serve(&api, http::Method::POST, &collection(), crontab("c3")).await.status(), StatusCode::CREATED);
    let mut third = serve(&api, http::Method::GET, &target, String::new()).await.into_body();
    settle().await;
    let Ok([newer]) = <[_; 1]>::try_from(api.initial_states().in_use()) else { panic!("the newest state in use") };
    assert_eq!(newer.objects.len(), 4, "a later list is a state of its own");
    assert_eq!(Arc::strong_count(&shared), 3, "the first two watches still send theirs");
    drop((shared, newer));
    // Each watch sends its whole state, in order; the first two then see the change.
    for body in [&mut first, &mut second, &mut third] {
        let mut seen = Vec::new();
        while seen.len() < 4 {
            settle().await;
            let lines = ready_frames(body);
            assert!(!lines.is_empty(), "stalled after {seen:?}");
            for line in lines {
                let event: Value = serde_json::from_slice(&line).unwrap();
                seen.push(format!(
                    "{} {}",
                    event["type"].as_str().unwrap(),
                    event["object"]["metadata"]["name"].as_str().unwrap()
                ));
            }
        }
        assert_eq!(seen, ["ADDED c0", "ADDED c1", "ADDED c2", "ADDED c3"]);
    }
    assert!(api.initial_states().in_use().is_empty(), "let go once every watch sent it");
}
