//! Loading a backup into etcd under `--etcd-prefix`, and the record that keeps revisions
//! above the backup's afterwards.
//!
//! etcd's revision cannot be set through its API (only `etcdutl snapshot restore
//! --bump-revision` can, offline). So the store's revision is etcd's plus an offset kept in a
//! record beside the prefix (`META`, read by every replica when it opens the store): a restore
//! chooses it so that every revision the store hands out is above the backup's (and the
//! store's own before) by `bump_revision`. The record also says from which revision on the
//! restored data is whole: lists at an older revision are `Expired`, as are watches (the
//! replica's history starts later still), so clients holding older resourceVersions list
//! again, as after an etcd restore.
//!
//! A marker written first and removed with the record's update makes an interrupted restore
//! visible: servers refuse to open the store until a restore with `--replace` completes.
//!
//! A takeover moves the revisions of a running store the same way (`EtcdStore::advance_revision`):
//! the record then gives a new offset from its own etcd revision on and keeps the earlier ones
//! (`Mapping`), so every revision issued before keeps its number.

use etcd_client::{Client, DeleteOptions, GetOptions, Txn, TxnOp};
use serde::{Deserialize, Serialize};

use super::EtcdOptions;
use super::connect::{self, revision, storage_error};
use crate::store::backup::{Entry, Error, Header, OBJECT_PREFIX, RestoreOptions, Restored, STATE_PREFIX};
use crate::store::{self, Revision};

/// The record of the last restore, beside the prefix (outside every listed or watched key).
const META: &str = "\0restore";

/// Present while a restore writes.
const RESTORING: &str = "\0restoring";

/// Most operations per etcd transaction (etcd's `--max-txn-ops` defaults to 128).
const TXN_OPS: usize = 100;

/// Most value bytes per transaction, below etcd's 1.5 MiB request limit.
const TXN_BYTES: usize = 1 << 20;

/// What the last restore or revision advance left: how far the store's revisions are above
/// etcd's, and the first revision at which the restored data is whole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Meta {
    /// The offset of the newest etcd revisions: of every one after a restore's record; of those
    /// from the record's own revision on after an advance (`from_record`).
    pub revision_offset: Revision,
    pub restored_at: Revision,
    /// Written by `advance`: the offset starts at the record's own etcd revision (its
    /// `mod_revision`), and `earlier` holds the offsets of the revisions before it.
    #[serde(default)]
    pub from_record: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<Segment>,
}

/// The etcd revisions from `from` on (up to the next segment) are the store's minus `offset`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Segment {
    pub from: Revision,
    pub offset: Revision,
}

/// The store's revisions of etcd's, from the record as a replica last read it: piecewise, so an
/// advance moves the revisions issued after it and leaves every earlier one (a key's, a
/// client's) as it was. Revisions only grow along it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Mapping {
    /// Oldest first; the first starts at 0.
    segments: Vec<Segment>,
    pub restored_at: Revision,
    /// The record's `mod_revision` (0: none), which writes compare to learn of a newer one.
    pub record_revision: i64,
}

impl Mapping {
    /// The mapping of the record `meta` written at etcd revision `record_revision` (0: none).
    pub fn of(meta: &Meta, record_revision: i64) -> Mapping {
        let mut segments = vec![Segment::default()];
        if meta.from_record {
            segments.extend(meta.earlier.iter().copied());
            segments.push(Segment { from: revision(record_revision), offset: meta.revision_offset });
        } else {
            segments.push(Segment { from: 0, offset: meta.revision_offset });
        }
        // Ordered by `from`, a later one replacing an earlier one that starts at the same place.
        segments.sort_by_key(|s| s.from);
        segments.dedup_by(|later, earlier| {
            let same = later.from == earlier.from;
            if same {
                earlier.offset = later.offset;
            }
            same
        });
        Mapping { segments, restored_at: meta.restored_at, record_revision }
    }

    /// The store's revision of an etcd revision (0 stays 0: none).
    pub fn rev(&self, etcd: Revision) -> Revision {
        if etcd == 0 {
            return 0;
        }
        let offset = self.segments.iter().rev().find(|s| s.from <= etcd).map_or(0, |s| s.offset);
        etcd.saturating_add(offset)
    }

    /// The etcd revision whose state a store revision names: its own, or for one between two
    /// segments (never issued) the last before the later one; 0 for one below them all (before
    /// a restore).
    pub fn etcd_rev(&self, store: Revision) -> Revision {
        let mut next_from = None;
        for segment in self.segments.iter().rev() {
            if store >= segment.from.saturating_add(segment.offset) {
                let etcd = store - segment.offset;
                return next_from.map_or(etcd, |next: Revision| etcd.min(next.saturating_sub(1)));
            }
            next_from = Some(segment.from);
        }
        0
    }

