//! Authentication: runs the authenticator chain over the request's headers and TLS peer
//! certificates, stores the `UserInfo` in the request, and removes credential headers
//! (`Authorization`, `X-Remote-*`) so that nothing after this filter can read them.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::{HeaderMap, Request, Response, header};

use super::{Filter, Next, run};
use crate::api::body::{ReqBody, RespBody, error_response};
use crate::api::negotiate::Encoding;
use crate::auth::{Authenticated, Chain, Credentials};
use crate::core::status::ApiError;
use crate::core::user::UserInfo;
use crate::server::conn::ConnInfo;

#[derive(Clone)]
pub struct Authentication {
    pub chain: Arc<Chain>,
    /// Header name prefixes the front proxy uses; stripped from every request.
    pub proxy_header_prefixes: Arc<Vec<String>>,
}

/// Removes credentials and identity headers.
pub fn strip_credentials(headers: &mut HeaderMap, prefixes: &[String]) {
    headers.remove(header::AUTHORIZATION);
    let doomed: Vec<header::HeaderName> = headers
        .keys()
        .filter(|name| {
            let name = name.as_str();
            name.starts_with("x-remote-") || prefixes.iter().any(|p| name.starts_with(p.as_str()))
        })
        .cloned()
        .collect();
    for name in doomed {
        headers.remove(name);
    }
}

impl Filter for Authentication {
    fn call(&self, mut request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>> {
        let chain = self.chain.clone();
        let prefixes = self.proxy_header_prefixes.clone();
        Box::pin(async move {
            let peer = request.extensions().get::<ConnInfo>().map(|c| c.peer_certificates.clone()).unwrap_or_default();
            let outcome = {
                let credentials = Credentials { headers: request.headers(), peer_certificates: &peer };
                chain.authenticate(&credentials).await
            };
            strip_credentials(request.headers_mut(), &prefixes);
            let user = match outcome {
                Authenticated::User(user) => user,
                Authenticated::Anonymous => UserInfo::anonymous(),
                Authenticated::Refused(reasons) => {
                    tracing::debug!(reasons = ?reasons, "authentication refused");
                    return error_response(&ApiError::unauthorized("Unauthorized"), Encoding::Json);
                }
            };
            request.extensions_mut().insert(user.clone());
            let mut response = run(next, request).await;
            response.extensions_mut().insert(user);
            response
        })
    }
}
