//! `EtcdStore`: the storage contract on etcd. Writes go to etcd as transactions comparing the
//! key's `mod_revision`, so a conflict is decided by etcd even between replicas; gets and lists
//! are answered by the replica's cache where Kubernetes' consistency rules allow it (`reads`)
//! and by etcd otherwise; watches are served from the replica's history window. One etcd
//! watch (`feed`) fills the window and the cache.
//!
//! A write is acknowledged once etcd committed it (etcd's own fsync and quorum), as
//! kube-apiserver acknowledges one: the replica's feed delivers it just after, and whatever
//! must see it waits for it there: a consistent read until the cache has reached etcd's
//! current revision (`reads`), a read or watch at its revision until the feed has
//! (`Store::wait_for_revision`, `Store::watch`).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{Client, Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp, TxnOpResponse};
use tokio::sync::{Notify, watch};

use super::EtcdOptions;
use super::cache::{Cache, Stats};
use super::connect::{self, etcd_revision, revision, storage_error};
use super::reads::{self, ReadCounts, Rounds};
use super::restore::{META_KEY, Mapping, Meta, parse_meta};
use crate::store::history::{History, HistoryLimits};
use crate::store::leadership::Leadership;
use crate::store::{Error, Freshness, KeyValue, ListOptions, ListResult, Result, Revision, Store, Versioned, Watch};

/// Most keys fetched by one etcd range when a list asks for all of them.
pub(super) const LIST_CHUNK: usize = 1000;

/// Largest etcd response accepted: a page of `LIST_CHUNK` values of etcd's largest size.
pub(super) const MAX_RESPONSE_BYTES: usize = 2 << 30;

/// Longest a watch from a revision the replica has not seen yet waits for it, as Kubernetes'
/// watch cache does before answering "Too large resource version".
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a wait for an etcd revision gives the feed before it writes a progress marker:
/// long enough for an event already on its way.
const FRESHNESS_GRACE: Duration = Duration::from_millis(5);

/// State shared by the store's handles and its background tasks.
pub(super) struct Shared {
    pub client: Client,
    /// Put before every key (no trailing slash: keys start with one).
    pub prefix: String,
    pub timeout: Duration,
    pub history: Mutex<History>,
    /// The revision every event of the history window has been seen up to.
    pub seen: watch::Sender<Revision>,
    /// Asks the feed for a progress marker now (`feed`).
    pub progress_wanted: Notify,
    /// Why etcd cannot be used right now; `None` while it answers.
    pub fault: Mutex<Option<String>>,
    /// etcd's database size, from its status; 0 until known.
    pub db_size: AtomicU64,
    /// The newest revision known to be compacted away.
    pub compacted: AtomicU64,
    pub tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Every object of the resources read so far, fed by the watch (`cache`, `reads`).
    pub cache: Cache,
    /// The shared reads of etcd's current revision that consistent reads wait for.
    pub rounds: Rounds,
    pub reads: ReadCounts,
    /// `--watch-cache`: false sends every read to etcd.
    pub watch_cache: bool,
    /// What the last restore or advance into this prefix left (`restore`): the store's
    /// revisions are etcd's plus its offsets, and reads below its `restored_at` are `Expired`.
    /// Read at start, replaced when the feed sees a newer record or a write finds one.
    pub mapping: arc_swap::ArcSwap<Mapping>,
}

impl Shared {
    pub fn history(&self) -> MutexGuard<'_, History> {
        // Every mutation of the window is a single push, pop or reset: still consistent.
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The store's revision of an etcd revision (0 stays 0: none).
    pub fn rev(&self, etcd: i64) -> Revision {
        self.mapping.load().rev(revision(etcd))
    }

    /// etcd's revision of a store revision; 0 (which matches no key's revision) for one
    /// from before the last restore.
    pub fn etcd_rev(&self, revision: Revision) -> i64 {
        etcd_revision(self.mapping.load().etcd_rev(revision))
    }

    /// Takes the record `meta` found at etcd revision `at` (its `mod_revision`), unless the
    /// one held is as new.
    pub fn learn(&self, meta: &Meta, at: i64) {
        let fresh = Mapping::of(meta, at);
        self.mapping.rcu(|held| if held.record_revision >= at { held.clone() } else { Arc::new(fresh.clone()) });
    }

