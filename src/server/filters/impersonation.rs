//! Impersonation: a request whose `Impersonate-*` headers name a user goes on as that user if
//! the authorizer allows the authenticated user to impersonate it (`auth::impersonation`
//! decides, as k8s.io/apiserver 1.36 does), and is refused otherwise: 400 for headers without a
//! user name, 403 worded as Kubernetes words it. The headers are removed either way, so nothing
//! after this filter can tell that impersonation was used.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::{Request, Response};

use super::authz::forbidden;
use super::{Filter, Next, run};
use crate::api::body::{ReqBody, RespBody, error_response};
use crate::api::negotiate::Encoding;
use crate::auth::impersonation::{Impersonation, ImpersonationError, take_wanted_user};
use crate::core::request_info::RequestInfo;
use crate::core::status::ApiError;
use crate::core::user::UserInfo;

#[derive(Clone)]
pub struct ImpersonationFilter(pub Arc<Impersonation>);

impl Filter for ImpersonationFilter {
    fn call(&self, mut request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>> {
        let impersonation = self.0.clone();
        Box::pin(async move {
            let wanted = match take_wanted_user(request.headers_mut()) {
                Ok(Some(wanted)) => wanted,
                Ok(None) => return run(next, request).await,
                Err(e) => return error_response(&refusal(e), Encoding::Json),
            };
            let (Some(requestor), Some(info)) =
                (request.extensions().get::<UserInfo>(), request.extensions().get::<RequestInfo>())
            else {
                return error_response(&ApiError::internal("no user found for request"), Encoding::Json);
            };
            match impersonation.impersonate(requestor, info, &wanted).await {
                Ok((user, mode)) => {
                    tracing::debug!(requestor = %requestor.name, user = %user.name, mode, "impersonating");
                    request.extensions_mut().insert(user);
                    run(next, request).await
                }
                Err(e) => {
                    tracing::debug!(requestor = %requestor.name, wanted = %wanted.name, "impersonation refused");
                    error_response(&refusal(e), Encoding::Json)
                }
            }
        })
    }
}

fn refusal(error: ImpersonationError) -> ApiError {
    match error {
        ImpersonationError::BadRequest(message) => ApiError::bad_request(message),
        ImpersonationError::Forbidden(refusal) => forbidden(&refusal.requestor, &refusal.attributes, &refusal.reason),
    }
}
