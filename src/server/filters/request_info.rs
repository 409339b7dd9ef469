//! Parses what the request is about once, into a `RequestInfo` extension that authorization,
//! routing and handlers read.

use futures_util::future::BoxFuture;
use http::{Request, Response};

use super::{Filter, Next, run};
use crate::api::body::{ReqBody, RespBody, error_response};
use crate::api::negotiate::Encoding;
use crate::core::request_info::{Query, RequestInfo};
use crate::core::status::ApiError;

#[derive(Clone)]
pub struct RequestInfoFilter;

impl Filter for RequestInfoFilter {
    fn call(&self, mut request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>> {
        Box::pin(async move {
            let query = Query::parse(request.uri().query());
            match RequestInfo::parse(request.method(), request.uri().path(), &query) {
                Ok(info) => {
                    request.extensions_mut().insert(info);
                    run(next, request).await
                }
                Err(e) => error_response(&ApiError::bad_request(e), Encoding::Json),
            }
        })
    }
}
