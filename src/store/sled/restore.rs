//! Loading a backup into a sled store (no server may have it open: sled's lock refuses).
//!
//! Keys keep the revisions the backup gives them, and the store's revision starts above both
//! the backup's and the store's own by `bump_revision`, so no resourceVersion handed out before
//! is handed out again; a server opening the store starts its history there, so a watch or list
//! from an older resourceVersion is `Expired` (410) and clients list again, as after an etcd
//! restore. A marker key written first and removed by the last batch makes a store whose
//! restore was interrupted refuse to open.

use std::path::Path;

use super::{Opened, RESTORING_KEY, REVISION_KEY, encode, storage_error};
use crate::store::backup::{Entry, Error, Header, RestoreOptions, Restored};

/// Keys written per sled batch.
const BATCH: usize = 1000;

/// Loads `header`'s state records and `objects` into the sled store in `dir`.
pub fn restore(
    dir: &Path,
    header: &Header,
    objects: impl Iterator<Item = Result<Entry, Error>>,
    options: RestoreOptions,
) -> Result<Restored, Error> {
    let Opened { db, tree, revision: own } = Opened::open_for_restore(dir, 64 << 20)?;
    let held = tree.iter().keys().filter(|k| k.as_ref().map_or(true, |k| k.as_ref() != REVISION_KEY)).count();
    if held > 0 && !options.replace {
        return Err(Error::Refused(format!(
            "the store at {} is not empty ({held} keys): restore into an empty store, or add --replace to \
             delete what it holds first",
            dir.display()
        )));
    }
    let sync = |db: &sled::Db| -> Result<(), Error> {
        db.flush().map_err(storage_error)?;
        let handle = std::fs::File::open(dir).map_err(|e| Error::Io(format!("{}: {e}", dir.display())))?;
        rustix::fs::syncfs(&handle).map_err(|e| Error::Io(format!("syncfs {}: {e}", dir.display())))
    };
    // From here until the last batch, the store refuses to open.
    tree.insert(RESTORING_KEY, &[]).map_err(storage_error)?;
    sync(&db)?;
    if held > 0 {
        let doomed: Vec<sled::IVec> = tree
            .iter()
            .keys()
            .filter_map(|k| k.ok())
            .filter(|k| k.as_ref() != REVISION_KEY && k.as_ref() != RESTORING_KEY)
            .collect();
        for chunk in doomed.chunks(BATCH) {
            let mut batch = sled::Batch::default();
            chunk.iter().for_each(|k| batch.remove(k));
            tree.apply_batch(batch).map_err(storage_error)?;
        }
    }
    let mut restored = Restored { objects: 0, state: 0, revision: 0 };
    let mut batch = sled::Batch::default();
    let mut in_batch = 0;
    let mut newest = header.revision.max(own);
    let state = header.state.iter().cloned().map(Ok);
    for (is_object, entry) in state.map(|e| (false, e)).chain(objects.map(|e| (true, e))) {
        let entry = entry?;
        newest = newest.max(entry.revision);
        batch.insert(entry.key.as_bytes(), encode(entry.revision, &entry.bytes()?));
        if is_object {
            restored.objects += 1;
        } else {
            restored.state += 1;
        }
        in_batch += 1;
        if in_batch == BATCH {
            tree.apply_batch(std::mem::take(&mut batch)).map_err(storage_error)?;
            in_batch = 0;
        }
    }
    restored.revision = newest.saturating_add(options.bump_revision);
    batch.insert(REVISION_KEY, &restored.revision.to_be_bytes());
    batch.remove(RESTORING_KEY);
    tree.apply_batch(batch).map_err(storage_error)?;
    sync(&db)?;
    Ok(restored)
}
