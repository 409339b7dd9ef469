//! A table of weak handles on shared values by key: what lets the users of one value find it
//! while any of them holds it, without the table keeping it alive (a watch's initial state,
//! a connection's certificate chain).
//!
//! Owns the handles and their sweep: handles whose value is gone are dropped when the table
//! has doubled since the last sweep left it (at least `SWEEP_FROM`), so that sweeping costs
//! O(1) per value put in. Callers lock it as they need.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Weak};

/// Handles a table holds before its first sweep.
const SWEEP_FROM: usize = 64;

#[derive(Debug)]
pub struct WeakTable<K, V> {
    held: HashMap<K, Weak<V>>,
    /// The size at which the table is next swept.
    sweep_at: usize,
}

impl<K, V> Default for WeakTable<K, V> {
    fn default() -> Self {
        WeakTable { held: HashMap::new(), sweep_at: SWEEP_FROM }
    }
}

impl<K: Hash + Eq, V> WeakTable<K, V> {
    /// The value under `key`, if something still holds it.
    pub fn get<Q>(&self, key: &Q) -> Option<Arc<V>>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.held.get(key).and_then(Weak::upgrade)
    }

    /// Puts `value` under `key` (in place of what was there), sweeping first when it is time.
    pub fn insert(&mut self, key: K, value: &Arc<V>) {
        if self.held.len() >= self.sweep_at {
            self.held.retain(|_, value| value.strong_count() > 0);
            self.sweep_at = (self.held.len() * 2).max(SWEEP_FROM);
        }
        self.held.insert(key, Arc::downgrade(value));
    }

    /// The values still held.
    pub fn values(&self) -> impl Iterator<Item = Arc<V>> + '_ {
        self.held.values().filter_map(Weak::upgrade)
    }

    /// Handles in the table, held or not.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether the table has no handle.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_found_while_held_and_let_go_after() {
        let mut table = WeakTable::default();
        let value = Arc::new(7);
        table.insert("k".to_string(), &value);
        assert!(table.get("k").is_some_and(|found| Arc::ptr_eq(&found, &value)));
        assert_eq!(table.values().count(), 1);
        drop(value);
        assert!(table.get("k").is_none(), "the table keeps no value alive");
        assert_eq!(table.values().count(), 0);
    }

    #[test]
    fn handles_of_values_gone_are_swept() {
        let mut table = WeakTable::default();
        let kept = Arc::new(0);
        table.insert(0, &kept);
        for i in 1..SWEEP_FROM * 8 {
            table.insert(i, &Arc::new(i));
        }
        assert!(table.len() <= SWEEP_FROM, "{} handles", table.len());
        assert!(table.get(&0).is_some_and(|found| Arc::ptr_eq(&found, &kept)));
    }
}