    /// A KV client whose responses may be as large as a page of large objects.
    pub fn kv(&self) -> etcd_client::KvClient {
        self.client.kv_client().max_decoding_message_size(MAX_RESPONSE_BYTES)
    }

    pub fn full_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Our key of an etcd key under the prefix.
    pub fn strip(&self, full: &[u8]) -> Option<String> {
        let rest = full.strip_prefix(self.prefix.as_bytes())?;
        std::str::from_utf8(rest).ok().map(str::to_string)
    }

    /// One etcd call, bounded by the request timeout.
    pub async fn call<T>(&self, call: impl Future<Output = std::result::Result<T, etcd_client::Error>>) -> Result<T> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result.map_err(storage_error),
            Err(_) => Err(Error::Timeout(format!("etcd did not answer within {:?}", self.timeout))),
        }
    }

    pub fn set_fault(&self, fault: Option<String>) {
        *self.fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
    }

    /// Marks every event up to `revision` seen and wakes whoever waits for it.
    pub fn publish(&self, revision: Revision) {
        self.seen.send_if_modified(|seen| {
            let newer = revision > *seen;
            if newer {
                *seen = revision;
            }
            newer
        });
    }

    /// Waits (at most `limit`) until the feed has seen `revision`, any etcd revision (a list's,
    /// which may be past the prefix's last event): unless the feed gets there on its own within
    /// `FRESHNESS_GRACE`, it is asked for a progress marker, whose event comes after
    /// `revision`. Waiters meanwhile share one marker.
    pub async fn wait_until_fresh(&self, revision: Revision, limit: Duration) -> bool {
        if *self.seen.borrow() >= revision {
            return true;
        }
        let mut seen = self.seen.subscribe();
        if let Ok(Ok(_)) = tokio::time::timeout(FRESHNESS_GRACE.min(limit), seen.wait_for(|r| *r >= revision)).await {
            return true;
        }
        self.progress_wanted.notify_one();
        let rest = limit.saturating_sub(FRESHNESS_GRACE);
        matches!(tokio::time::timeout(rest, seen.wait_for(|r| *r >= revision)).await, Ok(Ok(_)))
    }
}

/// What the replica's cache holds, and how reads were answered since the store opened.
#[derive(Debug, Clone, Copy)]
pub struct CacheStats {
    pub cache: Stats,
    /// Gets and list pages answered from the cache.
    pub cached_reads: u64,
    /// Gets and list pages of cacheable keys read from etcd (cache not ready, or too slow).
    pub direct_reads: u64,
    /// Reads of etcd's current revision made for consistent reads.
    pub revision_reads: u64,
}

/// The etcd-backed store. Cheap to clone.
#[derive(Clone)]
pub struct EtcdStore {
    shared: Arc<Shared>,
    leadership: Leadership,
}

impl EtcdStore {
    /// Connects to etcd (retrying while it is unreachable, failing at once on bad
    /// credentials) and starts the replica's watch, health probe and compactor.
    pub async fn open(options: EtcdOptions) -> Result<EtcdStore> {
        let client = connect::client(&options).await?;
        let prefix = options.prefix.trim_end_matches('/').to_string();
        // Members that are down are taken out of the client's endpoints before the first read.
        let mut members = super::members::Members::of(&options).await;
        let contact = super::upkeep::first_contact(&client, &prefix, &options, &mut members).await?;
        let mapping = Mapping::of(&contact.meta, contact.meta_revision);
        let start = mapping.rev(revision(contact.revision));
        let (seen, _) = watch::channel(start);
        let shared = Arc::new(Shared {
            client,
            prefix,
            timeout: options.request_timeout,
            history: Mutex::new(History::new(start, HistoryLimits::default())),
            seen,
            progress_wanted: Notify::new(),
            fault: Mutex::new(None),
            db_size: AtomicU64::new(0),
            compacted: AtomicU64::new(0),
            tasks: Mutex::new(Vec::new()),
            cache: Cache::new(start),
            rounds: Rounds::new(),
            reads: ReadCounts::default(),
            watch_cache: options.watch_cache,
            mapping: arc_swap::ArcSwap::from_pointee(mapping),
        });
        let mut tasks = vec![super::feed::spawn(shared.clone()), super::upkeep::spawn_probe(shared.clone())];
        if !options.compaction_interval.is_zero() {
            tasks.push(super::upkeep::spawn_compactor(shared.clone(), options.compaction_interval));
        }
        let leadership = match options.election {
            Some(timing) => {
                // Its own client: a campaign waits for leadership longer than any request.
                let campaigner = connect::waiting_client(&options).await?;
                if let Some(members) = members.as_mut() {
                    members.route_too(campaigner.clone()).await;
                }
                let (leadership, task) = super::election::spawn(campaigner, &shared.prefix, timing);
                tasks.push(task);
                leadership
            }
            None => Leadership::sole(),
        };
        tasks.extend(members.map(|members| members.spawn(shared.clone())));
        *shared.tasks.lock().unwrap_or_else(|e| e.into_inner()) = tasks;
        Ok(EtcdStore { shared, leadership })
    }

