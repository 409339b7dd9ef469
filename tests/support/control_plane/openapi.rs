//! The double's OpenAPI, as kube-aggregator serves it: `/openapi/v2` merged from one download
//! of the backend's document per APIService (as `system:aggregator`, through the APIService's
//! Service and so with its TLS server name, with `If-None-Match`; filtered to the APIService's
//! group version's paths and the definitions that only other paths used dropped; a 404 or a
//! part without new paths is skipped) and
//! served as JSON or protobuf by `Accept`, with an entity tag and `Vary: Accept`;
//! `/openapi/v3` the union of the indexes downloaded once per APIService through its own
//! Service (kube-aggregator's specProxier keeps each whole); `/openapi/v3/<path>` of a path some
//! index names proxied to the backend, through that APIService's Service, as the client's own
//! request (query, headers and identity).

use std::net::SocketAddr;

use serde_json::{Value, json};

use super::aggregator::{self, Backend, Caller};
use super::rbac::User;
use super::respond::{self, Body, Response};
use super::state::{ApiService, State, V2Download, lock};
use crd_apiserver::api::openapi::v2_proto as openapi_v2_proto;

const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

fn aggregator_user() -> User {
    User::new("system:aggregator", &[])
}

/// The media types of an `Accept` header, in the client's order, without parameters.
fn accepted(accept: &str) -> Vec<String> {
    let accept = if accept.trim().is_empty() { "*/*" } else { accept };
    accept.split(',').map(|c| c.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()).collect()
}

/// Which encoding of the v2 document a client takes: kube-openapi serves the first clause
/// that JSON or protobuf matches, wildcards included.
fn v2_encoding(accept: &str) -> Option<&'static str> {
    for clause in accepted(accept) {
        let (kind, sub) = clause.split_once('/').unwrap_or((clause.as_str(), ""));
        for (offered_sub, returned) in [
            ("json", "application/json"),
            ("com.github.proto-openapi.spec.v2@v1.0+protobuf", PROTOBUF),
            ("com.github.proto-openapi.spec.v2.v1.0+protobuf", PROTOBUF),
        ] {
            if (kind == "application" || kind == "*") && (sub == offered_sub || sub == "*") {
                return Some(returned);
            }
        }
    }
    None
}

/// The `$ref` names (`#/definitions/<name>`) anywhere in `value`.
fn references(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child) {
                    ("$ref", Value::String(r)) => {
                        if let Some(name) = r.strip_prefix("#/definitions/") {
                            out.push(name.to_string());
                        }
                    }
                    _ => references(child, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| references(i, out)),
        _ => {}
    }
}

/// The definitions `roots` refers to, directly or through other definitions of `document`.
fn used_definitions(document: &Value, roots: &Value) -> std::collections::BTreeSet<String> {
    let mut wanted = Vec::new();
    references(roots, &mut wanted);
    let mut used = std::collections::BTreeSet::new();
    while let Some(name) = wanted.pop() {
        if let Some(schema) = document["definitions"].get(&name)
            && used.insert(name)
        {
            references(schema, &mut wanted);
        }
    }
    used
}

/// kube-openapi's `FilterSpecByPathsWithoutSideEffects`: the paths under `prefix`, the shared
/// parameters (kept whole, as there) and the definitions but those that only the dropped paths
/// used (directly or through other definitions): one that no path uses stays.
fn filter_by_path(document: &Value, prefix: &str) -> Value {
    let paths: serde_json::Map<String, Value> = document["paths"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(path, _)| path.starts_with(prefix))
        .map(|(path, item)| (path.clone(), item.clone()))
        .collect();
    let parameters = document.get("parameters").cloned().unwrap_or_else(|| json!({}));
    let used_before = used_definitions(document, &document["paths"]);
    let used = used_definitions(document, &json!([paths, parameters]));
    let definitions: serde_json::Map<String, Value> = document["definitions"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, _)| used.contains(*name) || !used_before.contains(*name))
        .map(|(name, schema)| (name.clone(), schema.clone()))
        .collect();
    json!({"paths": paths, "definitions": definitions, "parameters": parameters})
}

/// One APIService's part of the cluster's v2 document, as kube-aggregator's downloader gets
/// it: `/openapi/v2` of the backend through the APIService's own Service (its TLS server
/// name), with the entity tag of the last download in `If-None-Match` (a 304 keeps the last
/// part), filtered to the paths of its group version. A 404 or a failure gives no part.
async fn api_service_v2(state: &State, backend: &Backend, service: &ApiService) -> Option<Value> {
    let name = format!("{}.{}", service.version, service.group);
    let cached = lock(&state.openapi_v2_cache).get(&name).cloned();
    let mut headers = vec![("accept", "application/json")];
    if let Some((etag, _)) = &cached {
        headers.push(("if-none-match", etag.as_str()));
    }
    let fetched =
        aggregator::fetch_via(state, backend, &service.server_name, "/openapi/v2", &headers, &aggregator_user())
            .await
            .ok()?;
    let document: Option<Value> = if fetched.status == 200 { serde_json::from_slice(&fetched.body).ok() } else { None };
    lock(&state.openapi_v2_downloads).push(V2Download {
        api_service: name.clone(),
        server_name: service.server_name.clone(),
        status: fetched.status,
        bytes: fetched.body.len(),
        paths: document
            .iter()
            .flat_map(|d| d["paths"].as_object().into_iter().flatten().map(|(p, _)| p.clone()))
            .collect(),
    });
    match fetched.status {
        304 => cached.map(|(_, part)| part),
        200 => {
            let document = document?;
            let part = filter_by_path(&document, &format!("/apis/{}/{}/", service.group, service.version));
            if let Some(etag) = fetched.etag {
                lock(&state.openapi_v2_cache).insert(name, (etag, part.clone()));
            }
            Some(part)
        }
        _ => None,
    }
}