    /// The record an advance writes: the current offset kept for every revision so far, a
    /// new one (never smaller) from the record's revision on, so that the first revision
    /// issued after it, at or after `etcd_now + 1`, is above `at_least`.
    pub fn advanced(&self, etcd_now: Revision, at_least: Revision) -> Meta {
        let current = self.segments.last().copied().unwrap_or_default();
        let offset = current.offset.max(at_least.saturating_sub(etcd_now));
        let earlier = self.segments.iter().copied().filter(|s| s.from > 0 || s.offset > 0).collect();
        Meta { revision_offset: offset, restored_at: self.restored_at, from_record: true, earlier }
    }
}

/// The restore record under `prefix` (none: no offset) and its `mod_revision`, refusing a store
/// whose restore was interrupted.
pub(super) async fn read_meta(client: &Client, prefix: &str) -> store::Result<(Meta, i64)> {
    let mut kv = client.kv_client();
    // Both keys start with `{prefix}\0restor`.
    let options = GetOptions::new().with_prefix();
    let response = kv.get(format!("{prefix}\0restor"), Some(options)).await.map_err(storage_error)?;
    let mut meta = (Meta::default(), 0);
    for kv in response.kvs() {
        if kv.key() == format!("{prefix}{RESTORING}").as_bytes() {
            return Err(store::Error::Backend(format!(
                "the store under --etcd-prefix={prefix} is incomplete: a restore into it was interrupted (run \
                 `crd-apiserver restore` again with --replace)"
            )));
        }
        if kv.key() == format!("{prefix}{META}").as_bytes() {
            meta = (parse_meta(prefix, kv.value())?, kv.mod_revision());
        }
    }
    Ok(meta)
}

/// The record's text.
pub(super) fn parse_meta(prefix: &str, value: &[u8]) -> store::Result<Meta> {
    serde_json::from_slice(value)
        .map_err(|e| store::Error::Backend(format!("the restore record under {prefix} is unreadable: {e}")))
}

/// The record's key after the prefix.
pub(super) const META_KEY: &str = META;

/// Keys held under the two ranges a backup covers, and etcd's current revision.
async fn held(client: &Client, prefix: &str) -> store::Result<(i64, Revision)> {
    let mut count = 0;
    let mut now = 0;
    for part in [OBJECT_PREFIX, STATE_PREFIX] {
        let start = format!("{prefix}{part}");
        let options = GetOptions::new().with_prefix().with_count_only();
        let response = client.kv_client().get(start, Some(options)).await.map_err(storage_error)?;
        count += response.count();
        now = response.header().map_or(0, |h| revision(h.revision()));
    }
    Ok((count, now))
}