    /// Stops the background tasks. Every acknowledged write is already in etcd.
    pub fn close(&self) {
        for task in self.shared.tasks.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            task.abort();
        }
        self.shared.cache.set_live(false);
        // Client watches end, as they do when a sled store closes.
        let mut history = self.shared.history();
        let at = history.durable();
        history.reset(at);
    }

    /// etcd's current revision, read after this call began: every write acknowledged before
    /// it, by any replica, is at or below it (a backup's revision).
    pub async fn committed_revision(&self) -> Result<Revision> {
        reads::current_revision(&self.shared).await
    }

    /// What the replica's cache holds and how reads were answered.
    pub fn cache_stats(&self) -> CacheStats {
        let reads = &self.shared.reads;
        CacheStats {
            cache: self.shared.cache.stats(),
            cached_reads: reads.cached.load(Ordering::Relaxed),
            direct_reads: reads.direct.load(Ordering::Relaxed),
            revision_reads: reads.revision_reads.load(Ordering::Relaxed),
        }
    }

    /// A range at etcd's current revision, read in one transaction with the revision record,
    /// which is taken in first when it is newer than the replica's: the range's revisions are
    /// mapped with every offset that applies to them, even before the feed has seen an advance.
    /// Returns the range and etcd's revision.
    async fn range_now(&self, key: Vec<u8>, options: Option<GetOptions>) -> Result<(etcd_client::GetResponse, i64)> {
        let record_key = self.shared.full_key(META_KEY);
        let txn = Txn::new().and_then([TxnOp::get(key, options), TxnOp::get(record_key.clone(), None)]);
        let response = self.txn(txn).await?;
        let now = response
            .header()
            .map(|h| h.revision())
            .ok_or_else(|| Error::Backend("etcd answered without a header".into()))?;
        let mut gets = response.op_responses().into_iter().filter_map(|op| match op {
            TxnOpResponse::Get(get) => Some(get),
            _ => None,
        });
        let range = gets.next().ok_or_else(|| Error::Backend("etcd answered a range without its result".into()))?;
        if let Some(record) = gets.next().and_then(|get| get.kvs().first().cloned())
            && record.mod_revision() > self.shared.mapping.load().record_revision
        {
            self.shared.learn(&parse_meta(&self.shared.prefix, record.value())?, record.mod_revision());
        }
        Ok((range, now))
    }

    async fn get_direct(&self, key: &str) -> Result<Option<Versioned>> {
        let (response, _) = self.range_now(self.shared.full_key(key).into_bytes(), None).await?;
        Ok(response.kvs().first().map(|kv| Versioned {
            revision: self.shared.rev(kv.mod_revision()),
            value: Bytes::copy_from_slice(kv.value()),
        }))
    }

    /// A list straight from etcd: ranges at one revision, page by page.
    async fn list_direct(&self, prefix: &str, options: ListOptions) -> Result<ListResult> {
        let full_prefix = self.shared.full_key(prefix);
        let end = prefix_end(&full_prefix);
        let mut cursor = match &options.start_after {
            Some(after) => {
                let mut k = self.shared.full_key(after).into_bytes();
                k.push(0);
                k
            }
            None => full_prefix.clone().into_bytes(),
        };
        let mut at = options.revision;
        let mut items = Vec::new();
        let mut more = false;
        let mut remaining = None;
        loop {
            let want = options.limit.map_or(LIST_CHUNK, |l| l.saturating_sub(items.len()).clamp(1, LIST_CHUNK));
            let mut get = GetOptions::new().with_range(end.clone()).with_limit(i64::try_from(want).unwrap_or(1));
            if let Some(r) = at {
                get = get.with_revision(self.shared.etcd_rev(r));
            }
            let response = match at {
                // The first range of a list at etcd's current revision: that revision is the
                // list's, mapped with the record read with it.
                None => {
                    let (response, now) = self.range_now(cursor.clone(), Some(get)).await?;
                    at = Some(self.shared.rev(now));
                    response
                }
                Some(_) => {
                    let mut kv = self.shared.kv();
                    self.shared.call(kv.get(cursor.clone(), Some(get))).await.map_err(|e| self.revision_error(e, at))?
                }
            };
            for kv in response.kvs() {
                let Some(key) = self.shared.strip(kv.key()) else { continue };
                items.push(KeyValue {
                    key,
                    revision: self.shared.rev(kv.mod_revision()),
                    value: Bytes::copy_from_slice(kv.value()),
                });
            }
            if !response.more() {
                break;
            }
            if options.limit.is_some_and(|l| items.len() >= l) {
                more = true;
                // etcd counts the whole range from the cursor, this response's items included.
                let after = response.count().saturating_sub(response.kvs().len() as i64);
                remaining = options.count_remaining.then(|| u64::try_from(after).unwrap_or(0));
                break;
            }
            match response.kvs().last() {
                Some(last) => {
                    cursor = last.key().to_vec();
                    cursor.push(0);
                }
                None => break,
            }
        }
        let revision = at.ok_or_else(|| Error::Backend("etcd answered a range without a header".into()))?;
        Ok(ListResult { revision, items, more, remaining })
    }

    /// Whether this replica runs the run-once work now.
    pub fn leadership(&self) -> Leadership {
        self.leadership.clone()
    }

    /// The etcd client, for what runs beside the store on the same cluster (elections).
    pub fn client(&self) -> Client {
        self.shared.client.clone()
    }

    async fn txn(&self, txn: Txn) -> Result<etcd_client::TxnResponse> {
        let mut kv = self.shared.kv();
        self.shared.call(kv.txn(txn)).await
    }

    /// A write transaction (`build`: its compares, its ops, its `or_else` ops, with the
    /// replica's mapping) fenced by the revision record: if another replica advanced the
    /// revisions since this one learnt them, nothing is written, the record is taken in, and
    /// the transaction built and tried again. So no replica ever hands out a revision mapped
    /// with an outdated offset, even before its feed has seen the record.
    async fn fenced_txn(
        &self,
        build: impl Fn() -> (Vec<Compare>, Vec<TxnOp>, Vec<TxnOp>),
    ) -> Result<etcd_client::TxnResponse> {
        let record_key = self.shared.full_key(META_KEY);
        for _ in 0..8 {
            let known = self.shared.mapping.load().record_revision;
            let (mut compares, then, mut otherwise) = build();
            compares.push(Compare::mod_revision(record_key.clone(), CompareOp::Equal, known));
            otherwise.push(TxnOp::get(record_key.clone(), None));
            let response = self.txn(Txn::new().when(compares).and_then(then).or_else(otherwise)).await?;
            if response.succeeded() {
                return Ok(response);
            }
            match found(&response, &record_key) {
                Some(record) if record.mod_revision() != known => {
                    let meta = parse_meta(&self.shared.prefix, record.value())?;
                    self.shared.learn(&meta, record.mod_revision());
                }
                None if known != 0 => {
                    return Err(Error::Backend(format!(
                        "the revision record {record_key:?} is gone: the store was replaced under this server"
                    )));
                }
                _ => return Ok(response),
            }
        }
        Err(Error::Backend("the revision record kept changing during a write".into()))
    }

    /// What a failed transaction's `or_else` read of `key` says: absent, or present at a
    /// revision.
    fn current_of(&self, response: &etcd_client::TxnResponse, key: &str) -> Option<Revision> {
        found(response, key).map(|kv| self.shared.rev(kv.mod_revision()))
    }

    /// Moves the store's revision to at least `at_least`: a new offset for every etcd revision
    /// from the revision record's own on (earlier ones keep theirs), written with a compare on
    /// the record so that two advances never both apply. Every replica takes it in from its
    /// feed (before any later event) or from its next fenced write. Returns the store's
    /// revision, that of the record.
    pub async fn advance_revision(&self, at_least: Revision) -> Result<Revision> {
        let record_key = self.shared.full_key(META_KEY);
        for _ in 0..16 {
            let mut kv = self.shared.kv();
            let response = self.shared.call(kv.get(record_key.clone(), None)).await?;
            let now = response.header().map_or(0, |h| revision(h.revision()));
            let (known, record_revision) = match response.kvs().first() {
                Some(kv) => (parse_meta(&self.shared.prefix, kv.value())?, kv.mod_revision()),
                None => (Meta::default(), 0),
            };
            self.shared.learn(&known, record_revision);
            let mapping = self.shared.mapping.load_full();
            if mapping.record_revision != record_revision {
                // Held a newer record than etcd showed: read again.
                continue;
            }
            if mapping.rev(now) >= at_least {
                return Ok(mapping.rev(now));
            }
            let advanced = mapping.advanced(now, at_least);
            let body = serde_json::to_vec(&advanced).map_err(|e| Error::Backend(e.to_string()))?;
            let txn = Txn::new()
                .when([Compare::mod_revision(record_key.clone(), CompareOp::Equal, record_revision)])
                .and_then([TxnOp::put(record_key.clone(), body, None)]);
            let response = self.txn(txn).await?;
            if !response.succeeded() {
                continue;
            }
            let at = response.header().map_or(0, |h| h.revision());
            self.shared.learn(&advanced, at);
            tracing::info!(at_least, offset = advanced.revision_offset, "advanced the store's revisions");
            return Ok(self.shared.rev(at));
        }
        Err(Error::Backend("the revision record kept changing while advancing it".into()))
    }

    fn header_revision(&self, response: &etcd_client::TxnResponse) -> Result<Revision> {
        response
            .header()
            .map(|h| self.shared.rev(h.revision()))
            .ok_or_else(|| Error::Backend("etcd answered a transaction without a header".into()))
    }

    /// A list error at `at`: a compacted revision is `Expired`, a future one `TooLarge`.
    fn revision_error(&self, error: Error, at: Option<Revision>) -> Error {
        let (Some(requested), Error::Backend(text)) = (at, &error) else {
            return error;
        };
        if text.contains("required revision has been compacted") {
            let oldest = self.shared.compacted.load(Ordering::SeqCst).max(requested + 1);
            return Error::Expired { requested, oldest };
        }
        if text.contains("required revision is a future revision") {
            return Error::TooLarge { requested, current: self.current_revision() };
        }
        error
    }
}

