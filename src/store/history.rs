//! The recent history of a backend: every event of a bounded window, used to read keys as of
//! an earlier revision (consistent lists, pagination, reads that must not show unflushed
//! writes) and to replay and fan out watch events.
//!
//! Events enter when a backend has decided them (sled: before it applies the batch; etcd: as its
//! watch reports them) and become visible to watchers only once they are durable.
//!
//! Owns the window and the fan-out to watchers. Must not do I/O: backends feed it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;

use crate::store::watchers::{self, SharedRegistry, locked};
use crate::store::{Error, Event, Result, Revision, Versioned, Watch, key};

/// One change and the revision of the value it replaced. The event is shared with every
/// watcher it is handed to.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub event: Arc<Event>,
    pub prev_revision: Revision,
}

impl Record {
    pub fn new(event: Event, prev_revision: Revision) -> Record {
        Record { event: Arc::new(event), prev_revision }
    }

    fn prev(&self) -> Option<Versioned> {
        self.event.prev.clone().map(|value| Versioned { revision: self.prev_revision, value })
    }

    fn size(&self) -> usize {
        self.event.value.len() + self.event.prev.as_ref().map_or(0, Bytes::len) + self.event.key.len() + 64
    }
}

/// Limits of the retained window.
#[derive(Debug, Clone, Copy)]
pub struct HistoryLimits {
    pub max_events: usize,
    pub max_bytes: usize,
}

impl Default for HistoryLimits {
    fn default() -> Self {
        HistoryLimits { max_events: 100_000, max_bytes: 256 << 20 }
    }
}

/// How far past its limits the window grows to keep a pinned revision readable.
const PINNED_LIMIT_FACTOR: usize = 8;

pub(crate) struct History {
    records: VecDeque<Record>,
    bytes: usize,
    /// Every event at or below this revision may have been dropped from the window.
    compacted: Revision,
    /// The latest revision known to be on disk.
    durable: Revision,
    /// `durable` for those who wait for a revision (`Store::wait_for_revision`).
    durable_tx: watch::Sender<Revision>,
    limits: HistoryLimits,
    /// Watchers by resource prefix (`/group/plural/`), each `Watch` holding a weak handle.
    watchers: SharedRegistry,
    /// Revisions readers are reading at for longer than the window may last (a backup), with
    /// how many of them: every event after the oldest is kept until it is unpinned.
    pins: BTreeMap<Revision, usize>,
}

impl History {
    pub fn new(revision: Revision, limits: HistoryLimits) -> History {
        History {
            records: VecDeque::new(),
            bytes: 0,
            compacted: revision,
            durable: revision,
            durable_tx: watch::channel(revision).0,
            limits,
            watchers: SharedRegistry::default(),
            pins: BTreeMap::new(),
        }
    }

    /// Keeps every event after the durable revision until `unpin`, so that reads at that
    /// revision stay possible while much is written meanwhile (up to `PINNED_LIMIT_FACTOR`
    /// times the window's limits); returns the revision.
    pub fn pin(&mut self) -> Revision {
        *self.pins.entry(self.durable).or_default() += 1;
        self.durable
    }

    /// Releases a `pin` taken at `revision`.
    pub fn unpin(&mut self, revision: Revision) {
        if let std::collections::btree_map::Entry::Occupied(mut pinned) = self.pins.entry(revision) {
            *pinned.get_mut() -= 1;
            if *pinned.get() == 0 {
                pinned.remove();
            }
        }
        self.trim();
    }

    pub fn durable(&self) -> Revision {
        self.durable
    }

    /// Waits (at most `limit`, without holding the window) until `revision` is durable;
    /// false when it was not in time. Take the receiver with `durable_changes`.
    pub async fn wait_durable(mut durable: watch::Receiver<Revision>, revision: Revision, limit: Duration) -> bool {
        matches!(tokio::time::timeout(limit, durable.wait_for(|r| *r >= revision)).await, Ok(Ok(_)))
    }

    /// The durable revision as it changes, for `wait_durable`.
    pub fn durable_changes(&self) -> watch::Receiver<Revision> {
        self.durable_tx.subscribe()
    }

    /// Checks that every event after `at` is still retained.
    pub fn check_retained(&self, at: Revision) -> Result<()> {
        if at < self.compacted {
            return Err(Error::Expired { requested: at, oldest: self.compacted });
        }
        Ok(())
    }

