//! The request log filter alone, around handlers of our own, with a subscriber writing
//! component-base's JSON into a buffer.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

use super::*;
use crate::api::body::{full, request_body};
use crate::core::request_scope::Phase;
use crate::logs::format::tests::Captured;
use crate::logs::{Format, KubeFormat, subscriber, verbosity};
use crate::server::conn::ConnInfo;
use crate::server::filters::endpoint;

fn crontabs() -> String {
    let gv = crate::core::gvr::GroupVersion::new("stable.example.com", "v1");
    crate::core::paths::collection_path(&gv, Some("default"), "crontabs")
}

fn request(method: Method, uri: &str, audit_id: Option<&str>) -> Request<ReqBody> {
    let mut builder = Request::builder().method(method).uri(uri).header("user-agent", "kubectl/v1.36.0 (linux/amd64)");
    if let Some(id) = audit_id {
        builder = builder.header("Audit-ID", id);
    }
    let mut request = builder.body(request_body("")).unwrap();
    let remote = "10.0.0.7:51234".parse().unwrap();
    request.extensions_mut().insert(ConnInfo::new(remote, Vec::new()));
    request
}

/// A handler that answers 200 as `alice` after `delay` spent in the store.
fn handler(delay: Duration) -> Next {
    endpoint(move |_request| async move {
        request_scope::end(Phase::Filters);
        tokio::time::sleep(delay).await;
        request_scope::end(Phase::Store);
        let mut response = Response::new(full("{}"));
        response.extensions_mut().insert(UserInfo { name: "alice".into(), ..UserInfo::anonymous() });
        response
    })
}

/// Serves `request` through the filter at `-v=verbosity`; the response and the JSON lines
/// written while it was served (and its body read).
async fn serve(
    filter: RequestLog,
    verbosity: u32,
    request: Request<ReqBody>,
    next: Next,
) -> (Response<Bytes>, Vec<Value>) {
    let captured = Captured::default();
    let filter_for_level = tracing_subscriber::EnvFilter::new(verbosity::directives(verbosity));
    let _guard =
        tracing::subscriber::set_default(subscriber(filter_for_level, KubeFormat::utc(Format::Json), captured.clone()));
    let response = filter.call(request, next).await;
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    let lines =
        captured.text().lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    (Response::from_parts(parts, bytes), lines)
}

#[tokio::test]
async fn the_audit_id_sent_is_echoed_and_a_missing_one_is_made() {
    let log = RequestLog::new(Duration::ZERO);
    let (response, _) =
        serve(log.clone(), 0, request(Method::GET, "/readyz", Some("4f1b-given")), handler(Duration::ZERO)).await;
    assert_eq!(response.headers()["audit-id"], "4f1b-given");
    let (first, _) = serve(log.clone(), 0, request(Method::GET, "/readyz", None), handler(Duration::ZERO)).await;
    let (second, _) = serve(log.clone(), 0, request(Method::GET, "/readyz", None), handler(Duration::ZERO)).await;
    let made = |r: &Response<Bytes>| uuid::Uuid::parse_str(r.headers()["audit-id"].to_str().unwrap()).unwrap();
    assert_eq!(made(&first).get_version_num(), 4);
    assert_ne!(made(&first), made(&second));
    // A response that already carries one (as from a nested apiserver) keeps it.
    let answered = endpoint(|_| async {
        let mut response = Response::new(full(""));
        response.headers_mut().insert(AUDIT_ID, HeaderValue::from_static("inner"));
        response
    });
    let (response, _) = serve(log, 0, request(Method::GET, "/readyz", Some("outer")), answered).await;
    assert_eq!(response.headers().get_all("audit-id").iter().collect::<Vec<_>>(), ["inner"]);
}

#[tokio::test]
async fn level_three_writes_one_httplog_line_per_request() {
    let log = RequestLog::new(Duration::ZERO);
    let uri = crontabs() + "/my-cron?pretty=true";
    let (_, lines) = serve(log.clone(), 3, request(Method::GET, &uri, Some("abc-123")), handler(Duration::ZERO)).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(line["msg"], "HTTP");
    assert_eq!(line["v"], 3);
    assert_eq!(line["verb"], "GET");
    assert_eq!(line["URI"], uri);
    assert_eq!(line["audit-ID"], "abc-123");
    assert_eq!(line["userAgent"], "kubectl/v1.36.0 (linux/amd64)");
    assert_eq!(line["srcIP"], "10.0.0.7:51234");
    assert_eq!(line["resp"], 200);
    assert_eq!(line["user"], "alice");
    assert_eq!(line["apiGroup"], "stable.example.com");
    assert_eq!(line["apiVersion"], "v1");
    assert_eq!(line["resource"], "crontabs");
    assert_eq!(line["namespace"], "default");
    assert_eq!(line["name"], "my-cron");
    assert!(line.get("subresource").is_none(), "empty fields are left out: {line}");
    assert!(line["latency"].as_str().unwrap().ends_with('s'), "{line}");
    // Below level 3 nothing is written for a fast request.
    let (_, quiet) = serve(log, 2, request(Method::GET, &uri, None), handler(Duration::ZERO)).await;
    assert!(quiet.is_empty(), "{quiet:?}");
}

