//! The webhooks of the cluster indexed by API group and resource, so that a write to a
//! resource no configuration names costs one or two hash probes and no allocation.
//!
//! Owns the lookup structure; built whole from configurations (`configuration`) and swapped
//! atomically by [`super::Admission::set_webhooks`].

use std::collections::HashMap;
use std::sync::Arc;

use super::hooks::Hook;

/// Positions of hooks by group, then resource (`*` is a key like any other).
type Keys = HashMap<String, HashMap<String, Vec<usize>>>;

/// Every mutating and validating webhook, in kube-apiserver's order (configurations sorted by
/// name, hooks in their order), with the index.
#[derive(Default)]
pub struct Index {
    pub mutating: Vec<Arc<Hook>>,
    pub validating: Vec<Arc<Hook>>,
    mutating_keys: Keys,
    validating_keys: Keys,
    /// Whether any webhook's match conditions may use `authorizer` (their text names it).
    uses_authorizer: bool,
}

fn keys_of(hooks: &[Arc<Hook>]) -> Keys {
    let mut keys = Keys::new();
    for (position, hook) in hooks.iter().enumerate() {
        for rule in &hook.rules {
            for (group, resource) in rule.index_keys() {
                let list = keys.entry(group.to_string()).or_default().entry(resource.to_string()).or_default();
                if list.last() != Some(&position) {
                    list.push(position);
                }
            }
        }
    }
    keys
}

fn covered(keys: &Keys, group: &str, resource: &str) -> bool {
    [group, "*"].iter().any(|g| keys.get(*g).is_some_and(|r| r.contains_key(resource) || r.contains_key("*")))
}

/// The positions under a group and resource, in order, without duplicates.
fn positions(keys: &Keys, group: &str, resource: &str) -> Vec<usize> {
    let mut out: Vec<usize> = [group, "*"]
        .iter()
        .filter_map(|g| keys.get(*g))
        .flat_map(|by_resource| [resource, "*"].into_iter().filter_map(|r| by_resource.get(r)))
        .flatten()
        .copied()
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

impl Index {
    pub fn new(mutating: Vec<Arc<Hook>>, validating: Vec<Arc<Hook>>) -> Index {
        let mutating_keys = keys_of(&mutating);
        let validating_keys = keys_of(&validating);
        let uses_authorizer = mutating
            .iter()
            .chain(&validating)
            .any(|h| h.match_conditions.iter().any(|(source, _)| source.contains("authorizer")));
        Index { mutating, validating, mutating_keys, validating_keys, uses_authorizer }
    }

    /// Whether any webhook's match conditions may use `authorizer`.
    pub fn uses_authorizer(&self) -> bool {
        self.uses_authorizer
    }

    /// Whether any webhook names this group and resource (or a wildcard covering them).
    pub fn covers(&self, group: &str, resource: &str) -> bool {
        covered(&self.mutating_keys, group, resource) || covered(&self.validating_keys, group, resource)
    }

    /// The mutating webhooks whose rules could match, in order.
    pub fn mutating_for(&self, group: &str, resource: &str) -> Vec<Arc<Hook>> {
        if !covered(&self.mutating_keys, group, resource) {
            return Vec::new();
        }
        positions(&self.mutating_keys, group, resource)
            .into_iter()
            .filter_map(|p| self.mutating.get(p).cloned())
            .collect()
    }

    /// The validating webhooks whose rules could match, in order.
    pub fn validating_for(&self, group: &str, resource: &str) -> Vec<Arc<Hook>> {
        if !covered(&self.validating_keys, group, resource) {
            return Vec::new();
        }
        positions(&self.validating_keys, group, resource)
            .into_iter()
            .filter_map(|p| self.validating.get(p).cloned())
            .collect()
    }
}
