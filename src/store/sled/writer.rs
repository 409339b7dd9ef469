//! The single writer of the sled backend: assigns revisions, checks preconditions, applies each
//! batch of concurrent writes atomically, flushes it and syncs it to stable storage once
//! (group commit), then acknowledges every write of the batch and publishes its events.
//!
//! Runs on its own thread so that sled's blocking work and fsync never occupy the async
//! executor.
//!
//! A batch that fails to apply or to reach the disk puts the store in a fault (see
//! `Shared::fault`): its writes are refused, its events stay pending (never delivered), its
//! revisions are never given out again, and later writes fail at once. Reads go on from the
//! last durable state, as the pending events describe what the in-memory tree holds beyond it.
//! Once the file system has room again, the writer drops its handles and reopens the store
//! from disk, which forgets whatever of the failed batch sled held only in memory.
//!
//! A batch that failed for want of space also releases the space reserve, so that the store
//! reopens at once; until the file system has room for the reserve again, the writer commits
//! deletions only (they make room) and refuses other writes as the disk being full.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::reserve::{self, Reserve};
use super::{Opened, REVISION_KEY, Shared, encode, is_no_space, no_space, storage_error};
use crate::store::history::Record;
use crate::store::{Error, Event, EventType, Result, Revision, Update, Versioned};

/// What the batch being decided has done to each key so far. foldhash: probed twice per write
/// on the writer thread (keys are seeded per process).
type Overlay = HashMap<String, Option<Versioned>, foldhash::fast::RandomState>;

/// Most writes decided and flushed together.
const MAX_BATCH: usize = 4096;

/// How often a faulty store checks whether it can reopen.
const RECOVERY_INTERVAL: Duration = Duration::from_secs(1);

/// Free space the store's file system needs before a faulty store reopens: sled writes a
/// new segment (512 KiB) on opening, and reopening into a disk that is still full would only
/// close the store to readers too.
const MIN_FREE_BYTES: u64 = 4 << 20;

/// Whether the file system of `dir` has room for sled to open (or reopen) and `more`. When
/// free space cannot be read, it is assumed there.
pub(super) fn has_room(dir: &std::path::Path, more: u64) -> bool {
    match rustix::fs::statvfs(dir) {
        Ok(fs) => fs.f_bavail.saturating_mul(fs.f_frsize) >= MIN_FREE_BYTES + more,
        Err(e) => {
            tracing::warn!(error = %e, store = %dir.display(), "cannot read the store's free space");
            true
        }
    }
}

/// Where the store lives, for reopening it.
pub(super) struct Place {
    pub dir: PathBuf,
    pub cache_capacity: u64,
    /// A descriptor on the store's file system, for `syncfs` and free space.
    pub sync_handle: std::fs::File,
}

pub(super) enum Op {
    Create(Bytes),
    Update {
        expected: Revision,
        value: Bytes,
    },
    Delete {
        expected: Option<Revision>,
    },
    /// Moves the revision counter to at least this revision (the key is ignored): no event,
    /// the counter written durably with the batch.
    Advance(Revision),
}

pub(super) enum Command {
    /// One write.
    One { key: String, op: Op, reply: oneshot::Sender<Result<Outcome>> },
    /// Updates decided in order, each as `One` would decide it, committed in the same batch
    /// and answered together (`Store::update_many`).
    Updates { updates: Vec<Update>, reply: oneshot::Sender<Vec<Result<Revision>>> },
}

impl Command {
    /// How many writes it carries.
    fn len(&self) -> usize {
        match self {
            Command::One { .. } => 1,
            Command::Updates { updates, .. } => updates.len(),
        }
    }

    fn is_delete(&self) -> bool {
        matches!(self, Command::One { op: Op::Delete { .. }, .. })
    }

    /// Answers every write it carries with `error`.
    fn refuse(self, error: &Error) {
        match self {
            Command::One { reply, .. } => {
                let _ = reply.send(Err(error.clone()));
            }
            Command::Updates { updates, reply } => {
                let _ = reply.send(updates.iter().map(|_| Err(error.clone())).collect());
            }
        }
    }
}

/// A decided command's answer, sent once its batch is durable (or failed).
enum Reply {
    One(oneshot::Sender<Result<Outcome>>, Result<Outcome>),
    Updates(oneshot::Sender<Vec<Result<Revision>>>, Vec<Result<Revision>>),
}

