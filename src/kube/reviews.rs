//! SubjectAccessReview and TokenReview against the main apiserver, each call bounded by a
//! timeout (10 s, as k8s.io/apiserver's delegating clients use).

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus};

use super::describe;
use crate::auth::BoxFuture;
use crate::auth::review::{AccessReviewer, ReviewError, TokenReviewer};
use crate::metrics::simple::Timed;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Asks the main apiserver (through the client it is given).
pub struct ClusterReviews {
    client: ::kube::Client,
    timeout: Duration,
}

impl ClusterReviews {
    pub fn new(client: ::kube::Client, timeout: Duration) -> Self {
        ClusterReviews { client, timeout }
    }

    /// Creates the review, counted in `timed` by HTTP code (`apiserver_delegated_*_request_*`).
    async fn create<K>(&self, object: &K, timed: &Timed<String>) -> Result<K, ReviewError>
    where
        K: ::kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + serde::de::DeserializeOwned,
        K::DynamicType: Default,
    {
        let api: ::kube::Api<K> = ::kube::Api::all(self.client.clone());
        let started = std::time::Instant::now();
        let answer = tokio::time::timeout(self.timeout, api.create(&::kube::api::PostParams::default(), object)).await;
        let code = match &answer {
            Ok(Ok(_)) => "201".to_string(),
            Ok(Err(::kube::Error::Api(status))) => status.code.to_string(),
            // No HTTP answer: a connection failure or the timeout.
            _ => "<error>".to_string(),
        };
        timed.observe(code, started.elapsed());
        match answer {
            Ok(Ok(created)) => Ok(created),
            Ok(Err(e)) => Err(ReviewError(describe(&e))),
            Err(_) => Err(ReviewError(format!("no answer within {}s", self.timeout.as_secs()))),
        }
    }
}

impl AccessReviewer for ClusterReviews {
    fn review_access<'a>(
        &'a self,
        spec: &'a SubjectAccessReviewSpec,
    ) -> BoxFuture<'a, Result<SubjectAccessReviewStatus, ReviewError>> {
        Box::pin(async move {
            let review = SubjectAccessReview { spec: spec.clone(), ..SubjectAccessReview::default() };
            let answered = self.create(&review, &crate::metrics::global().delegated.authorization).await?;
            // No status at all is not an allow.
            Ok(answered.status.unwrap_or_default())
        })
    }
}

impl TokenReviewer for ClusterReviews {
    fn review_token<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<TokenReviewStatus, ReviewError>> {
        Box::pin(async move {
            let review = TokenReview {
                spec: TokenReviewSpec { token: Some(token.to_string()), audiences: None },
                ..TokenReview::default()
            };
            let answered = self.create(&review, &crate::metrics::global().delegated.authentication).await?;
            Ok(answered.status.unwrap_or_default())
        })
    }
}
