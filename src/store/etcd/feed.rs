//! The replica's one etcd watch: every change under the prefix, in revision order, into the
//! history window that client watches are served from (so a thousand client watches cost etcd
//! one). Progress notifications, asked for periodically and on demand, advance the seen
//! revision while nothing under the prefix changes (writes elsewhere in etcd, other tenants),
//! which is what bookmarks, "wait until fresh" and the cache's consistent reads follow. etcd
//! before 3.4.31 and 3.5.13 may send a requested notification ahead of events it has not sent
//! yet (etcd-io/etcd#15220): with those, the feed writes `progress_key` instead, whose event
//! comes after every earlier one.
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
use super::store::Shared;
use crate::store::history::Record;
use crate::store::{Event, EventType, Revision};

/// How often the feed asks etcd for progress while nobody asks sooner.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(500);

/// How often the feed writes `PROGRESS_KEY` while nobody asks sooner, where etcd's requested
/// progress notifications cannot be trusted (`Shared::progress_by_write`).
const WRITTEN_PROGRESS_INTERVAL: Duration = Duration::from_secs(5);

/// The key written to learn etcd's progress from the watch itself: just before `<prefix>/`
/// (inside the feed's watched range, outside every listed one; not UTF-8, so never taken for
/// an object). Its event's revision, like any event's, comes after every earlier event.
pub(super) fn progress_key(prefix: &str) -> Vec<u8> {
    let mut key = format!("{prefix}.").into_bytes();
    key.push(0xff);
    key
}

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
    let from = shared.history().durable() + 1;
    let watched = format!("{}/", shared.prefix);
    let options = WatchOptions::new()
        .with_range(super::store::prefix_end(&watched))
        .with_prev_key()
        .with_progress_notify()
        .with_start_revision(shared.etcd_rev(from));
    let mut client = shared.client.watch_client().max_decoding_message_size(super::store::MAX_RESPONSE_BYTES);
    let key = progress_key(&shared.prefix);
    let stream = match tokio::time::timeout(shared.timeout, client.watch(key, Some(options))).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Ended::Failed(describe(&e)),
        Err(_) => return Ended::Failed("opening the watch timed out".into()),
    };
    let (mut requests, mut responses) = stream.split();
    // Progress requests go out from their own task: reading the stream is never interrupted.
    let asker = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let interval = if shared.progress_by_write { WRITTEN_PROGRESS_INTERVAL } else { PROGRESS_INTERVAL };
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(interval) => {}
                    _ = shared.progress_wanted.notified() => {}
                }
                if shared.progress_by_write {
                    let mut kv = shared.kv();
                    let key = progress_key(&shared.prefix);
                    if let Err(error) = shared.call(kv.put(key, Vec::new(), None)).await {
                        tracing::debug!(%error, "writing the progress key");
                    }
                } else if requests.request_progress().await.is_err() {
                    return;
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
    asker.abort();
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
    if events.is_empty() {
        // A progress notification: every event up to the header's revision was sent. The
        // response confirming the watch's creation says nothing of the kind.
        if !response.created()
            && let Some(header) = response.header()
        {
            let at = shared.rev(header.revision());
            let mut history = shared.history();
            if at > history.durable() {
                history.make_durable(at);
                drop(history);
                shared.cache.advance(at);
                shared.publish(at);
            }
        }
        return Ok(());
    }
    let records: Vec<Record> = events.iter().filter_map(|e| record(shared, e)).collect();
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

/// One etcd event as the storage contract describes it.
fn record(shared: &Shared, event: &etcd_client::Event) -> Option<Record> {
    let kv = event.kv()?;
    let key = shared.strip(kv.key())?;
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
    Some(Record { event, prev_revision })
}
