//! The filters of the request path, one concern each, composed in `stack.rs`.
//!
//! A filter sees the request, may answer it itself, and otherwise calls the rest of the chain
//! (`Next`). Every filter is a [`Filter`]; [`FilterLayer`] makes it a tower layer.

pub mod authn;
pub mod authz;
pub mod inflight;
pub mod log;
pub mod panic;
pub mod request_info;
pub mod timeout;

use std::convert::Infallible;

use futures_util::future::BoxFuture;
use http::{Request, Response};
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt};

use crate::api::body::{ReqBody, RespBody};

/// The rest of the chain.
pub type Next = BoxCloneSyncService<Request<ReqBody>, Response<RespBody>, Infallible>;

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
        BoxCloneSyncService::new(tower::service_fn(move |request: Request<ReqBody>| {
            let filter = filter.clone();
            let next = inner.clone();
            async move { Ok::<_, Infallible>(filter.call(request, next).await) }
        }))
    }
}

/// Calls the rest of the chain.
pub async fn run(mut next: Next, request: Request<ReqBody>) -> Response<RespBody> {
    match next.ready().await {
        Ok(service) => match service.call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        },
        Err(never) => match never {},
    }
}

/// Wraps an async function as the end of a chain (tests, and the router).
pub fn endpoint<F, Fut>(f: F) -> Next
where
    F: Fn(Request<ReqBody>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<RespBody>> + Send + 'static,
{
    BoxCloneSyncService::new(tower::service_fn(move |request| {
        let f = f.clone();
        async move { Ok::<_, Infallible>(f(request).await) }
    }))
}
