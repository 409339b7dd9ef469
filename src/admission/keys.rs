//! Positions of admission configurations (webhooks, policies) by the API group and resource
//! their rules name (either may be `*`): a write to a resource nothing names costs a probe or
//! two and no allocation, and the configurations that may apply come out in their order, from
//! one list when the resource is named exactly, or merged from the wildcard lists as read.
//!
//! Owns the lookup structure; what the positions point at is the caller's.

use std::collections::HashMap;

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Positions by what they name, each list ascending. A group and resource named exactly
/// carry every position that applies to them (the wildcard ones merged in as they are
/// added), so the common lookup is two probes and one list.
// foldhash: these probes run on every write, and the keys are the cluster's own
// configuration (no attacker picks them), so a fast hash beats SipHash's protection.
#[derive(Debug, Default)]
pub struct Keys {
    /// Group, then resource, both named: every position that applies.
    exact: Map<String, Map<String, Vec<usize>>>,
    /// `(group, *)` by group.
    any_resource: Map<String, Vec<usize>>,
    /// `(*, resource)` by resource.
    any_group: Map<String, Vec<usize>>,
    /// `(*, *)`.
    everything: Vec<usize>,
}

/// Appends a position to an ascending list (once).
fn push(list: &mut Vec<usize>, position: usize) {
    if list.last() != Some(&position) {
        list.push(position);
    }
}

fn list<'m>(map: &'m Map<String, Vec<usize>>, key: &str) -> &'m [usize] {
    map.get(key).map_or(&[], Vec::as_slice)
}

impl Keys {
    /// Records that the configuration at `position` names `group` and `resource` (either
    /// may be `*`); positions are added in ascending order.
    pub fn insert(&mut self, group: &str, resource: &str, position: usize) {
        match (group, resource) {
            ("*", "*") => {
                push(&mut self.everything, position);
                self.exact.values_mut().flat_map(|r| r.values_mut()).for_each(|l| push(l, position));
            }
            ("*", resource) => {
                push(self.any_group.entry(resource.to_string()).or_default(), position);
                let lists = self.exact.values_mut().filter_map(|r| r.get_mut(resource));
                lists.for_each(|l| push(l, position));
            }
            (group, "*") => {
                push(self.any_resource.entry(group.to_string()).or_default(), position);
                let lists = self.exact.get_mut(group).into_iter().flat_map(|r| r.values_mut());
                lists.for_each(|l| push(l, position));
            }
            (group, resource) => {
                let by_resource = self.exact.entry(group.to_string()).or_default();
                let list = by_resource.entry(resource.to_string()).or_insert_with(|| {
                    let lists = [list(&self.any_resource, group), list(&self.any_group, resource), &self.everything];
                    Positions { lists }.collect()
                });
                push(list, position);
            }
        }
    }

    /// Whether any configuration names this group and resource, or a wildcard covering them.
    pub fn covers(&self, group: &str, resource: &str) -> bool {
        !self.positions(group, resource).is_empty()
    }

    /// The positions under a group and resource, ascending, without duplicates.
    pub fn positions(&self, group: &str, resource: &str) -> Positions<'_> {
        let wildcards = !self.any_resource.is_empty() || !self.any_group.is_empty();
        let lists = if self.exact.is_empty() && !wildcards {
            [self.everything.as_slice(), &[], &[]]
        } else if let Some(exact) = self.exact.get(group).and_then(|r| r.get(resource)) {
            [exact.as_slice(), &[], &[]]
        } else if !wildcards {
            [self.everything.as_slice(), &[], &[]]
        } else {
            [list(&self.any_resource, group), list(&self.any_group, resource), &self.everything]
        };
        Positions { lists }
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
        let found: Vec<usize> = keys.positions("stable.example.com", "crontabs").collect();
        assert_eq!(found, [0, 1, 2, 3, 5]);
        assert_eq!(keys.positions("other.example.com", "widgets").collect::<Vec<_>>(), [1]);
        assert!(keys.covers("any.example.com", "things"));

        let mut later = Keys::default();
        later.insert("*", "*", 0);
        later.insert("stable.example.com", "*", 1);
        later.insert("*", "widgets", 2);
        later.insert("stable.example.com", "crontabs", 3);
        assert_eq!(later.positions("stable.example.com", "crontabs").collect::<Vec<_>>(), [0, 1, 3]);
        assert_eq!(later.positions("stable.example.com", "widgets").collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(later.positions("other.example.com", "widgets").collect::<Vec<_>>(), [0, 2]);
    }

    #[test]
    fn nothing_named_is_not_covered() {
        let mut keys = Keys::default();
        assert!(!keys.covers("stable.example.com", "crontabs"));
        assert!(keys.positions("stable.example.com", "crontabs").is_empty());
        keys.insert("stable.example.com", "crontabs", 0);
        assert!(!keys.covers("stable.example.com", "widgets"));
        assert!(!keys.covers("other.example.com", "crontabs"));
        assert!(keys.positions("other.example.com", "crontabs").next().is_none());
    }
}
