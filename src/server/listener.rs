//! The accept loop: how many connections may be open at once, what happens when that many
//! are, and the drain at shutdown. A full server does not fail accepts for want of file
//! descriptors: it takes the next client and makes room for it by closing the connection least
//! worth keeping that is doing nothing (one that never sent a request, then one idle whose
//! requests were all anonymous, then one idle the longest), as idle connections would time
//! out anyway. Connections with a request in flight (watches among them) are never closed
//! for room; when all are busy, new clients wait in the kernel's backlog.
//!
//! Owns the connection cap, the open connections' registry and the process' open-file limit.
//! Must not configure connections (`connection`) nor look into requests.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use super::activity::{Activity, IdleSignal};
use super::connection::{self, ConnectionSettings};
use super::filters::Next;

/// File descriptors kept for everything that is not a client connection (the store's files,
/// connections to the main apiserver and to webhooks, logs).
const RESERVED_DESCRIPTORS: u64 = 512;
/// The largest connection cap accepted (beyond any file-descriptor limit in use).
const MAX_CONNECTIONS: usize = 1 << 20;
/// How long a connection asked to give way may take to go before another is asked (long enough
/// for an idle one on a busy machine; a client that reads nothing may hold its close longer).
const EVICTION_GRACE: Duration = Duration::from_secs(5);
/// How often a full server or failing accepts are logged, at most.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Raises the soft open-file limit to the hard one (as Go programs, kube-apiserver among them,
/// do at start) and returns the connection cap it allows: the limit less a reserve.
pub fn default_max_connections() -> usize {
    let limit = raise_open_file_limit();
    usize::try_from(limit.saturating_sub(RESERVED_DESCRIPTORS).max(64)).unwrap_or(usize::MAX)
}

fn raise_open_file_limit() -> u64 {
    match rlimit::getrlimit(rlimit::Resource::NOFILE) {
        Ok((soft, hard)) if soft < hard => rlimit::increase_nofile_limit(hard).unwrap_or(soft),
        Ok((soft, _)) => soft,
        Err(_) => 1024,
    }
}

/// Accepts connections on `listener` and serves each until `shutdown` resolves, with at
/// most `max_connections` open at once; then closes the listener and gives the open
/// connections `drain` to finish what is in flight.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    handler: Next,
    settings: ConnectionSettings,
    max_connections: usize,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let settings = Arc::new(settings);
    let max_connections = max_connections.clamp(1, MAX_CONNECTIONS);
    let slots = Arc::new(Semaphore::new(max_connections));
    let open = Arc::new(OpenConnections::default());
    let (stop_connections, stopping) = watch::channel(false);
    let mut last_error_log: Option<Instant> = None;
    let mut log = RoomLog::default();
    tokio::pin!(shutdown);
    loop {
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    if due(&mut last_error_log) {
                        tracing::warn!(error = %e, "accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // While this client waits for room, the next ones wait in the backlog.
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => match make_room(&slots, &open, &mut log, max_connections, &mut shutdown).await {
                Some(slot) => slot,
                None => break,
            },
        };
        let activity = Arc::new(Activity::new(Some(open.idle.clone())));
        let registered = open.register(activity.clone());
        let acceptor = acceptor.clone();
        let handler = handler.clone();
        let settings = settings.clone();
        let stopping = stopping.clone();
        let _ = tcp.set_nodelay(true);
        tokio::spawn(async move {
            connection::serve(tcp, remote, acceptor, handler, settings, stopping, activity).await;
            // The slot first: a connection gone from the registry has always freed its slot,
            // so that whoever waits for room takes it rather than ask another to give way.
            drop(slot);
            drop(registered);
        });
    }
    drop(listener);
    tracing::info!("[graceful-termination] stopped listening");
    let _ = stop_connections.send(true);
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(drain, slots.acquire_many(all)).await.is_err() {
        tracing::warn!(?drain, "closing connections that did not finish in time");
    }
}

