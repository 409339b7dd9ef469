//! Delegated authorization: asks the main apiserver a SubjectAccessReview with the request's
//! full attributes, and remembers the answer (allowed and denied each for their own TTL).
//! A review that could not be made is an error, never an allow.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    FieldSelectorAttributes, LabelSelectorAttributes, NonResourceAttributes, ResourceAttributes,
    SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};

use super::BoxFuture;
use super::authz::{Authorizer, AuthzError, Decision};
use super::review::AccessReviewer;
use super::ttl_cache::TtlCache;
use crate::core::request_info::RequestInfo;
use crate::core::user::UserInfo;

/// How long answers are remembered (`--authorization-webhook-cache-*-ttl`).
#[derive(Debug, Clone, Copy)]
pub struct CacheTtls {
    pub authorized: Duration,
    pub unauthorized: Duration,
}

impl Default for CacheTtls {
    fn default() -> Self {
        CacheTtls { authorized: Duration::from_secs(10), unauthorized: Duration::from_secs(10) }
    }
}

pub struct SubjectAccessReviewAuthorizer {
    reviewer: Arc<dyn AccessReviewer>,
    cache: TtlCache<SubjectAccessReviewStatus>,
    ttls: CacheTtls,
}

impl SubjectAccessReviewAuthorizer {
    pub fn new(reviewer: Arc<dyn AccessReviewer>, ttls: CacheTtls) -> Self {
        SubjectAccessReviewAuthorizer { reviewer, cache: TtlCache::default(), ttls }
    }

    async fn status(&self, spec: &SubjectAccessReviewSpec) -> Result<SubjectAccessReviewStatus, AuthzError> {
        // The spec itself is the key: same user, same attributes, same answer.
        let key = serde_json::to_string(spec).map_err(|e| AuthzError(e.to_string()))?;
        let cached = self.cache.get(&key);
        crate::metrics::global().auth.authorization_cache(cached.is_some());
        if let Some(status) = cached {
            return Ok(status);
        }
        let status = self.reviewer.review_access(spec).await.map_err(|e| AuthzError(e.to_string()))?;
        let ttl = if status.allowed { self.ttls.authorized } else { self.ttls.unauthorized };
        self.cache.insert(key, status.clone(), ttl);
        Ok(status)
    }
}

fn some(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_string())
}

