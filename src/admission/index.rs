//! The webhooks of the cluster indexed by API group and resource, so that a write to a
//! resource no configuration names costs one or two hash probes and no allocation.
//!
//! Owns the lookup structure; built whole from configurations (`configuration`) and swapped
//! atomically by [`super::Admission::set_webhooks`].

use std::sync::Arc;

use super::hooks::Hook;
use super::keys::{Keys, Probe};

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
    let mut keys = Keys::default();
    for (position, hook) in hooks.iter().enumerate() {
        for rule in &hook.rules {
            for (group, resource) in rule.index_keys() {
                keys.insert(group, resource, position);
            }
        }
    }
    keys
}

impl Index {
    pub fn new(mutating: Vec<Arc<Hook>>, validating: Vec<Arc<Hook>>) -> Index {
        let mutating_keys = keys_of(&mutating);
        let validating_keys = keys_of(&validating);
        let uses_authorizer = mutating.iter().chain(&validating).any(|h| h.uses_authorizer());
        Index { mutating, validating, mutating_keys, validating_keys, uses_authorizer }
    }

    /// Whether any webhook's match conditions may use `authorizer`.
    pub fn uses_authorizer(&self) -> bool {
        self.uses_authorizer
    }

    /// Where the mutating webhooks that name this group and resource are (read with
    /// [`Index::mutating_in`]).
    pub fn probe_mutating(&self, group: &str, resource: &str) -> Probe {
        self.mutating_keys.probe(group, resource)
    }

    /// Where the validating webhooks that name this group and resource are.
    pub fn probe_validating(&self, group: &str, resource: &str) -> Probe {
        self.validating_keys.probe(group, resource)
    }

    /// Whether any webhook names this group and resource (or a wildcard covering them).
    pub fn covers(&self, group: &str, resource: &str) -> bool {
        self.mutating_keys.covers(group, resource) || self.validating_keys.covers(group, resource)
    }

    /// The mutating webhooks a probe of this index found, in order.
    pub fn mutating_in(&self, probe: Probe) -> Vec<Arc<Hook>> {
        self.mutating_keys.positions(probe).filter_map(|p| self.mutating.get(p).cloned()).collect()
    }

    /// The validating webhooks a probe of this index found, in order.
    pub fn validating_in(&self, probe: Probe) -> Vec<Arc<Hook>> {
        self.validating_keys.positions(probe).filter_map(|p| self.validating.get(p).cloned()).collect()
    }

    /// The mutating webhooks whose rules could match, in order.
    pub fn mutating_for(&self, group: &str, resource: &str) -> Vec<Arc<Hook>> {
        self.mutating_in(self.probe_mutating(group, resource))
    }

    /// The validating webhooks whose rules could match, in order.
    pub fn validating_for(&self, group: &str, resource: &str) -> Vec<Arc<Hook>> {
        self.validating_in(self.probe_validating(group, resource))
    }
}
