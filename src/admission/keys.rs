//! Positions of admission configurations (webhooks, policies) by the API group and resource
//! their rules name (either may be `*`): a write to a resource nothing names costs a probe or
//! two and no allocation, and the configurations that may apply come out in their order, from
//! one list when the resource is named exactly, or merged from the wildcard lists as read.
//! A probe's answer ([`Probe`]) is plain data, so that a write probes once and reads the
//! positions as often as it needs.
//!
//! Owns the lookup structure; what the positions point at is the caller's.

use std::collections::HashMap;

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The list that stays empty.
const EMPTY: usize = 0;
/// The list of `(*, *)`.
const EVERYTHING: usize = 1;

/// Positions by what they name, each list ascending. A group and resource named exactly
/// carry every position that applies to them (the wildcard ones merged in as they are
/// added), so the common lookup is two probes and one list.
// foldhash: these probes run on every write, and the keys are the cluster's own
// configuration (no attacker picks them), so a fast hash beats SipHash's protection.
#[derive(Debug)]
pub struct Keys {
    /// The position lists; the maps name them by their index here ([`EMPTY`] and
    /// [`EVERYTHING`] first).
    lists: Vec<Vec<usize>>,
    /// Group, then resource, both named: every position that applies.
    exact: Map<String, Map<String, usize>>,
    /// `(group, *)` by group.
    any_resource: Map<String, usize>,
    /// `(*, resource)` by resource.
    any_group: Map<String, usize>,
}

impl Default for Keys {
    fn default() -> Self {
        Keys {
            lists: vec![Vec::new(), Vec::new()],
            exact: Map::default(),
            any_resource: Map::default(),
            any_group: Map::default(),
        }
    }
}

/// What a probe of [`Keys`] found: up to three lists, by index (see [`Keys::positions`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Probe {
    /// Lists that are not empty, or [`EMPTY`].
    lists: [usize; 3],
}

impl Probe {
    /// Whether no position was found.
    pub fn is_empty(&self) -> bool {
        self.lists == [EMPTY; 3]
    }
}

/// Appends a position to an ascending list (once).
fn push(list: &mut Vec<usize>, position: usize) {
    if list.last() != Some(&position) {
        list.push(position);
    }
}

impl Keys {
    fn list(&self, id: usize) -> &[usize] {
        self.lists.get(id).map_or(&[], Vec::as_slice)
    }

    fn push_to(&mut self, id: usize, position: usize) {
        if let Some(list) = self.lists.get_mut(id) {
            push(list, position);
        }
    }

    /// A new list holding `positions`; its index.
    fn add_list(&mut self, positions: Vec<usize>) -> usize {
        self.lists.push(positions);
        self.lists.len() - 1
    }

    /// Records that the configuration at `position` names `group` and `resource` (either
    /// may be `*`); positions are added in ascending order.
    pub fn insert(&mut self, group: &str, resource: &str, position: usize) {
        let exact: Vec<usize> = match (group, resource) {
            ("*", "*") => {
                self.push_to(EVERYTHING, position);
                self.exact.values().flat_map(|r| r.values().copied()).collect()
            }
            ("*", resource) => {
                let id = match self.any_group.get(resource) {
                    Some(id) => *id,
                    None => {
                        let id = self.add_list(Vec::new());
                        self.any_group.insert(resource.to_string(), id);
                        id
                    }
                };
                self.push_to(id, position);
                self.exact.values().filter_map(|r| r.get(resource).copied()).collect()
            }
            (group, "*") => {
                let id = match self.any_resource.get(group) {
                    Some(id) => *id,
                    None => {
                        let id = self.add_list(Vec::new());
                        self.any_resource.insert(group.to_string(), id);
                        id
                    }
                };
                self.push_to(id, position);
                self.exact.get(group).into_iter().flat_map(|r| r.values().copied()).collect()
            }
            (group, resource) => {
                let id = match self.exact.get(group).and_then(|r| r.get(resource)) {
                    Some(id) => *id,
                    None => {
                        // A new exact list starts with the wildcard positions that apply.
                        let merged: Vec<usize> = self.wildcard_positions(group, resource).collect();
                        let id = self.add_list(merged);
                        self.exact.entry(group.to_string()).or_default().insert(resource.to_string(), id);
                        id
                    }
                };
                vec![id]
            }
        };
        for id in exact {
            self.push_to(id, position);
        }
    }

