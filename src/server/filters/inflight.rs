//! Limits concurrent requests (mutating and read-only separately, watches exempt), answering
//! 429 beyond the limit, as `--max-requests-inflight` does.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::{Request, Response};
use tokio::sync::Semaphore;

use super::timeout::is_long_running;
use super::{Filter, Next, run};
use crate::api::body::{ReqBody, RespBody, error_response};
use crate::api::negotiate::Encoding;
use crate::core::request_info::RequestInfo;
use crate::core::status::ApiError;
use crate::metrics::requests::Route;

#[derive(Clone)]
pub struct MaxInFlight {
    read_only: Arc<Semaphore>,
    mutating: Arc<Semaphore>,
}

impl MaxInFlight {
    pub fn new(read_only: usize, mutating: usize) -> MaxInFlight {
        MaxInFlight { read_only: Arc::new(Semaphore::new(read_only)), mutating: Arc::new(Semaphore::new(mutating)) }
    }
}

fn is_mutating(request: &Request<ReqBody>) -> bool {
    request
        .extensions()
        .get::<RequestInfo>()
        .is_some_and(|i| matches!(i.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection"))
}

impl Filter for MaxInFlight {
    fn call(&self, request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>> {
        let mutating = is_mutating(&request);
        let pool = if mutating { self.mutating.clone() } else { self.read_only.clone() };
        Box::pin(async move {
            if is_long_running(&request) {
                return run(next, request).await;
            }
            match pool.try_acquire_owned() {
                Ok(_permit) => {
                    let _seat = crate::metrics::global().inflight.enter(mutating);
                    run(next, request).await
                }
                Err(_) => {
                    crate::metrics::global().inflight.dropped(mutating);
                    if let Some(route) = request.extensions().get::<RequestInfo>().and_then(Route::refused) {
                        crate::metrics::requests::claim(route);
                    }
                    error_response(
                        &ApiError::too_many_requests("Too many requests, please try again later.", 1),
                        Encoding::Json,
                    )
                }
            }
        })
    }
}
