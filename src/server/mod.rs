//! The secure port: TLS listener, one hyper connection per client (HTTP/1.1 or HTTP/2 by
//! ALPN), the filter chain, routing, graceful shutdown.
//!
//! Owns the transport and the order of the request path. Must not implement API semantics
//! (those are in `api`) nor authentication logic (in `auth`).

pub mod conn;
pub mod filters;
pub mod router;
pub mod stack;
pub mod tls;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::api::body::BodyError;
use conn::ConnInfo;
use filters::Next;

/// Streams per HTTP/2 connection; the aggregator multiplexes many watches over one
/// connection (kube-apiserver allows 1000).
pub const HTTP2_MAX_CONCURRENT_STREAMS: u32 = 1000;
/// Time allowed for a TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Time open connections get to finish after shutdown starts (watches never finish).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `handler` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    handler: Next,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let handler = handler.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls_stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(remote = %remote, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(remote = %remote, "TLS handshake timed out");
                    return;
                }
            };
            let peer_certificates: Vec<_> = tls_stream
                .get_ref()
                .1
                .peer_certificates()
                .map(|chain| chain.iter().map(|c| c.clone().into_owned()).collect())
                .unwrap_or_default();
            let info = ConnInfo { remote, peer_certificates: Arc::new(peer_certificates) };
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let mut request = request.map(|b| b.map_err(|e| Box::new(e) as BodyError).boxed_unsync());
                request.extensions_mut().insert(info.clone());
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(filters::run(handler, request).await) }
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder.http2().max_concurrent_streams(HTTP2_MAX_CONCURRENT_STREAMS);
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(tls_stream), service);
            if let Err(e) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(remote = %remote, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::info!("closing connections that did not finish in time");
    }
}
