//! The room the sled store has on its file system, and which writes the writer may hand sled
//! with it.
//!
//! sled must never meet a full disk: a write of a blob file (a value or tree node over 128 KiB)
//! that fails after sled claimed its slot in a log buffer leaves that buffer unwritten for
//! good, and every later flush, and closing the database, waits for it forever. So free space
//! is read before every batch and sled is given a batch only if it leaves `FLOOR` free. A
//! write other than a deletion that finds no room makes the store full: it and the others are
//! refused (507), the space reserve (`reserve`) is released, and deletions go on in its room.
//!
//! sled gives little of a deletion's room back to the file system at once (a node keeps its
//! place on disk until it is rewritten whole), so a full store does not wait for free space
//! to show: the bytes deleted while it is full are a credit that lets as many bytes be written
//! again, in the room the file system has, leaving `KEPT_FOR_DELETIONS` for deletions. Once
//! the file system has room for the reserve again, it is allocated and the store is no longer
//! full.
//!
//! Owns these decisions and the reserve's release and return; the batches are the writer's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::reserve::{self, Reserve};

/// Free space sled is always left: room for the tree nodes a batch rewrites besides its
/// values (up to 17 objects each), for splits that readers complete, and for a new segment.
pub(super) const FLOOR: u64 = 4 << 20;

/// Room writes other than deletions leave to deletions when the reserve is not held.
pub(super) const KEPT_FOR_DELETIONS: u64 = 2 << 20;

/// How often a store that wants its reserve back tries to allocate it.
const RESERVE_RETRY: Duration = Duration::from_secs(1);

/// What a write of `bytes` (key and value) may take on disk before the next batch: the value
/// in the log, and once more when its node is rewritten whole.
pub(super) fn cost(bytes: usize) -> u64 {
    2 * bytes as u64 + 1024
}

/// Free bytes on the file system of `dir`, or `None` when they cannot be read.
pub(super) fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let fs = rustix::fs::statvfs(dir)?;
    Ok(fs.f_bavail.saturating_mul(fs.f_frsize))
}

/// Whether the file system of `dir` has room for sled to open (or reopen) and `more`. When
/// free space cannot be read, it is assumed there.
pub(super) fn has_room(dir: &Path, more: u64) -> bool {
    match free_bytes(dir) {
        Ok(free) => free >= FLOOR + more,
        Err(e) => {
            tracing::warn!(error = %e, store = %dir.display(), "cannot read the store's free space");
            true
        }
    }
}

/// What one write asks of the disk.
#[derive(Debug, Clone, Copy)]
pub(super) struct Demand {
    /// The key and value bytes it writes (0 for a deletion).
    pub bytes: usize,
    pub deletion: bool,
}

/// Reads the free bytes of the store's file system.
type Probe = Box<dyn FnMut(&Path) -> std::io::Result<u64> + Send>;

/// The writer's account of its disk.
pub(super) struct Space {
    dir: PathBuf,
    probe: Probe,
    reserve: Reserve,
    /// Writes other than deletions wait for room (`credit`, or the reserve back).
    full: bool,
    /// Bytes deleted since the store became full, not yet written again.
    credit: u64,
    /// When the reserve was last tried, so that a disk without room is not written every batch.
    reserve_tried: Option<Instant>,
    /// Free space could not be read (said once, then writes go on as if there were room).
    unreadable: bool,
}

impl Space {
    /// The account of a store in `dir`; `full` when it opened without room (its reserve
    /// released).
    pub fn new(dir: &Path, full: bool) -> Space {
        Space::with_probe(dir, full, Box::new(free_bytes))
    }

    fn with_probe(dir: &Path, full: bool, probe: Probe) -> Space {
        Space {
            dir: dir.to_path_buf(),
            probe,
            reserve: Reserve::new(dir),
            full,
            credit: 0,
            reserve_tried: None,
            unreadable: false,
        }
    }

    pub fn is_full(&self) -> bool {
        self.full
    }

