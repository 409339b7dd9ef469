//! Routing: the request's path as a typed [`Endpoint`], parsed once, then the handler for it.

use std::sync::Arc;

use http::{Method, Request, Response, StatusCode, header};
use serde_json::json;

use crate::api::Api;
use crate::api::body::{self, ReqBody, RespBody};
use crate::api::negotiate::plain_encoding;
use crate::api::openapi;
use crate::core::request_info::{Query, RequestInfo};
use crate::core::status::ApiError;
use crate::server::conn::ConnInfo;
use crate::server::health::{Health, Probe};

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Health(Probe),
    Metrics,
    /// A backup of the whole store, streamed (`docs/backup.md`).
    Backup,
    /// A takeover (false) or handback (true) run by this server, its progress streamed.
    Takeover(bool),
    /// `serveddefinitions/<name>/migrate`: a storage-version migration asked for (`admin`).
    Migrate,
    /// `serveddefinitions/<name>/impact`: an impact analysis asked for or cancelled (`admin`).
    Impact,
    /// The objects of a definition no longer served, counted or deleted (`admin`).
    DeleteObjects,
    Version,
    LegacyRoot,
    Apis,
    Group(String),
    GroupVersion(String, String),
    OpenApiV2,
    OpenApiV3Index,
    OpenApiV3(String, String),
    Resource,
    NotFound,
}

/// Parses the endpoint from the path and the already parsed request info.
pub fn parse(method: &Method, path: &str, info: &RequestInfo) -> Endpoint {
    if info.is_resource_request {
        return if super::admin::is_migrate(info) {
            Endpoint::Migrate
        } else if super::admin::is_impact(info) {
            Endpoint::Impact
        } else if info.api_prefix == "apis" && !info.resource.is_empty() {
            Endpoint::Resource
        } else {
            Endpoint::NotFound
        };
    }
    let segments = crate::core::paths::segments(path);
    let _ = method;
    match segments.as_slice() {
        ["healthz", ..] => Endpoint::Health(Probe::Healthz),
        ["livez", ..] => Endpoint::Health(Probe::Livez),
        ["readyz", ..] => Endpoint::Health(Probe::Readyz),
        ["metrics"] => Endpoint::Metrics,
        ["backup"] => Endpoint::Backup,
        ["takeover"] => Endpoint::Takeover(false),
        ["handback"] => Endpoint::Takeover(true),
        ["delete-objects"] => Endpoint::DeleteObjects,
        ["version"] => Endpoint::Version,
        ["api"] => Endpoint::LegacyRoot,
        ["apis"] => Endpoint::Apis,
        ["apis", group] => Endpoint::Group(group.to_string()),
        ["apis", group, version] => Endpoint::GroupVersion(group.to_string(), version.to_string()),
        ["openapi", "v2"] => Endpoint::OpenApiV2,
        ["openapi", "v3"] => Endpoint::OpenApiV3Index,
        ["openapi", "v3", "apis", group, version] => Endpoint::OpenApiV3(group.to_string(), version.to_string()),
        _ => Endpoint::NotFound,
    }
}

/// What the router serves from.
pub struct Router {
    pub api: Arc<Api>,
    pub health: Arc<Health>,
    /// Takeovers and handbacks (`None`: refused, as in tests of the router alone).
    pub takeovers: Option<Arc<crate::takeover::Takeovers>>,
    /// The lifecycle controller, for migrations asked for and objects deleted (`None`: refused).
    pub lifecycle: Option<Arc<crate::lifecycle::controller::Controller>>,
    /// Impact analyses asked for (`None`: refused).
    pub impacts: Option<Arc<crate::impact::runner::Runner>>,
}

