//! The request path's part in graceful termination (`server::shutdown`): every request is
//! counted in flight until it is answered (a streamed body: until its last byte is sent), watches end cleanly when the server stops
//! accepting (their body finishes between two events, so clients see a watch that ended and
//! start another, elsewhere), and with `--shutdown-send-retry-after` new requests are answered
//! 429 once the shutdown delay passed, as k8s.io/apiserver's `WithRetryAfter` answers them.
//!
//! Owns those three things. Must not decide when shutdown steps happen (`server::shutdown`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::{HeaderValue, Request, Response, StatusCode, Version, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use super::on_end::on_end;
use super::timeout::is_long_running;
use super::{Filter, Next, run};
use crate::api::body::{self, ReqBody, RespBody};
use crate::core::request_info::RequestInfo;
use crate::server::shutdown::{InFlight, Lifecycle};

/// Paths answered as usual after the delay, so that probes and scrapes see the shutdown.
const EXEMPT_PREFIXES: [&str; 4] = ["/readyz", "/livez", "/healthz", "/metrics"];

#[derive(Clone)]
pub struct Termination(pub Lifecycle);

impl Filter for Termination {
    fn call(&self, request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>> {
        let lifecycle = self.0.clone();
        Box::pin(async move {
            if lifecycle.options().send_retry_after && lifecycle.is_not_accepting() && !is_exempt(&request) {
                return retry_later(request.version());
            }
            let watch = is_long_running(&request);
            let in_flight = lifecycle.start_request(watch);
            let response = run(next, request).await;
            if watch {
                let end = Box::pin(lifecycle.watch_end());
                response.map(|inner| Ending { inner, end, _in_flight: in_flight }.boxed_unsync())
            } else if response.body().size_hint().exact().is_some() {
                // A whole body needs nothing more from the server (the connection writes it
                // out and graceful shutdown waits for connections): the request is done, and
                // the common answer costs no wrapper.
                drop(in_flight);
                response
            } else {
                response.map(|inner| on_end(inner, move |_| drop(in_flight)))
            }
        })
    }
}

/// Probes, scrapes and kube-apiserver's own loopback requests are never refused.
fn is_exempt(request: &Request<ReqBody>) -> bool {
    // The decoded path, as the router reads it.
    let path = request.extensions().get::<RequestInfo>().map_or(request.uri().path(), |info| info.path.as_str());
    EXEMPT_PREFIXES.iter().any(|prefix| path.starts_with(prefix))
        || request
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|agent| agent.starts_with("kube-apiserver/"))
}

