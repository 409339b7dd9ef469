//! One client connection from TLS handshake to close, with the bounds k8s.io/apiserver's
//! secure serving (Go's `http.Server`) puts on it so that no client can hold resources for
//! free: a TLS handshake deadline, a deadline for each HTTP/1.1 request head, an idle timeout
//! (no request in flight; `activity` keeps the time), HTTP/2 stream, reset and header-list
//! limits, and keepalive pings that find dead peers under idle watches. A connection asked to
//! give way at the connection cap goes like a timed-out one. hyper serves each connection, but
//! for an HTTP/1.1 connection's first request when it is a watch answered by a stream
//! (`first_head`, `chunked`): hyper takes over once that watch ends. Watches later on a
//! kept-alive connection stay with hyper.
//!
//! Owns the per-connection transport settings and the watchdog. Must not look into requests
//! (the filter chain does) nor decide how many connections may be open (`listener`).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

/// `AsyncWrite` for a stream wrapper that changes only what is read (`Watched`,
/// `first_head::Replayed`): every write goes to its `inner` stream as it is.
macro_rules! writes_to_inner {
    ($wrapper:ident) => {
        impl<S: AsyncWrite + Unpin> AsyncWrite for $wrapper<S> {
            fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
                Pin::new(&mut self.inner).poll_write(cx, buf)
            }

            fn poll_write_vectored(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> Poll<std::io::Result<usize>> {
                Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.inner.is_write_vectored()
            }

            fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
                Pin::new(&mut self.inner).poll_flush(cx)
            }

            fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
                Pin::new(&mut self.inner).poll_shutdown(cx)
            }
        }
    };
}
use tokio_rustls::TlsAcceptor;

use super::activity::{Activity, Expiry, InFlight};
use super::conn::ConnInfo;
use super::filters::{self, Next};
use super::malformed;
use super::refusals::{self, WithRefusalBodies};
use crate::api::body::{BodyError, ReqBody, RespBody, Streamed};
use first_head::FirstHead;

/// Bounds of one connection. The defaults are k8s.io/apiserver's.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    /// Time an HTTP/1.1 client gets to send a request's head (Go's `ReadHeaderTimeout`, 32 s
    /// in k8s.io/apiserver): the first from the end of the TLS handshake, each next one from
    /// its first bytes. The TLS handshake gets as long, as Go gives it.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long since the last one is closed
    /// (Go's `IdleTimeout`, 90 s in k8s.io/apiserver); so is a new HTTP/2 connection that
    /// opens no stream. Watches are requests in flight: they are never idle.
    pub idle_timeout: Duration,
    /// Streams per HTTP/2 connection; the aggregator multiplexes many watches over one
    /// connection (kube-apiserver allows 1000 to the aggregator's clients).
    pub http2_max_concurrent_streams: u32,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
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
/// Encrypted bytes a connection may hold for a peer that does not read: one full TLS record
/// (16 KiB of plaintext and its overhead). rustls holds 64 KiB by default, which every
/// stalled watch on its own HTTP/1.1 connection would keep; a reading peer takes each record
/// as soon as it is sealed, so a smaller buffer costs it nothing but a wakeup per record.
pub const TLS_SEND_BUFFER_BYTES: usize = 16 << 10;
/// Encrypted bytes an HTTP/1.1 connection may hold while it sends a response that trickles out
/// (a watch, `body::Streamed`): an eighth of a full record, so that a watch whose client stops
/// reading keeps a 2 KiB record, not a 16 KiB one, for as long as it lasts (ten thousand such
/// watches, 20 MiB less than with 4 KiB records). Its events are small and far apart; only its
/// initial state goes in more records than it would otherwise (one write each, 1% overhead).
pub const TLS_STREAMING_SEND_BUFFER_BYTES: usize = 2 << 10;

/// Serves one accepted TCP connection (`tcp`) until it ends, it times out, or `shutdown` turns true
/// (then in-flight requests finish and the connection closes). `activity` is the
/// connection's record (the listener's, for the connection cap).
pub async fn serve<S>(
    tcp: S,
    remote: SocketAddr,
    acceptor: TlsAcceptor,
    handler: Next,
    settings: Arc<ConnectionSettings>,
    mut shutdown: watch::Receiver<bool>,
    activity: Arc<Activity>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // The connection's task keeps its state for as long as the connection lasts, and an async
    // function keeps room for every local alive across a wait, moved from or not: the served
    // future is made in a block, so that the handshake's locals (the TLS stream, 1.2 KiB, before
    // it moved) take no room beside it.
    let served = {
        let Some((stream, protocol, info, streaming)) =
            handshake(tcp, remote, acceptor, &settings, &mut shutdown, activity).await
        else {
            return;
        };
        serve_stream(stream, protocol, info, handler, settings, shutdown, streaming)
    };
    served.await;
}

