//! The initial states of watches, shared among the watches that start from the same list.
//!
//! Watches without a resourceVersion (informers starting, or thousands of clients told to
//! watch again) list their resource at the store's current revision, and each would keep its
//! own list of the objects (their revisions and handles on the stored bytes, ~50 bytes per
//! object) for as long as its client takes to read them: a client that never reads keeps all
//! of it. Two lists of one key prefix at one revision hold the same objects, so a watch whose
//! list matches one still in use by another watch takes that one instead, and keeps only its
//! place in it; the state is let go when its last watch has sent it.
//!
//! Owns the table of states in use; knows nothing of how they are sent.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;

use crate::core::weak_table::WeakTable;
use crate::store::Revision;

/// The objects a watch starts with, in key order: each one's revision and stored bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct InitialState {
    /// The revision the list was read at.
    pub revision: Revision,
    pub objects: Vec<(Revision, Bytes)>,
}

/// The states watches are sending, by key prefix.
#[derive(Debug, Default)]
pub struct InitialStates {
    in_use: Mutex<WeakTable<String, InitialState>>,
}

impl InitialStates {
    /// The state of `prefix` read at `state.revision`: one a watch is still sending if there is
    /// one (`state` is dropped), else `state`, which later watches may then share.
    pub fn share(&self, prefix: &str, state: InitialState) -> Arc<InitialState> {
        // A poisoned lock holds a table of weak handles, sound whatever panicked.
        let mut in_use = self.in_use.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(shared) = in_use.get(prefix)
            && shared.revision == state.revision
        {
            return shared;
        }
        let state = Arc::new(state);
        in_use.insert(prefix.to_owned(), &state);
        state
    }
}

#[cfg(test)]
impl InitialStates {
    /// The states watches are sending now.
    pub fn in_use(&self) -> Vec<Arc<InitialState>> {
        self.in_use.lock().unwrap_or_else(PoisonError::into_inner).values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(revision: Revision, names: &[&'static str]) -> InitialState {
        InitialState { revision, objects: names.iter().map(|n| (revision, Bytes::from_static(n.as_bytes()))).collect() }
    }

    #[test]
    fn watches_of_one_prefix_at_one_revision_share_one_state() {
        let states = InitialStates::default();
        let first = states.share("/crontabs/a/", state(7, &["x", "y"]));
        let second = states.share("/crontabs/a/", state(7, &["x", "y"]));
        assert!(Arc::ptr_eq(&first, &second));
        // Another revision, or another prefix, is a state of its own.
        let later = states.share("/crontabs/a/", state(8, &["x", "y", "z"]));
        assert!(!Arc::ptr_eq(&first, &later));
        assert_eq!(later.objects.len(), 3);
        let other = states.share("/crontabs/b/", state(8, &[]));
        assert!(!Arc::ptr_eq(&later, &other));
        // The newest state of a prefix is the one shared from then on.
        assert!(Arc::ptr_eq(&later, &states.share("/crontabs/a/", state(8, &["x", "y", "z"]))));
    }

    #[test]
    fn a_state_no_watch_uses_is_let_go() {
        let states = InitialStates::default();
        let first = states.share("/p/", state(3, &["x"]));
        let weak = Arc::downgrade(&first);
        drop(first);
        assert!(weak.upgrade().is_none(), "the table holds no state alive");
        let again = states.share("/p/", state(3, &["x"]));
        assert_eq!(again.objects, vec![(3, Bytes::from_static(b"x"))]);
    }
}