impl Reply {
    /// Sends the answer; `failed`, when the batch did not reach the disk, replaces every
    /// success. The requester may have gone away (client disconnected): the write stands.
    fn send(self, failed: Option<&Error>) {
        fn fail<T>(result: Result<T>, failed: Option<&Error>) -> Result<T> {
            match failed {
                Some(e) => result.and(Err(e.clone())),
                None => result,
            }
        }
        match self {
            Reply::One(reply, result) => {
                let _ = reply.send(fail(result, failed));
            }
            Reply::Updates(reply, results) => {
                let _ = reply.send(results.into_iter().map(|r| fail(r, failed)).collect());
            }
        }
    }
}

#[derive(Debug)]
pub(super) struct Outcome {
    pub revision: Revision,
    /// The last value, for deletions.
    pub deleted: Option<Bytes>,
}

/// How the writer starts: the store as it opened (or did not, on a full disk).
pub(super) struct Start {
    pub db: Option<sled::Db>,
    /// The last revision written.
    pub revision: Revision,
    /// Why the store is closed, when it could not open.
    pub fault: Option<Error>,
    /// The disk was full at start: the reserve is released.
    pub deletes_only: bool,
}

pub(super) fn spawn(
    start: Start,
    place: Place,
    shared: Arc<Shared>,
    commands: Receiver<Command>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("sled-writer".into()).spawn(move || {
        let reserve = Reserve::new(&place.dir);
        let mut writer = Writer {
            db: start.db,
            place,
            shared,
            revision: start.revision,
            last_recovery: Instant::now(),
            fault: start.fault,
            reserve,
            deletes_only: start.deletes_only,
        };
        writer.run(&commands);
        // Every sender is gone: make sure the last batches are on disk before closing.
        if writer.db.is_some()
            && let Err(e) = writer.flush_durably()
        {
            tracing::error!(error = %e, "final flush of the store failed");
        }
    })
}

struct Writer {
    /// The open database; `None` while a fault has closed it.
    db: Option<sled::Db>,
    place: Place,
    shared: Arc<Shared>,
    /// The last revision assigned.
    revision: Revision,
    /// When the store last tried to reopen after a fault.
    last_recovery: Instant,
    /// Why writes fail now; the writer's own copy of `Shared::fault`, which only it sets, so
    /// that the write path never takes the shared lock.
    fault: Option<Error>,
    reserve: Reserve,
    /// The reserve is released: only deletions are committed.
    deletes_only: bool,
}

impl Writer {
    /// Records the fault here and for readers (`/readyz`, reads while the tree is closed).
    fn set_fault(&mut self, fault: Option<Error>) {
        self.shared.set_fault(fault.clone());
        self.fault = fault;
    }

