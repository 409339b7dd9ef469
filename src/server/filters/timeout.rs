//! Short requests get a deadline; watches (long-running) do not.

use std::time::Duration;

use futures_util::future::BoxFuture;
use http::{Request, Response};

use super::{Filter, Next, run};
use crate::api::body::{ReqBody, RespBody, error_response};
use crate::api::negotiate::Encoding;
use crate::core::request_info::RequestInfo;
use crate::core::status::ApiError;

#[derive(Clone)]
pub struct Timeout {
    pub limit: Duration,
}

/// Watches stream for as long as they last.
pub fn is_long_running(request: &Request<ReqBody>) -> bool {
    request.extensions().get::<RequestInfo>().is_some_and(|i| i.verb == "watch")
}

impl Filter for Timeout {
    fn call(&self, request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>> {
        let limit = self.limit;
        Box::pin(async move {
            if is_long_running(&request) {
                return run(next, request).await;
            }
            match tokio::time::timeout(limit, run(next, request)).await {
                Ok(response) => response,
                Err(_) => {
                    // Counted, as an abort, under the resource its handler claimed.
                    crate::metrics::requests::aborted();
                    error_response(
                        &ApiError::timeout("request did not complete within the allotted timeout", 0),
                        Encoding::Json,
                    )
                }
            }
        })
    }
}