/// The build's time (build.rs: `SOURCE_DATE_EPOCH`, else when it was built) as Kubernetes
/// writes `buildDate`.
fn build_date() -> String {
    let seconds = env!("CRD_APISERVER_BUILD_EPOCH").parse().unwrap_or(0);
    crate::core::time::format_rfc3339(jiff::Timestamp::from_second(seconds).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

fn version_info() -> serde_json::Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": format!("v1.33.0+crd-apiserver-{}", env!("CARGO_PKG_VERSION")),
        // Set by build.rs from the git checkout (empty outside one).
        "gitCommit": env!("CRD_APISERVER_GIT_COMMIT"),
        "gitTreeState": env!("CRD_APISERVER_GIT_TREE_STATE"),
        "buildDate": build_date(),
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

impl Router {
    pub async fn route(&self, request: Request<ReqBody>) -> Response<RespBody> {
        let accept = request.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).map(str::to_string);
        let encoding = plain_encoding(accept.as_deref());
        let Some(info) = request.extensions().get::<RequestInfo>() else {
            return body::error_response(&ApiError::internal("request info missing"), encoding);
        };
        let endpoint = parse(request.method(), &info.path, info);
        let read_only = matches!(*request.method(), Method::GET | Method::HEAD);
        let posted =
            matches!(endpoint, Endpoint::Takeover(_) | Endpoint::DeleteObjects) && request.method() == Method::POST;
        let resource =
            matches!(endpoint, Endpoint::Resource | Endpoint::Migrate | Endpoint::Impact | Endpoint::NotFound);
        if !resource && !read_only && !posted {
            return body::error_response(&ApiError::method_not_allowed(), encoding);
        }
        let if_none_match =
            request.headers().get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).map(str::to_string);
        match endpoint {
            Endpoint::Health(probe) => {
                let query = Query::parse(request.uri().query());
                self.health
                    .serve(probe, &info.path, &query)
                    .unwrap_or_else(|| body::error_response(&ApiError::path_not_found(), encoding))
            }
            Endpoint::Metrics => {
                let format = crate::metrics::Format::negotiate(accept.as_deref());
                body::bytes_response(StatusCode::OK, format.content_type(), crate::metrics::render(format))
            }
            Endpoint::Backup => backup_response(self.api.store().clone()),
            Endpoint::Takeover(_) if !posted => body::error_response(&ApiError::method_not_allowed(), encoding),
            Endpoint::Takeover(back) => match &self.takeovers {
                Some(takeovers) => takeover_response(takeovers.clone(), back, &Query::parse(request.uri().query())),
                None => body::error_response(&ApiError::service_unavailable("takeovers are not served"), encoding),
            },
            Endpoint::Migrate | Endpoint::DeleteObjects => {
                let Some(lifecycle) = self.lifecycle.clone() else {
                    return body::error_response(
                        &ApiError::service_unavailable("the lifecycle controller does not run"),
                        encoding,
                    );
                };
                if endpoint == Endpoint::Migrate {
                    let info = info.clone();
                    Box::pin(super::admin::migrate(&lifecycle, &info, request, encoding)).await
                } else if posted {
                    Box::pin(super::admin::delete_objects(lifecycle, &Query::parse(request.uri().query()), encoding))
                        .await
                } else {
                    body::error_response(&ApiError::method_not_allowed(), encoding)
                }
            }
            Endpoint::Impact => match &self.impacts {
                Some(impacts) => {
                    let info = info.clone();
                    Box::pin(super::admin::impact(impacts, &info, request, encoding)).await
                }
                None => {
                    body::error_response(&ApiError::service_unavailable("impact analyses are not served"), encoding)
                }
            },
            // Written as k8s.io/apiserver's `WriteRawJSON` does: indented JSON whatever the
            // Accept header, with no newline after it.
            Endpoint::Version => match serde_json::to_vec_pretty(&version_info()) {
                Ok(text) => body::document_response(StatusCode::OK, "application/json", text),
                Err(e) => body::error_response(&ApiError::internal(format!("encoding JSON: {e}")), encoding),
            },
            Endpoint::LegacyRoot => self.api.serve_legacy_root(accept.as_deref(), if_none_match.as_deref()),
            Endpoint::Apis => {
                // kube-aggregator's fetch for one Service: with one Service per group, that group's.
                let server_name = request.extensions().get::<ConnInfo>().and_then(|c| c.server_name.clone());
                self.api.serve_apis(accept.as_deref(), if_none_match.as_deref(), server_name.as_deref())
            }
            Endpoint::Group(group) => self.api.serve_group(&group, encoding),
            Endpoint::GroupVersion(group, version) => self.api.serve_group_version(&group, &version, encoding),
            Endpoint::OpenApiV2 => {
                let catalog = self.api.catalog();
                let empty = self.api.options().openapi_v2 == openapi::V2Content::Empty;
                match v2_encoding(accept.as_deref()) {
                    Some(V2Encoding::Json) if empty => {
                        openapi_response(openapi::v2_empty(false), if_none_match.as_deref())
                    }
                    Some(V2Encoding::Json) => {
                        // kube-aggregator's download for one APIService: that group's slice.
                        let server_name = request.extensions().get::<ConnInfo>().and_then(|c| c.server_name.clone());
                        openapi_response(&catalog.openapi.v2_for(server_name.as_deref()), if_none_match.as_deref())
                    }
                    Some(V2Encoding::Protobuf) => {
                        let document = if empty { openapi::v2_empty(true) } else { catalog.openapi.v2_protobuf() };
                        let mut response = openapi_response(document, if_none_match.as_deref());
                        response
                            .headers_mut()
                            .insert(header::CONTENT_TYPE, http::HeaderValue::from_static(V2_PROTOBUF));
                        response
                    }
                    None => body::error_response(
                        &ApiError::not_acceptable(format!("only application/json and {V2_PROTOBUF} are served")),
                        encoding,
                    ),
                }
            }
            Endpoint::OpenApiV3Index => {
                // kube-aggregator's download for one APIService: that group version's entry.
                let catalog = self.api.catalog();
                let server_name = request.extensions().get::<ConnInfo>().and_then(|c| c.server_name.clone());
                openapi_response(catalog.openapi.v3_index_for(server_name.as_deref()), if_none_match.as_deref())
            }
            Endpoint::OpenApiV3(group, version) => {
                let catalog = self.api.catalog();
                match catalog.openapi.v3(&group, &version) {
                    Some(doc) => openapi_response(doc, if_none_match.as_deref()),
                    None => body::error_response(&ApiError::path_not_found(), encoding),
                }
            }
            // Boxed, as the API layer boxes each handler: the request's future stays small.
            Endpoint::Resource => Box::pin(self.api.serve_resource(request)).await,
            Endpoint::NotFound => body::error_response(&ApiError::path_not_found(), encoding),
        }
    }
}

