//! The single writer of the sled backend: assigns revisions, checks preconditions, applies each
//! batch of concurrent writes atomically, flushes it and syncs it to stable storage once
//! (group commit), then acknowledges every write of the batch and publishes its events.
//!
//! Runs on its own thread so that sled's blocking work and fsync never occupy the async
//! executor.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::history::Record;
use super::{REVISION_KEY, Shared, decode, encode};
use crate::store::{Error, Event, EventType, Result, Revision, Versioned};

/// Most writes decided and flushed together.
const MAX_BATCH: usize = 4096;

pub(super) enum Op {
    Create(Bytes),
    Update { expected: Revision, value: Bytes },
    Delete { expected: Option<Revision> },
}

pub(super) struct Command {
    pub key: String,
    pub op: Op,
    pub reply: oneshot::Sender<Result<Outcome>>,
}

#[derive(Debug)]
pub(super) struct Outcome {
    pub revision: Revision,
    /// The last value, for deletions.
    pub deleted: Option<Bytes>,
}

pub(super) fn spawn(
    db: sled::Db,
    sync_handle: std::fs::File,
    shared: Arc<Shared>,
    revision: Revision,
    commands: Receiver<Command>,
) -> std::io::Result<()> {
    std::thread::Builder::new().name("sled-writer".into()).spawn(move || {
        let mut writer = Writer { db, sync_handle, shared, revision };
        while let Ok(first) = commands.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match commands.try_recv() {
                    Ok(c) => batch.push(c),
                    Err(_) => break,
                }
            }
            writer.commit(batch);
        }
        // Every sender is gone: make sure the last batches are on disk before closing.
        if let Err(e) = writer.flush_durably() {
            tracing::error!(error = %e, "final flush of the store failed");
        }
    })?;
    Ok(())
}

struct Writer {
    db: sled::Db,
    /// A descriptor on the store's file system, for `syncfs`.
    sync_handle: std::fs::File,
    shared: Arc<Shared>,
    /// The last revision assigned.
    revision: Revision,
}

impl Writer {
    fn commit(&mut self, commands: Vec<Command>) {
        let start_revision = self.revision;
        let mut overlay: HashMap<String, Option<Versioned>> = HashMap::new();
        let mut batch = sled::Batch::default();
        let mut records = Vec::new();
        let mut replies = Vec::with_capacity(commands.len());
        for Command { key, op, reply } in commands {
            let result = self.decide(&key, op, &mut overlay, &mut batch, &mut records);
            replies.push((reply, result));
        }
        if self.revision > start_revision {
            batch.insert(REVISION_KEY, &self.revision.to_be_bytes());
            if let Err(e) = self.apply(batch, records, start_revision) {
                // Nothing of this batch is visible or durable: fail every write in it.
                self.revision = start_revision;
                for (reply, result) in replies {
                    let _ = reply.send(result.and(Err(e.clone())));
                }
                return;
            }
        }
        for (reply, result) in replies {
            // The requester may have gone away (client disconnected); the write stands.
            let _ = reply.send(result);
        }
    }

    /// Applies the batch, flushes it to disk, then makes its events durable and visible.
    fn apply(&mut self, batch: sled::Batch, records: Vec<Record>, start_revision: Revision) -> Result<()> {
        self.shared.history().push_pending(records);
        {
            let _gate = self.shared.apply_gate.write().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = self.shared.tree.apply_batch(batch) {
                self.shared.history().discard_pending_after(start_revision);
                return Err(Error::Backend(e.to_string()));
            }
        }
        if let Err(e) = self.flush_durably() {
            // The batch is applied in memory but may not be on disk: report failure and keep
            // the state (a later flush will persist it), as the safest honest answer.
            tracing::error!(error = %e, "flushing the store failed");
            return Err(Error::Backend(format!("flush failed: {e}")));
        }
        self.shared.history().make_durable(self.revision);
        Ok(())
    }

    /// Writes everything sled holds to the OS, then syncs the store's file system: sled's
    /// own flush ends with `sync_file_range`, which persists neither the file's size nor new
    /// blob files (values and nodes over 128 KiB) and leaves the drive's cache unflushed.
    /// `syncfs` covers all of it with one call per batch.
    fn flush_durably(&self) -> std::result::Result<(), String> {
        self.db.flush().map_err(|e| e.to_string())?;
        rustix::fs::syncfs(&self.sync_handle).map_err(|e| format!("syncfs: {e}"))?;
        self.shared.syncs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    fn current(&self, key: &str, overlay: &HashMap<String, Option<Versioned>>) -> Result<Option<Versioned>> {
        if let Some(v) = overlay.get(key) {
            return Ok(v.clone());
        }
        match self.shared.tree.get(key.as_bytes()) {
            Ok(raw) => raw.map(|r| decode(&r)).transpose(),
            Err(e) => Err(Error::Backend(e.to_string())),
        }
    }

    fn decide(
        &mut self,
        key: &str,
        op: Op,
        overlay: &mut HashMap<String, Option<Versioned>>,
        batch: &mut sled::Batch,
        records: &mut Vec<Record>,
    ) -> Result<Outcome> {
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
        records.push(Record {
            event: Event {
                kind,
                key: key.to_string(),
                revision,
                value,
                prev: current.as_ref().map(|c| c.value.clone()),
            },
            prev_revision: current.map_or(0, |c| c.revision),
        });
        Ok(Outcome { revision, deleted })
    }
}
