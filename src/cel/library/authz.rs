//! Kubernetes' authorizer library for admission expressions: `authorizer.path(p)`,
//! `authorizer.group(g).resource(r).subresource(s).namespace(ns).name(n)`,
//! `authorizer.serviceAccount(ns, name)`, `.check(verb)` and the decision's `allowed()`,
//! `reason()`, `errored()`, `error()`, and `authorizer.requestResource`. The question itself goes to an [`Authorize`] the caller
//! binds (the server's authorizer); this module only builds it.
//!
//! Owns the values and calls of the library. Must not touch: the network.

use std::rc::Rc;
use std::sync::Arc;

use crate::cel::ir::Func;
use crate::cel::value::{EvalError, EvalResult, Value};

/// What is asked: a non-resource path or resource attributes, a verb, and the user (a
/// service account's namespace and name, or the request's user).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Check {
    pub service_account: Option<(String, String)>,
    pub path: Option<String>,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub verb: String,
}

/// An authorizer's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub reason: String,
    /// Empty unless the authorizer could not decide.
    pub error: String,
}

/// Answers authorization checks (synchronously; the caller decides how).
pub trait Authorize: Send + Sync {
    fn check(&self, check: &Check) -> Verdict;
    /// The resource attributes of the request being admitted (`authorizer.requestResource`).
    fn request_resource(&self) -> Check;
}

/// Which value of the library this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Authorizer,
    PathCheck,
    GroupCheck,
    ResourceCheck,
    Decision,
}

/// A value of the library.
#[derive(Clone)]
pub struct Authz {
    pub kind: Kind,
    pub check: Check,
    pub verdict: Verdict,
    authorizer: Arc<dyn Authorize>,
}

impl std::fmt::Debug for Authz {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authz").field("kind", &self.kind).field("check", &self.check).finish()
    }
}

impl Authz {
    /// The `authorizer` variable.
    pub fn root(authorizer: Arc<dyn Authorize>) -> Authz {
        Authz { kind: Kind::Authorizer, check: Check::default(), verdict: Verdict::default(), authorizer }
    }

    fn with(&self, kind: Kind, edit: impl FnOnce(&mut Check)) -> Value<'static> {
        let mut next = self.clone();
        next.kind = kind;
        edit(&mut next.check);
        Value::Authz(Rc::new(next))
    }
}

fn text<'b>(value: Option<&'b Value<'_>>) -> Result<&'b str, EvalError> {
    match value {
        Some(Value::Str(s)) => Ok(s.as_str()),
        _ => Err(EvalError::no_overload()),
    }
}

pub fn call<'a>(func: Func, args: &[Value<'a>]) -> EvalResult<'a> {
    let Some(Value::Authz(this)) = args.first() else { return Err(EvalError::no_overload()) };
    let arg = |i: usize| text(args.get(i));
    Ok(match (func, this.kind) {
        (Func::AuthzPath, Kind::Authorizer) => {
            let path = arg(1)?.to_string();
            this.with(Kind::PathCheck, |c| c.path = Some(path))
        }
        (Func::AuthzRequestResource, Kind::Authorizer) => {
            let request = this.authorizer.request_resource();
            this.with(Kind::ResourceCheck, |c| {
                c.group = request.group;
                c.resource = request.resource;
                c.subresource = request.subresource;
                c.namespace = request.namespace;
                c.name = request.name;
            })
        }
        (Func::AuthzGroup, Kind::Authorizer) => {
            let group = arg(1)?.to_string();
            this.with(Kind::GroupCheck, |c| c.group = group)
        }
        (Func::AuthzServiceAccount, Kind::Authorizer) => {
            let account = (arg(1)?.to_string(), arg(2)?.to_string());
            this.with(Kind::Authorizer, |c| c.service_account = Some(account))
        }
        (Func::AuthzResource, Kind::GroupCheck) => {
            let resource = arg(1)?.to_string();
            this.with(Kind::ResourceCheck, |c| c.resource = resource)
        }
        (Func::AuthzSubresource, Kind::ResourceCheck) => {
            let value = arg(1)?.to_string();
            this.with(Kind::ResourceCheck, |c| c.subresource = value)
        }
        (Func::AuthzNamespace, Kind::ResourceCheck) => {
            let value = arg(1)?.to_string();
            this.with(Kind::ResourceCheck, |c| c.namespace = value)
        }
        (Func::AuthzName, Kind::ResourceCheck) => {
            let value = arg(1)?.to_string();
            this.with(Kind::ResourceCheck, |c| c.name = value)
        }
        (Func::AuthzCheck, Kind::PathCheck | Kind::ResourceCheck) => {
            let mut decision = (**this).clone();
            decision.check.verb = arg(1)?.to_string();
            decision.verdict = this.authorizer.check(&decision.check);
            decision.kind = Kind::Decision;
            Value::Authz(Rc::new(decision))
        }
        (Func::AuthzAllowed, Kind::Decision) => Value::Bool(this.verdict.allowed),
        (Func::AuthzReason, Kind::Decision) => Value::string(this.verdict.reason.clone()),
        (Func::AuthzErrored, Kind::Decision) => Value::Bool(!this.verdict.error.is_empty()),
        (Func::AuthzError, Kind::Decision) => Value::string(this.verdict.error.clone()),
        _ => return Err(EvalError::no_overload()),
    })
}
