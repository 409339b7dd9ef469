//! Webhook configurations as read from the main apiserver
//! (`admissionregistration.k8s.io/v1` MutatingWebhookConfiguration and
//! ValidatingWebhookConfiguration) turned into an [`Index`], in kube-apiserver's order:
//! configurations sorted by name, webhooks in their order.
//!
//! Owns that translation; never reads the network (`kube` lists and watches).

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};

use super::hooks::Hook;
use super::index::Index;

/// Builds the index of every webhook in the configurations.
pub fn index(mutating: &[MutatingWebhookConfiguration], validating: &[ValidatingWebhookConfiguration]) -> Index {
    let mut mutating: Vec<&MutatingWebhookConfiguration> = mutating.iter().collect();
    mutating.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut validating: Vec<&ValidatingWebhookConfiguration> = validating.iter().collect();
    validating.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mutating_hooks = mutating
        .iter()
        .flat_map(|c| {
            let name = c.metadata.name.clone().unwrap_or_default();
            c.webhooks.iter().flatten().enumerate().map(move |(i, w)| Arc::new(Hook::mutating(&name, i, w)))
        })
        .collect();
    let validating_hooks = validating
        .iter()
        .flat_map(|c| {
            let name = c.metadata.name.clone().unwrap_or_default();
            c.webhooks.iter().flatten().enumerate().map(move |(i, w)| Arc::new(Hook::validating(&name, i, w)))
        })
        .collect();
    Index::new(mutating_hooks, validating_hooks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validating(name: &str, group: &str, resource: &str) -> ValidatingWebhookConfiguration {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "webhooks": [{"name": format!("{name}.example.com"), "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": "https://127.0.0.1:1/hook"},
                "rules": [{"operations": ["CREATE"], "apiGroups": [group], "apiVersions": ["*"], "resources": [resource]}]}]
        }))
        .unwrap()
    }

    #[test]
    fn indexed_by_group_and_resource_in_name_order() {
        let configs = [
            validating("b", "stable.example.com", "crontabs"),
            validating("a", "*", "*"),
            validating("c", "apps", "*"),
        ];
        let index = index(&[], &configs);
        assert!(index.covers("stable.example.com", "crontabs"));
        assert!(index.covers("other.io", "things"));
        let names: Vec<String> =
            index.validating_for("stable.example.com", "crontabs").iter().map(|h| h.configuration.clone()).collect();
        assert_eq!(names, ["a", "b"]);
        let only = index_of(&[validating("b", "stable.example.com", "crontabs")]);
        assert!(!only.covers("stable.example.com", "widgets"));
        assert!(only.validating_for("other.io", "crontabs").is_empty());
        assert!(only.mutating_for("stable.example.com", "crontabs").is_empty());
    }

    fn index_of(configs: &[ValidatingWebhookConfiguration]) -> Index {
        index(&[], configs)
    }
}
