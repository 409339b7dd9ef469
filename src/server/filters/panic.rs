//! Panic guard (right inside the request log): a panic while serving becomes a 500 `Status`
//! instead of a dropped connection. A safety net only; request paths do not panic by design.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use http::{Request, Response};

use super::{Filter, Next, run};
use crate::api::body::{ReqBody, RespBody, error_response};
use crate::api::negotiate::Encoding;
use crate::core::status::ApiError;

#[derive(Clone)]
pub struct PanicGuard;

impl Filter for PanicGuard {
    fn call(&self, request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>> {
        Box::pin(async move {
            match AssertUnwindSafe(run(next, request)).catch_unwind().await {
                Ok(response) => response,
                Err(_) => {
                    let audit_id = crate::core::request_scope::audit_id();
                    tracing::error!("audit-ID" = audit_id, "a request handler panicked");
                    error_response(
                        &ApiError::internal("an unexpected error occurred while serving the request"),
                        Encoding::Json,
                    )
                }
            }
        })
    }
}