/// The key-value a transaction's `or_else` read of `key` found.
fn found(response: &etcd_client::TxnResponse, key: &str) -> Option<etcd_client::KeyValue> {
    response.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(get) => get.kvs().iter().find(|kv| kv.key() == key.as_bytes()).cloned(),
        _ => None,
    })
}

/// The first key after every key starting with `prefix` (etcd's range end for a prefix).
pub(super) fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte was 0xff: the range is open-ended.
    vec![0]
}

impl Store for EtcdStore {
    fn current_revision(&self) -> Revision {
        self.shared.history().durable()
    }

    async fn wait_for_revision(&self, revision: Revision, limit: Duration) -> bool {
        // A revision from a list may be past the prefix's last event: a progress marker.
        self.shared.wait_until_fresh(revision, limit).await
    }

    async fn get(&self, key: &str) -> Result<Option<Versioned>> {
        self.get_fresh(key, Freshness::Consistent).await
    }

    async fn get_fresh(&self, key: &str, freshness: Freshness) -> Result<Option<Versioned>> {
        match reads::get(&self.shared, key, freshness).await {
            Some(found) => Ok(found),
            None => self.get_direct(key).await,
        }
    }

    async fn list(&self, prefix: &str, options: ListOptions) -> Result<ListResult> {
        // etcd still has the revisions of a restore's writes, but the data is whole only
        // from `restored_at` on.
        let restored_at = self.shared.mapping.load().restored_at;
        if let Some(requested) = options.revision
            && requested < restored_at
        {
            return Err(Error::Expired { requested, oldest: restored_at });
        }
        if let Some(page) = reads::list(&self.shared, prefix, &options).await {
            let page = page.map_err(|e| self.revision_error(e, options.revision))?;
            return Ok(ListResult {
                revision: page.revision,
                items: page.items,
                more: page.more,
                remaining: page.remaining,
            });
        }
        self.list_direct(prefix, options).await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        let full = self.shared.full_key(key);
        let response = self
            .fenced_txn(|| {
                let compares = vec![Compare::create_revision(full.clone(), CompareOp::Equal, 0)];
                (compares, vec![TxnOp::put(full.clone(), value.to_vec(), None)], Vec::new())
            })
            .await?;
        if !response.succeeded() {
            return Err(Error::AlreadyExists(key.to_string()));
        }
        self.header_revision(&response)
    }