/// Streams a backup of the store (JSON lines). It is read at one revision while writes go
/// on; a failure part way ends the body without the trailer line, so the file is refused.
fn backup_response(store: crate::store::Backend) -> Response<RespBody> {
    use http_body_util::{BodyExt, StreamBody};
    use tokio_stream::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        match store.backup(&tx).await {
            Ok(summary) => tracing::info!(
                revision = summary.revision,
                objects = summary.objects,
                state = summary.state,
                "served a backup"
            ),
            Err(e) => tracing::warn!(error = %e, "a backup failed part way; its body ends without a trailer"),
        }
    });
    let frames = tokio_stream::wrappers::ReceiverStream::new(rx)
        .map(|chunk| Ok::<_, std::convert::Infallible>(http_body::Frame::data(chunk)));
    let mut response = Response::new(BodyExt::boxed_unsync(StreamBody::new(frames)));
    response.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/jsonl"));
    response
}

/// Runs a takeover (or handback) of the definition named by `name` on its own task (a client
/// that goes away does not stop it half way) and streams its progress as JSON lines:
/// `{"progress": ...}` lines, then `{"report": ...}` or `{"error": ...}`.
fn takeover_response(takeovers: Arc<crate::takeover::Takeovers>, back: bool, query: &Query) -> Response<RespBody> {
    use http_body_util::{BodyExt, StreamBody};
    use tokio_stream::StreamExt;
    let name = query.get("name").unwrap_or_default().to_string();
    let dry_run = query.get("dryRun").is_some_and(|d| d == "All");
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(16);
    tokio::spawn(async move {
        let (progress, mut lines) = tokio::sync::mpsc::channel::<String>(16);
        let forward = tx.clone();
        let relay = tokio::spawn(async move {
            while let Some(line) = lines.recv().await {
                let _ = forward.send(json_line(&json!({"progress": line}))).await;
            }
        });
        let outcome = if back {
            takeovers.hand_back(&name, &progress).await
        } else {
            takeovers.take_over(&name, dry_run, &progress).await
        };
        drop(progress);
        let _ = relay.await;
        let last = match outcome {
            Ok(report) => json!({"report": report}),
            Err(e) => {
                tracing::warn!(target: "takeover", definition = %name, error = %e, "takeover or handback failed");
                json!({"error": e.to_string()})
            }
        };
        let _ = tx.send(json_line(&last)).await;
    });
    let frames = tokio_stream::wrappers::ReceiverStream::new(rx)
        .map(|chunk| Ok::<_, std::convert::Infallible>(http_body::Frame::data(chunk)));
    let mut response = Response::new(BodyExt::boxed_unsync(StreamBody::new(frames)));
    response.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/jsonl"));
    response
}