    /// Records events the writer has decided but not yet made durable.
    pub fn push_pending(&mut self, records: Vec<Record>) {
        for record in records {
            self.bytes += record.size();
            self.records.push_back(record);
        }
    }

    /// Drops pending events above `revision` (their batch failed to apply).
    pub fn discard_pending_after(&mut self, revision: Revision) {
        while self.records.back().is_some_and(|r| r.event.revision > revision) {
            if let Some(r) = self.records.pop_back() {
                self.bytes -= r.size();
            }
        }
    }

    /// Marks everything up to `revision` durable, delivers those events to watchers, and trims
    /// the window.
    pub fn make_durable(&mut self, revision: Revision) {
        let start = self.index_after(self.durable);
        let end = self.index_after(revision);
        let mut watchers = locked(&self.watchers);
        for record in self.records.range(start..end) {
            let event = &record.event;
            let Some(resource) = key::resource_prefix_of(&event.key) else {
                continue;
            };
            // A full queue means the watcher stopped reading: drop it rather than wait.
            watchers.deliver(resource, |watcher| watcher.deliver(event));
        }
        drop(watchers);
        self.durable = revision;
        self.durable_tx.send_replace(revision);
        self.trim();
    }

    /// Forgets every event and watcher: the store was reopened at `revision` and what it
    /// holds cannot be told apart from the window (a failed batch that reached the disk only
    /// in part). Watchers' streams end, and a watch or list at an older revision is `Expired`,
    /// so clients list again.
    pub fn reset(&mut self, revision: Revision) {
        self.records.clear();
        self.bytes = 0;
        self.compacted = revision;
        self.durable = revision;
        self.durable_tx.send_replace(revision);
        locked(&self.watchers).clear();
    }

    /// The revision of the newest event recorded, durable or pending.
    pub fn newest(&self) -> Revision {
        self.records.back().map_or(self.durable, |r| r.event.revision)
    }

    fn trim(&mut self) {
        while self.records.len() > self.limits.max_events || self.bytes > self.limits.max_bytes {
            let Some(front) = self.records.front() else {
                break;
            };
            // A pin holds the window past its limits, up to `PINNED_LIMIT_FACTOR` times them: a
            // backup nobody reads must not make the window grow without end (it then fails
            // as `Expired`, and can be taken again).
            let pinned = self.pins.keys().next().is_some_and(|pinned| front.event.revision > *pinned)
                && self.records.len() <= self.limits.max_events.saturating_mul(PINNED_LIMIT_FACTOR)
                && self.bytes <= self.limits.max_bytes.saturating_mul(PINNED_LIMIT_FACTOR);
            if front.event.revision > self.durable || pinned {
                break;
            }
            if let Some(r) = self.records.pop_front() {
                self.bytes -= r.size();
                self.compacted = r.event.revision;
            }
        }
    }

    /// Index of the first record with a revision above `revision`.
    fn index_after(&self, revision: Revision) -> usize {
        self.records.partition_point(|r| r.event.revision <= revision)
    }

    /// The value `key` had at revision `at`, given what sled holds now (`current`). Callers
    /// check `check_retained(at)` first.
    pub fn value_at(&self, key: &str, current: Option<Versioned>, at: Revision) -> Option<Versioned> {
        if let Some(v) = &current
            && v.revision <= at
        {
            return current;
        }
        let start = self.index_after(at);
        match self.records.range(start..).find(|r| r.event.key == key) {
            Some(record) => record.prev(),
            // Not changed since `at`: sled's value is the one (it cannot be newer).
            None => current.filter(|v| v.revision <= at),
        }
    }

    /// For every key under `prefix` (after `start_after`) changed since `at`: its value at `at`.
    pub fn changed_since(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        at: Revision,
    ) -> BTreeMap<String, Option<Versioned>> {
        let mut out = BTreeMap::new();
        let start = self.index_after(at);
        for record in self.records.range(start..) {
            let k = &record.event.key;
            if !k.starts_with(prefix) || start_after.is_some_and(|s| k.as_str() <= s) {
                continue;
            }
            out.entry(k.clone()).or_insert_with(|| record.prev());
        }
        out
    }

