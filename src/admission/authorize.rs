//! CEL's `authorizer` in admission expressions, answered by the server's own authorizer (the
//! delegating chain: system:masters, then SubjectAccessReview through its cache), for the
//! request's user or a named service account, as kube-apiserver's admission authorizer does.
//!
//! Owns turning a CEL check into authorization attributes; the decision is the authorizer's.

use std::sync::Arc;

use crate::auth::authz::{Authorizer, Decision};
use crate::cel::policy::{Authorize, Check, Verdict};
use crate::core::request_info::RequestInfo;
use crate::core::user::UserInfo;

pub struct RequestAuthorizer {
    authorizer: Arc<dyn Authorizer>,
    user: UserInfo,
    /// The request's resource attributes.
    request: Check,
}

impl RequestAuthorizer {
    pub fn new(authorizer: Arc<dyn Authorizer>, request: &super::Request<'_>) -> RequestAuthorizer {
        let t = &request.target;
        let check = Check {
            group: t.group.to_string(),
            resource: t.resource.to_string(),
            subresource: t.subresource.to_string(),
            namespace: t.namespace.to_string(),
            name: t.name.to_string(),
            ..Check::default()
        };
        RequestAuthorizer { authorizer, user: request.user.clone(), request: check }
    }
}

/// The identity of a service account, as its token authenticates it.
fn service_account(namespace: &str, name: &str) -> UserInfo {
    UserInfo::new(
        format!("system:serviceaccount:{namespace}:{name}"),
        vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".into(),
        ],
    )
}

fn attributes(check: &Check) -> RequestInfo {
    match &check.path {
        Some(path) => RequestInfo { path: path.clone(), verb: check.verb.clone(), ..RequestInfo::default() },
        None => RequestInfo {
            is_resource_request: true,
            verb: check.verb.clone(),
            api_group: check.group.clone(),
            api_version: "*".into(),
            namespace: check.namespace.clone(),
            resource: check.resource.clone(),
            subresource: check.subresource.clone(),
            name: check.name.clone(),
            ..RequestInfo::default()
        },
    }
}

impl Authorize for RequestAuthorizer {
    fn request_resource(&self) -> Check {
        self.request.clone()
    }

    /// Asks synchronously: expressions are evaluated inside the request's task, which the
    /// multi-threaded runtime lets block while the answer (often cached) arrives.
    fn check(&self, check: &Check) -> Verdict {
        let failed = |error: String| Verdict { allowed: false, reason: String::new(), error };
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return failed("no runtime to ask the authorizer on".into());
        };
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return failed("authorization checks need the multi-threaded runtime".into());
        }
        let user = match &check.service_account {
            Some((namespace, name)) => service_account(namespace, name),
            None => self.user.clone(),
        };
        let info = attributes(check);
        let answer = tokio::task::block_in_place(|| handle.block_on(self.authorizer.authorize(&user, &info)));
        match answer {
            Ok(Decision::Allow) => Verdict { allowed: true, reason: String::new(), error: String::new() },
            Ok(Decision::Deny(reason)) => Verdict { allowed: false, reason, error: String::new() },
            Ok(Decision::NoOpinion) => Verdict::default(),
            Err(e) => failed(e.to_string()),
        }
    }
}
