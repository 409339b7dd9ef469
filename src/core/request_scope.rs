//! What the server knows of the request being served, for its logs: its audit ID, and where
//! its time went (the phases of a resource request: filters, decode, admission and
//! validation, store, encode).
//!
//! The server's request log opens the scope around each request ([`scoped`]); the API layer
//! marks where each phase ends ([`end`]); log lines written while serving read the audit ID
//! ([`audit_id`]); the request log decides what, if anything, to write. The scope lives in
//! the request's task (a task-local value inside the request's future), so it allocates
//! nothing and takes no lock: a mark is one clock read and one thread-local update. Outside a
//! scope (unit tests, the offline `validate` command) a mark is a thread-local lookup that
//! finds nothing. Owns no policy and writes no log.

use std::cell::Cell;
use std::future::Future;
use std::time::{Duration, Instant};

use http::HeaderValue;

/// A phase of a resource request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Everything before the handler: authentication, authorization, limits.
    Filters,
    /// Reading the body, decoding it, pruning, defaulting and `fieldValidation`.
    Decode,
    /// Admission (namespace lifecycle, mutating and validating policies and webhooks,
    /// quota) and validation (schema, CEL).
    Admission,
    /// Conversion to the storage version and the store's answer (reads and writes).
    Store,
    /// Building the response in the negotiated view.
    Encode,
}

impl Phase {
    pub const ALL: [Phase; 5] = [Phase::Filters, Phase::Decode, Phase::Admission, Phase::Store, Phase::Encode];

    /// The name logs use.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Filters => "filters",
            Phase::Decode => "decode",
            Phase::Admission => "admission",
            Phase::Store => "store",
            Phase::Encode => "encode",
        }
    }
}

/// Time spent per phase. A phase that repeats (a patch retried after a conflict) adds up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Phases {
    filters: Duration,
    decode: Duration,
    admission: Duration,
    store: Duration,
    encode: Duration,
}

impl Phases {
    pub fn get(&self, phase: Phase) -> Duration {
        match phase {
            Phase::Filters => self.filters,
            Phase::Decode => self.decode,
            Phase::Admission => self.admission,
            Phase::Store => self.store,
            Phase::Encode => self.encode,
        }
    }

    fn add(&mut self, phase: Phase, spent: Duration) {
        let slot = match phase {
            Phase::Filters => &mut self.filters,
            Phase::Decode => &mut self.decode,
            Phase::Admission => &mut self.admission,
            Phase::Store => &mut self.store,
            Phase::Encode => &mut self.encode,
        };
        *slot += spent;
    }

    /// Whether no phase was marked (requests that never reached a resource handler).
    pub fn is_empty(&self) -> bool {
        *self == Phases::default()
    }
}

#[derive(Clone, Copy)]
struct Record {
    /// The end of the previous phase (at first, when the request arrived).
    last: Instant,
    phases: Phases,
}

/// One request's scope.
struct Scope {
    audit_id: HeaderValue,
    record: Cell<Record>,
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Runs `request` in a scope with its audit ID and a phase record that starts at `started`;
/// returns the request's output, where its time went and the audit ID.
pub async fn scoped<F: Future>(
    audit_id: HeaderValue,
    started: Instant,
    request: F,
) -> (F::Output, Phases, HeaderValue) {
    let scope = Scope { audit_id, record: Cell::new(Record { last: started, phases: Phases::default() }) };
    let future = SCOPE.scope(scope, request);
    tokio::pin!(future);
    let output = future.as_mut().await;
    match future.take_value() {
        Some(scope) => (output, scope.record.get().phases, scope.audit_id),
        None => (output, Phases::default(), HeaderValue::from_static("")),
    }
}

/// The audit ID of the request being served, for log lines written while serving it (`None`
/// outside a request).
pub fn audit_id() -> Option<String> {
    SCOPE.try_with(|s| String::from_utf8_lossy(s.audit_id.as_bytes()).into_owned()).ok()
}

/// Ends `phase` now: the time since the previous mark (or the request's arrival) is added to
/// it.
pub fn end(phase: Phase) {
    let _ = SCOPE.try_with(|scope| {
        let cell = &scope.record;
        let mut record = cell.get();
        let now = Instant::now();
        record.phases.add(phase, now.saturating_duration_since(record.last));
        record.last = now;
        cell.set(record);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn marks_split_the_time_between_phases() {
        let started = Instant::now();
        let ((), phases, _) = scoped(HeaderValue::from_static("a"), started, async {
            std::thread::sleep(Duration::from_millis(2));
            end(Phase::Filters);
            std::thread::sleep(Duration::from_millis(5));
            end(Phase::Store);
            end(Phase::Encode);
            std::thread::sleep(Duration::from_millis(1));
            end(Phase::Store);
        })
        .await;
        assert!(phases.get(Phase::Filters) >= Duration::from_millis(2));
        assert!(phases.get(Phase::Store) >= Duration::from_millis(6), "{phases:?}");
        assert!(phases.get(Phase::Store) < phases.get(Phase::Filters) + Duration::from_secs(1));
        assert_eq!(phases.get(Phase::Decode), Duration::ZERO);
        assert!(!phases.is_empty());
    }

    #[tokio::test]
    async fn marks_survive_awaits_and_stay_with_their_request() {
        let one = scoped(HeaderValue::from_static("one"), Instant::now(), async {
            tokio::task::yield_now().await;
            end(Phase::Decode);
            audit_id()
        });
        let two = scoped(HeaderValue::from_static("two"), Instant::now(), async {
            tokio::task::yield_now().await;
            audit_id()
        });
        let ((one_id, first, one_back), (two_id, second, _)) = tokio::join!(one, two);
        assert_eq!(one_back, "one");
        assert_eq!((one_id.as_deref(), two_id.as_deref()), (Some("one"), Some("two")));
        assert!(!first.is_empty());
        assert!(second.is_empty(), "a mark of one request leaked into another: {second:?}");
    }

    #[test]
    fn marks_outside_a_request_do_nothing() {
        end(Phase::Store);
        assert_eq!(audit_id(), None);
    }
}