pub(super) fn json_line(value: &serde_json::Value) -> bytes::Bytes {
    let mut text = value.to_string().into_bytes();
    text.push(b'\n');
    bytes::Bytes::from(text)
}

/// The media type of the protobuf OpenAPI v2 document.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

enum V2Encoding {
    Json,
    Protobuf,
}

/// The encoding of `/openapi/v2` a client takes: the first `Accept` clause that JSON or the
/// protobuf form matches, wildcards included, as kube-openapi picks it.
fn v2_encoding(accept: Option<&str>) -> Option<V2Encoding> {
    let accept = accept.filter(|a| !a.trim().is_empty()).unwrap_or("*/*");
    for clause in accept.split(',') {
        let essence = clause.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        let (kind, sub) = essence.split_once('/').unwrap_or((essence.as_str(), ""));
        if kind != "application" && kind != "*" {
            continue;
        }
        match sub {
            "json" | "*" => return Some(V2Encoding::Json),
            "com.github.proto-openapi.spec.v2@v1.0+protobuf" | "com.github.proto-openapi.spec.v2.v1.0+protobuf" => {
                return Some(V2Encoding::Protobuf);
            }
            _ => {}
        }
    }
    None
}

fn openapi_response(doc: &crate::api::openapi::Document, if_none_match: Option<&str>) -> Response<RespBody> {
    let etag = doc.etag();
    let mut response = if if_none_match == Some(etag.as_str()) {
        body::document_response(StatusCode::NOT_MODIFIED, "application/json", bytes::Bytes::new())
    } else {
        body::document_response(StatusCode::OK, "application/json", doc.body.clone())
    };
    if let Ok(v) = http::HeaderValue::from_str(&etag) {
        response.headers_mut().insert(header::ETAG, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::request_info::Query;

    fn endpoint(path: &str) -> Endpoint {
        let info = RequestInfo::parse(&Method::GET, path, &Query::default()).unwrap();
        parse(&Method::GET, path, &info)
    }

    #[test]
    fn paths_to_endpoints() {
        assert_eq!(endpoint("/apis"), Endpoint::Apis);
        assert_eq!(endpoint("/apis/g.io"), Endpoint::Group("g.io".into()));
        assert_eq!(endpoint("/apis/g.io/v1"), Endpoint::GroupVersion("g.io".into(), "v1".into()));
        assert_eq!(endpoint("/apis/g.io/v1/widgets"), Endpoint::Resource);
        assert_eq!(endpoint("/api/v1/pods"), Endpoint::NotFound);
        assert_eq!(endpoint("/openapi/v3/apis/g.io/v1"), Endpoint::OpenApiV3("g.io".into(), "v1".into()));
        assert_eq!(endpoint("/readyz/ping"), Endpoint::Health(Probe::Readyz));
        assert_eq!(endpoint("/livez"), Endpoint::Health(Probe::Livez));
        assert_eq!(endpoint("/backup"), Endpoint::Backup);
        assert_eq!(endpoint("/delete-objects"), Endpoint::DeleteObjects);
        assert_eq!(endpoint("/apis/crd-apiserver.io/v1alpha1/serveddefinitions/x.g.io/migrate"), Endpoint::Migrate);
        assert_eq!(endpoint("/apis/crd-apiserver.io/v1alpha1/serveddefinitions/x.g.io/impact"), Endpoint::Impact);
        assert_eq!(endpoint("/apis/crd-apiserver.io/v1alpha1/serveddefinitions/x.g.io"), Endpoint::Resource);
        assert_eq!(endpoint("/nothing"), Endpoint::NotFound);
    }
}
