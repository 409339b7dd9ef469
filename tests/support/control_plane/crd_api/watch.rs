//! Watches of CustomResourceDefinitions as kube-apiserver's watch cache serves them: from no
//! resourceVersion or `0`, every selected definition as ADDED first; from a resourceVersion,
//! every event after it; with `sendInitialEvents=true` (which needs
//! `resourceVersionMatch=NotOlderThan`), the selected definitions as ADDED, then a BOOKMARK
//! annotated `k8s.io/initial-events-end`. Selectors apply to both the
//! old and the new object: a definition that stops matching is DELETED (its previous content
//! at the event's resourceVersion), one that starts matching is ADDED. With
//! `allowWatchBookmarks`, a BOOKMARK carries the latest resourceVersion seen every
//! `crd_bookmark_ms`. The watch ends at `timeoutSeconds`, when an outage begins or when the
//! watches are ended; one from a compacted resourceVersion is a single ERROR event (410
//! Expired).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use serde_json::{Value, json};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::super::respond::{self, BoxError, Response};
use super::super::state::{Event, State, lock};
use super::strategy::{ErrorKind, Failure, FieldError};
use super::{API_VERSION, Query, RESOURCE, Selection};

fn line(kind: &str, object: &Value) -> Bytes {
    let mut text = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap();
    text.push(b'\n');
    Bytes::from(text)
}

fn bookmark(revision: u64, initial_events_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": revision.to_string(), "creationTimestamp": null});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        &json!({"kind": "CustomResourceDefinition", "apiVersion": API_VERSION, "metadata": metadata, "spec": {"group": "", "names": {"plural": "", "kind": ""}, "scope": "", "versions": null}, "status": {"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": null}}),
    )
}

/// What one change looks like to a watch with `selection`: nothing, or its event line.
fn filtered(event: &Event, selection: &Selection) -> Option<Bytes> {
    let now = event.kind != "DELETED" && selection.matches(&event.object);
    let before = event.previous.as_ref().is_some_and(|p| selection.matches(p));
    match (before, now) {
        (false, true) => Some(line("ADDED", &event.object)),
        (true, true) => Some(line(event.kind, &event.object)),
        (true, false) if event.kind == "DELETED" => Some(line("DELETED", &event.object)),
        (true, false) => {
            let mut previous = event.previous.clone().unwrap_or_default();
            previous["metadata"]["resourceVersion"] = json!(event.revision.to_string());
            Some(line("DELETED", &previous))
        }
        (false, false) => None,
    }
}

/// The ListOptions checks of a watch (`validateWatchOptions`).
fn check(query: &Query<'_>) -> Result<(), Failure> {
    let mut errors = Vec::new();
    let forbidden =
        |detail: &str| FieldError { field: "resourceVersionMatch".into(), kind: ErrorKind::Forbidden(detail.into()) };
    let mut matching = query.get("resourceVersionMatch").unwrap_or_default();
    let mut initial = query.get("sendInitialEvents").is_some();
    // `SetListOptionsDefaults` (WatchList on): a watch from no or any revision sends the state.
    let resource_version = query.get("resourceVersion").unwrap_or_default();
    if !initial && matching.is_empty() && (resource_version.is_empty() || resource_version == "0") {
        initial = true;
        matching = "NotOlderThan";
    }
    if initial && matching != "NotOlderThan" {
        errors.push(forbidden("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
    }
    if !matching.is_empty() {
        if !initial {
            errors.push(forbidden("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
        }
        if matching != "NotOlderThan" {
            errors.push(FieldError {
                field: "resourceVersionMatch".into(),
                kind: ErrorKind::NotSupported(matching.to_string(), &["NotOlderThan"]),
            });
        }
        if query.get("continue").is_some_and(|c| !c.is_empty()) {
            errors.push(forbidden("resourceVersionMatch is forbidden when continue is provided"));
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(Failure::invalid_kind("meta.k8s.io", "ListOptions", "", &errors)) }
}

/// `GET ...?watch=1`.
pub fn serve(state: &Arc<State>, query: &Query<'_>) -> Response {
    if let Err(failure) = check(query) {
        return failure.response();
    }
    let selection = match query.selectors() {
        Ok(selection) => selection,
        Err(failure) => return failure.response(),
    };
    let bookmarks = matches!(query.get("allowWatchBookmarks"), Some("true" | "1"));
    let initial = query.get("sendInitialEvents") == Some("true");
    let from: u64 = query.get("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
    let compacted = state.crd_compacted.load(Ordering::SeqCst);
    if from != 0 && !initial && from < compacted {
        // As kube-apiserver answers a watch from a compacted revision: one ERROR event.
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": format!("too old resource version: {from} ({compacted})"), "reason": "Expired", "code": 410});
        return respond::bytes(200, "application/json", line("ERROR", &status));
    }
    let mut live = state.events.subscribe();
    let (mut last, mut replay): (u64, Vec<Bytes>) = {
        let objects = lock(&state.objects);
        if from == 0 || initial {
            // No resourceVersion, `0`, or initial events "not older than" it: the current state.
            let added = objects.crds.values().filter(|c| selection.matches(c)).map(|c| line("ADDED", c)).collect();
            (objects.revision, added)
        } else {
            let replay = objects
                .log
                .iter()
                .filter(|e| e.revision > from && e.resource == RESOURCE)
                .filter_map(|e| filtered(e, &selection))
                .collect();
            (objects.revision, replay)
        }
    };
    if initial {
        replay.push(bookmark(last, true));
    }
    let limit = Duration::from_secs(query.get("timeoutSeconds").and_then(|t| t.parse().ok()).unwrap_or(1800));
    let every = Duration::from_millis(state.crd_bookmark_ms.load(Ordering::SeqCst).max(1));
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let state = state.clone();
    tokio::spawn(async move {
        for chunk in replay {
            if tx.send(chunk).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::sleep(limit);
        tokio::pin!(deadline);
        let mut marks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        let mut outage = tokio::time::interval(Duration::from_millis(50));
        let epoch = state.crd_watch_epoch.load(Ordering::SeqCst);
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = outage.tick() => {
                    if state.crd_outage.load(Ordering::SeqCst) || state.crd_watch_epoch.load(Ordering::SeqCst) != epoch {
                        return;
                    }
                }
                _ = marks.tick(), if bookmarks => {
                    if tx.send(bookmark(last, false)).await.is_err() {
                        return;
                    }
                }
                event = live.recv() => {
                    let Ok(event) = event else { return };
                    if event.revision <= last {
                        continue;
                    }
                    last = event.revision;
                    if event.resource != RESOURCE {
                        continue;
                    }
                    if let Some(chunk) = filtered(&event, &selection)
                        && tx.send(chunk).await.is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    let stream = ReceiverStream::new(rx).map(|chunk| Ok::<_, BoxError>(hyper::body::Frame::data(chunk)));
    http::Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(StreamBody::new(stream).boxed_unsync())
        .unwrap()
}
