//! The accept loop: how many connections may be open at once, what happens when that many
//! are, and the drain at shutdown. A full server stops accepting (new clients wait in the
//! kernel's backlog) instead of failing accepts for want of file descriptors, so the clients
//! it already has keep working.
//!
//! Owns the connection cap and the process' open-file limit. Must not configure connections
//! (`connection`) nor look into requests.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use super::connection::{self, ConnectionSettings};
use super::filters::Next;

/// File descriptors kept for everything that is not a client connection (the store's files,
/// connections to the main apiserver and to webhooks, logs).
const RESERVED_DESCRIPTORS: u64 = 512;
/// The largest connection cap accepted (beyond any file-descriptor limit in use).
const MAX_CONNECTIONS: usize = 1 << 20;
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
    let (stop_connections, stopping) = watch::channel(false);
    let mut last_full_log: Option<Instant> = None;
    let mut last_error_log: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        // A slot first: while every slot is taken, new clients wait in the backlog.
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if due(&mut last_full_log) {
                    tracing::warn!(max_connections, "open connection limit reached; new connections wait");
                }
                tokio::select! {
                    slot = slots.clone().acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => break,
                    },
                    _ = &mut shutdown => break,
                }
            }
        };
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
        let acceptor = acceptor.clone();
        let handler = handler.clone();
        let settings = settings.clone();
        let stopping = stopping.clone();
        tokio::spawn(async move {
            connection::serve(tcp, remote, acceptor, handler, settings, stopping).await;
            drop(slot);
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

/// Whether a rate-limited log line may be written now.
fn due(last: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    if last.is_some_and(|at| now.duration_since(at) < LOG_EVERY) {
        return false;
    }
    *last = Some(now);
    true
}
