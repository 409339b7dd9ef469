//! The admin requests of the server's own API, answered from the lifecycle controller:
//! `POST /apis/crd-apiserver.io/v1alpha1/serveddefinitions/<name>/migrate` (a storage-version
//! migration pass asked for, as Kubernetes' `pods/<name>/eviction` asks for an eviction: a
//! subresource that only takes `create`) and `POST /delete-objects?name=<name>[&confirm=true]`
//! (the objects of a definition that is no longer served counted, or deleted, while the server
//! runs; its progress streamed as JSON lines); and from the impact analyses:
//! `POST .../serveddefinitions/<name>/impact` (the candidate definition as the body; 202, the
//! analysis then shows in the status) and `DELETE` of it (the analysis under way cancelled).
//!
//! All were authorized by the filter chain like every request (SubjectAccessReview: `create`
//! on `serveddefinitions/migrate` or `serveddefinitions/impact`, `delete` on the latter; `post`
//! on the non-resource URL `/delete-objects`). Owns the HTTP shape of these requests only; what
//! they do is `lifecycle::controller`'s and `impact::runner`'s.

use std::sync::Arc;

use http::{Method, Request, Response, StatusCode, header};
use serde_json::json;

use crate::api::body::{self, ReqBody, RespBody};
use crate::api::negotiate::Encoding;
use crate::core::gvr::GroupKind;
use crate::core::gvr::GroupResource;
use crate::core::request_info::{Query, RequestInfo};
use crate::core::status::{ApiError, Status, StatusDetails};
use crate::definitions::builtin::{self, IMPACT, MIGRATE};
use crate::definitions::load::Refusal;
use crate::impact::runner::{RequestError as RunnerError, Runner};
use crate::lifecycle::controller::{Controller, RequestError};
use crate::lifecycle::migrate::progress::Requested;
use crate::lifecycle::removed;

/// Whether a resource request addresses the `migrate` subresource of `serveddefinitions`.
pub fn is_migrate(info: &RequestInfo) -> bool {
    is_action(info, MIGRATE)
}

/// Whether a resource request addresses the `impact` subresource of `serveddefinitions`.
pub fn is_impact(info: &RequestInfo) -> bool {
    is_action(info, IMPACT)
}

fn is_action(info: &RequestInfo, action: &str) -> bool {
    info.is_resource_request
        && info.api_group == builtin::GROUP
        && info.resource == builtin::SERVED_DEFINITIONS
        && info.subresource == action
}

fn served_definitions() -> GroupResource {
    GroupResource::new(builtin::GROUP, builtin::SERVED_DEFINITIONS)
}

/// Answers a request to `serveddefinitions/<name>/migrate`: 202 with a `Status` saying whether
/// a pass was started or one is under way; 404 for a definition that is not served.
pub async fn migrate(
    controller: &Controller,
    info: &RequestInfo,
    request: Request<ReqBody>,
    encoding: Encoding,
) -> Response<RespBody> {
    match request_migration(controller, info, request).await {
        Ok(status) => body::status_response(&status, encoding),
        Err(e) => body::error_response(&e, encoding),
    }
}

/// A request to an action subresource names one served definition, at the resource's path.
fn check_action_path(info: &RequestInfo) -> Result<(), ApiError> {
    if info.api_version != builtin::VERSION
        || !info.namespace.is_empty()
        || info.name.is_empty()
        || info.parts.len() > 3
    {
        return Err(ApiError::path_not_found());
    }
    Ok(())
}

async fn request_migration(
    controller: &Controller,
    info: &RequestInfo,
    request: Request<ReqBody>,
) -> Result<Status, ApiError> {
    check_action_path(info)?;
    if request.method() != Method::POST {
        let resource = GroupResource::new(builtin::GROUP, format!("{}/{MIGRATE}", builtin::SERVED_DEFINITIONS));
        return Err(ApiError::method_not_supported(&resource, &info.verb));
    }
    let dry_run = dry_run(&Query::parse(request.uri().query()))?;
    let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
    let bytes = body::read_limited(request.into_body()).await?;
    check_body(content_type.as_deref(), &bytes)?;
    let name = info.name.as_str();
    let (requested, storage) = controller.request_migration(name, dry_run).await.map_err(|e| match e {
        RequestError::NotServed(_) => ApiError::not_found(&served_definitions(), name),
        RequestError::Store(e) => storage_error(e),
    })?;
    let message = match (requested, dry_run) {
        (Requested::Started, false) => {
            format!("storage-version migration of {name} into {storage} started")
        }
        (Requested::Started, true) => format!("storage-version migration of {name} into {storage} would start"),
        (Requested::AlreadyRunning, _) => {
            format!("storage-version migration of {name} into {storage} is already under way")
        }
    };
    Ok(success(name, message, StatusCode::ACCEPTED, String::new()))
}

