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
//! Before a batch goes to sled, `space` decides which of its writes the disk has room for;
//! the others are refused as the disk being full, and a full store commits deletions (they
//! make room) and as many bytes again as they deleted. sled itself is thus never the first to
//! find the disk full, unless another program fills it between two batches: then the batch
//! fails as above, and the store is reopened once there is room.
//!
//! No write ever waits for sled to close or reopen a database that may be stuck: the old
//! handles are closed on a thread of their own, given `CLOSE_LIMIT`; one that does not close
//! leaves the store closed (its check says why) until the server is restarted.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::space::{Demand, Space, has_room};
use super::{Opened, REVISION_KEY, Shared, encode, is_no_space, no_space, storage_error};
use crate::store::history::Record;
use crate::store::{Error, Event, EventType, Result, Revision, Update, Versioned};

/// What the batch being decided has done to each key so far. foldhash: probed twice per write
/// on the writer thread (keys are seeded per process).
type Overlay = HashMap<String, Option<Versioned>, foldhash::fast::RandomState>;

/// Most writes decided and flushed together.
const MAX_BATCH: usize = 4096;

/// How often a faulty or full store looks whether it can reopen, or take its reserve back.
const RECOVERY_INTERVAL: Duration = Duration::from_secs(1);

/// How long sled is given to close a database (its last flush included). One that takes
/// longer is stuck (its log waits for a buffer that can no longer be written) and is left to
/// the end of the process: nothing acknowledged depends on it, every acknowledged write
/// having been synced to disk already.
pub(super) const CLOSE_LIMIT: Duration = Duration::from_secs(10);

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

    /// What it asks of the disk.
    fn demand(&self) -> Demand {
        match self {
            Command::One { op: Op::Delete { .. }, .. } => Demand { bytes: 0, deletion: true },
            Command::One { key, op: Op::Create(value) | Op::Update { value, .. }, .. } => {
                Demand { bytes: key.len() + value.len(), deletion: false }
            }
            Command::One { op: Op::Advance(_), .. } => Demand { bytes: 0, deletion: false },
            Command::Updates { updates, .. } => {
                Demand { bytes: updates.iter().map(|u| u.key.len() + u.value.len()).sum(), deletion: false }
            }
        }
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
    pub full: bool,
}

/// The running writer thread: it ends once every command sender is gone.
pub(super) struct Running {
    thread: std::thread::JoinHandle<()>,
    /// Disconnected when the thread ends, however it ends.
    ended: Receiver<()>,
}

impl Running {
    /// Waits at most `limit` for the thread to end; returns whether it did.
    pub fn wait(self, limit: Duration) -> bool {
        match self.ended.recv_timeout(limit) {
            Err(RecvTimeoutError::Timeout) => false,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                if self.thread.join().is_err() {
                    tracing::error!("the store's writer thread panicked");
                }
                true
            }
        }
    }
}

pub(super) fn spawn(
    start: Start,
    place: Place,
    shared: Arc<Shared>,
    commands: Receiver<Command>,
) -> std::io::Result<Running> {
    let (ending, ended) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::Builder::new().name("sled-writer".into()).spawn(move || {
        // Dropped when the thread ends, even by a panic: `Running::wait` learns it.
        let _ending = ending;
        let space = Space::new(&place.dir, start.full);
        let mut writer = Writer {
            db: start.db,
            place,
            shared,
            revision: start.revision,
            last_recovery: Instant::now(),
            fault: start.fault,
            space,
            stuck: false,
            deleted_bytes: 0,
        };
        writer.run(&commands);
        writer.finish();
    })?;
    Ok(Running { thread, ended })
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
    space: Space,
    /// sled did not close the database after a fault: the store stays closed.
    stuck: bool,
    /// Bytes (keys and values) deleted by the batch being decided.
    deleted_bytes: u64,
}

impl Writer {
    /// Records the fault here and for readers (`/readyz`, reads while the tree is closed).
    fn set_fault(&mut self, fault: Option<Error>) {
        self.shared.set_fault(fault.clone());
        self.fault = fault;
    }

