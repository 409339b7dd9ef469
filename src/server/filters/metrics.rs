//! Request metrics: counts and times every request that reached a handler (the handler claims
//! the series it counts under), as k8s.io/apiserver's `MonitorRequest` does, and keeps the long-running gauge
//! of watches. Whole bodies are counted when the handler returns; streamed bodies (lists,
//! watches) when their last byte is sent or the client goes away.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::{Request, Response, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use super::{Filter, Next, run};
use crate::api::body::{ReqBody, RespBody};
use crate::core::request_info::RequestInfo;
use crate::metrics::labels::{RequestLabels, Verb};
use crate::metrics::requests::{Cell, LongRunning, Route, claimed};

#[derive(Clone)]
pub struct RequestMetrics;

impl Filter for RequestMetrics {
    fn call(&self, request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>> {
        let started = Instant::now();
        let labels = request.extensions().get::<RequestInfo>().map(|info| {
            let content_type = request.headers().get(header::CONTENT_TYPE).map(|v| v.as_bytes());
            RequestLabels::of(request.method(), info, request.uri().query(), content_type)
        });
        Box::pin(async move {
            let (response, claimed) = claimed(started, run(next, request)).await;
            let (Some(labels), Some(route)) = (labels, claimed.route) else {
                return response;
            };
            record(response, labels, route, claimed.aborted, started)
        })
    }
}

fn record(
    response: Response<RespBody>,
    labels: RequestLabels,
    route: Route,
    aborted: bool,
    started: Instant,
) -> Response<RespBody> {
    let (series, labels) = match route {
        Route::Resource(series) => (series, labels),
        Route::Discovery(index) => {
            (crate::metrics::global().requests.discovery().clone(), RequestLabels::non_resource(Verb::Get, index))
        }
    };
    let Some(cell) = series.cell(&labels) else {
        return response;
    };
    if aborted {
        cell.abort();
    }
    let code = response.status().as_u16();
    if let Some(size) = response.body().size_hint().exact() {
        cell.record(code, started.elapsed(), size);
        return response;
    }
    let long_running = (labels.verb == Verb::Watch).then(|| cell.long_running());
    let (parts, body) = response.into_parts();
    let metered =
        Metered { inner: body, cell: Some(cell.clone()), code, started, bytes: 0, _long_running: long_running };
    Response::from_parts(parts, metered.boxed_unsync())
}

/// A streamed body that is counted when it ends.
struct Metered {
    inner: RespBody,
    /// Taken when recorded, so that the end and the drop record once.
    cell: Option<Arc<Cell>>,
    code: u16,
    started: Instant,
    bytes: u64,
    _long_running: Option<LongRunning>,
}

impl Metered {
    fn finish(&mut self) {
        if let Some(cell) = self.cell.take() {
            cell.record(self.code, self.started.elapsed(), self.bytes);
        }
    }
}

impl Body for Metered {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(context);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.bytes += data.len() as u64;
                }
            }
            Poll::Ready(None) => self.finish(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        self.finish();
    }
}