/// The TLS handshake of a connection, bounded as `serve` says; the decrypted stream and what
/// the handshake settled, or `None` when the client is gone or its time ran out.
async fn handshake<S>(
    tcp: S,
    remote: SocketAddr,
    acceptor: TlsAcceptor,
    settings: &ConnectionSettings,
    shutdown: &mut watch::Receiver<bool>,
    activity: Arc<Activity>,
) -> Option<(Sealing<S>, Protocol, ConnInfo, Streaming)>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // A client still shaking hands when the server shuts down, when its time is up (the
    // header timeout: nothing was asked yet), or when it must give way to another at the
    // connection cap, has no request in flight: it is dropped.
    let handshaken = tokio::select! {
        handshaken = acceptor.accept(tcp) => handshaken,
        _ = shutdown.wait_for(|stop| *stop) => return None,
        _ = activity.expired(settings.header_read_timeout, settings.idle_timeout) => {
            tracing::trace!(remote = %remote, "TLS handshake timed out or gave way");
            return None;
        }
    };
    let mut tls_stream = match handshaken {
        Ok(s) => s,
        Err(e) => {
            tracing::trace!(remote = %remote, error = %e, "TLS handshake failed");
            return None;
        }
    };
    // The first request's head is due within the header timeout from now.
    activity.handshaken();
    tls_stream.get_mut().1.set_buffer_limit(Some(TLS_SEND_BUFFER_BYTES));
    let streaming = Streaming::default();
    let session = tls_stream.get_ref().1;
    let protocol = if session.alpn_protocol() == Some(b"h2") {
        activity.set_http2();
        Protocol::Http2
    } else {
        Protocol::Http1
    };
    let peer_certificates = super::conn::shared_chain(session.peer_certificates().unwrap_or_default());
    let server_name = session.server_name().map(Arc::from);
    let info = ConnInfo { remote, peer_certificates, activity, server_name };
    let sealing = Sealing { inner: tls_stream, streaming: streaming.clone(), limit: TLS_SEND_BUFFER_BYTES };
    Some((sealing, protocol, info, streaming))
}

/// The protocol a connection speaks, as its TLS handshake settled it: HTTP/2 when the client
/// asked for `h2` (ALPN), HTTP/1.1 otherwise, whatever its first bytes are (as Go's server
/// decides). Known before the first read, so that hyper reads a client's first bytes into a
/// buffer of its own size: behind a look at the first 24 bytes (to tell an HTTP/2 preface)
/// hyper's HTTP/1.1 read buffer doubled to 16 KiB, which every open watch kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

/// Serves `protocol` on an established, decrypted stream until it ends, it times out
/// (`info.activity` keeps the time), or `shutdown` turns true. `streaming` is set while an
/// HTTP/1.1 response that trickles out is sent (the stream seals small TLS records then).
pub async fn serve_stream<S>(
    mut stream: S,
    protocol: Protocol,
    info: ConnInfo,
    handler: Next,
    settings: Arc<ConnectionSettings>,
    mut shutdown: watch::Receiver<bool>,
    streaming: Streaming,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let responder = Responder { info, handler, streaming };
    let (replay, prepared) = match protocol {
        Protocol::Http2 => (Vec::new(), None),
        Protocol::Http1 => match first_watch(&mut stream, &responder, &settings, &mut shutdown).await {
            FirstWatch::Hyper { replay, prepared } => (replay, prepared),
            FirstWatch::Gone => return,
        },
    };
    // Made in a block, so that its parts (moved into hyper's connection, on the heap) take no
    // room in the connection's task while it runs.
    let served = {
        let remote = responder.info.remote;
        let activity = responder.info.activity.clone();
        // The response to the replayed head, if it is already made: hyper's first request is
        // that head parsed again, and gets it.
        let prepared = std::cell::Cell::new(prepared);
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let answer = match prepared.take() {
                Some(response) => Err(response),
                None => Ok(responder.respond(request.map(|b| b.map_err(|e| Box::new(e) as BodyError).boxed_unsync()))),
            };
            async move {
                Ok::<_, Infallible>(match answer {
                    Ok(responding) => responding.await,
                    Err(response) => response,
                })
            }
        });
        let io = TokioIo::new(WithRefusalBodies::new(Watched {
            inner: first_head::Replayed::new(stream, replay),
            activity: activity.clone(),
        }));
        let connection: Served = match protocol {
            Protocol::Http1 => {
                // No header read timeout of hyper's (it has one by default): it runs from the
                // end of the previous request (so a kept-alive connection would get 32 s of
                // idleness instead of 90), and not at all before the first. The connection's
                // `Activity` keeps Go's timeouts.
                let mut http1 = http1::Builder::new();
                http1.timer(TokioTimer::new()).header_read_timeout(None).max_buf_size(HTTP1_MAX_HEAD_BYTES);
                Box::pin(http1.serve_connection(io, service))
            }
            Protocol::Http2 => {
                let mut http2 = http2::Builder::new(TokioExecutor::new());
                http2
                    .timer(TokioTimer::new())
                    .max_concurrent_streams(settings.http2_max_concurrent_streams)
                    .max_header_list_size(refusals::HTTP2_DECODED_HEADER_LIST_BYTES)
                    .max_pending_accept_reset_streams(HTTP2_MAX_PENDING_RESETS)
                    .keep_alive_interval(HTTP2_KEEPALIVE_INTERVAL)
                    .keep_alive_timeout(HTTP2_KEEPALIVE_TIMEOUT);
                Box::pin(http2.serve_connection(io, service))
            }
        };
        Ends { remote, activity, settings, shutdown }.drive(connection)
    };
    served.await;
}