    fn run(&mut self, commands: &Receiver<Command>) {
        loop {
            let waiting = (self.fault.is_some() && !self.stuck) || self.space.is_full();
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
                    self.space.tick();
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
            // A read that met a failed write inside sled (readers complete node splits) may
            // have left its log stuck: never flush it, reopen the store.
            if let Some(error) = self.shared.take_read_failure() {
                tracing::error!(error = %error, "a read met a failed write in the store; writes are refused until it is reopened");
                self.fail(error.clone());
                for command in batch {
                    command.refuse(&error);
                }
                continue;
            }
            let verdicts = self.space.admit(batch.iter().map(Command::demand));
            let mut taken = Vec::with_capacity(batch.len());
            for (command, take) in batch.into_iter().zip(verdicts) {
                if take {
                    taken.push(command);
                } else {
                    command.refuse(&no_space());
                }
            }
            if !taken.is_empty() {
                self.commit(taken);
            }
        }
    }

    /// Puts the store in a fault after a failed write: writes are refused at once until it is
    /// reopened from disk.
    fn fail(&mut self, error: Error) {
        if matches!(error, Error::NoSpace(_)) {
            self.space.found_full();
        }
        self.last_recovery = Instant::now();
        self.set_fault(Some(error));
    }

    /// Every sender is gone: the last batches reach the disk and sled closes the database,
    /// within `CLOSE_LIMIT` (`SledStore::close` waits that long for this thread).
    fn finish(&mut self) {
        let tree = self.shared.tree.write().unwrap_or_else(|e| e.into_inner()).take();
        if self.fault.is_none()
            && self.db.is_some()
            && let Err(e) = self.flush_durably()
        {
            tracing::error!(error = %e, "final flush of the store failed");
        }
        self.set_fault(Some(Error::Closed));
        if !self.stuck {
            drop(tree);
            drop(self.db.take());
        }
    }

    fn commit(&mut self, commands: Vec<Command>) {
        let start_revision = self.revision;
        self.deleted_bytes = 0;
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
                self.fail(e.clone());
                for reply in replies {
                    reply.send(Some(&e));
                }
                return;
            }
        }
        self.space.deleted(std::mem::take(&mut self.deleted_bytes));
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
        if self.stuck || !has_room(&self.place.dir, 0) {
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
        let tree = self.shared.tree.write().unwrap_or_else(|e| e.into_inner()).take();
        let db = self.db.take();
        let closing = move || {
            drop(tree);
            drop(db);
        };
        if !close_within(closing, CLOSE_LIMIT) {
            self.stuck = true;
            let stuck = Error::Backend(
                "sled did not close the store after a failed write; the store stays closed until the server is \
                 restarted"
                    .into(),
            );
            tracing::error!(error = %stuck, limit = ?CLOSE_LIMIT, "the store cannot be reopened");
            self.set_fault(Some(stuck.clone()));
            return Err(stuck);
        }
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
            self.deleted_bytes += (key.len() + value.len()) as u64;
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

/// Runs `close` (the drop of sled's handles) on a thread of its own and waits at most `limit`
/// for it; returns whether it ended. A database whose log is stuck never closes: its thread is
/// left waiting, and its handles are never used again.
fn close_within(close: impl FnOnce() + Send + 'static, limit: Duration) -> bool {
    let (closed, done) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new().name("sled-close".into()).spawn(move || {
        close();
        let _ = closed.send(());
    });
    match spawned {
        Ok(_) => done.recv_timeout(limit).is_ok(),
        Err(e) => {
            tracing::error!(error = %e, "cannot start a thread to close the store");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_close_that_never_ends_is_left_behind_at_the_limit() {
        let (release, held) = std::sync::mpsc::channel::<()>();
        // Held until the test releases it, well after the limit.
        assert!(!close_within(
            move || {
                let _ = held.recv();
            },
            Duration::from_millis(20)
        ));
        release.send(()).unwrap();
        let (closed, done) = std::sync::mpsc::channel();
        assert!(close_within(move || closed.send(()).unwrap(), CLOSE_LIMIT));
        assert!(done.try_recv().is_ok(), "the close ran");
    }
}
