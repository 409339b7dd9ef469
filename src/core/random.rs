//! Random identifiers (object `uid`s, `generateName` suffixes): bytes from the operating
//! system's generator, drawn a block at a time per thread, so that a create does not pay a
//! system call of its own for its `uid` (it did: one `getrandom` per create).

use std::cell::RefCell;

/// Bytes drawn from the operating system at once: 32 UUIDs' worth.
const BLOCK: usize = 512;

struct Pool {
    bytes: [u8; BLOCK],
    /// How many of `bytes` were handed out; `BLOCK` when the pool must be refilled.
    used: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = const { RefCell::new(Pool { bytes: [0; BLOCK], used: BLOCK }) };
}

/// A random (version 4) UUID, as Kubernetes gives every object.
pub fn uuid_v4() -> uuid::Uuid {
    let mut bytes = [0u8; 16];
    if !fill(&mut bytes) {
        // The system's generator failed to fill a block (it does not on Linux): ask uuid,
        // which reads it directly.
        return uuid::Uuid::new_v4();
    }
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// Fills `out` (at most `BLOCK` bytes) from this thread's pool; false when it could not be
/// refilled (or `out` is longer than a block).
fn fill(out: &mut [u8]) -> bool {
    POOL.with_borrow_mut(|pool| {
        if pool.used + out.len() > BLOCK {
            if getrandom::fill(&mut pool.bytes).is_err() {
                return false;
            }
            pool.used = 0;
        }
        let Some(taken) = pool.bytes.get(pool.used..pool.used + out.len()) else {
            return false;
        };
        out.copy_from_slice(taken);
        pool.used += out.len();
        true
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn uuids_are_version_4_and_distinct_across_refills() {
        let uuids: HashSet<uuid::Uuid> = (0..200).map(|_| uuid_v4()).collect();
        assert_eq!(uuids.len(), 200);
        for uuid in &uuids {
            assert_eq!(uuid.get_version_num(), 4);
            assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122);
        }
    }
}
