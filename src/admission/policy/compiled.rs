//! ValidatingAdmissionPolicies and their bindings compiled once when they change: match
//! constraints, match conditions, variables, validations (with message expressions) on the
//! CEL engine, failure policy and param kind; bindings with their match resources, param
//! reference and validation actions; and the set of both indexed by API group and resource
//! (`Indexed`, which MutatingAdmissionPolicies share).
//!
//! Owns the compiled forms; evaluation is `evaluate`'s.

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};

use super::matching::Matcher;
use crate::admission::keys::{Keys, Positions, Probe};
use crate::cel::policy::{Expression, Want};

/// The variables every policy expression may use, in slot order (`variables` comes last,
/// bound to the computed variables).
pub const VARIABLES: &[&str] =
    &["object", "oldObject", "request", "params", "namespaceObject", "authorizer", "variables"];

/// A compiled expression with its source, or the compile error.
#[derive(Debug)]
pub struct Compiled {
    pub source: String,
    pub program: Result<Expression, String>,
}

impl Compiled {
    pub fn new(source: &str, want: Want) -> Compiled {
        Compiled { source: source.to_string(), program: Expression::compile(source, VARIABLES, want) }
    }

    /// Whether evaluating the expression reads one of [`VARIABLES`] (an expression that does
    /// not compile reads nothing: it is never evaluated).
    pub fn reads(&self, variable: &str) -> bool {
        let index = VARIABLES.iter().position(|v| *v == variable);
        self.program.as_ref().is_ok_and(|p| index.is_some_and(|i| p.reads(i)))
    }
}

/// Which of the per-request variables some expression of a policy reads: the others are not
/// built for its requests.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reads {
    pub request: bool,
    pub namespace: bool,
    pub authorizer: bool,
}

impl Reads {
    pub fn of<'c>(expressions: impl Iterator<Item = &'c Compiled> + Clone) -> Reads {
        let reads = |name: &str| expressions.clone().any(|c| c.reads(name));
        Reads { request: reads("request"), namespace: reads("namespaceObject"), authorizer: reads("authorizer") }
    }
}

/// One validation.
#[derive(Debug)]
pub struct Validation {
    pub expression: Compiled,
    pub message: Option<String>,
    pub message_expression: Option<Compiled>,
    pub reason: Option<String>,
}

/// A compiled policy.
#[derive(Debug)]
pub struct Policy {
    pub name: String,
    /// `failurePolicy: Fail` (the default).
    pub fail: bool,
    /// `paramKind` as (apiVersion, kind).
    pub param_kind: Option<(String, String)>,
    pub constraints: Result<Matcher, String>,
    pub match_conditions: Vec<(String, Compiled)>,
    pub variables: Vec<(String, Compiled)>,
    pub validations: Vec<Validation>,
    /// Whether any expression reads `request`, `namespaceObject` or `authorizer`: otherwise
    /// they are not built for each request.
    pub reads: Reads,
}

/// How a binding finds its params.
#[derive(Debug, Clone)]
pub struct ParamRef {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    /// `parameterNotFoundAction: Deny`.
    pub deny_when_missing: bool,
}

/// A compiled binding.
#[derive(Debug)]
pub struct Binding {
    pub name: String,
    pub resources: Option<Result<Matcher, String>>,
    pub param_ref: Option<ParamRef>,
    pub deny: bool,
    pub warn: bool,
}

impl Policy {
    pub fn compile(wire: &ValidatingAdmissionPolicy) -> Policy {
        let spec = wire.spec.clone().unwrap_or_default();
        let constraints = match &spec.match_constraints {
            Some(m) => Matcher::compile(m),
            None => Err("spec.matchConstraints is required".to_string()),
        };
        let mut policy = Policy {
            reads: Reads::default(),
            name: wire.metadata.name.clone().unwrap_or_default(),
            fail: spec.failure_policy.as_deref() != Some("Ignore"),
            param_kind: spec
                .param_kind
                .as_ref()
                .map(|k| (k.api_version.clone().unwrap_or_default(), k.kind.clone().unwrap_or_default())),
            constraints,
            match_conditions: spec
                .match_conditions
                .iter()
                .flatten()
                .map(|c| (c.name.clone(), Compiled::new(&c.expression, Want::Bool)))
                .collect(),
            variables: spec
                .variables
                .iter()
                .flatten()
                .map(|v| (v.name.clone(), Compiled::new(&v.expression, Want::Any)))
                .collect(),
            validations: spec
                .validations
                .iter()
                .flatten()
                .map(|v| Validation {
                    expression: Compiled::new(&v.expression, Want::Bool),
                    message: v.message.clone(),
                    message_expression: v.message_expression.as_deref().map(|m| Compiled::new(m, Want::String)),
                    reason: v.reason.clone(),
                })
                .collect(),
        };
        policy.reads = Reads::of(policy.match_conditions.iter().chain(&policy.variables).map(|(_, c)| c).chain(
            policy.validations.iter().flat_map(|v| std::iter::once(&v.expression).chain(&v.message_expression)),
        ));
        policy
    }
}

impl Binding {
    pub fn compile(wire: &ValidatingAdmissionPolicyBinding) -> Binding {
        let spec = wire.spec.clone().unwrap_or_default();
        let actions = spec.validation_actions.unwrap_or_default();
        Binding {
            name: wire.metadata.name.clone().unwrap_or_default(),
            resources: spec.match_resources.as_ref().map(Matcher::compile),
            param_ref: spec.param_ref.map(|p| ParamRef {
                name: p.name,
                namespace: p.namespace,
                selector: p.selector,
                deny_when_missing: p.parameter_not_found_action.as_deref() == Some("Deny"),
            }),
            deny: actions.iter().any(|a| a == "Deny"),
            warn: actions.iter().any(|a| a == "Warn"),
        }
    }
}

