//! Raw bytes on one client connection to the server's connection layer (hyper with the
//! server's limits, timeouts and refusal bodies), in virtual time: whatever arrives, the
//! connection ends within the header and idle timeouts, every answer is well-formed HTTP,
//! and the refusals hyper makes itself carry a Status body.

use std::sync::Arc;
use std::time::Duration;

use arbitrary::Arbitrary;
use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crd_apiserver::api::body::bytes_response;
use crd_apiserver::server::conn::ConnInfo;
use crd_apiserver::server::connection::{ConnectionSettings, Streaming, serve_stream};
use crd_apiserver::server::filters::endpoint;

/// Pieces of requests the parser must tell apart.
const PIECES: &[&str] = &[
    "GET / HTTP/1.1\r\n",
    "POST /apis/x/v1/y HTTP/1.1\r\n",
    "GET /version HTTP/1.0\r\n",
    "Host: x\r\n",
    "Content-Length: 5\r\n",
    "Content-Length: 99999999999999999999\r\n",
    "Transfer-Encoding: chunked\r\n",
    "Connection: close\r\n",
    "Connection: upgrade\r\nUpgrade: h2c\r\n",
    "Expect: 100-continue\r\n",
    "\r\n",
    "5\r\nhello\r\n0\r\n\r\n",
    "ffffffffffffffff\r\n",
    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "hello",
];

#[derive(Debug, Clone, Arbitrary)]
enum Chunk {
    Piece(u8),
    Bytes(Vec<u8>),
    /// A long run of one byte (long URIs, heads past the limits).
    Run { byte: u8, kib: u16 },
    /// The client pauses for this many seconds (virtual time).
    Pause(u8),
}

#[derive(Debug, Clone, Arbitrary)]
pub struct Session {
    chunks: Vec<Chunk>,
    /// Whether the client closes its sending side at the end (or just stops and waits).
    close: bool,
}

impl Session {
    pub fn run(&self) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        runtime.block_on(self.exchange());
    }

    async fn exchange(&self) {
        let (client, server) = tokio::io::duplex(1 << 16);
        // Reads the whole body, within the deadline the server's timeout filter puts on every
        // request (60 s): a client that announces a body and never sends it is answered 504.
        let handler = endpoint(|request: http::Request<_>| async move {
            match tokio::time::timeout(Duration::from_secs(60), request.into_body().collect()).await {
                Ok(body) => {
                    let read = body.map(|b| b.to_bytes().len()).unwrap_or(0);
                    bytes_response(StatusCode::OK, "text/plain", Bytes::from(read.to_string()))
                }
                Err(_) => bytes_response(StatusCode::GATEWAY_TIMEOUT, "text/plain", Bytes::from_static(b"timeout")),
            }
        });
        let info = ConnInfo::new(([127, 0, 0, 1], 1).into(), Vec::new());
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let settings = Arc::new(ConnectionSettings::default());
        let connection = tokio::spawn(serve_stream(server, info, handler, settings, shutdown, Streaming::default()));
        let (mut from_server, mut to_server) = tokio::io::split(client);
        let reader = tokio::spawn(async move {
            let mut out = Vec::new();
            let _ = from_server.read_to_end(&mut out).await;
            out
        });
        let mut paused = 0u32;
        for chunk in self.chunks.iter().take(64) {
            let bytes: Vec<u8> = match chunk {
                Chunk::Piece(i) => PIECES[usize::from(*i) % PIECES.len()].as_bytes().to_vec(),
                Chunk::Bytes(b) => b.clone(),
                Chunk::Run { byte, kib } => vec![*byte; usize::from(*kib % 2048) * 1024],
                Chunk::Pause(seconds) => {
                    paused += u32::from(*seconds);
                    if paused <= 120 {
                        tokio::time::sleep(Duration::from_secs(u64::from(*seconds))).await;
                    }
                    continue;
                }
            };
            if to_server.write_all(&bytes).await.is_err() {
                break;
            }
        }
        if self.close {
            let _ = to_server.shutdown().await;
        }
        // Past the header (32 s), request (60 s) and idle (90 s) timeouts the server must have
        // let go.
        match tokio::time::timeout(Duration::from_secs(300), connection).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("the connection task failed: {e}"),
            Err(_) => panic!("the connection was still open 300 s after the client went quiet"),
        }
        drop(to_server);
        let out = reader.await.unwrap_or_else(|e| panic!("reader: {e}"));
        check(&out);
    }
}

/// What the server wrote: nothing, HTTP/2 frames, or HTTP/1 answers; hyper's own refusals
/// carry a Status.
fn check(out: &[u8]) {
    if out.is_empty() || out.get(3) == Some(&0x04) {
        return;
    }
    assert!(out.starts_with(b"HTTP/1.1 ") || out.starts_with(b"HTTP/1.0 "), "not HTTP: {:?}", &out[..out.len().min(64)]);
    for refusal in [&b"HTTP/1.1 414 "[..], &b"HTTP/1.1 431 "[..]] {
        if let Some(at) = out.windows(refusal.len()).position(|w| w == refusal) {
            let rest = &out[at..];
            let bare = rest.windows(4).position(|w| w == b"\r\n\r\n").is_some_and(|end| rest.len() == end + 4);
            assert!(!bare || at > 0, "a bare refusal without a Status body: {:?}", String::from_utf8_lossy(rest));
        }
    }
}
