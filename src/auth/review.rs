//! The questions this server asks the main apiserver, as traits: TokenReview (who holds this
//! bearer token?) and SubjectAccessReview (may this user do this?). The `kube` module answers them
//! over the network; tests answer them in memory. The wire types are Kubernetes' own.

use k8s_openapi::api::authentication::v1::TokenReviewStatus;
use k8s_openapi::api::authorization::v1::{SubjectAccessReviewSpec, SubjectAccessReviewStatus};

use super::BoxFuture;

/// A review could not be made (the main apiserver was unreachable, refused, or answered
/// something unreadable). Never read as an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReviewError(pub String);

/// Asks `authentication.k8s.io/v1` TokenReview.
pub trait TokenReviewer: Send + Sync {
    fn review_token<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<TokenReviewStatus, ReviewError>>;
}

/// Asks `authorization.k8s.io/v1` SubjectAccessReview.
pub trait AccessReviewer: Send + Sync {
    fn review_access<'a>(
        &'a self,
        spec: &'a SubjectAccessReviewSpec,
    ) -> BoxFuture<'a, Result<SubjectAccessReviewStatus, ReviewError>>;
}
