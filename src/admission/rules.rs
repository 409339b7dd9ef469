//! The `rules` of webhooks and policies (`RuleWithOperations`): operations, API groups,
//! versions, resources with subresources (`*`, `*/scale`, `crontabs/*`) and scope, matched as
//! k8s.io/apiserver's rules matcher matches them.
//!
//! Owns rule matching over request attributes; never sees objects or the network.

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;

use super::{Operation, Target};

/// Where a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    All,
    Namespaced,
    Cluster,
}

/// One compiled rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub operations: Vec<String>,
    pub groups: Vec<String>,
    pub versions: Vec<String>,
    /// `(resource, subresource)`; either may be `*`.
    pub resources: Vec<(String, String)>,
    pub scope: Scope,
}

fn exact_or_wildcard(items: &[String], requested: &str) -> bool {
    items.iter().any(|item| item == "*" || item == requested)
}

impl Rule {
    pub fn compile(wire: &RuleWithOperations) -> Rule {
        let resources = wire
            .resources
            .iter()
            .flatten()
            .map(|r| match r.split_once('/') {
                Some((resource, sub)) => (resource.to_string(), sub.to_string()),
                None => (r.clone(), String::new()),
            })
            .collect();
        let scope = match wire.scope.as_deref() {
            Some("Namespaced") => Scope::Namespaced,
            Some("Cluster") => Scope::Cluster,
            _ => Scope::All,
        };
        Rule {
            operations: wire.operations.clone().unwrap_or_default(),
            groups: wire.api_groups.clone().unwrap_or_default(),
            versions: wire.api_versions.clone().unwrap_or_default(),
            resources,
            scope,
        }
    }

    /// Whether the rule covers an operation on a target in `version`.
    pub fn matches(&self, operation: Operation, target: &Target<'_>, version: &str) -> bool {
        let scope = match self.scope {
            Scope::All => true,
            Scope::Namespaced => !target.namespace.is_empty(),
            Scope::Cluster => target.namespace.is_empty(),
        };
        scope
            && self.operations.iter().any(|op| op == "*" || op == operation.as_str())
            && exact_or_wildcard(&self.groups, target.group)
            && exact_or_wildcard(&self.versions, version)
            && self.resources.iter().any(|(resource, sub)| {
                (resource == "*" || resource == target.resource) && (sub == "*" || sub == target.subresource)
            })
    }

    /// The `(group, resource)` pairs this rule could match, for the index (`*` kept).
    pub fn index_keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.groups.iter().flat_map(move |g| self.resources.iter().map(move |(r, _)| (g.as_str(), r.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(value: serde_json::Value) -> Rule {
        Rule::compile(&serde_json::from_value(value).unwrap())
    }

    fn target<'a>(resource: &'a str, subresource: &'a str, namespace: &'a str) -> Target<'a> {
        Target { group: "stable.example.com", resource, subresource, namespace, name: "x" }
    }

    #[test]
    fn resources_subresources_and_scope() {
        let base = json!({"operations": ["CREATE"], "apiGroups": ["stable.example.com"], "apiVersions": ["*"], "resources": ["crontabs"]});
        let r = rule(base.clone());
        assert!(r.matches(Operation::Create, &target("crontabs", "", "default"), "v1"));
        assert!(!r.matches(Operation::Update, &target("crontabs", "", "default"), "v1"));
        assert!(!r.matches(Operation::Create, &target("crontabs", "status", "default"), "v1"));
        assert!(!r.matches(Operation::Create, &target("widgets", "", "default"), "v1"));
        let mut all = base.clone();
        all["resources"] = json!(["*/*"]);
        all["operations"] = json!(["*"]);
        assert!(rule(all).matches(Operation::Delete, &target("crontabs", "scale", "default"), "v1"));
        let mut status = base.clone();
        status["resources"] = json!(["crontabs/status"]);
        assert!(rule(status).matches(Operation::Create, &target("crontabs", "status", ""), "v1"));
        let mut cluster = base.clone();
        cluster["scope"] = json!("Cluster");
        assert!(!rule(cluster.clone()).matches(Operation::Create, &target("crontabs", "", "default"), "v1"));
        assert!(rule(cluster).matches(Operation::Create, &target("crontabs", "", ""), "v1"));
        let mut v2 = base;
        v2["apiVersions"] = json!(["v2"]);
        assert!(!rule(v2).matches(Operation::Create, &target("crontabs", "", "default"), "v1"));
    }
}
