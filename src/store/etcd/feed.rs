//! The replica's one etcd watch: every change under the prefix, in revision order, into the
//! history window that client watches are served from (so a thousand client watches cost etcd
//! one).
//!
//! What the window has seen advances only with events the watch delivered, never with etcd's
//! progress notifications: etcd releases without the fix of etcd-io/etcd#15220 (Debian's 3.4.23
//! among them) may answer a progress request with a revision whose events they have not sent
//! yet (a watch still catching up after it was reopened), and trusting it loses those events. When a revision must be known seen
//! (a client watches from a list's revision, or the prefix has been idle for a while, so
//! that reopening the watch would not fall behind a compaction), the feed writes a progress
//! marker, one key beside the prefix (`PROGRESS_KEY`, never listed): its event proves every
//! earlier one was delivered, because one watch delivers events in revision order.
//!
//! A broken stream is reopened from the revision after the last one seen, so no event is lost
//! or repeated. If etcd compacted past that revision meanwhile, the window is reset: client
//! watches end and older revisions are `Expired`, so clients list again, as after
//! kube-apiserver's watch cache is re-initialized.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{EventType as EtcdEventType, WatchOptions, WatchResponse};

use super::connect::describe;
use super::restore::{META_KEY, parse_meta};
use super::store::Shared;
use crate::store::history::Record;
use crate::store::{Event, EventType, Revision};

/// How long the prefix may go without an event before the feed writes a progress marker.
const IDLE_PROGRESS_INTERVAL: Duration = Duration::from_secs(10);

/// The progress marker's key after the prefix: beside the objects (which all start with `/`),
/// inside the range the feed watches.
pub(super) const PROGRESS_KEY: &str = "\0progress";

/// Pause before reopening a broken watch.
const RETRY_DELAY: Duration = Duration::from_millis(500);

/// Why a watch stream ended.
enum Ended {
    /// etcd compacted the revision the watch wanted to resume from.
    Compacted(Revision),
    Failed(String),
}

pub(super) fn spawn(shared: Arc<Shared>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match follow(&shared).await {
                Ended::Compacted(compacted) => {
                    tracing::warn!(
                        compacted,
                        "the etcd watch fell behind a compaction; watches restart and clients list again"
                    );
                    shared.cache.set_live(false);
                    reset_after_compaction(&shared).await;
                }
                Ended::Failed(cause) => {
                    tracing::warn!(%cause, "the etcd watch broke; reopening it");
                    // Reads go to etcd until the watch is open again.
                    shared.cache.set_live(false);
                    tokio::time::sleep(RETRY_DELAY).await;
                }
            }
        }
    })
}

/// Starts the window again at etcd's current revision.
async fn reset_after_compaction(shared: &Shared) {
    loop {
        let mut kv = shared.kv();
        let probe = etcd_client::GetOptions::new().with_count_only();
        match shared.call(kv.get(shared.prefix.clone(), Some(probe))).await {
            Ok(response) => {
                let now = response.header().map_or(0, |h| shared.rev(h.revision()));
                // Events were lost: every cached resource is listed again on its next read.
                shared.cache.reset(now);
                shared.history().reset(now);
                shared.publish(now);
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading etcd's revision after a compaction");
                tokio::time::sleep(RETRY_DELAY).await;
            }
        }
    }
}