/// The cluster's v2 document: the double's own (no definitions of its own) merged with each
/// proxied APIService's part that has a path the merge does not have yet, in the order of
/// their priorities; on a name clash the first one stays.
async fn merged_v2(state: &State, backend: Option<&Backend>) -> Value {
    let mut merged = json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": {},
        "definitions": {},
        "parameters": {},
    });
    let Some(backend) = backend else { return merged };
    let mut services = lock(&state.services).clone();
    services.sort_by(|a, b| {
        b.group_priority
            .cmp(&a.group_priority)
            .then(a.group.cmp(&b.group))
            .then(b.version_priority.cmp(&a.version_priority))
    });
    for service in &services {
        let Some(part) = api_service_v2(state, backend, service).await else { continue };
        // kube-openapi's mergeSpecs (ignoring path conflicts, as kube-aggregator merges) takes
        // nothing from a part that brings no new path, its definitions included.
        let new_path = part["paths"].as_object().into_iter().flatten().any(|(p, _)| merged["paths"].get(p).is_none());
        if !new_path {
            continue;
        }
        for section in ["paths", "definitions", "parameters"] {
            let incoming = part[section].as_object().cloned().unwrap_or_default();
            if let Some(target) = merged[section].as_object_mut() {
                for (name, value) in incoming {
                    target.entry(name).or_insert(value);
                }
            }
        }
    }
    merged
}

fn etag_of(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA512, bytes);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02X}")).collect();
    format!("\"{hex}\"")
}

/// `GET /openapi/v2`.
pub async fn v2(state: &State, backend: Option<&Backend>, accept: &str, if_none_match: Option<&str>) -> Response {
    let Some(content_type) = v2_encoding(accept) else {
        let mut response = respond::bytes(406, "text/plain", "");
        response.headers_mut().insert("vary", http::HeaderValue::from_static("Accept"));
        return response;
    };
    let document = merged_v2(state, backend).await;
    let json = serde_json::to_vec(&document).unwrap();
    // One entity tag for both encodings, as kube-openapi does (the response varies by Accept).
    let etag = etag_of(&json);
    let body = if content_type == PROTOBUF { openapi_v2_proto::encode(&document) } else { json };
    let mut response = if if_none_match == Some(etag.as_str()) {
        respond::bytes(304, content_type, Vec::new())
    } else {
        respond::bytes(200, content_type, body)
    };
    let headers = response.headers_mut();
    headers.insert("vary", http::HeaderValue::from_static("Accept"));
    headers.insert("etag", http::HeaderValue::from_str(&etag).unwrap());
    response
}

/// The backend's v3 index (`paths` to `serverRelativeURL`s), as `system:aggregator` fetches it
/// through the Service whose TLS server name is `server_name`.
async fn backend_v3_index(state: &State, backend: &Backend, server_name: &str) -> serde_json::Map<String, Value> {
    let fetched = aggregator::fetch_via(
        state,
        backend,
        server_name,
        "/openapi/v3",
        &[("accept", "application/json")],
        &aggregator_user(),
    )
    .await;
    let paths = match fetched {
        Ok(f) if f.status == 200 => serde_json::from_slice::<Value>(&f.body)
            .ok()
            .and_then(|index| index["paths"].as_object().cloned())
            .unwrap_or_default(),
        _ => serde_json::Map::new(),
    };
    lock(&state.openapi_v3_indexes).insert(server_name.to_string(), paths.keys().cloned().collect());
    paths
}

/// The union of the v3 indexes of every APIService, each downloaded through its own Service
/// (the first APIService naming a path keeps it). Before any APIService is registered, the
/// backend's own Service's index (the tests that register none read it so).
async fn v3_indexes(state: &State, backend: &Backend) -> serde_json::Map<String, Value> {
    let services = lock(&state.services).clone();
    if services.is_empty() {
        return backend_v3_index(state, backend, &backend.server_name).await;
    }
    let mut union = serde_json::Map::new();
    for service in &services {
        for (path, entry) in backend_v3_index(state, backend, &service.server_name).await {
            union.entry(path).or_insert(entry);
        }
    }
    union
}

/// `GET /openapi/v3`: every path of every APIService's index, as it names it.
pub async fn v3_index(state: &State, backend: Option<&Backend>) -> Response {
    let paths = match backend {
        Some(backend) => v3_indexes(state, backend).await,
        None => serde_json::Map::new(),
    };
    respond::json(200, &json!({"paths": paths}))
}

/// `GET /openapi/v3/<path>`: the client's request, proxied to the backend whose index names
/// `<path>`; a bare 404 otherwise, as kube-aggregator answers.
pub async fn v3_document(
    state: &State,
    backend: Option<&Backend>,
    parts: &http::request::Parts,
    body: Body,
    user: &User,
    remote: SocketAddr,
) -> Response {
    let path = parts.uri.path().trim_start_matches("/openapi/v3/");
    let Some(backend) = backend else { return respond::bytes(404, "text/plain", "") };
    if !v3_indexes(state, backend).await.contains_key(path) {
        return respond::bytes(404, "text/plain", "");
    }
    match aggregator::forward(state, backend, parts, body, Caller { user, remote: Some(remote) }).await {
        Ok(response) => response,
        Err(e) => aggregator::unavailable(&e),
    }
}
