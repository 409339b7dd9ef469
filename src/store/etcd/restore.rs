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

/// What the last restore left: how far the store's revisions are above etcd's, and the first
/// revision at which the restored data is whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Meta {
    pub revision_offset: Revision,
    pub restored_at: Revision,
}

/// The restore record under `prefix` (none: no offset), refusing a store whose restore was
/// interrupted.
pub(super) async fn read_meta(client: &Client, prefix: &str) -> store::Result<Meta> {
    let mut kv = client.kv_client();
    // Both keys start with `{prefix}\0restor`.
    let options = GetOptions::new().with_prefix();
    let response = kv.get(format!("{prefix}\0restor"), Some(options)).await.map_err(storage_error)?;
    let mut meta = Meta::default();
    for kv in response.kvs() {
        if kv.key() == format!("{prefix}{RESTORING}").as_bytes() {
            return Err(store::Error::Backend(format!(
                "the store under --etcd-prefix={prefix} is incomplete: a restore into it was interrupted (run \
                 `crd-apiserver restore` again with --replace)"
            )));
        }
        if kv.key() == format!("{prefix}{META}").as_bytes() {
            meta = serde_json::from_slice(kv.value())
                .map_err(|e| store::Error::Backend(format!("the restore record under {prefix} is unreadable: {e}")))?;
        }
    }
    Ok(meta)
}

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
        Ok(meta) => meta,
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
    let record = Meta { revision_offset: offset, restored_at: last + offset };
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