/// A `Success` Status about the served definition `name` (`uid`: what was started, if named).
fn success(name: &str, message: String, code: StatusCode, uid: String) -> Status {
    Status {
        kind: "Status".to_string(),
        api_version: "v1".to_string(),
        metadata: serde_json::Map::new(),
        status: "Success".to_string(),
        message,
        reason: String::new(),
        details: Some(StatusDetails {
            name: name.to_string(),
            group: builtin::GROUP.to_string(),
            kind: builtin::SERVED_DEFINITIONS.to_string(),
            uid,
            ..StatusDetails::default()
        }),
        code: code.as_u16(),
    }
}

/// Answers a request to `serveddefinitions/<name>/impact`: `POST` with the candidate definition
/// (JSON or YAML) starts an analysis (202, its id as `details.uid`; it then shows in the status),
/// `DELETE` cancels the one under way. 404 for a definition that is not served, 422 with
/// Kubernetes' field errors for a candidate that is not a valid definition.
pub async fn impact(
    runner: &Arc<Runner>,
    info: &RequestInfo,
    request: Request<ReqBody>,
    encoding: Encoding,
) -> Response<RespBody> {
    match impact_request(runner, info, request).await {
        Ok(status) => body::status_response(&status, encoding),
        Err(e) => body::error_response(&e, encoding),
    }
}

async fn impact_request(
    runner: &Arc<Runner>,
    info: &RequestInfo,
    request: Request<ReqBody>,
) -> Result<Status, ApiError> {
    check_action_path(info)?;
    let name = info.name.as_str();
    let refused = |e: RunnerError| match e {
        RunnerError::NotServed(_) => ApiError::not_found(&served_definitions(), name),
        // Fields of the wrong type are field errors too: a 422 naming them (the rest is told
        // once they are fixed).
        RunnerError::Candidate(Refusal::Invalid(errors) | Refusal::Undecodable { misfits: errors, .. })
            if !errors.is_empty() =>
        {
            ApiError::invalid(&GroupKind::new("apiextensions.k8s.io", "CustomResourceDefinition"), name, &errors)
        }
        RunnerError::Candidate(refusal) => ApiError::bad_request(refusal.messages().join("; ")),
        e @ RunnerError::WrongName { .. } => ApiError::bad_request(e.to_string()),
        RunnerError::Store(e) => storage_error(e),
    };
    match *request.method() {
        Method::POST => {
            let content_type =
                request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
            let essence =
                content_type.as_deref().and_then(|c| c.split(';').next()).map(|c| c.trim().to_ascii_lowercase());
            if essence.as_deref().is_some_and(|c| c != "application/json" && c != "application/yaml") {
                return Err(ApiError::unsupported_media_type(format!(
                    "the body of an {IMPACT} request is a CustomResourceDefinition in JSON or YAML, not {}",
                    content_type.unwrap_or_default()
                )));
            }
            let bytes = body::read_limited(request.into_body()).await?;
            let id = runner.request(name, &bytes).await.map_err(refused)?;
            let message =
                format!("impact analysis of {name} started; it shows in the status of serveddefinitions/{name}");
            Ok(success(name, message, StatusCode::ACCEPTED, id))
        }
        Method::DELETE => {
            let message = match runner.cancel(name).await.map_err(refused)? {
                true => format!("impact analysis of {name} cancelled"),
                false => format!("no impact analysis of {name} is under way"),
            };
            Ok(success(name, message, StatusCode::OK, String::new()))
        }
        _ => {
            let resource = GroupResource::new(builtin::GROUP, format!("{}/{IMPACT}", builtin::SERVED_DEFINITIONS));
            Err(ApiError::method_not_supported(&resource, &info.verb))
        }
    }
}

/// `dryRun=All`, or nothing; any other value is refused as Kubernetes refuses it.
fn dry_run(query: &Query) -> Result<bool, ApiError> {
    let values: Vec<&str> = query.all("dryRun").collect();
    match values.as_slice() {
        [] => Ok(false),
        ["All"] => Ok(true),
        other => {
            Err(ApiError::bad_request(format!("Invalid dryRun value {:?}: supported values: \"All\"", other.join(","))))
        }
    }
}

/// The request carries nothing to act on: its body is empty or a JSON object (what
/// `kubectl create --raw -f` sends), nothing else.
fn check_body(content_type: Option<&str>, bytes: &[u8]) -> Result<(), ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let essence = content_type.and_then(|c| c.split(';').next()).map(|c| c.trim().to_ascii_lowercase());
    if essence.as_deref().is_some_and(|c| c != "application/json") {
        return Err(ApiError::unsupported_media_type(format!(
            "the body of a {MIGRATE} request must be empty or a JSON object, not {}",
            content_type.unwrap_or_default()
        )));
    }
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err(ApiError::bad_request(format!("the body of a {MIGRATE} request must be empty or a JSON object"))),
        Err(e) => Err(ApiError::bad_request(format!("the body of a {MIGRATE} request is not JSON: {e}"))),
    }
}

fn storage_error(e: crate::store::Error) -> ApiError {
    match e {
        crate::store::Error::Unavailable(_) | crate::store::Error::Closed => {
            ApiError::service_unavailable(e.to_string())
        }
        crate::store::Error::NoSpace(_) => ApiError::insufficient_storage(e.to_string()),
        crate::store::Error::Timeout(_) => ApiError::timeout(e.to_string(), 0),
        other => ApiError::internal(other.to_string()),
    }
}

