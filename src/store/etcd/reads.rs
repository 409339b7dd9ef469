//! Gets and lists answered from the replica's cache (`cache`) where Kubernetes' consistency
//! rules allow it, as kube-apiserver's watch cache answers them, and from etcd otherwise.
//!
//! - Consistent (`resourceVersion=""`): etcd's current revision is read (a linearizable
//!   range of one absent key: etcd answers with its revision header and nothing else), the
//!   read waits until the cache has applied every event up to it (asking the feed for a
//!   progress marker when the events do not come by themselves: the revision may be past the
//!   prefix's last event), then answers from the
//!   cache. Revision reads are shared: a read joins the next round sent after it began
//!   (`Rounds`), so that each read still sees every write acknowledged before it began. Up to
//!   `ROUNDS_IN_FLIGHT` rounds are in flight at once: a read arriving while one is in flight
//!   sends the next at once instead of waiting for it to come back, and the reads arriving
//!   while every slot is taken share the round sent when the first comes back.
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

/// Most reads of etcd's revision in flight at once. One makes a read arriving while it is in
/// flight wait for the rest of it and then a whole next round; two let that read send its
/// round at once, while etcd still sees a bounded number whatever the number of reads.
const ROUNDS_IN_FLIGHT: usize = 2;

/// Rounds of etcd revision reads shared by the reads that wait for them.
pub(super) struct Rounds {
    state: Mutex<RoundState>,
    /// The newest round finished, and what it read.
    done: watch::Sender<(u64, Option<Result<Revision>>)>,
}

/// Which rounds are sent and which reads wait for one. Rounds are numbered in the order they
/// are sent (after the state's lock is released); a read waits for a round numbered at least
/// the one it was given, which is sent after the read began.
#[derive(Debug, Default)]
struct RoundState {
    /// Rounds numbered so far (the next one gets `numbered + 1`).
    numbered: u64,
    in_flight: usize,
    /// A read waits for round `numbered + 1`, not sent yet.
    wanted: bool,
}

/// What a read does to get a round sent after it began.
#[derive(Debug, PartialEq, Eq)]
enum Join {
    /// Send round N now (a slot was free) and wait for it.
    Send(u64),
    /// Wait for round N, which the first round to come back sends.
    Wait(u64),
}

impl RoundState {
    /// A read arrives.
    fn join(&mut self) -> Join {
        if self.in_flight < ROUNDS_IN_FLIGHT {
            // No read waits here: one only waits while every slot is taken.
            self.in_flight += 1;
            self.numbered += 1;
            Join::Send(self.numbered)
        } else {
            self.wanted = true;
            Join::Wait(self.numbered + 1)
        }
    }

    /// A round came back: the next round to send in its slot, if reads wait for one.
    fn finished(&mut self) -> Option<u64> {
        if self.wanted {
            self.wanted = false;
            self.numbered += 1;
            Some(self.numbered)
        } else {
            self.in_flight = self.in_flight.saturating_sub(1);
            None
        }
    }
}

impl Rounds {
    pub fn new() -> Rounds {
        Rounds { state: Mutex::new(RoundState::default()), done: watch::channel((0, None)).0 }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, RoundState> {
        // Every change of the state is made whole under the lock.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// etcd's current revision, read after this call began (shared with concurrent callers).
pub(super) async fn current_revision(shared: &Arc<Shared>) -> Result<Revision> {
    let mut done = shared.rounds.done.subscribe();
    let round = match shared.rounds.state().join() {
        Join::Send(round) => {
            tokio::spawn(run_rounds(shared.clone(), round));
            round
        }
        Join::Wait(round) => round,
    };
    // A round is bounded by the request timeout; twice that covers the round in flight.
    let limit = shared.timeout.saturating_mul(2);
    match tokio::time::timeout(limit, done.wait_for(|(finished, _)| *finished >= round)).await {
        Ok(Ok(value)) => value.1.clone().unwrap_or_else(|| Err(Error::Backend("no revision read".into()))),
        Ok(Err(_)) => Err(Error::Closed),
        Err(_) => Err(Error::Timeout("etcd's revision was not read in time".into())),
    }
}

/// Reads etcd's revision for `round`, then for each next round reads wait for.
async fn run_rounds(shared: Arc<Shared>, mut round: u64) {
    let probe = format!("{}{REVISION_PROBE}", shared.prefix);
    let mut kv = shared.kv();
    loop {
        shared.reads.revision_reads.fetch_add(1, Ordering::Relaxed);
        let options = GetOptions::new().with_keys_only();
        let read = shared.call(kv.get(probe.as_str(), Some(options))).await.and_then(|response| {
            response
                .header()
                .map(|h| shared.rev(h.revision()))
                .ok_or_else(|| Error::Backend("etcd answered a range without a header".into()))
        });
        // A later round may have come back first: its revision serves this round's reads too.
        shared.rounds.done.send_if_modified(|done| {
            let newer = round > done.0;
            if newer {
                *done = (round, Some(read));
            }
            newer
        });
        match shared.rounds.state().finished() {
            Some(next) => round = next,
            None => return,
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

#[cfg(test)]
mod tests {
    use super::{Join, ROUNDS_IN_FLIGHT, RoundState};

    #[test]
    fn a_read_arriving_while_every_slot_is_taken_waits_for_a_round_not_sent_yet() {
        let mut state = RoundState::default();
        let sent: Vec<Join> = (0..ROUNDS_IN_FLIGHT).map(|_| state.join()).collect();
        let numbers: Vec<Join> = (1..=ROUNDS_IN_FLIGHT as u64).map(Join::Send).collect();
        assert_eq!(sent, numbers, "free slots send at once");
        // Every slot is in flight (sent maybe before these reads began): the next number.
        let next = ROUNDS_IN_FLIGHT as u64 + 1;
        assert_eq!(state.join(), Join::Wait(next));
        assert_eq!(state.join(), Join::Wait(next), "reads waiting together share a round");
        // The first round back sends that round in its slot; a read after that waits for
        // the one after it.
        assert_eq!(state.finished(), Some(next));
        assert_eq!(state.join(), Join::Wait(next + 1));
        assert_eq!(state.finished(), Some(next + 1));
        // Nobody waits: slots free up, and the next read sends its own round.
        assert_eq!(state.finished(), None);
        assert_eq!(state.join(), Join::Send(next + 2));
        assert_eq!(state.finished(), None);
        assert_eq!(state.finished(), None);
        assert_eq!(state.in_flight, 0);
    }
}
