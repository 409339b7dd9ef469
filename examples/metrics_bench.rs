//! Benchmark for `hack/bench-metrics.sh`: what recording a request's metrics costs, in process,
//! free of network and machine noise: the steps the request path adds per get (labels, the
//! handler's claim, the cell's counters and histograms, the in-flight gauge, authentication
//! and authorization timings, a verbatim read), against the same loop without them, on one
//! thread and on two threads hitting the same series.
//!
//! Usage: metrics_bench [REQUESTS]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use crd_apiserver::core::request_info::{Query, RequestInfo};
use crd_apiserver::metrics::labels::RequestLabels;
use crd_apiserver::metrics::requests::{Route, claim, claimed, lap};
use crd_apiserver::metrics::simple::{Authentication, Authorization};

fn info() -> RequestInfo {
    let path = "/apis/stable.example.com/v1/namespaces/default/crontabs/a";
    RequestInfo::parse(&http::Method::GET, path, &Query::parse(None)).unwrap()
}

/// The per-request steps of the metrics, as the filters and the handler take them.
async fn with_metrics(info: &RequestInfo, requests: u64) -> Duration {
    let metrics = crd_apiserver::metrics::global();
    let series = metrics.requests.resource("stable.example.com", "v1", "crontabs", "CronTab");
    let started = Instant::now();
    for _ in 0..requests {
        let begun = Instant::now();
        let labels = RequestLabels::of(&http::Method::GET, black_box(info), None, None);
        let (answer, said) = claimed(begun, async {
            let _seat = metrics.inflight.enter(false);
            metrics.auth.authenticated(Authentication::Success, lap());
            metrics.auth.authorized(Authorization::Allowed, lap());
            claim(Route::Resource(series.clone()));
            crd_apiserver::metrics::verbatim(true);
            black_box(200u16)
        })
        .await;
        if let Some(Route::Resource(series)) = said.route
            && let Some(cell) = series.cell(&labels)
        {
            cell.record(answer, begun.elapsed(), 1024);
        }
    }
    started.elapsed()
}

/// The same loop shape with nothing recorded.
async fn without_metrics(info: &RequestInfo, requests: u64) -> Duration {
    let started = Instant::now();
    for _ in 0..requests {
        let answer = async { black_box(info.verb.len() as u16) }.await;
        black_box(answer);
    }
    started.elapsed()
}

fn per_request(elapsed: Duration, requests: u64) -> f64 {
    elapsed.as_nanos() as f64 / requests as f64
}

fn main() {
    let requests: u64 = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(2_000_000);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let info = info();
    runtime.block_on(async {
        // Warm up (allocates the resource's cells once).
        with_metrics(&info, 10_000).await;
        let base = without_metrics(&info, requests).await;
        let one = with_metrics(&info, requests).await;
        println!(
            "one thread: {:.0} ns per request with metrics, {:.1} ns without",
            per_request(one, requests),
            per_request(base, requests)
        );
        // Two threads recording into the same cell (the worst case: 8 connections getting one
        // resource on 2 cores).
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let info = info.clone();
                tokio::spawn(async move { with_metrics(&info, requests).await })
            })
            .collect();
        let mut slowest = Duration::ZERO;
        for task in tasks {
            slowest = slowest.max(task.await.unwrap());
        }
        println!("two threads, one series: {:.0} ns per request per thread", per_request(slowest, requests));
    });
}
