//! Authorization: decisions over request attributes, and the chain k8s.io/apiserver builds
//! for a delegating server (system:masters, always-allowed paths, then the configured one).

use super::BoxFuture;
use crate::core::field::go_quote;
use crate::core::request_info::RequestInfo;
use crate::core::user::{MASTERS_GROUP, UserInfo};

/// A decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Denied, with the authorizer's reason (may be empty).
    Deny(String),
    NoOpinion,
}

/// An authorizer could not decide (for example the SubjectAccessReview call failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthzError(pub String);

pub trait Authorizer: Send + Sync {
    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        info: &'a RequestInfo,
    ) -> BoxFuture<'a, Result<Decision, AuthzError>>;
}

/// Allows every authenticated user everything: the development mode's authorizer.
pub struct AllowAuthenticated;

impl Authorizer for AllowAuthenticated {
    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        _info: &'a RequestInfo,
    ) -> BoxFuture<'a, Result<Decision, AuthzError>> {
        Box::pin(async move { Ok(if user.is_anonymous() { Decision::NoOpinion } else { Decision::Allow }) })
    }
}

/// The delegating chain: system:masters; always-allowed paths (with `*` suffix prefixes);
/// then the configured authorizer. No opinion from all of them denies.
pub struct Chain {
    always_allow_paths: Vec<String>,
    delegate: Box<dyn Authorizer>,
}

impl Chain {
    pub fn new(always_allow_paths: Vec<String>, delegate: Box<dyn Authorizer>) -> Chain {
        Chain { always_allow_paths, delegate }
    }

    fn path_allowed(&self, info: &RequestInfo) -> bool {
        if info.is_resource_request {
            return false;
        }
        self.always_allow_paths.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => info.path.starts_with(prefix),
            None => info.path == *p,
        })
    }

    pub async fn authorize(&self, user: &UserInfo, info: &RequestInfo) -> Result<Decision, AuthzError> {
        if user.in_group(MASTERS_GROUP) || self.path_allowed(info) {
            return Ok(Decision::Allow);
        }
        match self.delegate.authorize(user, info).await? {
            Decision::NoOpinion => Ok(Decision::Deny(String::new())),
            other => Ok(other),
        }
    }
}

/// The chain answers like any authorizer (admission expressions' `authorizer` asks it).
impl Authorizer for Chain {
    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        info: &'a RequestInfo,
    ) -> BoxFuture<'a, Result<Decision, AuthzError>> {
        Box::pin(Chain::authorize(self, user, info))
    }
}

/// The Forbidden message Kubernetes writes for a denied request: its attributes quoted as Go's
/// `%q` quotes them, `&`, `<` and `>` escaped so that nothing in it reads as HTML, then the
/// authorizer's reason.
pub fn forbidden_reason(user: &UserInfo, info: &RequestInfo, reason: &str) -> String {
    let text = if info.is_resource_request {
        let resource = if info.subresource.is_empty() {
            info.resource.clone()
        } else {
            format!("{}/{}", info.resource, info.subresource)
        };
        let scope = if info.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {}", go_quote(&info.namespace))
        };
        format!(
            "User {} cannot {} resource {} in API group {} {scope}",
            go_quote(&user.name),
            info.verb,
            go_quote(&resource),
            go_quote(&info.api_group)
        )
    } else {
        format!("User {} cannot {} path {}", go_quote(&user.name), info.verb, go_quote(&info.path))
    };
    let mut text = text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    if !reason.is_empty() {
        text.push_str(": ");
        text.push_str(reason);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::request_info::Query;

    fn info(method: http::Method, path: &str) -> RequestInfo {
        RequestInfo::parse(&method, path, &Query::default()).unwrap()
    }

    #[tokio::test]
    async fn chain_order() {
        let chain = Chain::new(vec!["/healthz".into(), "/readyz*".into()], Box::new(AllowAuthenticated));
        let anon = UserInfo::anonymous();
        assert_eq!(chain.authorize(&anon, &info(http::Method::GET, "/healthz")).await.unwrap(), Decision::Allow);
        assert_eq!(chain.authorize(&anon, &info(http::Method::GET, "/readyz/ping")).await.unwrap(), Decision::Allow);
        assert!(matches!(chain.authorize(&anon, &info(http::Method::GET, "/apis")).await.unwrap(), Decision::Deny(_)));
        let admin = UserInfo::new("x", vec![MASTERS_GROUP.into()]);
        assert_eq!(chain.authorize(&admin, &info(http::Method::GET, "/apis")).await.unwrap(), Decision::Allow);
    }

    #[test]
    fn forbidden_wording() {
        let user = UserInfo::new("alice", vec![]);
        let create = RequestInfo::parse(
            &http::Method::POST,
            "/apis/stable.example.com/v1/namespaces/a/crontabs",
            &Query::default(),
        )
        .unwrap();
        assert_eq!(
            forbidden_reason(&user, &create, ""),
            "User \"alice\" cannot create resource \"crontabs\" in API group \"stable.example.com\" in the namespace \"a\""
        );
        let status =
            RequestInfo::parse(&http::Method::PUT, "/apis/g.io/v1/widgets/w/status", &Query::default()).unwrap();
        assert_eq!(
            forbidden_reason(&user, &status, "nope"),
            "User \"alice\" cannot update resource \"widgets/status\" in API group \"g.io\" at the cluster scope: nope"
        );
        assert_eq!(
            forbidden_reason(&user, &info(http::Method::GET, "/x"), ""),
            "User \"alice\" cannot get path \"/x\""
        );
        // Go's %q, and no HTML in the message (the reason is the authorizer's own).
        let odd = UserInfo::new("a\"<b>&\u{1}", vec![]);
        assert_eq!(
            forbidden_reason(&odd, &info(http::Method::GET, "/x"), "<why>"),
            "User \"a\\\"&lt;b&gt;&amp;\\x01\" cannot get path \"/x\": <why>"
        );
    }
}
