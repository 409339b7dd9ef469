//! The core API the project's server calls on the main apiserver: the
//! `kube-system/extension-apiserver-authentication` ConfigMap (get, list, watch) and
//! Namespaces (get, list, watch, create, delete), with kube-apiserver's list and watch shapes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use serde_json::{Value, json};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::rbac::Attributes;
use super::respond::{self, BoxError, Response};
use super::state::{Event, State, lock};

const AUTH_CONFIGMAP: &str = "extension-apiserver-authentication";

/// Serves a core request whose attributes were authorized.
pub async fn serve(state: &Arc<State>, attrs: &Attributes, query: &[(String, String)], body: Bytes) -> Response {
    let get = |k: &str| query.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    if attrs.resource == "configmaps" {
        while state.configmaps_held.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    match (attrs.resource.as_str(), attrs.verb.as_str()) {
        ("configmaps", "get") => {
            let auth = lock(&state.objects).auth_configmap.clone();
            match (&attrs.namespace[..], &attrs.name[..], auth) {
                ("kube-system", AUTH_CONFIGMAP, Some(map)) => respond::json(200, &map),
                _ => match state.get_object("configmaps", &attrs.namespace, &attrs.name) {
                    Some(map) => respond::json(200, &map),
                    None => respond::not_found("configmaps", &attrs.name),
                },
            }
        }
        // Other ConfigMaps (admission policy params) are stored objects; labels select them.
        ("configmaps", "list") if attrs.namespace != "kube-system" => {
            let selector = get("labelSelector").unwrap_or_default();
            let namespace = attrs.namespace.clone();
            super::stored_api::list_selected(state, "configmaps", &namespace, &selector)
        }
        ("configmaps", "list") => list(state, "configmaps", |o| matches_configmap(o, attrs)),
        ("configmaps", "watch") => {
            let attrs = attrs.clone();
            watch(
                state,
                "configmaps",
                move |o| matches_configmap(o, &attrs),
                get("resourceVersion"),
                get("timeoutSeconds"),
            )
        }
        ("namespaces", "get") => match lock(&state.objects).namespaces.get(&attrs.name) {
            Some(ns) => respond::json(200, ns),
            None => respond::not_found("namespaces", &attrs.name),
        },
        ("namespaces", "list") => list(state, "namespaces", |_| true),
        ("namespaces", "watch") => watch(state, "namespaces", |_| true, get("resourceVersion"), get("timeoutSeconds")),
        ("namespaces", "create") => {
            let Some(name) = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["metadata"]["name"].as_str().map(str::to_string))
            else {
                return respond::status(400, "BadRequest", "the namespace needs metadata.name", None);
            };
            match state.create_namespace(&name) {
                Ok(ns) => respond::json(201, &ns),
                Err(()) => respond::status(
                    409,
                    "AlreadyExists",
                    &format!("namespaces \"{name}\" already exists"),
                    Some(json!({"name": name, "kind": "namespaces"})),
                ),
            }
        }
        ("resourcequotas" | "secrets" | "serviceaccounts" | "services", _) => {
            super::stored_api::serve(state, attrs, query, body)
        }
        ("namespaces", "delete") => match state.delete_namespace(&attrs.name) {
            Some(ns) => respond::json(200, &ns),
            None => respond::not_found("namespaces", &attrs.name),
        },
        _ => respond::status(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            Some(json!({})),
        ),
    }
}

fn matches_configmap(object: &Value, attrs: &Attributes) -> bool {
    object["metadata"]["namespace"] == "kube-system"
        && (attrs.namespace.is_empty() || attrs.namespace == "kube-system")
        && (attrs.name.is_empty() || object["metadata"]["name"] == attrs.name.as_str())
}

fn current(state: &State, resource: &str) -> (u64, Vec<Value>) {
    let objects = lock(&state.objects);
    let items = match resource {
        "configmaps" => objects
            .auth_configmap
            .iter()
            .cloned()
            .chain(objects.stored.iter().filter(|((r, _, _), _)| *r == "configmaps").map(|(_, o)| o.clone()))
            .collect(),
        "namespaces" => objects.namespaces.values().cloned().collect(),
        other => objects.stored.iter().filter(|((r, _, _), _)| *r == other).map(|(_, o)| o.clone()).collect(),
    };
    (objects.revision, items)
}

/// A list of a resource as kube-apiserver answers it: `<Kind>List` with the current
/// resourceVersion.
pub fn list(state: &State, resource: &str, keep: impl Fn(&Value) -> bool) -> Response {
    let (revision, items) = current(state, resource);
    let (kind, api_version) = match resource {
        "configmaps" => ("ConfigMapList", "v1"),
        "namespaces" => ("NamespaceList", "v1"),
        other => super::stored_api::list_kind(other),
    };
    let items: Vec<Value> = items.into_iter().filter(|o| keep(o)).collect();
    respond::json(
        200,
        &json!({"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": revision.to_string()}, "items": items}),
    )
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut text = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap();
    text.push(b'\n');
    Bytes::from(text)
}

/// A watch: replays what happened after `resourceVersion` (or the current objects as ADDED
/// when it is absent or 0), then streams, until `timeoutSeconds`.
pub fn watch(
    state: &Arc<State>,
    resource: &'static str,
    keep: impl Fn(&Value) -> bool + Send + 'static,
    resource_version: Option<String>,
    timeout_seconds: Option<String>,
) -> Response {
    let mut live = state.events.subscribe();
    let from: u64 = resource_version.and_then(|v| v.parse().ok()).unwrap_or(0);
    let (mut last, replay): (u64, Vec<Bytes>) = if from == 0 {
        let (revision, items) = current(state, resource);
        (revision, items.iter().filter(|o| keep(o)).map(|o| line("ADDED", o)).collect())
    } else {
        let objects = lock(&state.objects);
        let replay = objects
            .log
            .iter()
            .filter(|e| e.revision > from && e.resource == resource && keep(&e.object))
            .map(|e| line(e.kind, &e.object))
            .collect();
        (objects.revision, replay)
    };
    let limit = Duration::from_secs(timeout_seconds.and_then(|t| t.parse().ok()).unwrap_or(1800));
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        for chunk in replay {
            if tx.send(chunk).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::sleep(limit);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                event = live.recv() => {
                    let Ok(Event { revision, resource: r, kind, object, .. }) = event else { return };
                    if revision <= last || r != resource || !keep(&object) {
                        continue;
                    }
                    last = revision;
                    if tx.send(line(kind, &object)).await.is_err() {
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
