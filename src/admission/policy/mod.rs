//! ValidatingAdmissionPolicy (`admissionregistration.k8s.io/v1`) on our CEL engine: the
//! policies and bindings of the cluster (`compiled`), their match resources (`matching`), one
//! evaluation (`evaluate`), and here the dispatch: every matching policy and binding, with its
//! params, decisions routed by `validationActions` (Deny, Warn; Audit has no audit log here),
//! configuration errors by `failurePolicy`, and kube-apiserver's denial.
//!
//! Owns the policy step of validating admission; params come through [`ParamSource`].

pub mod compiled;
pub mod evaluate;
pub mod matching;

use futures_util::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use super::review::{Reviewed, request_json};
use super::{Error, NamespaceLabels, Request};
use compiled::{Binding, ForResource, Policy};
use evaluate::{Decision, Inputs};

/// Where policy params come from (the main apiserver).
pub trait ParamSource: Send + Sync {
    /// Whether objects of a kind are namespaced.
    fn namespaced<'a>(&'a self, api_version: &'a str, kind: &'a str) -> BoxFuture<'a, Result<bool, String>>;
    /// One object (`None`: not found).
    fn get<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, String>>;
    /// The objects a label selector picks.
    fn list<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
        selector: &'a LabelSelector,
    ) -> BoxFuture<'a, Result<Vec<Value>, String>>;
}

/// A denial waiting to be reported: policy, binding (none: the policy itself failed) and the
/// decision.
struct Denied {
    policy: String,
    binding: Option<String>,
    decision: Decision,
}

/// The params a binding evaluates its policy with: once with none, or once per object found.
pub(crate) enum Params {
    Unused,
    Found(Vec<Value>),
}

impl Params {
    pub(crate) fn iter(&self) -> impl Iterator<Item = Option<&Value>> {
        let (unused, found) = match self {
            Params::Unused => (true, &[][..]),
            Params::Found(found) => (false, found.as_slice()),
        };
        std::iter::once(None).filter(move |_| unused).chain(found.iter().map(Some))
    }
}

/// The params of a binding (`CollectParams`): unused without a param kind or reference.
/// Shared with MutatingAdmissionPolicies.
pub(crate) async fn params(
    source: Option<&dyn ParamSource>,
    param_kind: Option<&(String, String)>,
    param_ref: Option<&compiled::ParamRef>,
    request: &Request<'_>,
) -> Result<Params, String> {
    let (Some((api_version, kind)), Some(reference)) = (param_kind, param_ref) else {
        return Ok(Params::Unused);
    };
    let source = source.ok_or("params cannot be read without a cluster")?;
    let namespaced = source.namespaced(api_version, kind).await?;
    let namespace = match (namespaced, reference.namespace.as_deref().filter(|n| !n.is_empty())) {
        (false, Some(_)) => {
            return Err("paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into());
        }
        (false, None) => None,
        (true, Some(ns)) => Some(ns),
        (true, None) if !request.target.namespace.is_empty() => Some(request.target.namespace),
        (true, None) => {
            return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
        }
    };
    let found = match (&reference.name, &reference.selector) {
        (Some(name), None) => source.get(api_version, kind, namespace, name).await?.into_iter().collect(),
        (None, Some(selector)) => source.list(api_version, kind, namespace, selector).await?,
        (Some(_), Some(_)) => return Err("paramRef.name and paramRef.selector are mutually exclusive".into()),
        (None, None) => return Err("one of name or selector must be provided".into()),
    };
    if found.is_empty() && reference.deny_when_missing {
        return Err("no params found for policy binding with `Deny` parameterNotFoundAction".into());
    }
    Ok(Params::Found(found))
}

/// What a dispatch collects: warnings, and denials waiting to be reported (the first wins).
#[derive(Default)]
struct Collected {
    warnings: Vec<String>,
    denied: Vec<Denied>,
}

impl Collected {
    /// A policy or binding that could not be configured, under its failure policy.
    fn config_error(&mut self, policy: &Policy, binding: Option<&Binding>, e: &str) {
        if !policy.fail {
            return;
        }
        let (what, name) = match binding {
            None => ("policy", None),
            Some(b) => ("binding", Some(b.name.clone())),
        };
        let message = format!("failed to configure {what}: {e}");
        self.denied.push(Denied {
            policy: policy.name.clone(),
            binding: name,
            decision: Decision { message, reason: String::new() },
        });
    }

    /// Evaluates a policy for one binding and its params; its decisions routed by the
    /// binding's validation actions.
    fn evaluate(&mut self, policy: &Policy, binding: &Binding, params: &Params, inputs: Inputs<'_>) {
        for param in params.iter() {
            let inputs = Inputs { params: param, ..inputs };
            for decision in evaluate::evaluate(policy, &inputs) {
                if binding.warn {
                    self.warnings.push(format!(
                        "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                        policy.name, binding.name, decision.message
                    ));
                }
                if binding.deny {
                    self.denied.push(Denied {
                        policy: policy.name.clone(),
                        binding: Some(binding.name.clone()),
                        decision,
                    });
                }
            }
        }
    }

    /// The warnings, or the first denial as kube-apiserver words it.
    fn finish(self) -> Result<Vec<String>, Error> {
        let Some(first) = self.denied.into_iter().next() else { return Ok(self.warnings) };
        let why = match &first.binding {
            Some(binding) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{binding}' denied request: {}",
                first.policy, first.decision.message
            ),
            None => format!("ValidatingAdmissionPolicy '{}' denied request: {}", first.policy, first.decision.message),
        };
        let reason = if first.decision.reason.is_empty() { "Invalid".to_string() } else { first.decision.reason };
        let code = match reason.as_str() {
            "Forbidden" => 403,
            "Unauthorized" => 401,
            "RequestEntityTooLarge" => 413,
            _ => 422,
        };
        Err(Error::Policy { code, reason, why })
    }
}

