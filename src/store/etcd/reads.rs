//! Gets and lists answered from the replica's cache (`cache`) where Kubernetes' consistency
//! rules allow it, as kube-apiserver's watch cache answers them, and from etcd otherwise.
//!
//! - Consistent (`resourceVersion=""`): etcd's current revision is read (a linearizable
//!   range of one absent key: etcd answers with its revision header and nothing else), the
//!   read waits until the cache has applied every event up to it (asking the feed for a
//!   progress marker when the events do not come by themselves: the revision may be past the
//!   prefix's last event), then answers from the
//!   cache. Revision reads are shared: a read joins the next round that starts after it
//!   began (`Rounds`), so that however many reads arrive, etcd sees at most one revision read
//!   in flight, and each read still sees every write acknowledged before it began.
//! - Not older than N (`"0"`, `"N"`): from the cache as soon as it has reached N.
//! - At an exact revision (`resourceVersionMatch=Exact`, continue tokens): from the cache and
//!   the history window (every key changed after the revision, with its value then) while the
//!   window still holds that revision; from etcd otherwise. etcd is asked first whether it
//!   still holds the revision (a range of one absent key at it), so that a compacted revision
//!   is `Expired` exactly when etcd would say so.
//! - A resource not cached yet (its first read), a broken watch, a wait past
//!   `CACHE_WAIT`, or a failed revision read: straight from etcd.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use etcd_client::GetOptions;
use tokio::sync::watch;

use super::cache::{Loaded, Page, PageRequest, Readiness};
use super::store::{LIST_CHUNK, Shared, prefix_end};
use crate::store::{Error, Freshness, ListOptions, Result, Revision, Versioned, key};

/// Longest a read waits for the cache to reach the revision it needs before it reads etcd.
const CACHE_WAIT: Duration = Duration::from_secs(1);

/// The absent key whose range tells etcd's current revision (outside every listed prefix).
const REVISION_PROBE: &str = "\0revision";

/// How many reads the cache answered and how many went to etcd.
#[derive(Debug, Default)]
pub(crate) struct ReadCounts {
    pub cached: AtomicU64,
    pub direct: AtomicU64,
    /// Reads of etcd's current revision (`Rounds`), each shared by the reads that waited.
    pub revision_reads: AtomicU64,
}

/// Rounds of etcd revision reads shared by the reads that wait for them.
pub(super) struct Rounds {
    state: Mutex<RoundState>,
    /// The last round finished, and what it read.
    done: watch::Sender<(u64, Option<Result<Revision>>)>,
}

#[derive(Default)]
struct RoundState {
    /// The newest round started.
    started: u64,
    /// Whether round `started` is in flight.
    running: bool,
    /// A read asked for round `started + 1`.
    wanted: bool,
}

impl Rounds {
    pub fn new() -> Rounds {
        Rounds { state: Mutex::new(RoundState::default()), done: watch::channel((0, None)).0 }
    }
}

/// etcd's current revision, read after this call began (shared with concurrent callers).
pub(super) async fn current_revision(shared: &Arc<Shared>) -> Result<Revision> {
    let rounds = &shared.rounds;
    let mut done = rounds.done.subscribe();
    let round = {
        let mut state = rounds.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.running {
            // The round in flight may have been sent before this read began: wait for the next.
            state.wanted = true;
            state.started + 1
        } else {
            state.started += 1;
            state.running = true;
            tokio::spawn(run_rounds(shared.clone()));
            state.started
        }
    };
    // A round is bounded by the request timeout; twice that covers the round in flight.
    let limit = shared.timeout.saturating_mul(2);
    match tokio::time::timeout(limit, done.wait_for(|(finished, _)| *finished >= round)).await {
        Ok(Ok(value)) => value.1.clone().unwrap_or_else(|| Err(Error::Backend("no revision read".into()))),
        Ok(Err(_)) => Err(Error::Closed),
        Err(_) => Err(Error::Timeout("etcd's revision was not read in time".into())),
    }
}

/// Reads etcd's revision round after round while reads wait for a next one.
async fn run_rounds(shared: Arc<Shared>) {
    loop {
        shared.reads.revision_reads.fetch_add(1, Ordering::Relaxed);
        let mut kv = shared.kv();
        let probe = format!("{}{REVISION_PROBE}", shared.prefix);
        let read = shared.call(kv.get(probe, Some(GetOptions::new().with_keys_only()))).await.and_then(|response| {
            response
                .header()
                .map(|h| shared.rev(h.revision()))
                .ok_or_else(|| Error::Backend("etcd answered a range without a header".into()))
        });
        let mut state = shared.rounds.state.lock().unwrap_or_else(|e| e.into_inner());
        shared.rounds.done.send_replace((state.started, Some(read)));
        if state.wanted {
            state.wanted = false;
            state.started += 1;
        } else {
            state.running = false;
            return;
        }
    }
}