    /// The wildcard positions that apply to a group and resource, ascending.
    fn wildcard_positions(&self, group: &str, resource: &str) -> Positions<'_> {
        let any_resource = self.any_resource.get(group).map_or(EMPTY, |id| *id);
        let any_group = self.any_group.get(resource).map_or(EMPTY, |id| *id);
        Positions { lists: [self.list(any_resource), self.list(any_group), self.list(EVERYTHING)] }
    }

    /// Whether any configuration names this group and resource, or a wildcard covering them.
    pub fn covers(&self, group: &str, resource: &str) -> bool {
        !self.probe(group, resource).is_empty()
    }

    /// Finds the lists under a group and resource (read with [`Keys::positions`]).
    pub fn probe(&self, group: &str, resource: &str) -> Probe {
        let wildcards = !self.any_resource.is_empty() || !self.any_group.is_empty();
        let only = |id: usize| Probe { lists: [if self.list(id).is_empty() { EMPTY } else { id }, EMPTY, EMPTY] };
        if self.exact.is_empty() && !wildcards {
            return only(EVERYTHING);
        }
        if let Some(exact) = self.exact.get(group).and_then(|r| r.get(resource)) {
            return only(*exact);
        }
        if !wildcards {
            return only(EVERYTHING);
        }
        let any_resource = self.any_resource.get(group).map_or(EMPTY, |id| *id);
        let any_group = self.any_group.get(resource).map_or(EMPTY, |id| *id);
        Probe {
            lists: [any_resource, any_group, EVERYTHING].map(|id| if self.list(id).is_empty() { EMPTY } else { id }),
        }
    }

    /// The positions a probe of these keys found, ascending, without duplicates.
    pub fn positions(&self, probe: Probe) -> Positions<'_> {
        Positions { lists: probe.lists.map(|id| self.list(id)) }
    }
}

/// Positions in ascending order (see [`Keys::positions`]).
#[derive(Debug, Clone)]
pub struct Positions<'k> {
    /// Ascending lists, each consumed from the front.
    lists: [&'k [usize]; 3],
}

impl Positions<'_> {
    /// Whether no position is left.
    pub fn is_empty(&self) -> bool {
        self.lists.iter().all(|l| l.is_empty())
    }
}

impl Iterator for Positions<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let next = self.lists.iter().filter_map(|l| l.first()).min().copied()?;
        for list in &mut self.lists {
            if list.first() == Some(&next) {
                *list = list.get(1..).unwrap_or_default();
            }
        }
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_merge_exact_and_wildcard_keys_in_order() {
        let mut keys = Keys::default();
        keys.insert("stable.example.com", "crontabs", 0);
        keys.insert("*", "*", 1);
        keys.insert("stable.example.com", "*", 2);
        keys.insert("stable.example.com", "crontabs", 2);
        keys.insert("*", "crontabs", 3);
        keys.insert("other.example.com", "crontabs", 4);
        keys.insert("stable.example.com", "crontabs", 5);
        let found: Vec<usize> = keys.positions(keys.probe("stable.example.com", "crontabs")).collect();
        assert_eq!(found, [0, 1, 2, 3, 5]);
        assert_eq!(keys.positions(keys.probe("other.example.com", "widgets")).collect::<Vec<_>>(), [1]);
        assert!(keys.covers("any.example.com", "things"));

        let mut later = Keys::default();
        later.insert("*", "*", 0);
        later.insert("stable.example.com", "*", 1);
        later.insert("*", "widgets", 2);
        later.insert("stable.example.com", "crontabs", 3);
        assert_eq!(later.positions(later.probe("stable.example.com", "crontabs")).collect::<Vec<_>>(), [0, 1, 3]);
        assert_eq!(later.positions(later.probe("stable.example.com", "widgets")).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(later.positions(later.probe("other.example.com", "widgets")).collect::<Vec<_>>(), [0, 2]);
    }

    #[test]
    fn nothing_named_is_not_covered() {
        let mut keys = Keys::default();
        assert!(!keys.covers("stable.example.com", "crontabs"));
        assert!(keys.positions(keys.probe("stable.example.com", "crontabs")).is_empty());
        keys.insert("stable.example.com", "crontabs", 0);
        assert!(!keys.covers("stable.example.com", "widgets"));
        assert!(!keys.covers("other.example.com", "crontabs"));
        assert!(keys.positions(keys.probe("other.example.com", "crontabs")).next().is_none());
    }
}