/// `request` as a policy's expressions see it (null when none reads it).
fn request_value(policy: &Policy, request: &Request<'_>, version: &str) -> Value {
    if policy.reads.request {
        request_json("", request, &Reviewed { version, object: None, old: None })
    } else {
        Value::Null
    }
}

/// Whether dispatching the policies that may apply must wait for something: namespace labels
/// for a namespace selector, `namespaceObject`, or params. When not, [`dispatch_now`] decides
/// (the same decisions as [`dispatch`], without a future).
pub fn awaits(applicable: ForResource<'_, Policy, Binding>, request: &Request<'_>) -> bool {
    let namespaced = !request.target.namespace.is_empty();
    let reads_namespace = |m: &Result<matching::Matcher, String>| m.as_ref().is_ok_and(|m| m.reads_namespace(request));
    applicable.into_iter().any(|(policy, bindings)| {
        reads_namespace(&policy.constraints)
            || (namespaced && policy.reads.namespace)
            || bindings.iter().any(|b| {
                b.resources.as_ref().is_some_and(reads_namespace)
                    || (policy.param_kind.is_some() && b.param_ref.is_some())
            })
    })
}

/// [`dispatch`] when nothing must be waited for (see [`awaits`]).
pub fn dispatch_now(
    applicable: ForResource<'_, Policy, Binding>,
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
    authorizer: Option<&std::sync::Arc<dyn crate::cel::policy::Authorize>>,
) -> Result<Vec<String>, Error> {
    let mut collected = Collected::default();
    for (policy, bindings) in applicable {
        let version = match &policy.constraints {
            Err(e) => {
                collected.config_error(policy, None, e);
                continue;
            }
            Ok(matcher) => match matcher.matches_request(request, object, old) {
                Some(version) => version,
                None => continue,
            },
        };
        let request_value = request_value(policy, request, version);
        for binding in bindings {
            match &binding.resources {
                Some(Err(e)) => {
                    collected.config_error(policy, Some(binding), e);
                    continue;
                }
                Some(Ok(matcher)) if matcher.matches_request(request, object, old).is_none() => continue,
                _ => {}
            }
            let inputs = Inputs { object, old, request: &request_value, params: None, namespace: None, authorizer };
            collected.evaluate(policy, binding, &Params::Unused, inputs);
        }
    }
    collected.finish()
}

/// What the policies that may apply (`applicable`, from [`compiled::Indexed::for_resource`])
/// decided: warnings, or the first denial as an error.
pub async fn dispatch(
    applicable: ForResource<'_, Policy, Binding>,
    namespaces: &dyn NamespaceLabels,
    source: Option<&dyn ParamSource>,
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
    authorizer: Option<&std::sync::Arc<dyn crate::cel::policy::Authorize>>,
) -> Result<Vec<String>, Error> {
    let mut collected = Collected::default();
    let mut namespace_object: Option<Option<Value>> = None;
    for (policy, bindings) in applicable {
        let version = match &policy.constraints {
            Err(e) => {
                collected.config_error(policy, None, e);
                continue;
            }
            // Awaited only when matching reads the namespace (the common case decides here).
            Ok(matcher) if !matcher.reads_namespace(request) => match matcher.matches_request(request, object, old) {
                Some(version) => version,
                None => continue,
            },
            Ok(matcher) => match matcher.matches(request, namespaces, object, old).await? {
                Some(version) => version,
                None => continue,
            },
        };
        let request_value = request_value(policy, request, version);
        if policy.reads.namespace && namespace_object.is_none() {
            namespace_object = Some(self::namespace_object(namespaces, request).await?);
        }
        let namespace_value = namespace_object.clone().flatten();
        for binding in bindings {
            match &binding.resources {
                Some(Err(e)) => {
                    collected.config_error(policy, Some(binding), e);
                    continue;
                }
                Some(Ok(matcher))
                    if !matcher.reads_namespace(request) && matcher.matches_request(request, object, old).is_none() =>
                {
                    continue;
                }
                Some(Ok(matcher)) if !matcher.reads_namespace(request) => {}
                Some(Ok(matcher)) if matcher.matches(request, namespaces, object, old).await?.is_none() => continue,
                _ => {}
            }
            let params = if policy.param_kind.is_none() || binding.param_ref.is_none() {
                Params::Unused
            } else {
                match params(source, policy.param_kind.as_ref(), binding.param_ref.as_ref(), request).await {
                    Ok(p) => p,
                    Err(e) => {
                        collected.config_error(policy, Some(binding), &e);
                        continue;
                    }
                }
            };
            let inputs = Inputs {
                object,
                old,
                request: &request_value,
                params: None,
                namespace: namespace_value.as_ref(),
                authorizer,
            };
            collected.evaluate(policy, binding, &params, inputs);
        }
    }
    collected.finish()
}

/// `namespaceObject`: the request's namespace as CEL sees it (none for cluster-scoped).
pub(crate) async fn namespace_object(
    namespaces: &dyn NamespaceLabels,
    request: &Request<'_>,
) -> Result<Option<Value>, Error> {
    let name = request.target.namespace;
    if name.is_empty() {
        return Ok(None);
    }
    let labels = namespaces.labels(name).await.map_err(Error::Internal)?;
    Ok(Some(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels.unwrap_or_default()}}),
    ))
}
