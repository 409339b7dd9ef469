//! Request log: one line per request with method, path, status, user and duration.

use std::time::Instant;

use futures_util::future::BoxFuture;
use http::{Request, Response};

use super::{Filter, Next, run};
use crate::api::body::{ReqBody, RespBody};
use crate::core::user::UserInfo;

#[derive(Clone)]
pub struct RequestLog;

impl Filter for RequestLog {
    fn call(&self, request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>> {
        let method = request.method().clone();
        let uri = request.uri().clone();
        let started = Instant::now();
        Box::pin(async move {
            let response = run(next, request).await;
            let user = response.extensions().get::<UserInfo>().map(|u| u.name.clone()).unwrap_or_default();
            tracing::debug!(
                method = %method,
                uri = %uri,
                status = response.status().as_u16(),
                user = %user,
                micros = started.elapsed().as_micros() as u64,
                "request"
            );
            response
        })
    }
}