/// How a connection's first request went before hyper.
enum FirstWatch {
    /// hyper serves the connection from here, reading `replay` first; `prepared` is the answer
    /// to its first request, already made.
    Hyper { replay: Vec<u8>, prepared: Option<Response<RespBody>> },
    /// The connection is gone (or its time ran out before a request).
    Gone,
}

/// Serves an HTTP/1.1 connection's first request without hyper if it is a watch answered by a
/// stream (`first_head`, `chunked`): such a connection usually carries that one watch for as
/// long as it lasts, and hyper's connection would keep its read and write buffers (8 KiB each)
/// all that time. Once the watch ends, hyper serves the connection's next requests, so that it
/// is kept alive as hyper would keep it. A head that is no watch, and a watch answered
/// otherwise (a refusal, an error), go to hyper, which answers them as always.
async fn first_watch<S>(
    stream: &mut S,
    responder: &Responder,
    settings: &ConnectionSettings,
    shutdown: &mut watch::Receiver<bool>,
) -> FirstWatch
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut read = Vec::new();
    let activity = &responder.info.activity;
    let first = tokio::select! {
        first = first_head::read(stream, &mut read) => first,
        // Shutting down: hyper closes the connection as it closes one that has not asked
        // anything yet (or answers a head it gets in full).
        _ = shutdown.wait_for(|stop| *stop) => FirstHead::Other(read),
        // Its time is up (or it must give way) before a request: dropped, as `Ends` drops it.
        _ = activity.expired(settings.header_read_timeout, settings.idle_timeout) => FirstHead::Gone,
    };
    let (request, head_bytes) = match first {
        FirstHead::Watch(request, head_bytes) => (*request, head_bytes),
        FirstHead::Other(replay) => return FirstWatch::Hyper { replay, prepared: None },
        FirstHead::Gone => return FirstWatch::Gone,
    };
    let response = responder.respond(request).await;
    let Some(head) = chunked::head(&response) else {
        return FirstWatch::Hyper { replay: head_bytes, prepared: Some(response) };
    };
    drop(head_bytes);
    match chunked::send(stream, head, response.into_body()).await {
        chunked::Sent::Done(received) => FirstWatch::Hyper { replay: received, prepared: None },
        chunked::Sent::Gone => FirstWatch::Gone,
    }
}

/// Answers a connection's requests: the filter chain behind Go's transport refusals, each
/// request in flight on the connection until its response's body is done.
struct Responder {
    info: ConnInfo,
    handler: Next,
    streaming: Streaming,
}

