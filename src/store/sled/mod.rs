//! The embedded backend: objects in a sled tree, revisions and history kept by this module.
//!
//! sled gives ordered keys, atomic batches and `flush()` to the OS (its flush does not reach
//! stable storage by itself: the writer follows it with a `syncfs`). It has no global order of
//! changes and no history, so revisions are assigned by one writer thread (`writer`), which
//! also groups concurrent writes into one flush, and recent events are kept in `history`.
//! Stored values are the revision (8 bytes, big endian) followed by the caller's bytes.
//!
//! sled's own periodic flusher is off: the writer flushes every batch, so sled writes only
//! when the writer (or a read completing a node split the writer began) asks it to, and the
//! writer keeps it from ever meeting a full disk (`space`): a write that finds no room is
//! refused (507), the store's space reserve (`reserve`) is released for deletions, and writes
//! resume by themselves as deletions or the file system make room.
//!
//! A failed flush (an I/O error, or a disk another program filled between two batches) puts
//! the store in a fault: writes fail at once with the cause, reads go on from the last durable
//! state, and the writer reopens the store from disk as soon as it can write again
//! (`writer::Writer::recover`). A store that cannot open for want of space releases the
//! reserve to open, or starts closed and opens once there is room.

mod reserve;
mod restore;
mod space;
mod writer;

pub use restore::restore;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::history::History;
pub use super::history::HistoryLimits;
use writer::{Command, Op, Outcome};

use super::{Error, KeyValue, ListOptions, ListResult, Result, Revision, Store, Update, Versioned, Watch};

/// Key of the last assigned revision. Object keys start with `/`, so it never appears in lists.
const REVISION_KEY: &[u8] = b"\0revision";

/// Present while a restore writes the store (`restore`): a store holding it is incomplete.
const RESTORING_KEY: &[u8] = b"\0restoring";

/// Options of the sled backend.
#[derive(Debug, Clone)]
pub struct SledOptions {
    /// sled's page cache, in bytes.
    pub cache_capacity: u64,
    pub history: HistoryLimits,
}

impl Default for SledOptions {
    fn default() -> Self {
        SledOptions { cache_capacity: 256 << 20, history: HistoryLimits::default() }
    }
}

/// The sled-backed store. Cheap to clone.
#[derive(Clone)]
pub struct SledStore {
    shared: Arc<Shared>,
    /// The store's directory, for its size on disk.
    dir: Arc<Path>,
}

/// State shared by readers and the writer thread.
struct Shared {
    /// The open tree; empty while the writer reopens the store after a fault (sled allows
    /// one open handle per directory, so every reader's handle must be gone first). Readers
    /// hold the read lock for as long as they use the tree.
    tree: RwLock<Option<sled::Tree>>,
    /// Why writes fail right now; `None` when healthy.
    fault: Mutex<Option<Error>>,
    history: Mutex<History>,
    /// Held for writing while a batch is applied, for reading while a list scans: a scan sees
    /// whole batches only, and the history has every event of what it sees.
    apply_gate: RwLock<()>,
    commands: Mutex<Option<std::sync::mpsc::Sender<Command>>>,
    /// The writer thread, joined on close.
    writer: Mutex<Option<writer::Running>>,
    /// File-system syncs completed by the writer; every acknowledged write was preceded by one.
    syncs: std::sync::atomic::AtomicU64,
    /// The first I/O error a read met inside sled (reads may write: they complete node
    /// splits), for the writer to reopen the store before it flushes again.
    read_failure: Mutex<Option<Error>>,
    /// Whether `read_failure` holds one, read without the lock on every batch.
    read_failed: std::sync::atomic::AtomicBool,
}

