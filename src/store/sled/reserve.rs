//! The store's space reserve: a file of a few MiB allocated in the store's directory while the
//! file system has room, and deleted the moment the disk fills, so that sled can reopen and
//! deletions can still commit and make room. It is allocated again once the file system has
//! room for it and for sled's next segment.
//!
//! Owns the reserve file only; when to release or restore it is the writer's decision.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The reserve's name in the store's directory.
pub const FILE: &str = "crd-apiserver.reserve";

/// The reserve's size: room for sled to reopen (a new 512 KiB segment) and for many
/// deletions' tombstones.
pub const BYTES: u64 = 8 << 20;

pub struct Reserve {
    path: PathBuf,
}

impl Reserve {
    pub fn new(dir: &Path) -> Reserve {
        Reserve { path: dir.join(FILE) }
    }

    /// Whether the reserve is allocated.
    pub fn held(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| m.len() >= BYTES)
    }

    /// Allocates the reserve if it is not held. It is written under another name and renamed,
    /// so that a reserve cut short by a full disk never counts as held.
    pub fn allocate(&self) -> std::io::Result<()> {
        if self.held() {
            return Ok(());
        }
        let partial = self.path.with_extension("partial");
        let result = fill(&partial).and_then(|()| std::fs::rename(&partial, &self.path));
        if result.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        result
    }

    /// Deletes the reserve; returns whether it freed anything.
    pub fn release(&self) -> bool {
        let _ = std::fs::remove_file(self.path.with_extension("partial"));
        std::fs::remove_file(&self.path).is_ok()
    }
}

/// Allocates `BYTES` at `path`: `fallocate` where the file system has it, zeros otherwise.
fn fill(path: &Path) -> std::io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    match rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, BYTES) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => {
            let block = vec![0u8; 1 << 20];
            for _ in 0..BYTES / (1 << 20) {
                file.write_all(&block)?;
            }
        }
        Err(e) => return Err(e.into()),
    }
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_allocated_once_and_released() {
        let dir = tempfile::tempdir().unwrap();
        let reserve = Reserve::new(dir.path());
        assert!(!reserve.held());
        reserve.allocate().unwrap();
        assert!(reserve.held());
        assert_eq!(std::fs::metadata(dir.path().join(FILE)).unwrap().len(), BYTES);
        reserve.allocate().unwrap();
        assert!(reserve.release());
        assert!(!reserve.held());
        assert!(!reserve.release(), "nothing left to free");
    }
}