    /// Registers a watcher on `prefix`: the retained events after `from`, then live ones.
    pub fn subscribe(&mut self, prefix: &str, from: Revision) -> Result<Watch> {
        if from > self.durable {
            return Err(Error::TooLarge { requested: from, current: self.durable });
        }
        self.check_retained(from)?;
        let start = self.index_after(from);
        let end = self.index_after(self.durable);
        let backlog = self
            .records
            .range(start..end)
            .filter(|r| r.event.key.starts_with(prefix))
            .map(|r| r.event.clone())
            .collect();
        let resource = key::resource_prefix_of(prefix).unwrap_or(prefix).to_string();
        Ok(watchers::register(&self.watchers, resource, prefix, backlog))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EventType;
    use crate::store::watchers::{WATCHER_BYTES, WATCHER_EVENTS};

    fn record(revision: Revision, key: &str) -> Record {
        sized(revision, key, Bytes::from_static(b"{}"))
    }

    fn sized(revision: Revision, key: &str, value: Bytes) -> Record {
        Record::new(Event { kind: EventType::Added, key: key.into(), revision, value, prev: None }, 0)
    }

    /// Writes `records` one revision after another, each made durable (delivered) at once.
    fn write(history: &mut History, records: impl IntoIterator<Item = Record>) {
        for record in records {
            let revision = record.event.revision;
            history.push_pending(vec![record]);
            history.make_durable(revision);
        }
    }

    /// What `next` gives at once: `Some(Some(event))`, `Some(None)` when the watch ended, `None`
    /// while it would wait.
    fn next_now(watch: &mut Watch) -> Option<Option<Arc<Event>>> {
        futures_util::FutureExt::now_or_never(watch.next())
    }

    /// Whether `fell_behind` has resolved, without waiting.
    fn fell_behind(watch: &Watch) -> bool {
        let waiting = std::pin::pin!(watch.fell_behind());
        let waker = std::task::Waker::noop();
        waiting.poll(&mut std::task::Context::from_waker(waker)).is_ready()
    }

    #[test]
    fn a_failed_batch_is_pending_until_settled() {
        let mut history = History::new(10, HistoryLimits::default());
        let mut watch = history.subscribe("/g/r/", 10).unwrap();
        history.push_pending(vec![record(11, "/g/r/a")]);
        history.make_durable(11);
        history.push_pending(vec![record(12, "/g/r/b"), record(13, "/g/r/c")]);
        assert_eq!((history.durable(), history.newest()), (11, 13));
        // Reads as of the durable revision see the pending keys as absent.
        assert_eq!(history.changed_since("/g/r/", None, 11).len(), 2);
        assert!(history.value_at("/g/r/b", None, 11).is_none());
        // Gone from disk: discarded, never delivered; the revisions are skipped, not reused.
        history.discard_pending_after(11);
        history.make_durable(13);
        assert_eq!((history.durable(), history.newest()), (13, 11));
        assert_eq!(next_now(&mut watch).flatten().unwrap().revision, 11);
        assert!(next_now(&mut watch).is_none(), "nothing more queued");
        assert!(history.changed_since("/g/r/", None, 11).is_empty());
    }

    #[test]
    fn a_pinned_revision_stays_readable_until_unpinned() {
        let mut history = History::new(0, HistoryLimits { max_events: 2, max_bytes: usize::MAX });
        history.push_pending(vec![record(1, "/g/r/a")]);
        history.make_durable(1);
        let pinned = history.pin();
        for revision in 2..10 {
            history.push_pending(vec![record(revision, "/g/r/a")]);
            history.make_durable(revision);
        }
        assert!(history.check_retained(pinned).is_ok());
        assert_eq!(history.changed_since("/g/r/", None, pinned).len(), 1);
        history.unpin(pinned);
        assert!(matches!(history.check_retained(pinned), Err(Error::Expired { .. })));
        // A pin nobody releases holds the window up to eight times its limits, not more.
        let forgotten = history.pin();
        for revision in 10..40 {
            history.push_pending(vec![record(revision, "/g/r/a")]);
            history.make_durable(revision);
        }
        assert!(matches!(history.check_retained(forgotten), Err(Error::Expired { .. })));
        assert!(history.records.len() <= 2 * PINNED_LIMIT_FACTOR + 1, "{}", history.records.len());
    }

    #[test]
    fn a_reset_ends_watchers_and_expires_older_revisions() {
        let mut history = History::new(10, HistoryLimits::default());
        let mut watch = history.subscribe("/g/r/", 10).unwrap();
        history.push_pending(vec![record(11, "/g/r/a")]);
        history.reset(20);
        assert_eq!((history.durable(), history.newest()), (20, 20));
        assert!(matches!(next_now(&mut watch), Some(None)), "ended");
        assert!(!fell_behind(&watch), "ended, not dropped for falling behind");
        assert!(matches!(history.subscribe("/g/r/", 15), Err(Error::Expired { requested: 15, oldest: 20 })));
        assert!(history.subscribe("/g/r/", 20).is_ok());
    }

    #[test]
    fn a_watcher_that_does_not_take_its_events_is_dropped_at_its_event_limit() {
        let mut history = History::new(0, HistoryLimits::default());
        let mut stalled = history.subscribe("/g/r/", 0).unwrap();
        let mut reading = history.subscribe("/g/r/", 0).unwrap();
        let limit = WATCHER_EVENTS as u64;
        for revision in 1..=limit {
            write(&mut history, [record(revision, "/g/r/a")]);
            assert_eq!(next_now(&mut reading).flatten().unwrap().revision, revision);
        }
        assert!(!fell_behind(&stalled), "a full queue is not yet an overflow");
        write(&mut history, [record(limit + 1, "/g/r/a")]);
        assert!(fell_behind(&stalled));
        assert!(!fell_behind(&reading));
        assert_eq!(next_now(&mut reading).flatten().unwrap().revision, limit + 1);
        // What was queued can still be taken; then the stream ends.
        for revision in 1..=limit {
            assert_eq!(next_now(&mut stalled).flatten().unwrap().revision, revision);
        }
        assert!(matches!(next_now(&mut stalled), Some(None)), "ended");
        assert_eq!(locked(&history.watchers).count("/g/r/"), 1);
    }

    #[test]
    fn a_watcher_is_dropped_at_its_byte_limit_and_taking_events_frees_room() {
        let mut history = History::new(0, HistoryLimits::default());
        let mut watch = history.subscribe("/g/r/", 0).unwrap();
        let quarter = Bytes::from(vec![b'x'; WATCHER_BYTES / 4]);
        write(&mut history, (1..=4).map(|r| sized(r, "/g/r/a", quarter.clone())));
        assert_eq!(watch.queue().bytes(), WATCHER_BYTES);
        // Taking one event makes room for one more.
        let taken = futures_util::FutureExt::now_or_never(watch.next()).flatten().unwrap();
        assert_eq!(taken.revision, 1);
        write(&mut history, [sized(5, "/g/r/a", quarter.clone())]);
        assert!(!fell_behind(&watch));
        write(&mut history, [record(6, "/g/r/a")]);
        assert!(fell_behind(&watch), "a byte over the limit");
        // A single event larger than the limit goes into an empty queue.
        let mut large = history.subscribe("/g/r/", 6).unwrap();
        write(&mut history, [sized(7, "/g/r/a", Bytes::from(vec![b'x'; WATCHER_BYTES + 1]))]);
        assert!(!fell_behind(&large));
        assert_eq!(next_now(&mut large).flatten().unwrap().revision, 7);
    }

    #[test]
    fn events_are_shared_between_the_window_and_every_watcher() {
        let mut history = History::new(0, HistoryLimits::default());
        let mut watches: Vec<Watch> = (0..3).map(|_| history.subscribe("/g/r/", 0).unwrap()).collect();
        write(&mut history, [record(1, "/g/r/a")]);
        let received: Vec<Arc<Event>> = watches.iter_mut().map(|w| next_now(w).flatten().unwrap()).collect();
        let kept = &history.records.front().unwrap().event;
        assert!(received.iter().all(|event| Arc::ptr_eq(event, kept)));
    }

    #[test]
    fn a_dropped_watch_leaves_the_registry_at_once() {
        let mut history = History::new(0, HistoryLimits::default());
        let gone: Vec<Watch> = (0..1000).map(|_| history.subscribe("/g/r/a", 0).unwrap()).collect();
        let mut kept = history.subscribe("/g/r/", 0).unwrap();
        assert_eq!(locked(&history.watchers).count("/g/r/"), 1001);
        let burst = locked(&history.watchers).slots("/g/r/");
        drop(gone);
        // No event of the resource came after they went: their watchers left all the same,
        // and so did most of the slots they took.
        assert_eq!(locked(&history.watchers).count("/g/r/"), 1);
        assert!(locked(&history.watchers).slots("/g/r/") * 8 <= burst, "{burst}");
        write(&mut history, [record(1, "/g/r/b")]);
        assert_eq!(next_now(&mut kept).flatten().unwrap().revision, 1);
        // A closed store ends the watches still held.
        drop(history);
        assert!(matches!(next_now(&mut kept), Some(None)), "ended");
    }
}