impl Shared {
    fn history(&self) -> MutexGuard<'_, History> {
        // A poisoned lock means a thread panicked while holding it; the data is still a
        // consistent window (every mutation is a single push/pop), so keep serving.
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self, key: &[u8]) -> Result<Option<Versioned>> {
        let slot = self.tree();
        let raw = self.tree_or_fault(&slot)?.get(key).map_err(|e| self.read_error(e))?;
        raw.map(decode).transpose()
    }

    /// A sled error met by a read, as the contract names it; an I/O error is kept for the
    /// writer (`take_read_failure`).
    fn read_error(&self, e: sled::Error) -> Error {
        let io = matches!(e, sled::Error::Io(_));
        let error = storage_error(e);
        if io {
            let mut slot = self.read_failure.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert_with(|| error.clone());
            self.read_failed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        error
    }

    /// The I/O error a read met since the last call, if any.
    fn take_read_failure(&self) -> Option<Error> {
        if !self.read_failed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        self.read_failure.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn tree(&self) -> RwLockReadGuard<'_, Option<sled::Tree>> {
        self.tree.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The tree in `slot`, or the fault that closed it.
    fn tree_or_fault<'a>(&self, slot: &'a Option<sled::Tree>) -> Result<&'a sled::Tree> {
        slot.as_ref().ok_or_else(|| self.fault().err().unwrap_or(Error::Backend("the store is reopening".into())))
    }

    fn fault(&self) -> Result<()> {
        match &*self.fault.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn set_fault(&self, fault: Option<Error>) {
        *self.fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
    }
}

/// A sled error as the storage contract names it: a full file system (or quota) is `NoSpace`.
fn storage_error(e: sled::Error) -> Error {
    match &e {
        // sled wraps the OS error in one of its own text: name the condition plainly.
        sled::Error::Io(io) if is_no_space(io) => no_space(),
        _ => Error::Backend(e.to_string()),
    }
}

fn no_space() -> Error {
    Error::NoSpace(std::io::Error::from_raw_os_error(rustix::io::Errno::NOSPC.raw_os_error()).to_string())
}

fn is_no_space(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull
        || e.kind() == std::io::ErrorKind::QuotaExceeded
        || matches!(e.raw_os_error(), Some(code) if code == rustix::io::Errno::NOSPC.raw_os_error() || code == rustix::io::Errno::DQUOT.raw_os_error())
}

