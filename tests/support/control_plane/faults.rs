//! Faults a test switches on at the double's door: a request held until the test releases it
//! (to stop the project's server at a precise step of what it is doing), and an outage (the
//! double unreachable as a dead kube-apiserver is: every open connection closed, every new one
//! reset before its TLS handshake). Also a log of the requests that came in, for tests that
//! count calls.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

use super::state::lock;

/// A request held at the door until `release`.
struct Hold {
    method: http::Method,
    /// Held when the path and query contain this.
    path: String,
    /// How many matching requests still pass before one is held.
    skip: usize,
    held: usize,
    /// `Some(true)` once released to go on, `Some(false)` to be answered 503 with no effect.
    released: watch::Sender<Option<bool>>,
}

pub struct Faults {
    /// By id; a released hold is removed.
    holds: Mutex<Vec<(usize, Hold)>>,
    next_hold: std::sync::atomic::AtomicUsize,
    down: AtomicBool,
    /// Bumped when the double goes down: open connections close.
    outages: watch::Sender<u64>,
    requests: Mutex<Vec<(http::Method, String)>>,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults {
            holds: Mutex::new(Vec::new()),
            next_hold: std::sync::atomic::AtomicUsize::new(0),
            down: AtomicBool::new(false),
            outages: watch::channel(0).0,
            requests: Mutex::new(Vec::new()),
        }
    }
}

/// What the door does with a request.
pub enum Door {
    Pass,
    /// Wait for the release; true: go on, false: answer 503 with no effect.
    Held(watch::Receiver<Option<bool>>),
}

impl Faults {
    /// Holds the first request with `method` whose path and query contain `path` after `skip`
    /// such requests went through, and every later one, until `release`; answers the hold's id.
    pub fn hold(&self, method: http::Method, path: &str, skip: usize) -> usize {
        let id = self.next_hold.fetch_add(1, Ordering::SeqCst);
        let hold = Hold { method, path: path.to_string(), skip, held: 0, released: watch::channel(None).0 };
        lock(&self.holds).push((id, hold));
        id
    }

    /// How many requests wait at the hold `id`.
    pub fn held(&self, id: usize) -> usize {
        lock(&self.holds).iter().find(|(i, _)| *i == id).map_or(0, |(_, h)| h.held)
    }

    /// Lets the requests held by `id` go on (`apply`) or answers them 503 with no effect;
    /// removes the hold.
    pub fn release(&self, id: usize, apply: bool) {
        let mut holds = lock(&self.holds);
        if let Some(at) = holds.iter().position(|(i, _)| *i == id) {
            let (_, hold) = holds.remove(at);
            hold.released.send_replace(Some(apply));
        }
    }

    /// Records a request and answers whether a hold keeps it (the first hold that matches).
    pub fn arrive(&self, method: &http::Method, path: &str) -> Door {
        lock(&self.requests).push((method.clone(), path.to_string()));
        let mut holds = lock(&self.holds);
        let Some((_, hold)) = holds.iter_mut().find(|(_, h)| h.method == method && path.contains(&h.path)) else {
            return Door::Pass;
        };
        if hold.skip > 0 {
            hold.skip -= 1;
            return Door::Pass;
        }
        hold.held += 1;
        Door::Held(hold.released.subscribe())
    }

    /// How many requests with `method` whose path and query contain `path` came in so far.
    pub fn count(&self, method: &http::Method, path: &str) -> usize {
        lock(&self.requests).iter().filter(|(m, p)| m == method && p.contains(path)).count()
    }

    /// Takes the double down (every connection closed, new ones reset) or brings it back.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
        if down {
            self.outages.send_modify(|n| *n += 1);
        }
    }

    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    /// Follows outages: changes when the double goes down.
    pub fn outages(&self) -> watch::Receiver<u64> {
        self.outages.subscribe()
    }
}
