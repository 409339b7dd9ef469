//! Bearer token authentication by TokenReview against the main apiserver, as a delegating
//! k8s.io/apiserver does it: answers (authenticated or not) are cached for a TTL (10 s by
//! default); a review that could not be made is not cached and refuses the request. Where no
//! review can be made at all, every token is refused (`UnverifiableTokens`).

use std::sync::Arc;
use std::time::Duration;

use http::header::AUTHORIZATION;
use k8s_openapi::api::authentication::v1::TokenReviewStatus;

use super::review::TokenReviewer;
use super::ttl_cache::TtlCache;
use super::{Authenticator, AuthnError, BoxFuture, Credentials};
use crate::core::user::UserInfo;

/// What a token turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    User(UserInfo),
    Refused(String),
}

pub struct TokenAuthenticator {
    reviewer: Arc<dyn TokenReviewer>,
    cache: TtlCache<Answer>,
    success_ttl: Duration,
    failure_ttl: Duration,
}

impl TokenAuthenticator {
    pub fn new(reviewer: Arc<dyn TokenReviewer>, success_ttl: Duration, failure_ttl: Duration) -> Self {
        TokenAuthenticator { reviewer, cache: TtlCache::default(), success_ttl, failure_ttl }
    }

    async fn answer(&self, token: &str) -> Result<Answer, AuthnError> {
        // The cache is keyed by a digest so that tokens are not kept in memory.
        let key = digest(token);
        let cached = self.cache.get(&key);
        crate::metrics::global().auth.token_cache(cached.is_some());
        if let Some(answer) = cached {
            return Ok(answer);
        }
        let status =
            self.reviewer.review_token(token).await.map_err(|e| AuthnError(format!("token review failed: {e}")))?;
        let answer = answer_of(status);
        let ttl = if matches!(answer, Answer::User(_)) { self.success_ttl } else { self.failure_ttl };
        self.cache.insert(key, answer.clone(), ttl);
        Ok(answer)
    }
}

fn digest(token: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn answer_of(status: TokenReviewStatus) -> Answer {
    match (status.authenticated, status.user) {
        (Some(true), Some(user)) => Answer::User(UserInfo {
            name: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }),
        _ => Answer::Refused(status.error.filter(|e| !e.is_empty()).unwrap_or_else(|| "invalid bearer token".into())),
    }
}

/// The token of an `Authorization: Bearer <token>` header; anything else is not a bearer
/// token (the scheme is case-insensitive; a third word is ignored).
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl Authenticator for TokenAuthenticator {
    fn authenticate<'a>(
        &'a self,
        credentials: &'a Credentials<'a>,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, AuthnError>> {
        Box::pin(async move {
            let Some(token) = bearer_token(credentials.headers) else {
                return Ok(None);
            };
            match self.answer(token).await? {
                Answer::User(user) => Ok(Some(user)),
                Answer::Refused(why) => Err(AuthnError(why)),
            }
        })
    }
}

/// Refuses every bearer token: the authenticator where no TokenReview can be asked
/// (development mode, or no kubeconfig for authentication). A token nobody can verify is an
/// invalid credential (401), as kube-apiserver answers a token none of its authenticators
/// accepts, never a reason to serve the request as anonymous.
pub struct UnverifiableTokens;

impl Authenticator for UnverifiableTokens {
    fn authenticate<'a>(
        &'a self,
        credentials: &'a Credentials<'a>,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, AuthnError>> {
        Box::pin(async move {
            match bearer_token(credentials.headers) {
                Some(_) => Err(AuthnError("invalid bearer token".into())),
                None => Ok(None),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::BoxFuture;
    use crate::auth::review::ReviewError;
    use k8s_openapi::api::authentication::v1::UserInfo as ReviewedUser;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Reviewer {
        calls: AtomicUsize,
        down: Mutex<bool>,
    }

    impl TokenReviewer for Reviewer {
        fn review_token<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<TokenReviewStatus, ReviewError>> {
            Box::pin(async move {
                self.calls.fetch_add(1, Ordering::SeqCst);
                if *self.down.lock().unwrap() {
                    return Err(ReviewError("connection refused".into()));
                }
                Ok(match token {
                    "good" => TokenReviewStatus {
                        authenticated: Some(true),
                        user: Some(ReviewedUser {
                            username: Some("carol".into()),
                            uid: Some("c-1".into()),
                            groups: Some(vec!["devs".into()]),
                            extra: Some([("scopes".to_string(), vec!["x".to_string()])].into()),
                        }),
                        ..TokenReviewStatus::default()
                    },
                    _ => TokenReviewStatus { authenticated: Some(false), ..TokenReviewStatus::default() },
                })
            })
        }
    }

    fn headers(value: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert(AUTHORIZATION, value.parse().unwrap());
        h
    }

    async fn run(auth: &TokenAuthenticator, header: &str) -> Result<Option<UserInfo>, AuthnError> {
        let headers = headers(header);
        auth.authenticate(&Credentials { headers: &headers, peer_certificates: &[] }).await
    }

    #[test]
    fn bearer_header_forms() {
        assert_eq!(bearer_token(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("bearer abc extra")), Some("abc"));
        assert_eq!(bearer_token(&headers("Basic abc")), None);
        assert_eq!(bearer_token(&headers("Bearer")), None);
        assert_eq!(bearer_token(&headers("Bearer  abc")), None);
    }

    #[tokio::test]
    async fn answers_are_cached_and_outages_are_not() {
        let reviewer = Arc::new(Reviewer::default());
        let auth = TokenAuthenticator::new(reviewer.clone(), Duration::from_secs(10), Duration::from_secs(10));
        let user = run(&auth, "Bearer good").await.unwrap().unwrap();
        assert_eq!((user.name.as_str(), user.uid.as_str()), ("carol", "c-1"));
        assert_eq!(user.groups, vec!["devs".to_string()]);
        assert_eq!(user.extra["scopes"], vec!["x".to_string()]);
        run(&auth, "Bearer good").await.unwrap().unwrap();
        assert_eq!(reviewer.calls.load(Ordering::SeqCst), 1, "the second call is served from the cache");
        assert_eq!(run(&auth, "Bearer bad").await.unwrap_err().0, "invalid bearer token");
        run(&auth, "Bearer bad").await.unwrap_err();
        assert_eq!(reviewer.calls.load(Ordering::SeqCst), 2, "failures are cached too");
        *reviewer.down.lock().unwrap() = true;
        assert!(run(&auth, "Bearer other").await.unwrap_err().0.contains("connection refused"));
        assert!(run(&auth, "Bearer other").await.is_err());
        assert_eq!(reviewer.calls.load(Ordering::SeqCst), 4, "an outage is asked again");
        assert_eq!(run(&auth, "Basic xyz").await.unwrap(), None);
    }

    #[tokio::test]
    async fn without_token_review_every_token_is_invalid() {
        let bearer = headers("Bearer anything");
        let refused = UnverifiableTokens.authenticate(&Credentials { headers: &bearer, peer_certificates: &[] }).await;
        assert_eq!(refused, Err(AuthnError("invalid bearer token".into())));
        let basic = headers("Basic abc");
        let other = UnverifiableTokens.authenticate(&Credentials { headers: &basic, peer_certificates: &[] }).await;
        assert_eq!(other, Ok(None));
    }
}