/// What a policy set needs of the policies it indexes.
pub trait Indexable {
    /// The compiled `matchConstraints`.
    fn constraints(&self) -> &Result<Matcher, String>;
    /// Whether any of its expressions may use `authorizer`.
    fn needs_authorizer(&self) -> bool;
}

impl Indexable for Policy {
    fn constraints(&self) -> &Result<Matcher, String> {
        &self.constraints
    }

    fn needs_authorizer(&self) -> bool {
        self.reads.authorizer
    }
}

/// Policies (of either kind) with their bindings, indexed by the API group and resource their
/// constraints name (`*` for either).
pub struct Indexed<P, B> {
    pub entries: Vec<(Arc<P>, Vec<Arc<B>>)>,
    uses_authorizer: bool,
    /// Whether dispatching may have to wait for something (see [`Indexed::may_await`]).
    may_await: bool,
    keys: Keys,
}

impl<P, B> Default for Indexed<P, B> {
    fn default() -> Self {
        Indexed { entries: Vec::new(), uses_authorizer: false, may_await: true, keys: Keys::default() }
    }
}

impl<P: Indexable, B> Indexed<P, B> {
    /// Adds a policy (callers add them in name order) with its bindings; a policy without
    /// bindings applies nowhere and is left out. One whose constraints do not compile covers
    /// everything (under Fail it still fails its requests).
    pub fn push(&mut self, policy: Arc<P>, bindings: Vec<Arc<B>>) {
        if bindings.is_empty() {
            return;
        }
        let position = self.entries.len();
        let keys: Vec<(&str, &str)> = match policy.constraints() {
            Ok(matcher) => matcher.index_keys().collect(),
            Err(_) => vec![("*", "*")],
        };
        for (group, resource) in keys {
            self.keys.insert(group, resource, position);
        }
        self.uses_authorizer |= policy.needs_authorizer();
        self.entries.push((policy, bindings));
    }

    /// Whether any policy's expressions may use `authorizer`.
    pub fn uses_authorizer(&self) -> bool {
        self.uses_authorizer
    }

    /// Whether dispatching some policy may have to wait for something (namespace labels,
    /// `namespaceObject`, params); when not, no request needs to ask `policy::awaits`.
    pub fn may_await(&self) -> bool {
        self.may_await
    }

    /// Whether a policy could apply to a group and resource.
    pub fn covers(&self, group: &str, resource: &str) -> bool {
        self.keys.covers(group, resource)
    }

    /// Where the policies that could apply to a group and resource are (read with
    /// [`Indexed::found`]).
    pub fn probe(&self, group: &str, resource: &str) -> Probe {
        self.keys.probe(group, resource)
    }

    /// The policies a probe of this set found, in the order they were added (allocating
    /// nothing).
    pub fn found(&self, probe: Probe) -> ForResource<'_, P, B> {
        ForResource { entries: &self.entries, positions: self.keys.positions(probe) }
    }

    /// The policies that could apply, in the order they were added (allocating nothing).
    pub fn for_resource(&self, group: &str, resource: &str) -> ForResource<'_, P, B> {
        self.found(self.probe(group, resource))
    }
}

/// The policies for one group and resource, in order (see [`Indexed::for_resource`]).
pub struct ForResource<'s, P, B> {
    entries: &'s [(Arc<P>, Vec<Arc<B>>)],
    positions: Positions<'s>,
}

// Not derived: that would ask `P: Clone` and `B: Clone`.
impl<P, B> Clone for ForResource<'_, P, B> {
    fn clone(&self) -> Self {
        ForResource { entries: self.entries, positions: self.positions.clone() }
    }
}

impl<P, B> ForResource<'_, P, B> {
    /// Whether no policy is left.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }
}

impl<'s, P, B> Iterator for ForResource<'s, P, B> {
    type Item = &'s (Arc<P>, Vec<Arc<B>>);

    fn next(&mut self) -> Option<Self::Item> {
        self.positions.next().and_then(|p| self.entries.get(p))
    }
}

/// Every ValidatingAdmissionPolicy with its bindings.
pub type PolicySet = Indexed<Policy, Binding>;

impl PolicySet {
    /// Compiles the policies (sorted by name) and attaches their bindings (sorted by name).
    pub fn build(policies: &[ValidatingAdmissionPolicy], bindings: &[ValidatingAdmissionPolicyBinding]) -> PolicySet {
        let mut policies: Vec<&ValidatingAdmissionPolicy> = policies.iter().collect();
        policies.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut bindings: Vec<&ValidatingAdmissionPolicyBinding> = bindings.iter().collect();
        bindings.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut set = PolicySet::default();
        for wire in policies {
            let policy = Arc::new(Policy::compile(wire));
            let attached: Vec<Arc<Binding>> = bindings
                .iter()
                .filter(|b| b.spec.as_ref().and_then(|s| s.policy_name.as_deref()) == Some(policy.name.as_str()))
                .map(|b| Arc::new(Binding::compile(b)))
                .collect();
            set.push(policy, attached);
        }
        set.may_await = set.entries.iter().any(|(policy, bindings)| {
            let selects_namespace = |m: &Result<Matcher, String>| m.as_ref().is_ok_and(Matcher::selects_namespace);
            selects_namespace(&policy.constraints)
                || policy.reads.namespace
                || bindings.iter().any(|b| {
                    b.resources.as_ref().is_some_and(selects_namespace)
                        || (policy.param_kind.is_some() && b.param_ref.is_some())
                })
        });
        set
    }
}