fn encode(revision: Revision, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + value.len());
    out.extend_from_slice(&revision.to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// A stored value as sled holds it: its revision, then its bytes. The bytes are not copied:
/// they stay the ones sled's cache holds, shared by every reader of them (watches' initial
/// states, lists in flight) for as long as one holds them.
fn decode(raw: sled::IVec) -> Result<Versioned> {
    let (rev, _) = raw.split_at_checked(8).ok_or_else(|| Error::Backend("stored value is truncated".into()))?;
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(rev);
    Ok(Versioned { revision: u64::from_be_bytes(bytes), value: Bytes::from_owner(raw).slice(8..) })
}

impl SledStore {
    /// Opens (or creates) a store in `dir`.
    pub fn open(dir: &Path, options: SledOptions) -> Result<SledStore> {
        // Made here rather than by sled, so that its free space can be read before it opens.
        std::fs::create_dir_all(dir).map_err(|e| Error::Backend(format!("creating {}: {e}", dir.display())))?;
        let reserve = reserve::Reserve::new(dir);
        // sled writes as it opens; on a full disk it can leave a file it cannot read back, so
        // it is opened only with room: the reserve's, if need be.
        let mut full = false;
        if !space::has_room(dir, 0) && reserve.release() {
            full = true;
            tracing::error!(
                store = %dir.display(),
                reserve_bytes = reserve::BYTES,
                "the store's disk is full: released the space reserve to open the store; only deletions are accepted until space is freed"
            );
        }
        let opened = if space::has_room(dir, 0) { Opened::open(dir, options.cache_capacity) } else { Err(no_space()) };
        full |= matches!(opened, Err(Error::NoSpace(_)));
        let (opened, fault) = match opened {
            Ok(opened) => (Some(opened), None),
            // Started all the same: the store stays closed (reads and writes answer that the
            // disk is full) and the writer opens it once there is room.
            Err(Error::NoSpace(cause)) => {
                tracing::error!(
                    store = %dir.display(),
                    "the store's disk is full and the store cannot open; it opens by itself once space is freed"
                );
                (None, Some(Error::NoSpace(cause)))
            }
            Err(e) => return Err(e),
        };
        if opened.is_some()
            && !full
            && space::has_room(dir, space::KEPT_FOR_DELETIONS + reserve::BYTES)
            && let Err(e) = reserve.allocate()
        {
            tracing::warn!(store = %dir.display(), error = %e, "no room for the store's space reserve; a full disk would also stop deletions");
        }
        let (db, tree, revision) = match opened {
            Some(Opened { db, tree, revision }) => (Some(db), Some(tree), revision),
            None => (None, None, 0),
        };
        // Any descriptor on the store's file system serves syncfs; the directory is one.
        let sync_handle = std::fs::File::open(dir)
            .map_err(|e| Error::Backend(format!("opening {} for syncing: {e}", dir.display())))?;
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = Arc::new(Shared {
            tree: RwLock::new(tree),
            fault: Mutex::new(fault.clone()),
            history: Mutex::new(History::new(revision, options.history)),
            apply_gate: RwLock::new(()),
            commands: Mutex::new(Some(tx)),
            writer: Mutex::new(None),
            syncs: std::sync::atomic::AtomicU64::new(0),
            read_failure: Mutex::new(None),
            read_failed: std::sync::atomic::AtomicBool::new(false),
        });
        let place = writer::Place { dir: dir.to_path_buf(), cache_capacity: options.cache_capacity, sync_handle };
        let start = writer::Start { db, revision, fault, full };
        let thread = writer::spawn(start, place, shared.clone(), rx)
            .map_err(|e| Error::Backend(format!("starting writer: {e}")))?;
        *shared.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
        Ok(SledStore { shared, dir: dir.into() })
    }

    /// Keeps the current revision readable (lists at it) until the pin is dropped, while
    /// writes go on (up to eight times the history window's limits): what a backup reads at.
    pub fn pin(&self) -> Pinned {
        let revision = self.shared.history().pin();
        Pinned { shared: self.shared.clone(), revision }
    }

    /// How many times the writer has synced the store's file system to stable storage. A
    /// write is acknowledged only after a sync that began after it was applied.
    pub fn durable_syncs(&self) -> u64 {
        self.shared.syncs.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Stops accepting writes; waits until the pending ones finished, the last batch is on
    /// disk and sled closed the database, or `writer::CLOSE_LIMIT` if sled is stuck (every
    /// acknowledged write is on disk already). Reads fail afterwards.
    pub fn close(&self) {
        if let Ok(mut commands) = self.shared.commands.lock() {
            commands.take();
        }
        let running = self.shared.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(running) = running
            && !running.wait(writer::CLOSE_LIMIT)
        {
            tracing::error!(limit = ?writer::CLOSE_LIMIT, "the store did not close in time; every acknowledged write is on disk");
        }
    }

    /// Moves the store's revision to at least `at_least`, durably, without an event: every
    /// revision handed out afterwards is above it. Returns the store's revision.
    pub async fn advance_revision(&self, at_least: Revision) -> Result<Revision> {
        Ok(self.submit("", Op::Advance(at_least)).await?.revision)
    }

    async fn submit(&self, key: &str, op: Op) -> Result<Outcome> {
        let (reply, rx) = oneshot::channel();
        {
            let commands = self.shared.commands.lock().map_err(|_| Error::Closed)?;
            let sender = commands.as_ref().ok_or(Error::Closed)?;
            sender.send(Command::One { key: key.to_string(), op, reply }).map_err(|_| Error::Closed)?;
        }
        rx.await.map_err(|_| Error::Closed)?
    }

    fn list_blocking(shared: &Shared, prefix: &str, options: &ListOptions) -> Result<ListResult> {
        let slot = shared.tree();
        let tree = shared.tree_or_fault(&slot)?;
        let _gate = shared.apply_gate.read().unwrap_or_else(|e| e.into_inner());
        let (at, changed) = {
            let history = shared.history();
            let at = match options.revision {
                None => history.durable(),
                Some(r) if r > history.durable() => {
                    return Err(Error::TooLarge { requested: r, current: history.durable() });
                }
                Some(r) => r,
            };
            history.check_retained(at)?;
            (at, history.changed_since(prefix, options.start_after.as_deref(), at))
        };
        let limit = options.limit.unwrap_or(usize::MAX);
        let start = match &options.start_after {
            Some(after) => {
                let mut k = after.as_bytes().to_vec();
                k.push(0);
                k
            }
            None => prefix.as_bytes().to_vec(),
        };
        let mut scan = tree
            .range(start..)
            .take_while(|r| r.as_ref().map_or(true, |(k, _)| k.starts_with(prefix.as_bytes())))
            .peekable();
        let mut changed = changed.into_iter().peekable();
        let mut items = Vec::new();
        let mut more = false;
        let mut remaining = 0u64;
        loop {
            let from_tree = match scan.peek() {
                Some(Ok((k, _))) => Some(String::from_utf8_lossy(k).into_owned()),
                Some(Err(e)) => return Err(shared.read_error(e.clone())),
                None => None,
            };
            let from_history = changed.peek().map(|(k, _)| k.clone());
            let (key, value) = match (from_tree, from_history) {
                (None, None) => break,
                (Some(t), Some(h)) if h <= t => {
                    if h == t {
                        scan.next();
                    }
                    let (k, v) = changed.next().ok_or_else(|| Error::Backend("history iterator".into()))?;
                    (k, v)
                }
                (Some(t), _) => {
                    let Some(Ok((_, raw))) = scan.next() else {
                        break;
                    };
                    let v = decode(raw)?;
                    // Applied after `at` yet absent from the history snapshot cannot happen
                    // under the gate; skip defensively rather than show a newer value.
                    (t, Some(v).filter(|v| v.revision <= at))
                }
                (None, Some(_)) => changed.next().ok_or_else(|| Error::Backend("history iterator".into()))?,
            };
            let Some(value) = value else { continue };
            if items.len() == limit {
                more = true;
                if !options.count_remaining {
                    break;
                }
                remaining += 1;
                continue;
            }
            items.push(KeyValue { key, revision: value.revision, value: value.value });
        }
        // A long scan of an old revision may have raced with trimming.
        shared.history().check_retained(at)?;
        let remaining = (more && options.count_remaining).then_some(remaining);
        Ok(ListResult { revision: at, items, more, remaining })
    }
}

/// A revision kept readable; see `SledStore::pin`.
pub struct Pinned {
    shared: Arc<Shared>,
    revision: Revision,
}

impl Pinned {
    pub fn revision(&self) -> Revision {
        self.revision
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        self.shared.history().unpin(self.revision);
    }
}

impl Store for SledStore {
    fn current_revision(&self) -> Revision {
        self.shared.history().durable()
    }

    async fn wait_for_revision(&self, revision: Revision, limit: std::time::Duration) -> bool {
        let durable = self.shared.history().durable_changes();
        History::wait_durable(durable, revision, limit).await
    }

    async fn get(&self, key: &str) -> Result<Option<Versioned>> {
        let at = self.current_revision();
        let current = self.shared.read(key.as_bytes())?;
        match &current {
            Some(v) if v.revision > at => Ok(self.shared.history().value_at(key, current, at)),
            _ => Ok(current),
        }
    }

    async fn list(&self, prefix: &str, options: ListOptions) -> Result<ListResult> {
        let shared = self.shared.clone();
        let prefix = prefix.to_string();
        tokio::task::spawn_blocking(move || SledStore::list_blocking(&shared, &prefix, &options))
            .await
            .map_err(|e| Error::Backend(format!("list task: {e}")))?
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        self.submit(key, Op::Create(value)).await.map(|o| o.revision)
    }

    async fn update(&self, key: &str, expected: Revision, value: Bytes) -> Result<Revision> {
        self.submit(key, Op::Update { expected, value }).await.map(|o| o.revision)
    }

    /// One command to the writer: the updates are decided in order and committed in one batch.
    async fn update_many(&self, updates: Vec<Update>) -> Vec<Result<Revision>> {
        let count = updates.len();
        let (reply, rx) = oneshot::channel();
        let sent = match self.shared.commands.lock() {
            Ok(commands) => {
                commands.as_ref().is_some_and(|sender| sender.send(Command::Updates { updates, reply }).is_ok())
            }
            Err(_) => false,
        };
        match (sent, rx.await) {
            (true, Ok(results)) => results,
            _ => (0..count).map(|_| Err(Error::Closed)).collect(),
        }
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, Bytes)> {
        let outcome = self.submit(key, Op::Delete { expected }).await?;
        Ok((outcome.revision, outcome.deleted.unwrap_or_default()))
    }

    async fn watch(&self, prefix: &str, from: Revision) -> Result<Watch> {
        let mut history = self.shared.history();
        history.subscribe(prefix, from)
    }

    fn health(&self) -> Result<()> {
        self.shared.fault()
    }

    async fn count(&self, prefix: &str) -> Result<u64> {
        let shared = self.shared.clone();
        let prefix = prefix.to_string();
        tokio::task::spawn_blocking(move || {
            let slot = shared.tree();
            let tree = shared.tree_or_fault(&slot)?;
            let mut count = 0;
            for key in tree.scan_prefix(prefix.as_bytes()).keys() {
                key.map_err(|e| shared.read_error(e))?;
                count += 1;
            }
            Ok(count)
        })
        .await
        .map_err(|e| Error::Backend(format!("count task: {e}")))?
    }

    fn size_on_disk(&self) -> Option<u64> {
        directory_size(&self.dir)
    }
}

/// The bytes allocated to the files under `dir` (sled keeps a data file, blobs and snapshots).
fn directory_size(dir: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        let metadata = entry.metadata().ok()?;
        total += if metadata.is_dir() {
            directory_size(&entry.path()).unwrap_or(0)
        } else {
            // Blocks of 512 bytes, as `du` counts what is physically allocated.
            metadata.blocks() * 512
        };
    }
    Some(total)
}

/// A store opened from disk: the database, its objects tree and the last revision written.
/// The file naming the process that has the store open.
const OWNER_FILE: &str = "crd-apiserver.pid";

struct Opened {
    db: sled::Db,
    tree: sled::Tree,
    revision: Revision,
}

impl Opened {
    /// Opens the store, refusing one an interrupted restore left incomplete.
    fn open(dir: &Path, cache_capacity: u64) -> Result<Opened> {
        let opened = Opened::open_for_restore(dir, cache_capacity)?;
        if opened.tree.contains_key(RESTORING_KEY).map_err(storage_error)? {
            return Err(Error::Backend(format!(
                "the store at {} is incomplete: a restore into it was interrupted (run `crd-apiserver restore` \
                 again with --replace)",
                dir.display()
            )));
        }
        Ok(opened)
    }

    /// Opens the store whatever it holds.
    fn open_for_restore(dir: &Path, cache_capacity: u64) -> Result<Opened> {
        // No periodic flusher: the writer flushes every batch itself, and sled must write only
        // when the writer has checked there is room (`space`).
        let config = sled::Config::new().path(dir).cache_capacity(cache_capacity).flush_every_ms(None);
        let db = config.open().map_err(|e| match e {
            // sled holds an exclusive lock on its files while open: another server has them.
            sled::Error::Io(io) if io.to_string().starts_with("could not acquire lock") => {
                let owner = std::fs::read_to_string(dir.join(OWNER_FILE)).ok();
                let pid = owner.as_deref().map(str::trim).filter(|p| !p.is_empty());
                Error::Backend(format!(
                    "the store at {} is in use by another crd-apiserver{}",
                    dir.display(),
                    pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
                ))
            }
            e => match storage_error(e) {
                Error::Backend(m) => Error::Backend(format!("opening {}: {m}", dir.display())),
                other => other,
            },
        })?;
        // Named for the next server that finds the store locked; not needed for correctness.
        if let Err(e) = std::fs::write(dir.join(OWNER_FILE), std::process::id().to_string()) {
            tracing::debug!(error = %e, "could not record the store's owner");
        }
        let tree = db.open_tree("objects").map_err(storage_error)?;
        let revision = match tree.get(REVISION_KEY).map_err(storage_error)? {
            Some(raw) => {
                let bytes: [u8; 8] =
                    raw.as_ref().try_into().map_err(|_| Error::Backend("corrupt revision key".into()))?;
                u64::from_be_bytes(bytes)
            }
            None => 0,
        };
        Ok(Opened { db, tree, revision })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> SledStore {
        SledStore::open(dir, SledOptions::default()).unwrap()
    }

    #[tokio::test]
    async fn conformance() {
        let dir = tempfile::tempdir().unwrap();
        crate::store::conformance::run_all(&open(dir.path())).await;
    }

    #[tokio::test]
    async fn reopening_keeps_objects_and_revisions() {
        let dir = tempfile::tempdir().unwrap();
        let (rev_a, rev_b) = {
            let store = open(dir.path());
            let a = store.create("/g/r/a", Bytes::from_static(b"{}")).await.unwrap();
            let b = store.create("/g/r/b", Bytes::from_static(b"{}")).await.unwrap();
            store.delete("/g/r/b", None).await.unwrap();
            store.close();
            (a, b)
        };
        // sled allows one open handle per directory; wait for the writer thread to let go.
        let store = loop {
            match SledStore::open(dir.path(), SledOptions::default()) {
                Ok(s) => break s,
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        };
        assert_eq!(store.get("/g/r/a").await.unwrap().unwrap().revision, rev_a);
        assert!(store.get("/g/r/b").await.unwrap().is_none());
        assert_eq!(store.current_revision(), rev_b + 1);
        let c = store.create("/g/r/c", Bytes::from_static(b"{}")).await.unwrap();
        assert_eq!(c, rev_b + 2);
    }

    #[tokio::test]
    async fn a_closed_store_leaves_nothing_of_sled_open_and_refuses_what_follows() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.create("/g/r/a", Bytes::from_static(b"{}")).await.unwrap();
        let handle = store.clone();
        store.close();
        // sled closed the database in `close`, not with the last handle: nothing of it is left
        // for the end of the process, and the store opens again at once.
        let reopened = open(dir.path());
        assert!(reopened.get("/g/r/a").await.unwrap().is_some());
        assert_eq!(handle.get("/g/r/a").await, Err(Error::Closed));
        assert_eq!(handle.create("/g/r/b", Bytes::from_static(b"{}")).await, Err(Error::Closed));
        assert_eq!(handle.health(), Err(Error::Closed));
    }

    #[tokio::test]
    async fn an_advanced_revision_is_durable_and_watches_go_on_across_it() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path());
            let a = store.create("/g/r/a", Bytes::from_static(b"{}")).await.unwrap();
            let mut watch = store.watch("/g/r/", a).await.unwrap();
            assert_eq!(store.advance_revision(1_000).await.unwrap(), 1_000);
            // Never backwards.
            assert_eq!(store.advance_revision(10).await.unwrap(), 1_000);
            assert_eq!(store.current_revision(), 1_000);
            let b = store.create("/g/r/b", Bytes::from_static(b"{}")).await.unwrap();
            assert_eq!(b, 1_001);
            let event = watch.next().await.unwrap();
            assert_eq!((event.key.as_str(), event.revision), ("/g/r/b", 1_001));
            store.close();
        }
        let store = loop {
            match SledStore::open(dir.path(), SledOptions::default()) {
                Ok(s) => break s,
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        };
        assert_eq!(store.current_revision(), 1_001);
    }

    #[tokio::test]
    async fn every_acknowledged_write_follows_a_file_system_sync() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let before = store.durable_syncs();
        // One at a time, each write is its own batch: its acknowledgement must come after a
        // sync of its own, whatever its size (the large one goes to a sled blob file).
        let large = Bytes::from(vec![b'x'; 300_000]);
        for (i, value) in [Bytes::from_static(b"{}"), large.clone(), Bytes::from_static(b"{}")].into_iter().enumerate()
        {
            store.create(&format!("/g/r/{i}"), value).await.unwrap();
            assert!(store.durable_syncs() > before + i as u64, "write {i} acknowledged before its sync");
        }
        store.update("/g/r/1", store.get("/g/r/1").await.unwrap().unwrap().revision, large).await.unwrap();
        store.delete("/g/r/0", None).await.unwrap();
        assert!(store.durable_syncs() >= before + 5);
        // Concurrent writes share syncs (group commit) but none is acknowledged without one.
        let writes = (0..64).map(|i| {
            let store = store.clone();
            async move { store.create(&format!("/g/c/{i}"), Bytes::from_static(b"{}")).await.unwrap() }
        });
        let at = store.durable_syncs();
        futures_util::future::join_all(writes).await;
        assert!(store.durable_syncs() > at);
        // A page of updates is one batch and one sync, acknowledged after it.
        let mut updates = Vec::new();
        for i in 0..64 {
            let key = format!("/g/c/{i}");
            let revision = store.get(&key).await.unwrap().unwrap().revision;
            updates.push(crate::store::Update { key, expected: revision, value: Bytes::from_static(b"[]") });
        }
        let at = store.durable_syncs();
        let results = store.update_many(updates).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        assert_eq!(store.durable_syncs(), at + 1);
    }
}
