//! A value worked out once per text and shared by every thread that asks for the same text
//! again: thousands of definitions repeat the same `pattern`s and CEL rules (issue 32: ten
//! thousand generated definitions carry a handful of distinct ones, upjet's providers repeat
//! theirs across versions and kinds), and compiling each again costs most of a start.
//!
//! Owns only the memo. It is bounded: past `capacity` texts it starts over empty, so that a
//! long-running server whose definitions keep changing does not keep every text it ever saw.

use std::collections::HashMap;
use std::sync::Mutex;

/// Values by the text they were worked out from, at most `capacity` of them.
pub struct Recall<V> {
    capacity: usize,
    known: Mutex<Option<HashMap<String, V>>>,
}

impl<V: Clone> Recall<V> {
    /// An empty memo (usable in a `static`) for up to `capacity` texts.
    pub const fn new(capacity: usize) -> Recall<V> {
        Recall { capacity, known: Mutex::new(None) }
    }

    /// The value of `text`: the one remembered, or `work(text)`'s, remembered when `keep` says
    /// it is worth keeping. `work` runs without the lock held, so that threads asking for other
    /// texts are not held up (two asking for the same new text both work it out).
    pub fn get_or(&self, text: &str, work: impl FnOnce(&str) -> V, keep: impl FnOnce(&V) -> bool) -> V {
        if let Some(known) = self.lookup(text) {
            return known;
        }
        let value = work(text);
        if keep(&value) {
            let mut known = self.known.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let map = known.get_or_insert_with(HashMap::new);
            if map.len() >= self.capacity {
                map.clear();
            }
            map.insert(text.to_string(), value.clone());
        }
        value
    }

    fn lookup(&self, text: &str) -> Option<V> {
        let known = self.known.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        known.as_ref()?.get(text).cloned()
    }

    /// How many texts are remembered.
    pub fn len(&self) -> usize {
        let known = self.known.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        known.as_ref().map_or(0, HashMap::len)
    }

    /// Whether no text is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn works_a_text_out_once_and_keeps_only_what_it_is_told_to() {
        let recall: Recall<usize> = Recall::new(10);
        let runs = Cell::new(0);
        let work = |t: &str| {
            runs.set(runs.get() + 1);
            t.len()
        };
        assert_eq!(recall.get_or("abc", work, |_| true), 3);
        assert_eq!(recall.get_or("abc", work, |_| true), 3);
        assert_eq!(runs.get(), 1, "the second answer is the remembered one");
        assert_eq!(recall.get_or("refused", work, |_| false), 7);
        assert_eq!(recall.get_or("refused", work, |_| false), 7);
        assert_eq!(runs.get(), 3, "a value not kept is worked out again");
        assert_eq!(recall.len(), 1);
    }

    #[test]
    fn starts_over_past_its_capacity() {
        let recall: Recall<usize> = Recall::new(2);
        for text in ["a", "bb", "ccc"] {
            recall.get_or(text, str::len, |_| true);
        }
        assert_eq!(recall.len(), 1, "the third text found the memo full and emptied it");
        let runs = Cell::new(0);
        let counted = |t: &str| {
            runs.set(runs.get() + 1);
            t.len()
        };
        recall.get_or("ccc", counted, |_| true);
        recall.get_or("a", counted, |_| true);
        assert_eq!(runs.get(), 1, "only the forgotten text is worked out again");
    }
}
