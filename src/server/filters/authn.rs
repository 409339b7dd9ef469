//! Authentication: runs the authenticator chain over the request's headers and TLS peer
//! certificates, stores the `UserInfo` in the request, and removes credential headers
//! (`Authorization`, `X-Remote-*`) so that nothing after this filter can read them.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::{HeaderMap, Request, Response, header};

use super::{Filter, Next, run};
use crate::api::body::{ReqBody, RespBody, error_response};
use crate::api::negotiate::Encoding;
use crate::auth::requestheader::{RequestHeaderConfig, SharedRequestHeaderConfig};
use crate::auth::{Authenticated, Chain, Credentials};
use crate::core::status::ApiError;
use crate::core::user::UserInfo;
use crate::metrics::simple as metrics;
use crate::server::conn::ConnInfo;

#[derive(Clone)]
pub struct Authentication {
    pub chain: Arc<Chain>,
    /// The front proxy's header names (they may change with the cluster's ConfigMap); stripped
    /// from every request, as are the standard `X-Remote-*` headers.
    pub request_header: SharedRequestHeaderConfig,
}

/// Removes credentials and identity headers.
pub fn strip_credentials(headers: &mut HeaderMap, config: &RequestHeaderConfig) {
    headers.remove(header::AUTHORIZATION);
    let names: Vec<String> = config.header_names().collect();
    let prefixes: Vec<String> = config.prefixes().collect();
    let doomed: Vec<header::HeaderName> = headers
        .keys()
        .filter(|name| {
            let name = name.as_str();
            name.starts_with("x-remote-")
                || names.iter().any(|n| n == name)
                || prefixes.iter().any(|p| name.starts_with(p.as_str()))
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
        let request_header = self.request_header.clone();
        Box::pin(async move {
            let connection = request.extensions().get::<ConnInfo>();
            let peer = connection.map(|c| c.peer_certificates.clone()).unwrap_or_default();
            let activity = connection.map(|c| c.activity.clone());
            let outcome = {
                let credentials = Credentials { headers: request.headers(), peer_certificates: &peer };
                chain.authenticate(&credentials).await
            };
            let result = match &outcome {
                Authenticated::User(_) | Authenticated::Anonymous => metrics::Authentication::Success,
                Authenticated::Refused(_) => metrics::Authentication::Failure,
            };
            // Timed from the previous step: the clock is read once per step.
            crate::metrics::global().auth.authenticated(result, crate::metrics::requests::lap());
            strip_credentials(request.headers_mut(), &request_header.load());
            let user = match outcome {
                Authenticated::User(user) => {
                    // At the connection cap, connections of anonymous clients give way first.
                    if let Some(activity) = activity {
                        activity.set_authenticated();
                    }
                    user
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_identity_headers_are_removed() {
        let config = RequestHeaderConfig {
            username_headers: vec!["X-Forwarded-User".into()],
            group_headers: vec!["X-Forwarded-Groups".into()],
            extra_prefixes: vec!["X-Forwarded-Extra-".into()],
            ..RequestHeaderConfig::default()
        };
        let mut headers = HeaderMap::new();
        for name in [
            "authorization",
            "x-remote-user",
            "x-remote-group",
            "x-remote-extra-scopes",
            "x-remote-uid",
            "x-forwarded-user",
            "x-forwarded-groups",
            "x-forwarded-extra-team",
            "accept",
        ] {
            headers.insert(header::HeaderName::from_static(name), "v".parse().unwrap());
        }
        strip_credentials(&mut headers, &config);
        assert_eq!(headers.keys().map(|k| k.as_str()).collect::<Vec<_>>(), vec!["accept"]);
    }
}