    fn free(&mut self) -> Option<u64> {
        match (self.probe)(&self.dir) {
            Ok(free) => Some(free),
            Err(e) => {
                if !self.unreadable {
                    self.unreadable = true;
                    tracing::warn!(error = %e, store = %self.dir.display(), "cannot read the store's free space; writes are not held back for it");
                }
                None
            }
        }
    }

    /// Decides, in order, which writes sled may be given now; `false` is refused as the disk
    /// being full.
    pub fn admit(&mut self, demands: impl IntoIterator<Item = Demand>) -> Vec<bool> {
        let Some(mut free) = self.free() else {
            return demands.into_iter().map(|_| true).collect();
        };
        if self.full || !self.reserve.held() {
            free = self.take_reserve_back(free);
        }
        // What the writes taken so far in this batch will take.
        let mut taken_cost = 0;
        let mut verdicts = Vec::new();
        for demand in demands {
            let cost = cost(demand.bytes);
            let mut taken = self.fits(demand, cost, free.saturating_sub(taken_cost));
            if !taken && !self.full {
                // The disk is full now: the reserve's room goes to deletions.
                self.become_full();
                free = self.free().unwrap_or(free);
                taken = self.fits(demand, cost, free.saturating_sub(taken_cost));
            }
            if taken {
                taken_cost += cost;
                if self.full && !demand.deletion {
                    self.credit = self.credit.saturating_sub(demand.bytes as u64);
                }
            }
            verdicts.push(taken);
        }
        verdicts
    }

    /// Whether `demand` fits in `free` as the store stands.
    fn fits(&self, demand: Demand, cost: u64, free: u64) -> bool {
        if demand.deletion {
            return free >= FLOOR + cost;
        }
        let kept = if self.reserve.held() { 0 } else { KEPT_FOR_DELETIONS };
        let room = free >= FLOOR + kept + cost;
        room && (!self.full || self.credit >= demand.bytes as u64)
    }

    fn become_full(&mut self) {
        self.full = true;
        self.credit = 0;
        if self.reserve.release() {
            tracing::error!(
                store = %self.dir.display(),
                reserve_bytes = reserve::BYTES,
                "the store's disk is full: released the space reserve; only deletions are accepted until space is freed"
            );
        } else {
            tracing::error!(store = %self.dir.display(), "the store's disk is full; only deletions are accepted until space is freed");
        }
    }

    /// Counts the bytes a committed batch deleted: while the store is full they may be
    /// written again.
    pub fn deleted(&mut self, bytes: u64) {
        if self.full {
            self.credit = self.credit.saturating_add(bytes);
        }
    }

    /// The disk was found full by sled itself (another program took the room between two
    /// batches): the store is full.
    pub fn found_full(&mut self) {
        if !self.full {
            self.become_full();
        }
    }

    /// Leaves the full state (or takes a missing reserve back) once the file system has room
    /// for the reserve again; returns the free space left.
    pub fn take_reserve_back(&mut self, free: u64) -> u64 {
        if free < FLOOR + KEPT_FOR_DELETIONS + reserve::BYTES
            || self.reserve_tried.is_some_and(|t| t.elapsed() < RESERVE_RETRY)
        {
            return free;
        }
        self.reserve_tried = Some(Instant::now());
        match self.reserve.allocate() {
            Ok(()) => {
                if self.full {
                    self.full = false;
                    self.credit = 0;
                    tracing::info!(
                        store = %self.dir.display(),
                        "the store's disk has room again: the space reserve is back and every write is accepted"
                    );
                }
                self.free().unwrap_or(free.saturating_sub(reserve::BYTES))
            }
            Err(e) => {
                tracing::warn!(error = %e, store = %self.dir.display(), "the store's space reserve could not be allocated yet");
                free
            }
        }
    }

