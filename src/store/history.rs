//! The recent history of a backend: every event of a bounded window, used to read keys as of
//! an earlier revision (consistent lists, pagination, reads that must not show unflushed
//! writes) and to replay and fan out watch events.
//!
//! Events enter when a backend has decided them (sled: before it applies the batch; etcd: as its
//! watch reports them) and become visible to watchers only once they are durable.
//!
//! Owns the window and the fan-out to watchers. Must not do I/O: backends feed it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use crate::store::{Error, Event, Result, Revision, Versioned, key};

/// One change and the revision of the value it replaced.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub event: Event,
    pub prev_revision: Revision,
}

impl Record {
    fn prev(&self) -> Option<Versioned> {
        self.event.prev.clone().map(|value| Versioned { revision: self.prev_revision, value })
    }

    fn size(&self) -> usize {
        self.event.value.len() + self.event.prev.as_ref().map_or(0, Bytes::len) + self.event.key.len() + 64
    }
}

struct Watcher {
    prefix: String,
    tx: mpsc::Sender<Event>,
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

/// Buffered events per watcher; a watcher that falls this far behind is dropped.
pub(crate) const WATCHER_BUFFER: usize = 4096;

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
    /// Watchers by resource prefix (`/group/plural/`).
    watchers: HashMap<String, Vec<Watcher>>,
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
            watchers: HashMap::new(),
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
        for record in self.records.range(start..end) {
            let event = &record.event;
            let Some(resource) = key::resource_prefix_of(&event.key) else {
                continue;
            };
            if let Some(watchers) = self.watchers.get_mut(resource) {
                // A full buffer means the watcher stopped reading: drop it rather than wait.
                watchers.retain(|w| !event.key.starts_with(&w.prefix) || w.tx.try_send(event.clone()).is_ok());
                if watchers.is_empty() {
                    self.watchers.remove(resource);
                }
            }
        }
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
        self.watchers.clear();
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

    /// Registers a watcher on `prefix` and returns the retained events after `from`.
    pub fn subscribe(&mut self, prefix: &str, from: Revision) -> Result<(Vec<Event>, mpsc::Receiver<Event>)> {
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
        let (tx, rx) = mpsc::channel(WATCHER_BUFFER);
        let resource = key::resource_prefix_of(prefix).unwrap_or(prefix).to_string();
        self.watchers.entry(resource).or_default().push(Watcher { prefix: prefix.to_string(), tx });
        Ok((backlog, rx))
    }

    /// Forgets watchers whose receivers are gone.
    pub fn prune_closed_watchers(&mut self) {
        self.watchers.retain(|_, ws| {
            ws.retain(|w| !w.tx.is_closed());
            !ws.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EventType;

    fn record(revision: Revision, key: &str) -> Record {
        Record {
            event: Event {
                kind: EventType::Added,
                key: key.into(),
                revision,
                value: Bytes::from_static(b"{}"),
                prev: None,
            },
            prev_revision: 0,
        }
    }

    #[test]
    fn a_failed_batch_is_pending_until_settled() {
        let mut history = History::new(10, HistoryLimits::default());
        let (_, mut live) = history.subscribe("/g/r/", 10).unwrap();
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
        assert_eq!(live.try_recv().unwrap().revision, 11);
        assert!(live.try_recv().is_err());
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
        let (_, mut live) = history.subscribe("/g/r/", 10).unwrap();
        history.push_pending(vec![record(11, "/g/r/a")]);
        history.reset(20);
        assert_eq!((history.durable(), history.newest()), (20, 20));
        assert!(matches!(live.try_recv(), Err(mpsc::error::TryRecvError::Disconnected)));
        assert!(matches!(history.subscribe("/g/r/", 15), Err(Error::Expired { requested: 15, oldest: 20 })));
        assert!(history.subscribe("/g/r/", 20).is_ok());
    }
}