    fn run(&mut self, commands: &Receiver<Command>) {
        loop {
            let waiting = self.fault.is_some() || self.deletes_only;
            let first = if !waiting {
                match commands.recv() {
                    Ok(c) => Some(c),
                    Err(_) => return,
                }
            } else {
                match commands.recv_timeout(RECOVERY_INTERVAL) {
                    Ok(c) => Some(c),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            };
            if waiting && self.last_recovery.elapsed() >= RECOVERY_INTERVAL {
                self.last_recovery = Instant::now();
                if self.fault.is_some() {
                    self.recover_when_room();
                } else {
                    self.restore_reserve_when_room();
                }
            }
            let Some(first) = first else { continue };
            let mut writes = first.len();
            let mut batch = vec![first];
            while writes < MAX_BATCH {
                match commands.try_recv() {
                    Ok(c) => {
                        writes += c.len();
                        batch.push(c);
                    }
                    Err(_) => break,
                }
            }
            if let Some(fault) = &self.fault {
                for command in batch {
                    command.refuse(fault);
                }
                continue;
            }
            if self.deletes_only {
                // Deletions make room; anything else would only fill the disk again.
                let (deletes, others): (Vec<Command>, Vec<Command>) = batch.into_iter().partition(Command::is_delete);
                for command in others {
                    command.refuse(&no_space());
                }
                batch = deletes;
                if batch.is_empty() {
                    continue;
                }
            }
            self.commit(batch);
        }
    }

    /// Leaves deletions-only mode once the file system has room for the reserve again.
    fn restore_reserve_when_room(&mut self) {
        if !has_room(&self.place.dir, reserve::BYTES) {
            return;
        }
        match self.reserve.allocate() {
            Ok(()) => {
                self.deletes_only = false;
                tracing::info!(
                    "the store's disk has room again: the space reserve is back and every write is accepted"
                );
            }
            Err(e) => tracing::warn!(error = %e, "the store's space reserve could not be allocated yet"),
        }
    }

    fn commit(&mut self, commands: Vec<Command>) {
        let start_revision = self.revision;
        let mut overlay = Overlay::default();
        let mut batch = sled::Batch::default();
        let mut records = Vec::new();
        let mut replies = Vec::with_capacity(commands.len());
        let mut writes = 0;
        for command in commands {
            writes += command.len();
            replies.push(match command {
                Command::One { key, op, reply } => {
                    Reply::One(reply, self.decide(&key, op, &mut overlay, &mut batch, &mut records))
                }
                Command::Updates { updates, reply } => {
                    let results = updates
                        .into_iter()
                        .map(|Update { key, expected, value }| {
                            let op = Op::Update { expected, value };
                            self.decide(&key, op, &mut overlay, &mut batch, &mut records).map(|o| o.revision)
                        })
                        .collect();
                    Reply::Updates(reply, results)
                }
            });
        }
        let metrics = &crate::metrics::global().group_commit;
        metrics.batch_size.observe(writes as u64);
        if self.revision > start_revision {
            batch.insert(REVISION_KEY, &self.revision.to_be_bytes());
            let started = Instant::now();
            let applied = self.apply(batch, records);
            metrics.flush.observe_duration(started.elapsed());
            if let Err(e) = applied {
                // Nothing of this batch is acknowledged or delivered: fail every write in it.
                // Its revisions stay used (sled may hold the batch in memory, or have put part
                // of it on disk), and the store stays faulty until it is reopened from disk.
                tracing::error!(error = %e, first = start_revision + 1, last = self.revision, "a write batch failed; writes are refused until the store can be reopened");
                if matches!(e, Error::NoSpace(_)) {
                    self.deletes_only = true;
                    if self.reserve.release() {
                        tracing::error!(
                            reserve_bytes = reserve::BYTES,
                            "the store's disk is full: released the space reserve so that the store reopens; only deletions are accepted until space is freed"
                        );
                    }
                }
                self.last_recovery = Instant::now();
                self.set_fault(Some(e.clone()));
                for reply in replies {
                    reply.send(Some(&e));
                }
                return;
            }
        }
        for reply in replies {
            reply.send(None);
        }
    }

    /// Applies the batch, flushes it to disk, then makes its events durable and visible.
    /// On failure the events stay pending: they describe what the tree may hold in memory
    /// beyond the durable revision, so that reads keep answering as of that revision.
    fn apply(&mut self, batch: sled::Batch, records: Vec<Record>) -> Result<()> {
        self.shared.history().push_pending(records);
        {
            let _gate = self.shared.apply_gate.write().unwrap_or_else(|e| e.into_inner());
            let slot = self.shared.tree();
            self.shared.tree_or_fault(&slot)?.apply_batch(batch).map_err(storage_error)?;
        }
        self.flush_durably()?;
        self.shared.history().make_durable(self.revision);
        Ok(())
    }

    /// Writes everything sled holds to the OS, then syncs the store's file system: sled's
    /// own flush ends with `sync_file_range`, which persists neither the file's size nor new
    /// blob files (values and nodes over 128 KiB) and leaves the drive's cache unflushed.
    /// `syncfs` covers all of it with one call per batch.
    fn flush_durably(&self) -> Result<()> {
        let db = self.db.as_ref().ok_or_else(|| Error::Backend("the store is closed by a fault".into()))?;
        db.flush().map_err(storage_error)?;
        rustix::fs::syncfs(&self.place.sync_handle).map_err(|e| {
            let e = std::io::Error::from(e);
            if is_no_space(&e) { no_space() } else { Error::Backend(format!("syncfs: {e}")) }
        })?;
        self.shared.syncs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// Reopens a faulty store once its file system has room again; until then readers keep
    /// the open tree.
    fn recover_when_room(&mut self) {
        if !has_room(&self.place.dir, 0) {
            return;
        }
        match self.recover() {
            Ok(()) => tracing::info!(revision = self.revision, "the store is writable again"),
            Err(e) => tracing::warn!(error = %e, "the store could not be reopened yet"),
        }
    }

    /// Drops every handle on the store, opens it from disk, settles the pending events of the
    /// failed batch by what reached the disk, and proves that writes work again with a
    /// durable write of the revision counter.
    fn recover(&mut self) -> Result<()> {
        // Readers hold the read lock while they use the tree: once this write lock is taken,
        // the slot's handle is the last one besides `db`.
        drop(self.shared.tree.write().unwrap_or_else(|e| e.into_inner()).take());
        self.db = None;
        // sled's own background thread may hold the file lock for a moment longer.
        let mut attempts = 0;
        let Opened { db, tree, revision: on_disk } = loop {
            match Opened::open(&self.place.dir, self.place.cache_capacity) {
                Ok(opened) => break opened,
                Err(e) if attempts == 20 => return Err(e),
                Err(_) => {
                    attempts += 1;
                    std::thread::sleep(Duration::from_millis(25));
                }
            }
        };
        let (durable, newest) = {
            let history = self.shared.history();
            (history.durable(), history.newest())
        };
        // Revisions handed out stay used, even those of a batch that never reached the disk.
        let next = self.revision.max(on_disk);
        tree.insert(REVISION_KEY, &next.to_be_bytes()).map_err(storage_error)?;
        self.db = Some(db);
        if let Err(e) = self.flush_durably() {
            self.db = None;
            return Err(e);
        }
        {
            let mut history = self.shared.history();
            if durable == 0 && newest == 0 {
                // The store never opened (a full disk at start): this is its first state.
                history.reset(next);
            } else if on_disk == durable {
                // The failed batch is gone with sled's memory.
                history.discard_pending_after(durable);
                history.make_durable(next);
            } else if on_disk == newest {
                // It reached the disk whole after all: its events are true, deliver them.
                history.make_durable(next);
            } else {
                tracing::warn!(
                    on_disk,
                    durable,
                    newest,
                    "the reopened store matches no known state; watchers must list again"
                );
                history.reset(next);
            }
        }
        self.revision = next;
        *self.shared.tree.write().unwrap_or_else(|e| e.into_inner()) = Some(tree);
        self.set_fault(None);
        Ok(())
    }

    fn current(&self, key: &str, overlay: &Overlay) -> Result<Option<Versioned>> {
        if let Some(v) = overlay.get(key) {
            return Ok(v.clone());
        }
        self.shared.read(key.as_bytes())
    }

    fn decide(
        &mut self,
        key: &str,
        op: Op,
        overlay: &mut Overlay,
        batch: &mut sled::Batch,
        records: &mut Vec<Record>,
    ) -> Result<Outcome> {
        if let Op::Advance(to) = op {
            self.revision = self.revision.max(to);
            return Ok(Outcome { revision: self.revision, deleted: None });
        }
        let current = self.current(key, overlay)?;
        let (kind, value, deleted) = match (op, &current) {
            (Op::Create(_), Some(_)) => return Err(Error::AlreadyExists(key.to_string())),
            (Op::Create(value), None) => (EventType::Added, value, None),
            (Op::Update { .. } | Op::Delete { .. }, None) => {
                return Err(Error::NotFound(key.to_string()));
            }
            (Op::Update { expected, .. }, Some(cur)) | (Op::Delete { expected: Some(expected) }, Some(cur))
                if cur.revision != expected =>
            {
                return Err(Error::Conflict { key: key.to_string(), expected, current: cur.revision });
            }
            (Op::Update { value, .. }, Some(_)) => (EventType::Modified, value, None),
            (Op::Delete { .. }, Some(cur)) => (EventType::Deleted, cur.value.clone(), Some(cur.value.clone())),
            (Op::Advance(_), _) => return Err(Error::Backend("advance is decided above".into())),
        };
        self.revision += 1;
        let revision = self.revision;
        if kind == EventType::Deleted {
            batch.remove(key.as_bytes());
            overlay.insert(key.to_string(), None);
        } else {
            batch.insert(key.as_bytes(), encode(revision, &value));
            overlay.insert(key.to_string(), Some(Versioned { revision, value: value.clone() }));
        }
        records.push(Record::new(
            Event { kind, key: key.to_string(), revision, value, prev: current.as_ref().map(|c| c.value.clone()) },
            current.map_or(0, |c| c.revision),
        ));
        Ok(Outcome { revision, deleted })
    }
}