/// Answers `POST /delete-objects?name=<plural>.<group>[&confirm=true]`: a 4xx `Status` when the
/// name is not a definition name, the definition is served (or may be), or the store knows
/// nothing of it (404), else JSON lines
/// streamed as the sweep goes: `{"progress": ...}` at most every second, then
/// `{"report": {"name", "objects", "deleted"}}` or `{"error": ...}`. The sweep runs on its own
/// task: a client that goes away does not stop it half way (running it again finishes it).
pub async fn delete_objects(controller: Arc<Controller>, query: &Query, encoding: Encoding) -> Response<RespBody> {
    let name = query.get("name").unwrap_or_default().to_string();
    let confirm = match query.get("confirm") {
        None => false,
        Some(value) => match crate::core::request_info::parse_go_bool(value) {
            Some(confirm) => confirm,
            None => {
                return body::error_response(
                    &ApiError::bad_request(format!("confirm: {value:?} is not a boolean")),
                    encoding,
                );
            }
        },
    };
    if removed::split_name(&name).is_none() {
        return body::error_response(
            &ApiError::bad_request(format!("name: {name:?} is not a definition name (<plural>.<group>)")),
            encoding,
        );
    }
    if let Err(why) = controller.check_unserved(&name) {
        return body::error_response(&ApiError::new(409, "Conflict", why), encoding);
    }
    match controller.known(&name).await {
        Ok(()) => {}
        Err(removed::Error::Unknown(why)) => {
            return body::error_response(&ApiError::new(404, "NotFound", why), encoding);
        }
        Err(e) => return body::error_response(&ApiError::internal(e.to_string()), encoding),
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(16);
    tokio::spawn(async move {
        let mut last_line = std::time::Instant::now();
        let progress = tx.clone();
        let mut report = |count: u64| {
            if last_line.elapsed() >= std::time::Duration::from_secs(1) {
                last_line = std::time::Instant::now();
                let verb = if confirm { "deleted" } else { "counted" };
                // A full channel (a slow client) skips a progress line, never the sweep.
                let _ = progress
                    .try_send(super::router::json_line(&json!({"progress": format!("{verb} {count} objects so far")})));
            }
        };
        let outcome = controller.delete_objects(&name, confirm, &mut report).await;
        let last = match outcome {
            Ok(objects) => {
                if confirm {
                    tracing::info!(definition = %name, objects, "deleted the objects of a definition no longer served");
                }
                json!({"report": {"name": name, "objects": objects, "deleted": confirm}})
            }
            Err(e) => {
                tracing::warn!(definition = %name, error = %e, "deleting the objects of a definition stopped");
                json!({"error": e.to_string()})
            }
        };
        let _ = tx.send(super::router::json_line(&last)).await;
    });
    streamed(rx)
}

fn streamed(rx: tokio::sync::mpsc::Receiver<bytes::Bytes>) -> Response<RespBody> {
    use http_body_util::{BodyExt, StreamBody};
    use tokio_stream::StreamExt;
    let frames = tokio_stream::wrappers::ReceiverStream::new(rx)
        .map(|chunk| Ok::<_, std::convert::Infallible>(http_body::Frame::data(chunk)));
    let mut response = Response::new(BodyExt::boxed_unsync(StreamBody::new(frames)));
    response.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/jsonl"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_migrate_body_is_empty_or_a_json_object() {
        let code =
            |content_type: Option<&str>, body: &str| check_body(content_type, body.as_bytes()).err().map(|e| e.code);
        assert_eq!(code(None, ""), None);
        assert_eq!(code(Some("application/json"), " \n"), None);
        assert_eq!(code(Some("application/json"), "{}"), None);
        assert_eq!(code(Some("application/json; charset=utf-8"), r#"{"kind":"Anything"}"#), None);
        assert_eq!(code(Some("application/json"), "[1]"), Some(400));
        assert_eq!(code(Some("application/json"), "{not json"), Some(400));
        assert_eq!(code(Some("application/yaml"), "a: b"), Some(415));
    }

    #[test]
    fn only_the_migrate_subresource_of_served_definitions_is_a_migration_request() {
        let info = |path: &str| RequestInfo::parse(&Method::POST, path, &Query::default()).unwrap();
        assert!(is_migrate(&info(
            "/apis/crd-apiserver.io/v1alpha1/serveddefinitions/crontabs.stable.example.com/migrate"
        )));
        assert!(!is_migrate(&info("/apis/crd-apiserver.io/v1alpha1/serveddefinitions/crontabs.stable.example.com")));
        assert!(!is_migrate(&info("/apis/stable.example.com/v1/crontabs/x/migrate")));
        assert!(!is_migrate(&info("/delete-objects")));
    }

    #[test]
    fn dry_run_takes_all_or_nothing() {
        assert!(!dry_run(&Query::parse(None)).unwrap());
        assert!(dry_run(&Query::parse(Some("dryRun=All"))).unwrap());
        assert_eq!(dry_run(&Query::parse(Some("dryRun=Some"))).unwrap_err().code, 400);
    }
}