/// The SubjectAccessReview spec for a user and a request, as k8s.io/apiserver's webhook
/// authorizer writes it.
pub fn review_spec(user: &UserInfo, info: &RequestInfo) -> SubjectAccessReviewSpec {
    let mut spec = SubjectAccessReviewSpec {
        user: some(&user.name),
        uid: some(&user.uid),
        groups: (!user.groups.is_empty()).then(|| user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
        ..SubjectAccessReviewSpec::default()
    };
    if info.is_resource_request {
        spec.resource_attributes = Some(ResourceAttributes {
            namespace: some(&info.namespace),
            verb: some(&info.verb),
            group: some(&info.api_group),
            version: some(&info.api_version),
            resource: some(&info.resource),
            subresource: some(&info.subresource),
            name: some(&info.name),
            field_selector: some(&info.field_selector)
                .map(|raw| FieldSelectorAttributes { raw_selector: Some(raw), requirements: None }),
            label_selector: some(&info.label_selector)
                .map(|raw| LabelSelectorAttributes { raw_selector: Some(raw), requirements: None }),
        });
    } else {
        spec.non_resource_attributes = Some(NonResourceAttributes { path: some(&info.path), verb: some(&info.verb) });
    }
    spec
}

impl Authorizer for SubjectAccessReviewAuthorizer {
    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        info: &'a RequestInfo,
    ) -> BoxFuture<'a, Result<Decision, AuthzError>> {
        Box::pin(async move {
            if user.is_anonymous() {
                // Requests without credentials only reach the always-allowed paths.
                return Ok(Decision::NoOpinion);
            }
            let status = self.status(&review_spec(user, info)).await?;
            let reason = status.reason.clone().unwrap_or_default();
            match (status.allowed, status.denied.unwrap_or(false)) {
                (true, true) => {
                    Err(AuthzError("webhook subject access review returned both allow and deny response".into()))
                }
                (true, false) => Ok(Decision::Allow),
                (false, true) => Ok(Decision::Deny(reason)),
                (false, false) => Ok(Decision::Deny(reason)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::review::ReviewError;
    use crate::core::request_info::Query;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Reviewer {
        calls: AtomicUsize,
        seen: Mutex<Vec<SubjectAccessReviewSpec>>,
        down: Mutex<bool>,
    }

    impl AccessReviewer for Reviewer {
        fn review_access<'a>(
            &'a self,
            spec: &'a SubjectAccessReviewSpec,
        ) -> BoxFuture<'a, Result<SubjectAccessReviewStatus, ReviewError>> {
            Box::pin(async move {
                self.calls.fetch_add(1, Ordering::SeqCst);
                self.seen.lock().unwrap().push(spec.clone());
                if *self.down.lock().unwrap() {
                    return Err(ReviewError("the server is currently unable to handle the request".into()));
                }
                let verb = spec.resource_attributes.as_ref().and_then(|r| r.verb.clone()).unwrap_or_default();
                let alice = spec.user.as_deref() == Some("alice");
                Ok(SubjectAccessReviewStatus {
                    allowed: alice && (verb == "get" || verb == "list"),
                    reason: (!alice).then(|| "no RBAC policy matched".to_string()),
                    ..SubjectAccessReviewStatus::default()
                })
            })
        }
    }

    fn info(method: http::Method, path: &str, query: &str) -> RequestInfo {
        RequestInfo::parse(&method, path, &Query::parse(Some(query))).unwrap()
    }

    #[test]
    fn spec_carries_every_attribute() {
        let mut user = UserInfo::new("alice", vec!["devs".into(), "system:authenticated".into()]);
        user.uid = "a-1".into();
        user.extra.insert("scopes".into(), vec!["x".into()]);
        let list = info(
            http::Method::GET,
            "/apis/stable.example.com/v1/namespaces/a/crontabs",
            "labelSelector=tier%3Dweb&fieldSelector=spec.x%3D1",
        );
        let spec = serde_json::to_value(review_spec(&user, &list)).unwrap();
        assert_eq!(
            spec,
            serde_json::json!({
                "user": "alice", "uid": "a-1", "groups": ["devs", "system:authenticated"],
                "extra": {"scopes": ["x"]},
                "resourceAttributes": {
                    "namespace": "a", "verb": "list", "group": "stable.example.com", "version": "v1",
                    "resource": "crontabs",
                    "fieldSelector": {"rawSelector": "spec.x=1"}, "labelSelector": {"rawSelector": "tier=web"}
                }
            })
        );
        let status = info(http::Method::PUT, "/apis/g.io/v1/widgets/w/status", "");
        let spec = serde_json::to_value(review_spec(&user, &status)).unwrap();
        assert_eq!(
            spec["resourceAttributes"],
            serde_json::json!({"verb": "update", "group": "g.io", "version": "v1", "resource": "widgets", "subresource": "status", "name": "w"})
        );
        let path = info(http::Method::GET, "/openapi/v2", "");
        let spec = serde_json::to_value(review_spec(&user, &path)).unwrap();
        assert_eq!(spec["nonResourceAttributes"], serde_json::json!({"path": "/openapi/v2", "verb": "get"}));
    }

    #[tokio::test]
    async fn decisions_are_cached_and_outages_never_allow() {
        let reviewer = Arc::new(Reviewer::default());
        let authz = SubjectAccessReviewAuthorizer::new(reviewer.clone(), CacheTtls::default());
        let alice = UserInfo::new("alice", vec![]);
        let bob = UserInfo::new("bob", vec![]);
        let get = info(http::Method::GET, "/apis/g.io/v1/namespaces/a/widgets/w", "");
        let create = info(http::Method::POST, "/apis/g.io/v1/namespaces/a/widgets", "");
        assert_eq!(authz.authorize(&alice, &get).await.unwrap(), Decision::Allow);
        assert_eq!(authz.authorize(&alice, &get).await.unwrap(), Decision::Allow);
        assert_eq!(reviewer.calls.load(Ordering::SeqCst), 1);
        assert_eq!(authz.authorize(&alice, &create).await.unwrap(), Decision::Deny(String::new()));
        assert_eq!(authz.authorize(&bob, &get).await.unwrap(), Decision::Deny("no RBAC policy matched".into()));
        authz.authorize(&bob, &get).await.unwrap();
        assert_eq!(reviewer.calls.load(Ordering::SeqCst), 3, "denials are cached too");
        *reviewer.down.lock().unwrap() = true;
        let delete = info(http::Method::DELETE, "/apis/g.io/v1/namespaces/a/widgets/w", "");
        assert!(authz.authorize(&alice, &delete).await.is_err());
        assert_eq!(authz.authorize(&UserInfo::anonymous(), &get).await.unwrap(), Decision::NoOpinion);
        assert_eq!(reviewer.calls.load(Ordering::SeqCst), 4, "anonymous requests are not reviewed");
    }

    #[tokio::test]
    async fn zero_ttls_ask_every_time() {
        let reviewer = Arc::new(Reviewer::default());
        let ttls = CacheTtls { authorized: Duration::ZERO, unauthorized: Duration::ZERO };
        let authz = SubjectAccessReviewAuthorizer::new(reviewer.clone(), ttls);
        let alice = UserInfo::new("alice", vec![]);
        let get = info(http::Method::GET, "/apis/g.io/v1/namespaces/a/widgets/w", "");
        authz.authorize(&alice, &get).await.unwrap();
        authz.authorize(&alice, &get).await.unwrap();
        assert_eq!(reviewer.calls.load(Ordering::SeqCst), 2);
    }
}
