//! Request metrics: counts and times every request that reached a handler (the handler claims
//! the series it counts under), as k8s.io/apiserver's `MonitorRequest` does, and keeps the long-running gauge
//! of watches. Whole bodies are counted when the handler returns; streamed bodies (lists,
//! watches) when their last byte is sent or the client goes away.

use std::time::Instant;

use futures_util::future::BoxFuture;
use http::{Request, Response, header};
use http_body::Body;

use super::on_end::on_end;
use super::{Filter, Next, run};
use crate::api::body::{ReqBody, RespBody};
use crate::core::request_info::RequestInfo;
use crate::metrics::labels::{RequestLabels, Verb};
use crate::metrics::requests::{Route, claimed};

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
    let cell = cell.clone();
    response.map(|body| {
        on_end(body, move |bytes| {
            cell.record(code, started.elapsed(), bytes);
            drop(long_running);
        })
    })
}
