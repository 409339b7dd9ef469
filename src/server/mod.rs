//! The secure port: TLS listener and connection cap (`listener`), one bounded hyper connection
//! per client (HTTP/1.1 or HTTP/2 by ALPN; `connection`), Status bodies for the requests hyper
//! refuses itself (`refusals`), the filter chain, routing, graceful shutdown.
//!
//! Owns the transport and the order of the request path. Must not implement API semantics
//! (those are in `api`) nor authentication logic (in `auth`).

pub mod conn;
pub mod connection;
pub mod filters;
pub mod listener;
pub mod refusals;
pub mod router;
pub mod stack;
pub mod tls;

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub use connection::ConnectionSettings;
use filters::Next;

/// Serves `handler` on `listener` until `shutdown` resolves, with at most `max_connections`
/// client connections open at once.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    handler: Next,
    settings: ConnectionSettings,
    max_connections: usize,
    shutdown: impl Future<Output = ()>,
) {
    listener::serve(listener, TlsAcceptor::from(tls), handler, settings, max_connections, shutdown).await;
}
