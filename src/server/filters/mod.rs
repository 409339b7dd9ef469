//! The filters of the request path, one concern each, composed in `stack.rs`.
//!
//! A filter sees the request, may answer it itself, and otherwise calls the rest of the chain
//! (`Next`). Every filter is a [`Filter`]; [`FilterLayer`] makes it a tower layer.

pub mod authn;
pub mod authz;
pub mod impersonation;
pub mod inflight;
pub mod log;
pub mod metrics;
pub mod on_end;
pub mod panic;
pub mod pretty;
pub mod request_info;
pub mod termination;
pub mod timeout;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::{Request, Response};
use tower::Layer;

use crate::api::body::{ReqBody, RespBody};

type Handler = dyn Fn(Request<ReqBody>) -> BoxFuture<'static, Response<RespBody>> + Send + Sync;

/// The rest of the chain. Cloning it (once per filter per request) only counts a reference:
/// the chain is built once and shared by every request.
#[derive(Clone)]
pub struct Next(Arc<Handler>);

/// One step of the request path.
pub trait Filter: Clone + Send + Sync + 'static {
    fn call(&self, request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>>;
}

/// A [`Filter`] as a tower layer.
#[derive(Clone)]
pub struct FilterLayer<F>(pub F);

impl<F: Filter> Layer<Next> for FilterLayer<F> {
    type Service = Next;

    fn layer(&self, inner: Next) -> Next {
        let filter = self.0.clone();
        Next(Arc::new(move |request| filter.call(request, inner.clone())))
    }
}

/// Calls the rest of the chain.
pub async fn run(next: Next, request: Request<ReqBody>) -> Response<RespBody> {
    (next.0)(request).await
}

/// Wraps an async function as the end of a chain (tests, and the router).
pub fn endpoint<F, Fut>(f: F) -> Next
where
    F: Fn(Request<ReqBody>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<RespBody>> + Send + 'static,
{
    Next(Arc::new(move |request| Box::pin(f(request))))
}