/// Loads `header`'s state records and `objects` into etcd under `options.prefix`.
pub async fn restore(
    options: &EtcdOptions,
    header: &Header,
    objects: impl Iterator<Item = Result<Entry, Error>>,
    restore: RestoreOptions,
) -> Result<Restored, Error> {
    let client = connect::client(options).await?;
    let prefix = options.prefix.trim_end_matches('/').to_string();
    let mut kv = client.kv_client();
    // Refuses an interrupted restore's leftovers only with --replace.
    let meta = match read_meta(&client, &prefix).await {
        Ok((meta, _)) => meta,
        Err(_) if restore.replace => {
            let response = kv.get(format!("{prefix}{META}"), None).await.map_err(storage_error)?;
            response.kvs().first().and_then(|kv| serde_json::from_slice(kv.value()).ok()).unwrap_or_default()
        }
        Err(e) => return Err(e.into()),
    };
    let (count, _) = held(&client, &prefix).await?;
    if count > 0 && !restore.replace {
        return Err(Error::Refused(format!(
            "etcd holds {count} keys under --etcd-prefix={prefix}: restore into an empty prefix, or add --replace \
             to delete them first (stop every server on it before)"
        )));
    }
    kv.put(format!("{prefix}{RESTORING}"), Vec::new(), None).await.map_err(storage_error)?;
    if count > 0 {
        for part in [OBJECT_PREFIX, STATE_PREFIX] {
            let options = DeleteOptions::new().with_prefix();
            kv.delete(format!("{prefix}{part}"), Some(options)).await.map_err(storage_error)?;
        }
    }
    let (_, before) = held(&client, &prefix).await?;
    let own = if before > 0 { before + meta.revision_offset } else { 0 };
    let mut newest = header.revision.max(own);
    let mut restored = Restored { objects: 0, state: 0, revision: 0 };
    let mut last = before;
    // State records one by one in revision order: their order is kept (the first holder of a
    // name is the oldest record).
    let mut state = header.state.clone();
    state.sort_by_key(|e| e.revision);
    for entry in &state {
        newest = newest.max(entry.revision);
        let response = kv.put(format!("{prefix}{}", entry.key), entry.bytes()?.to_vec(), None).await;
        last = response.map_err(storage_error)?.header().map_or(last, |h| revision(h.revision()));
        restored.state += 1;
    }
    let mut ops = Vec::new();
    let mut bytes = 0;
    for entry in objects {
        let entry = entry?;
        newest = newest.max(entry.revision);
        let value = entry.bytes()?;
        if !ops.is_empty() && (ops.len() == TXN_OPS || bytes + value.len() > TXN_BYTES) {
            last = commit(&client, std::mem::take(&mut ops)).await?.max(last);
            bytes = 0;
        }
        bytes += value.len();
        ops.push(TxnOp::put(format!("{prefix}{}", entry.key), value.to_vec(), None));
        restored.objects += 1;
    }
    if !ops.is_empty() {
        last = commit(&client, ops).await?.max(last);
    }
    // Every etcd revision after `before` maps above `newest + bump`.
    let offset = meta.revision_offset.max(newest.saturating_add(restore.bump_revision).saturating_sub(before));
    // The data restored is all there is: one offset for every revision, earlier ones dropped.
    let record = Meta { revision_offset: offset, restored_at: last + offset, from_record: false, earlier: Vec::new() };
    let body = serde_json::to_vec(&record).map_err(|e| Error::Io(e.to_string()))?;
    let done = Txn::new().and_then([
        TxnOp::put(format!("{prefix}{META}"), body, None),
        TxnOp::delete(format!("{prefix}{RESTORING}"), None),
    ]);
    let response = kv.txn(done).await.map_err(storage_error)?;
    restored.revision = response.header().map_or(last, |h| revision(h.revision())) + offset;
    Ok(restored)
}

/// One transaction of puts; its revision.
async fn commit(client: &Client, ops: Vec<TxnOp>) -> Result<Revision, Error> {
    let response = client.kv_client().txn(Txn::new().and_then(ops)).await.map_err(storage_error)?;
    Ok(response.header().map_or(0, |h| revision(h.revision())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_keep_earlier_revisions_and_move_later_ones() {
        // A restore: every revision 100 above etcd's.
        let restored = Mapping::of(&Meta { revision_offset: 100, restored_at: 150, ..Meta::default() }, 40);
        assert_eq!((restored.rev(0), restored.rev(1), restored.rev(60)), (0, 101, 160));
        assert_eq!((restored.etcd_rev(160), restored.etcd_rev(99)), (60, 0), "below the restore: none");
        // An advance at etcd revision 70 (written by whoever saw etcd at 69) to above 10,000.
        let meta = restored.advanced(69, 10_000);
        assert_eq!((meta.revision_offset, meta.restored_at), (10_000 - 69, 150));
        let advanced = Mapping::of(&meta, 70);
        assert_eq!(advanced.rev(69), 169, "revisions before the advance keep their numbers");
        assert!(advanced.rev(70) > 10_000 && advanced.rev(71) == advanced.rev(70) + 1);
        for etcd in [1, 40, 69, 70, 500] {
            assert_eq!(advanced.etcd_rev(advanced.rev(etcd)), etcd, "{etcd}");
        }
        // A revision between the two (never issued) names the state before the advance.
        assert_eq!(advanced.etcd_rev(5_000), 69);
        // A second advance keeps both earlier offsets; one to a revision already passed keeps
        // the offset (revisions never go back).
        let twice = Mapping::of(&advanced.advanced(80, 50_000), 81);
        assert_eq!((twice.rev(69), twice.rev(75)), (169, advanced.rev(75)));
        assert!(twice.rev(81) > 50_000);
        let again = Mapping::of(&twice.advanced(90, 5), 91);
        assert_eq!(again.rev(91), twice.rev(91));
        // The record as written and read back.
        let text = serde_json::to_vec(&twice.advanced(95, 60_000)).unwrap();
        let back: Meta = serde_json::from_slice(&text).unwrap();
        assert_eq!(Mapping::of(&back, 96).rev(75), advanced.rev(75));
    }
}