impl Responder {
    /// The response to `request`. The refusals are decided here, before the returned future
    /// runs (in the connection's task, so that an over-large HTTP/2 header list is freed before
    /// the next stream is decoded), and the request is in flight from here.
    fn respond(&self, request: Request<ReqBody>) -> impl Future<Output = Response<RespBody>> + Send + use<> {
        let activity = &self.info.activity;
        let admitted = match refusals::header_list_refusal(&request).or_else(|| malformed::refusal(&request)) {
            Some(refusal) => Err(refusal),
            None => Ok(request),
        };
        let admitted = admitted.map(|mut request| {
            if request.version() == http::Version::HTTP_2 {
                activity.set_http2();
            }
            request.extensions_mut().insert(self.info.clone());
            request
        });
        let handler = self.handler.clone();
        let in_flight = InFlight::start(activity.clone());
        let streaming = self.streaming.clone();
        async move {
            let http1 = admitted.as_ref().is_ok_and(|request| request.version() < http::Version::HTTP_2);
            let response = match admitted {
                Ok(request) => filters::run(handler, request).await,
                Err(refusal) => refusal,
            };
            // One HTTP/1.1 response at a time is written: small records while it is one that
            // trickles out. (HTTP/2 streams share the connection; its records stay full.)
            let streamed = (http1 && response.extensions().get::<Streamed>().is_some()).then(|| streaming.start());
            // The request stays in flight until its body is done (a watch, for as long as it
            // streams).
            response.map(|body| TrackedBody { inner: body, _in_flight: in_flight, _streamed: streamed }.boxed_unsync())
        }
    }
}

/// hyper's connection serving one protocol, on the heap.
type Served = Pin<Box<dyn GracefulConnection<Error = hyper::Error, Output = Result<(), hyper::Error>> + Send>>;

/// What ends a served connection besides its client: its timeouts and the server's shutdown.
struct Ends {
    remote: SocketAddr,
    activity: Arc<Activity>,
    settings: Arc<ConnectionSettings>,
    shutdown: watch::Receiver<bool>,
}

impl Ends {
    /// Runs hyper's `connection` until it ends, closing it gracefully when it has been idle
    /// too long or the server shuts down, and dropping it when it never sent a request head.
    /// (Each protocol's connection on the heap, in its own size: a task serving HTTP/1.1,
    /// one per watch, carries no room for HTTP/2's larger state.)
    async fn drive(mut self, mut connection: Served) {
        let mut closing = false;
        loop {
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::trace!(remote = %self.remote, error = %e, "connection ended with an error");
                    }
                    return;
                }
                expiry = self.activity.expired(self.settings.header_read_timeout, self.settings.idle_timeout), if !closing => {
                    match expiry {
                        Expiry::Drop => {
                            tracing::trace!(remote = %self.remote, "dropping a connection that sent no complete request head");
                            return;
                        }
                        Expiry::Close => {
                            tracing::trace!(remote = %self.remote, "closing an idle connection");
                            connection.as_mut().graceful_shutdown();
                            closing = true;
                        }
                    }
                }
                _ = self.shutdown.wait_for(|stop| *stop), if !closing => {
                    connection.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}

/// The client's stream, telling the connection's activity when bytes arrive (the head of a
/// next request, when none is in flight).
struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.received();
        }
        polled
    }
}

writes_to_inner!(Watched);

/// A response body that keeps its request in flight while it is being sent (and the
/// connection's small TLS records, for a response that trickles out).
struct TrackedBody {
    inner: RespBody,
    _in_flight: InFlight,
    _streamed: Option<StreamingResponse>,
}

/// Whether the connection is sending a response that trickles out: shared by the service,
/// which knows the response, and the TLS stream below hyper, which seals the records.
#[derive(Debug, Clone, Default)]
pub struct Streaming(Arc<AtomicBool>);

impl Streaming {
    /// Marks such a response as being sent, until the guard is dropped (with its body).
    fn start(&self) -> StreamingResponse {
        self.0.store(true, Ordering::Relaxed);
        StreamingResponse(self.0.clone())
    }

    fn now(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A response that trickles out, being sent; the connection's records are full-sized again
/// once it is gone.
struct StreamingResponse(Arc<AtomicBool>);

impl Drop for StreamingResponse {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// The TLS stream, sealing records of the size the response being sent calls for: what rustls
/// may hold for a peer that does not read (`TLS_SEND_BUFFER_BYTES`, or
/// `TLS_STREAMING_SEND_BUFFER_BYTES` under a watch).
struct Sealing<S> {
    inner: tokio_rustls::server::TlsStream<S>,
    streaming: Streaming,
    /// The limit rustls has now.
    limit: usize,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Sealing<S> {
    fn seal_for_response(&mut self) {
        let limit = if self.streaming.now() { TLS_STREAMING_SEND_BUFFER_BYTES } else { TLS_SEND_BUFFER_BYTES };
        if limit != self.limit {
            self.limit = limit;
            self.inner.get_mut().1.set_buffer_limit(Some(limit));
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Sealing<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Sealing<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.seal_for_response();
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.seal_for_response();
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
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

mod chunked;
mod first_head;

#[cfg(test)]
mod tests;
