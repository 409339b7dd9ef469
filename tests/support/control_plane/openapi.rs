//! The double's OpenAPI, as kube-aggregator serves it: `/openapi/v2` merged from the backend's
//! document (downloaded as `system:aggregator` with `If-None-Match`; a 404 is skipped) and
//! served as JSON or protobuf by `Accept`, with an entity tag and `Vary: Accept`;
//! `/openapi/v3` the union of the backends' indexes; `/openapi/v3/<path>` of a path some index
//! names proxied to its backend as the client's own request (query, headers and identity).

use std::net::SocketAddr;

use serde_json::{Value, json};

use super::aggregator::{self, Backend, Caller};
use super::rbac::User;
use super::respond::{self, Body, Response};
use super::state::{State, lock};
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

/// The backend's v2 document, re-downloaded only when it changed.
async fn backend_v2(state: &State, backend: &Backend) -> Option<Value> {
    let cached = lock(&state.openapi_v2_cache).clone();
    let mut headers = vec![("accept", "application/json")];
    if let Some((etag, _)) = &cached {
        headers.push(("if-none-match", etag.as_str()));
    }
    let fetched = aggregator::fetch(state, backend, "/openapi/v2", &headers, &aggregator_user()).await.ok()?;
    match fetched.status {
        304 => cached.map(|(_, document)| document),
        200 => {
            let document: Value = serde_json::from_slice(&fetched.body).ok()?;
            if let Some(etag) = fetched.etag {
                *lock(&state.openapi_v2_cache) = Some((etag, document.clone()));
            }
            Some(document)
        }
        _ => None,
    }
}

/// The cluster's v2 document: the double's own (no definitions of its own) merged with the
/// backend's paths and definitions; on a name clash the first one stays.
async fn merged_v2(state: &State, backend: Option<&Backend>) -> Value {
    let mut merged = json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": {},
        "definitions": {},
    });
    let downloaded = match backend {
        Some(backend) => backend_v2(state, backend).await,
        None => None,
    };
    for section in ["paths", "definitions"] {
        let incoming = downloaded.as_ref().and_then(|d| d[section].as_object()).cloned().unwrap_or_default();
        if let Some(target) = merged[section].as_object_mut() {
            for (name, value) in incoming {
                target.entry(name).or_insert(value);
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

/// The backend's v3 index (`paths` to `serverRelativeURL`s), as `system:aggregator` fetches it.
async fn backend_v3_index(state: &State, backend: &Backend) -> serde_json::Map<String, Value> {
    match aggregator::fetch(state, backend, "/openapi/v3", &[("accept", "application/json")], &aggregator_user()).await
    {
        Ok(f) if f.status == 200 => serde_json::from_slice::<Value>(&f.body)
            .ok()
            .and_then(|index| index["paths"].as_object().cloned())
            .unwrap_or_default(),
        _ => serde_json::Map::new(),
    }
}

/// `GET /openapi/v3`: every path of every backend's index, as it names it.
pub async fn v3_index(state: &State, backend: Option<&Backend>) -> Response {
    let paths = match backend {
        Some(backend) => backend_v3_index(state, backend).await,
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
    if !backend_v3_index(state, backend).await.contains_key(path) {
        return respond::bytes(404, "text/plain", "");
    }
    match aggregator::forward(state, backend, parts, body, Caller { user, remote: Some(remote) }).await {
        Ok(response) => response,
        Err(e) => aggregator::unavailable(&e),
    }
}
