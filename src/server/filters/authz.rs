//! Authorization: asks the authorizer chain about the request's user and attributes; a denial
//! is a 403 worded as Kubernetes words it, an authorizer failure a 500 (never an allow).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::{Request, Response};

use super::{Filter, Next, run};
use crate::api::body::{ReqBody, RespBody, error_response};
use crate::api::negotiate::Encoding;
use crate::auth::authz::{Chain, Decision, forbidden_reason};
use crate::core::gvr::GroupResource;
use crate::core::request_info::RequestInfo;
use crate::core::status::ApiError;
use crate::core::user::UserInfo;
use crate::metrics::simple as metrics;

#[derive(Clone)]
pub struct Authorization {
    pub chain: Arc<Chain>,
}

/// The 403 for a request (or an impersonation check) the authorizer did not allow.
pub fn forbidden(user: &UserInfo, info: &RequestInfo, reason: &str) -> ApiError {
    let why = forbidden_reason(user, info, reason);
    if info.is_resource_request {
        ApiError::forbidden(&GroupResource::new(&info.api_group, &info.resource), &info.name, &why)
    } else {
        ApiError::forbidden_path(&why)
    }
}

impl Filter for Authorization {
    fn call(&self, request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>> {
        let chain = self.chain.clone();
        Box::pin(async move {
            let (Some(user), Some(info)) =
                (request.extensions().get::<UserInfo>(), request.extensions().get::<RequestInfo>())
            else {
                return error_response(
                    &ApiError::internal("request reached authorization without identity"),
                    Encoding::Json,
                );
            };
            let decision = chain.authorize(user, info).await;
            let result = match &decision {
                Ok(Decision::Allow) => metrics::Authorization::Allowed,
                Ok(Decision::Deny(_)) => metrics::Authorization::Denied,
                Ok(Decision::NoOpinion) => metrics::Authorization::NoOpinion,
                Err(_) => metrics::Authorization::Error,
            };
            // Timed from the end of authentication, the step before.
            crate::metrics::global().auth.authorized(result, crate::metrics::requests::lap());
            match decision {
                Ok(Decision::Allow) => run(next, request).await,
                Ok(Decision::Deny(reason)) => error_response(&forbidden(user, info, &reason), Encoding::Json),
                Ok(Decision::NoOpinion) => error_response(&forbidden(user, info, ""), Encoding::Json),
                Err(e) => {
                    tracing::warn!(error = %e, "authorization failed");
                    error_response(&ApiError::internal(e.to_string()), Encoding::Json)
                }
            }
        })
    }
}
