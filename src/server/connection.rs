//! One client connection from TLS handshake to close, with the bounds k8s.io/apiserver's
//! secure serving puts on it so that no client can hold resources for free: a TLS handshake
//! deadline, a deadline for an HTTP/1.1 request's headers, an idle timeout (no request in
//! flight), HTTP/2 stream, reset and header-list limits, and keepalive pings that find dead
//! peers under idle watches.
//!
//! Owns the per-connection transport settings and the idle watchdog. Must not look into
//! requests (the filter chain does) nor decide how many connections may be open (`listener`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

// tokio's clock, so that the idle watchdog follows the runtime's time (paused in the fuzz
// harness, which runs connections in virtual time).
use tokio::time::Instant;

use bytes::Bytes;
use http::Request;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use super::conn::ConnInfo;
use super::filters::{self, Next};
use super::malformed;
use super::refusals::{self, WithRefusalBodies};
use crate::api::body::{BodyError, RespBody};

/// Bounds of one connection. The defaults are k8s.io/apiserver's.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    /// Time a client gets to complete the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time an HTTP/1.1 client gets to send a request's headers (Go's `ReadHeaderTimeout`,
    /// 32 s in k8s.io/apiserver).
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed (Go's `IdleTimeout`,
    /// 90 s in k8s.io/apiserver). Watches are requests in flight: they are never idle.
    pub idle_timeout: Duration,
    /// Streams per HTTP/2 connection; the aggregator multiplexes many watches over one
    /// connection (kube-apiserver allows 1000 to the aggregator's clients).
    pub http2_max_concurrent_streams: u32,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            http2_max_concurrent_streams: 1000,
        }
    }
}

/// Largest HTTP/1.1 request head (request line and headers): Go's `MaxHeaderBytes` (1 MiB)
/// plus the 4 KiB its reader allows beyond it. Larger heads are refused with 431.
const HTTP1_MAX_HEAD_BYTES: usize = (1 << 20) + 4096;
/// Streams a client may open and reset before the server reads them (the "rapid reset"
/// attack); beyond it the connection is closed.
const HTTP2_MAX_PENDING_RESETS: usize = 20;
/// HTTP/2 ping interval while the connection carries nothing, and the time a pong may take:
/// a peer that vanished under an idle watch is found within a minute and a half.
const HTTP2_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);
const HTTP2_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// Serves one accepted TCP connection until it ends, it is idle too long, or `shutdown`
/// turns true (then in-flight requests finish and the connection closes).
pub async fn serve(
    tcp: TcpStream,
    remote: SocketAddr,
    acceptor: TlsAcceptor,
    handler: Next,
    settings: Arc<ConnectionSettings>,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = tcp.set_nodelay(true);
    let handshake = tokio::time::timeout(settings.handshake_timeout, acceptor.accept(tcp));
    // A client still shaking hands when the server shuts down has no request in flight: it is
    // dropped rather than waited for.
    let handshaken = tokio::select! {
        handshaken = handshake => handshaken,
        _ = shutdown.wait_for(|stop| *stop) => return,
    };
    let tls_stream = match handshaken {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::trace!(remote = %remote, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::trace!(remote = %remote, "TLS handshake timed out");
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
    serve_stream(tls_stream, info, handler, settings, shutdown).await;
}

/// Serves HTTP/1.1 or HTTP/2 (by the client's first bytes) on an established, decrypted
/// stream until it ends, it is idle too long, or `shutdown` turns true.
pub async fn serve_stream<S>(
    stream: S,
    info: ConnInfo,
    handler: Next,
    settings: Arc<ConnectionSettings>,
    mut shutdown: watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let remote = info.remote;
    let activity = Arc::new(Activity::new());
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |request: Request<Incoming>| {
            // Refused here, in the connection's task, so that an over-large header list is
            // freed before the next stream is decoded.
            let admitted = match refusals::header_list_refusal(&request).or_else(|| malformed::refusal(&request)) {
                Some(refusal) => Err(refusal),
                None => Ok(request),
            };
            let admitted = admitted.map(|request| {
                let mut request = request.map(|b| b.map_err(|e| Box::new(e) as BodyError).boxed_unsync());
                request.extensions_mut().insert(info.clone());
                request
            });
            let handler = handler.clone();
            let in_flight = InFlight::start(activity.clone());
            async move {
                let response = match admitted {
                    Ok(request) => filters::run(handler, request).await,
                    Err(refusal) => refusal,
                };
                // The request stays in flight until its body is done (a watch, for as long
                // as it streams).
                Ok::<_, Infallible>(
                    response.map(|body| TrackedBody { inner: body, _in_flight: in_flight }.boxed_unsync()),
                )
            }
        })
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(settings.header_read_timeout)
        .max_buf_size(HTTP1_MAX_HEAD_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(settings.http2_max_concurrent_streams)
        .max_header_list_size(refusals::HTTP2_DECODED_HEADER_LIST_BYTES)
        .max_pending_accept_reset_streams(HTTP2_MAX_PENDING_RESETS)
        .keep_alive_interval(HTTP2_KEEPALIVE_INTERVAL)
        .keep_alive_timeout(HTTP2_KEEPALIVE_TIMEOUT);
    let io = TokioIo::new(WithRefusalBodies::new(stream));
    let connection = builder.serve_connection_with_upgrades(io, service);
    tokio::pin!(connection);
    let mut closing = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::trace!(remote = %remote, error = %e, "connection ended with an error");
                }
                return;
            }
            _ = activity.idle_for(settings.idle_timeout), if !closing => {
                tracing::trace!(remote = %remote, "closing an idle connection");
                connection.as_mut().graceful_shutdown();
                closing = true;
            }
            _ = shutdown.wait_for(|stop| *stop), if !closing => {
                connection.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    }
}

/// Requests in flight on one connection, and when that number last changed.
struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `opened` of the last start or end of a request.
    last_change_ms: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity { opened: Instant::now(), in_flight: AtomicUsize::new(0), last_change_ms: AtomicU64::new(0) }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_change_ms.store(ms, Ordering::Relaxed);
    }

    /// Resolves once no request has been in flight for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let last = self.opened + Duration::from_millis(self.last_change_ms.load(Ordering::Relaxed));
            let due = last + idle;
            let now = Instant::now();
            if due <= now {
                if self.in_flight.load(Ordering::Relaxed) == 0 {
                    return;
                }
                // Busy: look again a whole period later (a request that ends resets it).
                tokio::time::sleep(idle).await;
            } else {
                tokio::time::sleep(due - now).await;
            }
        }
    }
}

/// Marks one request in flight until dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        activity.touch();
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body that keeps its request in flight while it is being sent.
struct TrackedBody {
    inner: RespBody,
    _in_flight: InFlight,
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