/// Whether the cache may answer a read of `resource` needing `freshness` now, after waiting
/// for it if needed; starts loading a resource read for the first time.
async fn cache_ready(shared: &Arc<Shared>, resource: &str, freshness: Freshness) -> bool {
    if !shared.watch_cache {
        return false;
    }
    match shared.cache.readiness(resource) {
        Readiness::Ready => {}
        Readiness::NotYet => return false,
        Readiness::Unknown => {
            start_loading(shared, resource);
            return false;
        }
    }
    let needed = match freshness {
        Freshness::NotOlderThan(revision) => revision,
        Freshness::Consistent => match current_revision(shared).await {
            Ok(revision) => revision,
            Err(_) => return false,
        },
    };
    reached(shared, needed).await
}

/// Waits (at most `CACHE_WAIT`) until the cache has applied every event up to `revision`.
async fn reached(shared: &Shared, revision: Revision) -> bool {
    // The feed publishes a revision once the cache has applied it.
    shared.cache.revision() >= revision || shared.wait_until_fresh(revision, CACHE_WAIT).await
}

/// Lists `resource` from etcd at the cache's revision and installs it, in the background.
fn start_loading(shared: &Arc<Shared>, resource: &str) {
    let Some((id, since)) = shared.cache.begin_load(resource) else { return };
    let shared = shared.clone();
    let resource = resource.to_string();
    tokio::spawn(async move {
        match load(&shared, &resource, since).await {
            Ok(loaded) => {
                shared.cache.finish_load(&resource, id, loaded);
            }
            Err(error) => {
                tracing::debug!(%error, resource, "caching a resource failed; its reads go to etcd");
                shared.cache.abandon_load(&resource, id);
            }
        }
    });
}

async fn load(shared: &Shared, resource: &str, at: Revision) -> Result<Loaded> {
    let full_prefix = shared.full_key(resource);
    let end = prefix_end(&full_prefix);
    let mut cursor = full_prefix.into_bytes();
    let mut loaded = Loaded::new();
    loop {
        let options = GetOptions::new()
            .with_range(end.clone())
            .with_limit(i64::try_from(LIST_CHUNK).unwrap_or(1))
            .with_revision(shared.etcd_rev(at));
        let mut kv = shared.kv();
        let response = shared.call(kv.get(cursor.clone(), Some(options))).await?;
        for kv in response.kvs() {
            let Some(key) = shared.strip(kv.key()) else { continue };
            let Some(relative) = key.get(resource.len()..) else { continue };
            loaded.add(relative, shared.rev(kv.mod_revision()), Bytes::copy_from_slice(kv.value()));
        }
        match response.kvs().last() {
            Some(last) if response.more() => {
                cursor = last.key().to_vec();
                cursor.push(0);
            }
            _ => return Ok(loaded),
        }
    }
}

/// Whether etcd still holds revision `at` (a range of the absent probe key at it): a list at
/// a revision etcd compacted is `Expired`, as when etcd answers it, even where the window
/// could still answer it.
async fn still_in_etcd(shared: &Shared, at: Revision) -> Result<()> {
    let mut kv = shared.kv();
    let probe = format!("{}{REVISION_PROBE}", shared.prefix);
    let options = GetOptions::new().with_keys_only().with_revision(shared.etcd_rev(at));
    shared.call(kv.get(probe, Some(options))).await.map(drop)
}

/// The value of `key` from the cache, when it may answer; `None`: read etcd.
pub(super) async fn get(shared: &Arc<Shared>, key: &str, freshness: Freshness) -> Option<Option<Versioned>> {
    let resource = key::resource_prefix_of(key)?;
    if !cache_ready(shared, resource, freshness).await {
        shared.reads.direct.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    let (_, found) = shared.cache.get(resource, key)?;
    shared.reads.cached.fetch_add(1, Ordering::Relaxed);
    Some(found)
}

/// A page of `prefix` from the cache, when it may answer; `None`: read etcd.
pub(super) async fn list(shared: &Arc<Shared>, prefix: &str, options: &ListOptions) -> Option<Result<Page>> {
    let resource = key::resource_prefix_of(prefix)?;
    let freshness = match options.revision {
        // The cache must hold the revision; the window says what changed since.
        Some(at) => Freshness::NotOlderThan(at),
        None => options.freshness,
    };
    if !cache_ready(shared, resource, freshness).await {
        shared.reads.direct.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    if let Some(at) = options.revision
        && let Err(error) = still_in_etcd(shared, at).await
    {
        return Some(Err(error));
    }
    let request = PageRequest {
        prefix,
        start_after: options.start_after.as_deref(),
        limit: options.limit,
        count_remaining: options.count_remaining,
    };
    let changed = |at| {
        let history = shared.history();
        history.check_retained(at)?;
        Ok(history.changed_since(prefix, options.start_after.as_deref(), at))
    };
    match shared.cache.page(resource, &request, options.revision, changed)? {
        // Older than the window: etcd may still hold it (or says it is compacted).
        Err(Error::Expired { .. }) => None,
        answer => {
            shared.reads.cached.fetch_add(1, Ordering::Relaxed);
            if let (Ok(page), Some((group, plural))) = (&answer, resource.trim_matches('/').split_once('/')) {
                crate::metrics::global().watch_cache.update(group, plural, |f| {
                    f.lists += 1;
                    f.fetched += page.fetched as u64;
                    f.returned += page.items.len() as u64;
                });
            }
            Some(answer)
        }
    }
}
