//! `MatchResources` of ValidatingAdmissionPolicies and their bindings: namespace and object
//! selectors, `excludeResourceRules`, `resourceRules` with `resourceNames`, and `matchPolicy`
//! (Equivalent by default), as k8s.io/apiserver's policy matcher applies them; an empty
//! `resourceRules` (bindings) matches everything the policy matches.
//!
//! Owns matching; never evaluates CEL.

use k8s_openapi::api::admissionregistration::v1::{MatchResources, NamedRuleWithOperations, RuleWithOperations};

use crate::admission::rules::Rule;
use crate::admission::selector::Selector;
use crate::admission::{Error, NamespaceLabels, Request};

/// A rule with the names it is limited to (empty: every name).
#[derive(Debug, Clone)]
struct NamedRule {
    rule: Rule,
    names: Vec<String>,
}

impl NamedRule {
    fn compile(wire: &NamedRuleWithOperations) -> NamedRule {
        let rule = Rule::compile(&RuleWithOperations {
            api_groups: wire.api_groups.clone(),
            api_versions: wire.api_versions.clone(),
            operations: wire.operations.clone(),
            resources: wire.resources.clone(),
            scope: wire.scope.clone(),
        });
        NamedRule { rule, names: wire.resource_names.clone().unwrap_or_default() }
    }

    fn matches(&self, request: &Request<'_>, version: &str) -> bool {
        self.rule.matches(request.operation, &request.target, version)
            && (self.names.is_empty() || self.names.iter().any(|n| n == request.target.name))
    }
}

/// Compiled `MatchResources`.
#[derive(Debug, Clone)]
pub struct Matcher {
    namespace_selector: Selector,
    object_selector: Selector,
    rules: Vec<NamedRule>,
    excluded: Vec<NamedRule>,
    equivalent: bool,
}

impl Matcher {
    pub fn compile(wire: &MatchResources) -> Result<Matcher, String> {
        Ok(Matcher {
            namespace_selector: Selector::compile(wire.namespace_selector.as_ref())?,
            object_selector: Selector::compile(wire.object_selector.as_ref())?,
            rules: wire.resource_rules.iter().flatten().map(NamedRule::compile).collect(),
            excluded: wire.exclude_resource_rules.iter().flatten().map(NamedRule::compile).collect(),
            equivalent: wire.match_policy.as_deref() != Some("Exact"),
        })
    }

    /// The `(group, resource)` pairs the rules name, for the index.
    pub fn index_keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.rules.iter().flat_map(|r| r.rule.index_keys())
    }

    /// The version a rule list matches the request in (the request's own first, then the
    /// definition's other served versions under Equivalent).
    fn version_in<'r>(&self, rules: &[NamedRule], request: &Request<'r>) -> Option<&'r str> {
        if rules.is_empty() {
            return None;
        }
        if rules.iter().any(|r| r.matches(request, request.version)) {
            return Some(request.version);
        }
        if !self.equivalent {
            return None;
        }
        request
            .definition
            .served_versions()
            .find(|v| v.name != request.version && rules.iter().any(|r| r.matches(request, &v.name)))
            .map(|v| v.name.as_str())
    }

    /// Whether the request matches, and in which version.
    pub async fn matches<'r>(
        &self,
        request: &Request<'r>,
        namespaces: &dyn NamespaceLabels,
        object: Option<&serde_json::Value>,
        old: Option<&serde_json::Value>,
    ) -> Result<Option<&'r str>, Error> {
        let namespace = request.target.namespace;
        if self.reads_namespace(request) {
            match namespaces.labels(namespace).await {
                Ok(Some(labels)) if self.namespace_selector.matches_map(&labels) => {}
                Ok(Some(_)) => return Ok(None),
                Ok(None) => return Err(Error::NamespaceNotFound(namespace.to_string())),
                Err(e) => return Err(Error::Internal(e)),
            }
        }
        Ok(self.matches_request(request, object, old))
    }

    /// Whether matching the request reads its namespace's labels; when not,
    /// [`Matcher::matches_request`] decides alone, without awaiting anything.
    pub fn reads_namespace(&self, request: &Request<'_>) -> bool {
        !request.target.namespace.is_empty() && self.selects_namespace()
    }

    /// Whether a namespace selector is set (matching namespaced requests reads labels).
    pub fn selects_namespace(&self) -> bool {
        !self.namespace_selector.is_empty()
    }

    /// [`Matcher::matches`] past the namespace selector.
    pub fn matches_request<'r>(
        &self,
        request: &Request<'r>,
        object: Option<&serde_json::Value>,
        old: Option<&serde_json::Value>,
    ) -> Option<&'r str> {
        if !self.object_selector.is_empty() {
            let selected = |o: Option<&serde_json::Value>| o.is_some_and(|o| self.object_selector.matches_object(o));
            if !selected(object) && !selected(old) {
                return None;
            }
        }
        if self.version_in(&self.excluded, request).is_some() {
            return None;
        }
        if self.rules.is_empty() {
            return Some(request.version);
        }
        self.version_in(&self.rules, request)
    }
}
