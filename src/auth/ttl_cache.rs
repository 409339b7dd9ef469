//! A small bounded cache whose entries expire: the memory of TokenReview and
//! SubjectAccessReview answers. Keys are strings (a token digest, a serialized review spec).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries kept at most; beyond that expired entries are dropped, then everything (the cache
/// only saves calls, it never decides anything on its own).
const DEFAULT_CAPACITY: usize = 4096;

pub struct TtlCache<V> {
    entries: Mutex<HashMap<String, (Instant, V)>>,
    capacity: usize,
}

impl<V: Clone> Default for TtlCache<V> {
    fn default() -> Self {
        TtlCache::with_capacity(DEFAULT_CAPACITY)
    }
}

impl<V: Clone> TtlCache<V> {
    pub fn with_capacity(capacity: usize) -> Self {
        TtlCache { entries: Mutex::new(HashMap::new()), capacity: capacity.max(1) }
    }

    /// The live value under `key`, if any.
    pub fn get(&self, key: &str) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match entries.get(key) {
            Some((expires, value)) if *expires > Instant::now() => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Remembers `value` for `ttl` (a zero TTL remembers nothing).
    pub fn insert(&self, key: String, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, (expires, _)| *expires > now);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(key, (now + ttl, value));
    }

    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_capacity_is_bounded() {
        let cache = TtlCache::with_capacity(2);
        cache.insert("a".into(), 1, Duration::from_secs(60));
        cache.insert("gone".into(), 2, Duration::from_millis(1));
        cache.insert("never".into(), 3, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(cache.get("a"), Some(1));
        assert_eq!(cache.get("gone"), None);
        assert_eq!(cache.get("never"), None);
        cache.insert("b".into(), 4, Duration::from_secs(60));
        cache.insert("c".into(), 5, Duration::from_secs(60));
        assert!(cache.len() <= 2);
        assert_eq!(cache.get("c"), Some(5));
    }
}