#[tokio::test]
async fn slow_resource_requests_are_logged_with_their_phases_at_every_level() {
    let log = RequestLog::new(Duration::from_millis(300));
    // The threshold is far above what a request with no work takes on a loaded machine (a
    // 20 ms one was passed there), and the slow handler just above it.
    let (_, lines) =
        serve(log.clone(), 0, request(Method::GET, &crontabs(), None), handler(Duration::from_millis(350))).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(line["msg"], "Slow request");
    assert_eq!(line["v"], 0);
    assert_eq!(line["verb"], "LIST");
    assert_eq!(line["resp"], 200);
    let millis = |key: &str| {
        let text = line[key].as_str().unwrap_or_else(|| panic!("no {key}: {line}"));
        text.strip_suffix("ms").and_then(|n| n.parse::<f64>().ok()).unwrap_or_else(|| panic!("{key}: {text}"))
    };
    assert!(millis("store") >= 350.0, "{line}");
    assert!(millis("latency") >= millis("store"), "{line}");
    assert_eq!(line["decode"], "0s");
    assert_eq!(line["admission"], "0s");
    // Fast requests, watches and requests that are not for resources are not traced.
    let fast = serve(log.clone(), 0, request(Method::GET, &crontabs(), None), handler(Duration::ZERO)).await.1;
    assert!(fast.is_empty(), "{fast:?}");
    let watch = crontabs() + "?watch=true";
    let slow_watch =
        serve(log.clone(), 0, request(Method::GET, &watch, None), handler(Duration::from_millis(350))).await.1;
    assert!(slow_watch.is_empty(), "{slow_watch:?}");
    let slow_health = serve(log, 0, request(Method::GET, "/readyz", None), handler(Duration::from_millis(350))).await.1;
    assert!(slow_health.is_empty(), "{slow_health:?}");
}

#[tokio::test]
async fn a_streamed_response_is_logged_when_it_ends() {
    let streaming = endpoint(|_| async {
        let frames = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(http_body::Frame::data(
            Bytes::from("event"),
        ))])
        .then(|frame| async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            frame
        });
        let body = http_body_util::StreamBody::new(frames).boxed_unsync();
        Response::builder().status(StatusCode::OK).body(body).unwrap()
    });
    let log = RequestLog::new(Duration::ZERO);
    let (response, lines) = serve(log, 3, request(Method::GET, &(crontabs() + "?watch=1"), None), streaming).await;
    assert_eq!(response.body(), "event");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["verb"], "WATCH");
    let latency = lines[0]["latency"].as_str().unwrap();
    let millis: f64 = latency.strip_suffix("ms").unwrap().parse().unwrap();
    assert!(millis >= 30.0, "the line waited for the stream's end: {latency}");
}

#[tokio::test]
async fn errors_written_while_serving_carry_the_audit_id() {
    use tower::Layer;
    let failing = endpoint(|_| async {
        crate::api::body::error_response(
            &crate::core::status::ApiError::internal("the store is gone"),
            crate::api::negotiate::Encoding::Json,
        )
    });
    let log = RequestLog::new(Duration::ZERO);
    let (response, lines) = serve(log.clone(), 0, request(Method::GET, &crontabs(), Some("id-500")), failing).await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["msg"], "request failed: Internal error occurred: the store is gone");
    assert_eq!(lines[0]["audit-ID"], "id-500");
    #[allow(clippy::panic)]
    let panicking = endpoint(|_| async { panic!("a bug") });
    let guarded = super::super::FilterLayer(super::super::panic::PanicGuard).layer(panicking);
    let (response, lines) = serve(log, 0, request(Method::GET, &crontabs(), Some("id-panic")), guarded).await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(response.headers()["audit-id"], "id-panic");
    let panicked: Vec<&Value> = lines.iter().filter(|l| l["msg"] == "a request handler panicked").collect();
    assert_eq!(panicked.len(), 1, "{lines:?}");
    assert_eq!(panicked[0]["audit-ID"], "id-panic");
}

#[tokio::test]
async fn the_filter_future_stays_small() {
    // Boxed once per request: within glibc's per-thread cache (1032 bytes) an allocation is a
    // few dozen instructions, beyond it a few thousand (hack/callgrind-requests.sh saw it).
    let future = RequestLog::new(Duration::from_millis(500))
        .call(request(Method::GET, "/readyz", None), handler(Duration::ZERO));
    let size = std::mem::size_of_val(&*future);
    assert!(size <= 768, "{size} bytes");
}