    async fn update(&self, key: &str, expected: Revision, value: Bytes) -> Result<Revision> {
        let full = self.shared.full_key(key);
        let response = self
            .fenced_txn(|| {
                let compares = vec![
                    Compare::version(full.clone(), CompareOp::Greater, 0),
                    Compare::mod_revision(full.clone(), CompareOp::Equal, self.shared.etcd_rev(expected)),
                ];
                (compares, vec![TxnOp::put(full.clone(), value.to_vec(), None)], vec![TxnOp::get(full.clone(), None)])
            })
            .await?;
        if !response.succeeded() {
            return Err(match self.current_of(&response, &full) {
                None => Error::NotFound(key.to_string()),
                Some(current) => Error::Conflict { key: key.to_string(), expected, current },
            });
        }
        self.header_revision(&response)
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, Bytes)> {
        let full = self.shared.full_key(key);
        let response = self
            .fenced_txn(|| {
                let mut compares = vec![Compare::version(full.clone(), CompareOp::Greater, 0)];
                if let Some(expected) = expected {
                    compares.push(Compare::mod_revision(
                        full.clone(),
                        CompareOp::Equal,
                        self.shared.etcd_rev(expected),
                    ));
                }
                let delete = TxnOp::delete(full.clone(), Some(DeleteOptions::new().with_prev_key()));
                (compares, vec![delete], vec![TxnOp::get(full.clone(), None)])
            })
            .await?;
        if !response.succeeded() {
            return Err(match (self.current_of(&response, &full), expected) {
                (Some(current), Some(expected)) => Error::Conflict { key: key.to_string(), expected, current },
                _ => Error::NotFound(key.to_string()),
            });
        }
        let last = response.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Delete(deleted) => deleted.prev_kvs().first().map(|kv| Bytes::copy_from_slice(kv.value())),
            _ => None,
        });
        let revision = self.header_revision(&response)?;
        Ok((revision, last.unwrap_or_default()))
    }

    async fn watch(&self, prefix: &str, from: Revision) -> Result<Watch> {
        if from > self.current_revision() {
            self.shared.wait_until_fresh(from, CATCH_UP_TIMEOUT).await;
        }
        let mut history = self.shared.history();
        history.subscribe(prefix, from)
    }

    fn health(&self) -> Result<()> {
        match &*self.shared.fault.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(cause) => Err(Error::Unavailable(cause.clone())),
            None => Ok(()),
        }
    }

    async fn count(&self, prefix: &str) -> Result<u64> {
        let full_prefix = self.shared.full_key(prefix);
        let options = GetOptions::new().with_range(prefix_end(&full_prefix)).with_count_only();
        let mut kv = self.shared.kv();
        let response = self.shared.call(kv.get(full_prefix, Some(options))).await?;
        Ok(u64::try_from(response.count()).unwrap_or(0))
    }

    fn size_on_disk(&self) -> Option<u64> {
        Some(self.shared.db_size.load(Ordering::Relaxed)).filter(|size| *size > 0)
    }
}