    /// The periodic look at a full store (or one without its reserve) between writes.
    pub fn tick(&mut self) {
        if (self.full || !self.reserve.held())
            && let Some(free) = self.free()
        {
            self.take_reserve_back(free);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    const MIB: u64 = 1 << 20;

    fn write(bytes: usize) -> Demand {
        Demand { bytes, deletion: false }
    }

    fn deletion() -> Demand {
        Demand { bytes: 0, deletion: true }
    }

    /// A store in a temporary directory whose file system reports `free` bytes (the reserve's
    /// file is real: released and allocated on the machine's disk).
    fn account(full: bool) -> (tempfile::TempDir, Space, Arc<AtomicU64>) {
        let dir = tempfile::tempdir().unwrap();
        let free = Arc::new(AtomicU64::new(100 * MIB));
        let reading = free.clone();
        let space = Space::with_probe(dir.path(), full, Box::new(move |_| Ok(reading.load(Ordering::SeqCst))));
        (dir, space, free)
    }

    #[test]
    fn writes_stop_at_the_floor_and_the_reserve_goes_to_deletions() {
        let (dir, mut space, free) = account(false);
        assert_eq!(space.admit([write(100)]), [true]);
        assert!(Reserve::new(dir.path()).held(), "allocated while there is room");
        // Each write is reckoned at twice its bytes plus 1 KiB: two of 1 MiB fit above 4 MiB
        // of 9, the third does not.
        free.store(9 * MIB, Ordering::SeqCst);
        assert_eq!(space.admit([write(MIB as usize), write(MIB as usize), write(MIB as usize)]), [true, true, false]);
        assert!(space.is_full());
        assert!(!Reserve::new(dir.path()).held(), "released for deletions");
        // Full: deletions go on down to the floor, other writes wait.
        free.store(4 * MIB + 5_000, Ordering::SeqCst);
        assert_eq!(
            space.admit([write(10), deletion(), deletion(), deletion(), deletion(), deletion()]),
            [false, true, true, true, true, false]
        );
    }

    #[test]
    fn bytes_deleted_while_full_may_be_written_again_leaving_room_to_deletions() {
        let (_dir, mut space, free) = account(true);
        free.store(10 * MIB, Ordering::SeqCst);
        assert_eq!(space.admit([write(1_000)]), [false], "nothing deleted yet");
        space.deleted(3_000);
        assert_eq!(space.admit([write(1_000), write(1_500), write(1_000)]), [true, true, false]);
        assert!(space.is_full());
        // Credit without room: 2 MiB stay kept for deletions above the floor.
        space.deleted(MIB);
        free.store(6 * MIB, Ordering::SeqCst);
        assert_eq!(space.admit([write(1_000), deletion()]), [false, true]);
        free.store(6 * MIB + 5_000, Ordering::SeqCst);
        assert_eq!(space.admit([write(1_000)]), [true]);
        // Deletions counted before the store was full are no credit.
        let (_dir, mut space, free) = account(false);
        space.deleted(MIB);
        free.store(5 * MIB, Ordering::SeqCst);
        assert_eq!(space.admit([write(MIB as usize)]), [false]);
    }

    #[test]
    fn a_full_store_takes_every_write_again_once_the_reserve_fits() {
        let (dir, mut space, free) = account(true);
        free.store(4 * MIB + 2 * MIB + reserve::BYTES - 1, Ordering::SeqCst);
        space.tick();
        assert!(space.is_full(), "one byte short of the reserve and the room kept for deletions");
        assert!(!Reserve::new(dir.path()).held());
        free.store(4 * MIB + 2 * MIB + reserve::BYTES, Ordering::SeqCst);
        // A write finds the room at once, without waiting for the periodic look.
        assert_eq!(space.admit([write(10)]), [true]);
        assert!(!space.is_full());
        assert!(Reserve::new(dir.path()).held());
    }

    #[test]
    fn unreadable_free_space_holds_no_write_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut space = Space::with_probe(dir.path(), false, Box::new(|_| Err(std::io::Error::other("no statvfs"))));
        assert_eq!(space.admit([write(100), deletion()]), [true, true]);
        assert!(!space.is_full());
    }

    #[test]
    fn costs_count_a_node_rewrite_beside_the_value() {
        assert_eq!(cost(0), 1024);
        assert_eq!(cost(10_000), 21_024);
    }
}
