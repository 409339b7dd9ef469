//! MutatingAdmissionPolicies and their bindings (`admissionregistration.k8s.io/v1`, or
//! `v1beta1` on Kubernetes 1.34 and 1.35: the same fields) compiled once when they change:
//! match constraints, match conditions, variables, the ordered mutations (apply
//! configurations and JSON patches) on the CEL engine, failure and reinvocation policies,
//! param kind; bindings with their match resources and param reference; the set of both
//! indexed by API group and resource.
//!
//! Owns the wire forms (read from JSON: the k8s-openapi release we build against predates
//! these kinds) and the compiled forms; patching is `patch`'s, dispatch `mutating_policy`'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{MatchCondition, MatchResources, ParamKind, ParamRef, Variable};
use serde::Deserialize;
use serde_json::Value;

use crate::admission::policy::compiled::{Compiled, Indexable, Indexed, ParamRef as CompiledParamRef, Reads};
use crate::admission::policy::matching::Matcher;
use crate::cel::policy::Want;

/// `MutatingAdmissionPolicy` as the main apiserver serves it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WirePolicy {
    #[serde(default)]
    pub metadata: WireMeta,
    #[serde(default)]
    pub spec: WirePolicySpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct WireMeta {
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WirePolicySpec {
    pub param_kind: Option<ParamKind>,
    pub match_constraints: Option<MatchResources>,
    #[serde(default)]
    pub variables: Vec<Variable>,
    #[serde(default)]
    pub mutations: Vec<WireMutation>,
    pub failure_policy: Option<String>,
    #[serde(default)]
    pub match_conditions: Vec<MatchCondition>,
    pub reinvocation_policy: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireMutation {
    #[serde(default)]
    pub patch_type: String,
    pub apply_configuration: Option<WireExpression>,
    #[serde(rename = "jsonPatch")]
    pub json_patch: Option<WireExpression>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct WireExpression {
    #[serde(default)]
    pub expression: String,
}

/// `MutatingAdmissionPolicyBinding` as the main apiserver serves it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WireBinding {
    #[serde(default)]
    pub metadata: WireMeta,
    #[serde(default)]
    pub spec: WireBindingSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireBindingSpec {
    #[serde(default)]
    pub policy_name: String,
    pub param_ref: Option<ParamRef>,
    pub match_resources: Option<MatchResources>,
}

/// One mutation, compiled.
#[derive(Debug)]
pub enum Mutation {
    ApplyConfiguration(Compiled),
    JsonPatch(Compiled),
}

/// A compiled policy.
#[derive(Debug)]
pub struct Policy {
    pub name: String,
    /// `failurePolicy: Fail` (the default).
    pub fail: bool,
    /// `reinvocationPolicy: IfNeeded`.
    pub reinvoke_if_needed: bool,
    pub param_kind: Option<(String, String)>,
    pub constraints: Result<Matcher, String>,
    pub match_conditions: Vec<(String, Compiled)>,
    pub variables: Vec<(String, Compiled)>,
    pub mutations: Vec<Mutation>,
    /// Which per-request variables some expression reads (the others are not built).
    pub reads: Reads,
}

/// A compiled binding.
#[derive(Debug)]
pub struct Binding {
    pub name: String,
    pub resources: Option<Result<Matcher, String>>,
    pub param_ref: Option<CompiledParamRef>,
}

impl Policy {
    pub fn compile(wire: &WirePolicy) -> Policy {
        let spec = &wire.spec;
        let constraints = match &spec.match_constraints {
            Some(m) => Matcher::compile(m),
            None => Err("spec.matchConstraints is required".to_string()),
        };
        // A mutation of an unknown patch type, or without its expression, is skipped, as
        // Kubernetes' compiler skips it (its API validation refuses such policies).
        let mutations = spec
            .mutations
            .iter()
            .filter_map(|m| match (m.patch_type.as_str(), &m.apply_configuration, &m.json_patch) {
                ("ApplyConfiguration", Some(e), _) => {
                    Some(Mutation::ApplyConfiguration(Compiled::new(&e.expression, Want::ApplyConfiguration)))
                }
                ("JSONPatch", _, Some(e)) => Some(Mutation::JsonPatch(Compiled::new(&e.expression, Want::JsonPatch))),
                _ => None,
            })
            .collect();
        let mut policy = Policy {
            reads: Reads::default(),
            name: wire.metadata.name.clone(),
            fail: spec.failure_policy.as_deref() != Some("Ignore"),
            reinvoke_if_needed: spec.reinvocation_policy.as_deref() == Some("IfNeeded"),
            param_kind: spec
                .param_kind
                .as_ref()
                .map(|k| (k.api_version.clone().unwrap_or_default(), k.kind.clone().unwrap_or_default())),
            constraints,
            match_conditions: spec
                .match_conditions
                .iter()
                .map(|c| (c.name.clone(), Compiled::new(&c.expression, Want::Bool)))
                .collect(),
            variables: spec
                .variables
                .iter()
                .map(|v| (v.name.clone(), Compiled::new(&v.expression, Want::Any)))
                .collect(),
            mutations,
        };
        policy.reads = Reads::of(policy.match_conditions.iter().chain(&policy.variables).map(|(_, c)| c).chain(
            policy.mutations.iter().map(|m| match m {
                Mutation::ApplyConfiguration(c) | Mutation::JsonPatch(c) => c,
            }),
        ));
        policy
    }
}

impl Binding {
    pub fn compile(wire: &WireBinding) -> Binding {
        let spec = &wire.spec;
        Binding {
            name: wire.metadata.name.clone(),
            resources: spec.match_resources.as_ref().map(Matcher::compile),
            param_ref: spec.param_ref.clone().map(|p| CompiledParamRef {
                name: p.name,
                namespace: p.namespace,
                selector: p.selector,
                deny_when_missing: p.parameter_not_found_action.as_deref() == Some("Deny"),
            }),
        }
    }
}

impl Indexable for Policy {
    fn constraints(&self) -> &Result<Matcher, String> {
        &self.constraints
    }

    fn needs_authorizer(&self) -> bool {
        self.reads.authorizer
    }
}

/// Every MutatingAdmissionPolicy with its bindings.
pub type MutatingPolicySet = Indexed<Policy, Binding>;

impl MutatingPolicySet {
    /// Compiles the policies and bindings read as JSON (objects that do not decode are
    /// skipped with a warning), policies in name order, each with its bindings in name order.
    pub fn from_json(policies: &[Value], bindings: &[Value]) -> MutatingPolicySet {
        fn decode<T: for<'de> Deserialize<'de>>(what: &str, values: &[Value]) -> Vec<T> {
            values
                .iter()
                .filter_map(|v| match T::deserialize(v) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        tracing::warn!(name = ?v.pointer("/metadata/name"), error = %e, "skipping a {what} that does not decode");
                        None
                    }
                })
                .collect()
        }
        MutatingPolicySet::build(
            &decode::<WirePolicy>("MutatingAdmissionPolicy", policies),
            &decode::<WireBinding>("MutatingAdmissionPolicyBinding", bindings),
        )
    }

    pub fn build(policies: &[WirePolicy], bindings: &[WireBinding]) -> MutatingPolicySet {
        let by_name: BTreeMap<&str, &WirePolicy> = policies.iter().map(|p| (p.metadata.name.as_str(), p)).collect();
        let mut bindings: Vec<&WireBinding> = bindings.iter().collect();
        bindings.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut set = MutatingPolicySet::default();
        for wire in by_name.values() {
            let attached: Vec<Arc<Binding>> = bindings
                .iter()
                .filter(|b| b.spec.policy_name == wire.metadata.name)
                .map(|b| Arc::new(Binding::compile(b)))
                .collect();
            // A policy without bindings applies nowhere: not compiled at all.
            if !attached.is_empty() {
                set.push(Arc::new(Policy::compile(wire)), attached);
            }
        }
        set
    }
}
