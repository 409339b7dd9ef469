//! The secure port: TLS listener and connection cap (`listener`), one bounded hyper connection
//! per client (HTTP/1.1 or HTTP/2 by ALPN; an HTTP/1.1 connection's first watch without hyper;
//! `connection`) and what it is doing (`activity`),
//! Status bodies for the requests hyper refuses itself (`refusals`), Go's answers to malformed
//! requests (`malformed`), the filter chain, routing, health checks (`health`), graceful
//! shutdown (`shutdown`).
//!
//! Owns the transport and the order of the request path. Must not implement API semantics
//! (those are in `api`) nor authentication logic (in `auth`).

pub mod activity;
pub mod admin;
pub mod conn;
pub mod connection;
pub mod filters;
pub mod health;
pub mod listener;
pub mod malformed;
pub mod refusals;
pub mod router;
pub mod shutdown;
pub mod stack;
pub mod tls;

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub use connection::ConnectionSettings;
use filters::Next;

/// Serves `handler` on `listener`, with at most `max_connections` client connections open at
/// once, until `stop` resolves and the termination `lifecycle` runs: then stops accepting and
/// waits for the connections to finish.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    handler: Next,
    settings: ConnectionSettings,
    max_connections: usize,
    lifecycle: &shutdown::Lifecycle,
    stop: impl Future<Output = shutdown::Stop>,
) {
    let stop_listening = lifecycle.stop_listening_after(stop);
    let acceptor = TlsAcceptor::from(tls);
    let drain = lifecycle.drain_timeout();
    listener::serve(listener, acceptor, handler, settings, max_connections, stop_listening, drain).await;
    tracing::info!("[graceful-termination] every connection is closed");
}