/// Waits for a free slot, asking the connection least worth keeping to give way whenever no
/// connection asked before is still about to (`None`: the server is shutting down).
async fn make_room(
    slots: &Arc<Semaphore>,
    open: &OpenConnections,
    log: &mut RoomLog,
    max_connections: usize,
    shutdown: &mut (impl Future<Output = ()> + Unpin),
) -> Option<OwnedSemaphorePermit> {
    open.idle.waiting.store(true, Ordering::Relaxed);
    let slot = loop {
        // A slot freed meanwhile (by the connection asked last, or any other) is taken
        // before anyone else is asked to go.
        if let Ok(slot) = slots.clone().try_acquire_owned() {
            break Some(slot);
        }
        match open.evict_one() {
            Eviction::Asked => log.evicted(max_connections),
            Eviction::Pending => {}
            Eviction::NoneIdle => log.full(max_connections),
        }
        tokio::select! {
            biased;
            slot = slots.clone().acquire_owned() => break slot.ok(),
            // A connection went idle or closed: look again.
            _ = open.idle.notify.notified() => {}
            // One asked to go is slow to (its client does not read what it still sends):
            // after a moment another is asked.
            _ = tokio::time::sleep(EVICTION_GRACE) => {}
            _ = &mut *shutdown => break None,
        }
    };
    open.idle.waiting.store(false, Ordering::Relaxed);
    slot
}

/// The open connections, by a number of their own.
#[derive(Default)]
struct OpenConnections {
    connections: Mutex<HashMap<u64, Arc<Activity>>>,
    next: std::sync::atomic::AtomicU64,
    idle: Arc<IdleSignal>,
}

/// What asking for room did.
#[derive(Debug, PartialEq, Eq)]
enum Eviction {
    /// A connection was asked to give way.
    Asked,
    /// One asked before has not gone yet and is idle: its slot is on its way.
    Pending,
    /// Every connection has a request in flight.
    NoneIdle,
}

impl OpenConnections {
    fn register(self: &Arc<Self>, activity: Arc<Activity>) -> Registered {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut connections) = self.connections.lock() {
            connections.insert(id, activity);
        }
        Registered { open: self.clone(), id }
    }

    /// Asks the connection least worth keeping to give way, unless one asked a moment ago
    /// is still idle (it is closing: its slot comes next).
    fn evict_one(&self) -> Eviction {
        let Ok(connections) = self.connections.lock() else {
            return Eviction::NoneIdle;
        };
        if connections.values().any(|a| a.evicted_and_idle(EVICTION_GRACE)) {
            return Eviction::Pending;
        }
        let victim = connections
            .values()
            .filter_map(|activity| activity.standing().map(|(standing, since)| (standing, since, activity)))
            .min_by_key(|(standing, since, _)| (*standing, *since));
        match victim {
            Some((_, _, activity)) => {
                activity.evict();
                Eviction::Asked
            }
            None => Eviction::NoneIdle,
        }
    }
}

/// Removes its connection from the registry when dropped.
struct Registered {
    open: Arc<OpenConnections>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Ok(mut connections) = self.open.connections.lock() {
            connections.remove(&self.id);
        }
        // A client waiting for room looks again (the freed slot wakes it too).
        self.open.idle.notify.notify_one();
    }
}

/// Rate-limited lines about a full server.
#[derive(Default)]
struct RoomLog {
    last_full: Option<Instant>,
    last_evicted: Option<Instant>,
}

impl RoomLog {
    fn full(&mut self, max_connections: usize) {
        if due(&mut self.last_full) {
            tracing::warn!(
                max_connections,
                "open connection limit reached; every connection is busy, new connections wait"
            );
        }
    }

    fn evicted(&mut self, max_connections: usize) {
        if due(&mut self.last_evicted) {
            tracing::info!(max_connections, "open connection limit reached; closing idle connections to make room");
        }
    }
}

/// Whether a rate-limited log line may be written now.
fn due(last: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    if last.is_some_and(|at| now.duration_since(at) < LOG_EVERY) {
        return false;
    }
    *last = Some(now);
    true
}