/// k8s.io/apiserver's answer to a request that arrives while it drains: 429, try again in
/// five seconds, on another connection (HTTP/1.1 only: HTTP/2 has no `Connection` header).
fn retry_later(version: Version) -> Response<RespBody> {
    let mut response = body::bytes_response(
        StatusCode::TOO_MANY_REQUESTS,
        "text/plain; charset=utf-8",
        "The apiserver is shutting down, please try again later.\n",
    );
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    if version < Version::HTTP_2 {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A watch's body: ends, between two frames (each one whole event), when `end` resolves.
struct Ending {
    inner: RespBody,
    end: Pin<Box<dyn Future<Output = ()> + Send>>,
    _in_flight: InFlight,
}

impl Body for Ending {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.end.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    /// Unknown: the body may end before the inner one says it would.
    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::StreamExt;
    use http_body_util::{BodyStream, StreamBody};

    use super::*;
    use crate::core::request_info::{Query, RequestInfo};
    use crate::server::filters::endpoint;
    use crate::server::shutdown::{ShutdownOptions, Stop};

    fn request(method: http::Method, path: &str, agent: Option<&str>) -> Request<ReqBody> {
        let mut request = Request::builder().method(method.clone()).uri(path);
        if let Some(agent) = agent {
            request = request.header(header::USER_AGENT, agent);
        }
        let mut request = request.body(body::request_body(Bytes::new())).unwrap();
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let info = RequestInfo::parse(&method, path, &Query::parse(Some(query))).unwrap();
        request.extensions_mut().insert(info);
        request
    }

    /// A chain answering every request with a body of events that never ends by itself.
    fn endless() -> Next {
        endpoint(|_| async {
            let events = futures_util::stream::iter(0..)
                .then(|i| async move {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(format!("{{\"event\":{i}}}\n"))))
                })
                .boxed();
            Response::new(StreamBody::new(events).boxed_unsync())
        })
    }

    #[tokio::test]
    async fn watches_end_cleanly_when_the_server_stops_accepting() {
        let lifecycle = Lifecycle::new(ShutdownOptions::default());
        let filter = Termination(lifecycle.clone());
        let watch = request(http::Method::GET, "/apis/g.io/v1/widgets?watch=true", None);
        let response = filter.call(watch, endless()).await;
        let mut frames = BodyStream::new(response.into_body());
        let first = frames.next().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, "{\"event\":0}\n");
        assert!(!lifecycle.drained(Duration::from_millis(1)).await, "the watch is in flight");
        lifecycle.stop_listening_after(async { Stop::Signal }).await;
        // The body ends (no error) and the watch is no longer in flight.
        assert!(frames.next().await.is_none());
        drop(frames);
        assert!(lifecycle.drained(Duration::from_millis(1)).await);
    }

    #[tokio::test]
    async fn streamed_answers_are_in_flight_until_sent_and_whole_ones_until_answered() {
        let lifecycle = Lifecycle::new(ShutdownOptions::default());
        let filter = Termination(lifecycle.clone());
        let streamed = endpoint(|_| async {
            let chunks = futures_util::stream::iter(["{\"items\":[", "]}"])
                .map(|c| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(c))));
            Response::new(StreamBody::new(chunks).boxed_unsync())
        });
        let list = request(http::Method::GET, "/apis/g.io/v1/widgets", None);
        let response = filter.call(list, streamed).await;
        assert!(!lifecycle.drained(Duration::from_millis(1)).await, "the list is still being written");
        let sent = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(sent, "{\"items\":[]}");
        assert!(lifecycle.drained(Duration::from_millis(1)).await);
        // A whole body needs nothing more from the server once the handler answered.
        let get = request(http::Method::GET, "/apis/g.io/v1/widgets/a", None);
        let whole = endpoint(|_| async { Response::new(body::full("got")) });
        let response = filter.call(get, whole).await;
        assert!(lifecycle.drained(Duration::from_millis(1)).await);
        assert_eq!(response.into_body().collect().await.unwrap().to_bytes(), "got");
    }

    #[tokio::test]
    async fn with_send_retry_after_new_requests_get_429_once_the_delay_passed() {
        let options = ShutdownOptions { send_retry_after: true, ..ShutdownOptions::default() };
        let lifecycle = Lifecycle::new(options);
        let filter = Termination(lifecycle.clone());
        let answer = || endpoint(|_| async { Response::new(body::full("served")) });
        let before = filter.call(request(http::Method::GET, "/apis/g.io/v1/widgets", None), answer()).await;
        assert_eq!(before.status(), StatusCode::OK);
        drop(before);
        lifecycle.stop_listening_after(async { Stop::Signal }).await;
        let refused = filter.call(request(http::Method::POST, "/apis/g.io/v1/widgets", None), answer()).await;
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "5");
        assert_eq!(refused.headers()[header::CONNECTION], "close");
        let text = refused.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(text, "The apiserver is shutting down, please try again later.\n");
        for (path, agent) in
            [("/readyz", None), ("/livez/ping", None), ("/apis/g.io/v1/widgets", Some("kube-apiserver/v1.36.0"))]
        {
            let served = filter.call(request(http::Method::GET, path, agent), answer()).await;
            assert_eq!(served.status(), StatusCode::OK, "{path}");
        }
    }
}