/// Follows one etcd watch stream until it ends.
async fn follow(shared: &Arc<Shared>) -> Ended {
    // The etcd revision after the last one seen (the window's revisions are all mapped from
    // etcd's, so they map back exactly, even across an advance the mapping knows already).
    let from = shared.etcd_rev(shared.history().durable()) + 1;
    // From the progress marker to the end of the objects' keys: `<prefix>\0…` up to `<prefix>0`
    // (the byte after `/`), so also the restore record and the election's keys, which `record`
    // passes over.
    let options =
        WatchOptions::new().with_range(format!("{}0", shared.prefix)).with_prev_key().with_start_revision(from);
    let mut client = shared.client.watch_client().max_decoding_message_size(super::store::MAX_RESPONSE_BYTES);
    let key = format!("{}\0", shared.prefix);
    // The watcher half is kept for as long as the stream is read: dropping it ends the stream.
    let stream = match tokio::time::timeout(shared.timeout, client.watch(key, Some(options))).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Ended::Failed(describe(&e)),
        Err(_) => return Ended::Failed("opening the watch timed out".into()),
    };
    let (_watcher, mut responses) = stream.split();
    // Progress markers go out from their own task: reading the stream is never interrupted.
    let marker = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut durable_then = shared.history().durable();
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(IDLE_PROGRESS_INTERVAL) => {
                        let durable = shared.history().durable();
                        let idle = durable == durable_then;
                        durable_then = durable;
                        if !idle {
                            continue;
                        }
                    }
                    _ = shared.progress_wanted.notified() => {}
                }
                let mut kv = shared.kv();
                if let Err(e) = shared.call(kv.put(shared.full_key(PROGRESS_KEY), Vec::new(), None)).await {
                    tracing::warn!(error = %e, "writing the etcd progress marker failed");
                }
            }
        })
    };
    let ended = loop {
        match responses.message().await {
            Ok(Some(response)) => {
                if let Err(ended) = apply(shared, &response) {
                    break ended;
                }
            }
            Ok(None) => break Ended::Failed("etcd closed the watch stream".into()),
            Err(e) => break Ended::Failed(describe(&e)),
        }
    };
    marker.abort();
    ended
}

/// Takes one watch response into the window.
fn apply(shared: &Shared, response: &WatchResponse) -> Result<(), Ended> {
    if response.canceled() {
        if response.compact_revision() > 0 {
            return Err(Ended::Compacted(shared.rev(response.compact_revision())));
        }
        return Err(Ended::Failed(format!("etcd canceled the watch: {}", response.cancel_reason())));
    }
    let events = response.events();
    if response.created() {
        // Open again from the revision after the last one applied: nothing was missed.
        shared.cache.set_live(true);
    }
    // A response without events (the watch's creation) says nothing about what was sent.
    let mut records = Vec::with_capacity(events.len());
    for event in events {
        // A new revision record (an advance by another replica) maps its own revision and
        // every later one: taken in before them.
        learn_record(shared, event);
        records.extend(record(shared, event));
    }
    let Some(last) = events.last().and_then(|e| e.kv()).map(|kv| shared.rev(kv.mod_revision())) else {
        return Ok(());
    };
    let mut history = shared.history();
    if last <= history.durable() {
        return Ok(());
    }
    // The window first, then the cache: a read at an older revision takes the window's values
    // over the cache's, so the window must never be behind the cache.
    history.push_pending(records.clone());
    history.make_durable(last);
    drop(history);
    shared.cache.apply(&records, last);
    shared.publish(last);
    Ok(())
}

/// Takes a put of the revision record (`restore::META_KEY`) into the replica's mapping.
fn learn_record(shared: &Shared, event: &etcd_client::Event) {
    let Some(kv) = event.kv() else { return };
    if event.event_type() != EtcdEventType::Put || kv.key() != shared.full_key(META_KEY).as_bytes() {
        return;
    }
    match parse_meta(&shared.prefix, kv.value()) {
        Ok(meta) => {
            tracing::info!(offset = meta.revision_offset, "the store's revisions were advanced");
            shared.learn(&meta, kv.mod_revision());
        }
        Err(e) => tracing::error!(error = %e, "the revision record changed to something unreadable; ignored"),
    }
}

/// One etcd event as the storage contract describes it; none for the keys beside the
/// objects (progress marker, restore record, election).
fn record(shared: &Shared, event: &etcd_client::Event) -> Option<Record> {
    let kv = event.kv()?;
    let key = shared.strip(kv.key()).filter(|key| key.starts_with('/'))?;
    let prev = event.prev_kv();
    let prev_value = prev.map(|p| Bytes::copy_from_slice(p.value()));
    let prev_revision = prev.map_or(0, |p| shared.rev(p.mod_revision()));
    let event = match event.event_type() {
        EtcdEventType::Put => Event {
            // A key's version restarts at 1 when it is created again after a deletion.
            kind: if kv.version() == 1 { EventType::Added } else { EventType::Modified },
            key,
            revision: shared.rev(kv.mod_revision()),
            value: Bytes::copy_from_slice(kv.value()),
            prev: prev_value,
        },
        EtcdEventType::Delete => {
            let last = prev_value.unwrap_or_default();
            Event {
                kind: EventType::Deleted,
                key,
                revision: shared.rev(kv.mod_revision()),
                value: last.clone(),
                prev: Some(last),
            }
        }
    };
    Some(Record::new(event, prev_revision))
}
