//! The first request head of an HTTP/1.1 connection, read before hyper takes the connection, so
//! that a connection opened for one watch (as kubectl, informers without HTTP/2, or any client
//! with one connection per watch open it) need not keep hyper's per-connection buffers (8 KiB
//! to read, 8 KiB to write) for as long as the watch lasts.
//!
//! A head is taken here only when it is plainly a watch and nothing else: a complete `GET`
//! over HTTP/1.1 in origin form, asking to watch (`watch=` true in the query, or a `watch`
//! path segment), with no body and nothing hyper answers on its own or keeps for later (no
//! `Content-Length`, `Transfer-Encoding`, `Expect`, `Upgrade` or `Connection` header), and no
//! byte after its blank line. Everything else — another request, a malformed or unfinished
//! head, one larger than [`FIRST_HEAD_LIMIT`] — goes to hyper with the bytes read so far
//! replayed first ([`Replayed`]), and is answered by hyper exactly as if it had read them; so
//! is a watch whose answer is not a stream (a refusal), its head parsed again by hyper.
//!
//! Owns this reading and parsing; what is done with the request is `connection`'s.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Request, Uri, Version, header};
use http_body_util::{BodyExt, Empty};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use crate::api::body::ReqBody;

/// The largest first head read here; a larger one goes to hyper, whose limit is Go's (1 MiB).
/// Watch heads are a few hundred bytes (a bearer token or front-proxy headers add a few more).
pub const FIRST_HEAD_LIMIT: usize = 16 << 10;
/// How much room each read of the head gets.
const READ_ROOM: usize = 1024;
/// Header fields in a head hyper parses (its default); more is hyper's 431 to answer.
const MAX_HEADERS: usize = 100;

/// What the first bytes of a connection are.
#[derive(Debug)]
pub enum FirstHead {
    /// A watch, parsed, and its head's bytes (for hyper to read, should the watch be answered
    /// by a response hyper sends).
    Watch(Box<Request<ReqBody>>, Vec<u8>),
    /// Anything else, or a head still incomplete: these bytes are hyper's to read first.
    Other(Vec<u8>),
    /// The client closed the connection (or it failed) before sending anything.
    Gone,
}

/// What a head's bytes are so far.
enum Parsed {
    Watch(Box<Request<ReqBody>>),
    Partial,
    Other,
}

/// Reads the first head from `stream` into `read` until it is a watch, something else, or
/// larger than [`FIRST_HEAD_LIMIT`]. Cancelling it leaves what was read in `read` (each read
/// appends whole): the caller then hands those bytes to hyper.
pub async fn read<S: AsyncRead + Unpin>(stream: &mut S, read: &mut Vec<u8>) -> FirstHead {
    loop {
        if read.capacity() - read.len() < READ_ROOM / 2 {
            read.reserve(READ_ROOM);
        }
        match stream.read_buf(read).await {
            Ok(0) | Err(_) if read.is_empty() => return FirstHead::Gone,
            // hyper meets the same end (or error) after the replayed bytes and answers as it does.
            Ok(0) | Err(_) => return FirstHead::Other(std::mem::take(read)),
            Ok(_) => {}
        }
        match parse(read) {
            Parsed::Watch(request) => return FirstHead::Watch(request, std::mem::take(read)),
            Parsed::Partial if read.len() < FIRST_HEAD_LIMIT => {}
            Parsed::Partial | Parsed::Other => return FirstHead::Other(std::mem::take(read)),
        }
    }
}

/// Parses `bytes` as a watch's head, as hyper would parse it (httparse, its default limits).
fn parse(bytes: &[u8]) -> Parsed {
    // Not even a GET: no need to wait for the rest.
    if !b"GET ".starts_with(bytes.get(..4).unwrap_or(bytes)) {
        return Parsed::Other;
    }
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut head = httparse::Request::new(&mut fields);
    let length = match head.parse(bytes) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(_) => return Parsed::Other,
    };
    if length != bytes.len() || head.method != Some("GET") || head.version != Some(1) {
        return Parsed::Other;
    }
    let Some(target) = head.path.filter(|p| p.starts_with('/')) else {
        return Parsed::Other;
    };
    let Ok(uri) = Uri::try_from(target) else {
        return Parsed::Other;
    };
    if !asks_to_watch(&uri) {
        return Parsed::Other;
    }
    let mut request = Request::new(Empty::<Bytes>::new().map_err(|never| match never {}).boxed_unsync());
    *request.method_mut() = Method::GET;
    *request.uri_mut() = uri;
    *request.version_mut() = Version::HTTP_11;
    let headers = request.headers_mut();
    headers.reserve(head.headers.len());
    for field in head.headers.iter() {
        let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(field.name.as_bytes()), HeaderValue::from_bytes(field.value))
        else {
            return Parsed::Other;
        };
        if [header::CONTENT_LENGTH, header::TRANSFER_ENCODING, header::EXPECT, header::UPGRADE, header::CONNECTION]
            .contains(&name)
        {
            return Parsed::Other;
        }
        headers.append(name, value);
    }
    Parsed::Watch(Box::new(request))
}

/// Whether a request target asks to watch: a `watch` path segment (the deprecated watch paths)
/// or a `watch` parameter Go's `strconv.ParseBool` reads as true. (A mistaken guess costs
/// nothing but this look: the request is answered as any other.)
fn asks_to_watch(uri: &Uri) -> bool {
    uri.path().split('/').any(|segment| segment == "watch")
        || uri.query().is_some_and(|query| {
            query
                .split('&')
                .any(|pair| matches!(pair.split_once('='), Some(("watch", "1" | "t" | "T" | "true" | "TRUE" | "True"))))
        })
}

/// A stream whose first reads return bytes already read from it.
pub struct Replayed<S> {
    replay: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Replayed<S> {
    pub fn new(inner: S, replay: Vec<u8>) -> Self {
        Replayed { replay, at: 0, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replayed<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.at < this.replay.len() {
            let rest = this.replay.get(this.at..).unwrap_or_default();
            let n = rest.len().min(buf.remaining());
            buf.put_slice(rest.get(..n).unwrap_or_default());
            this.at += n;
            if this.at == this.replay.len() {
                // Replayed in full: its memory goes.
                this.replay = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

writes_to_inner!(Replayed);

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(bytes: &[u8]) -> &'static str {
        match parse(bytes) {
            Parsed::Watch(_) => "watch",
            Parsed::Partial => "partial",
            Parsed::Other => "other",
        }
    }

    #[test]
    fn only_plain_watch_heads_are_taken() {
        let watch = b"GET /apis/g/v1/things?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n";
        assert_eq!(parsed(watch), "watch");
        let Parsed::Watch(request) = parse(watch) else { unreachable!() };
        assert_eq!(request.uri(), "/apis/g/v1/things?watch=true&resourceVersion=0");
        assert_eq!(request.headers()["host"], "x");
        assert_eq!(request.headers()["accept"], "application/json");
        assert_eq!(request.version(), Version::HTTP_11);
        assert_eq!(parsed(b"GET /apis/g/v1/watch/things HTTP/1.1\r\nHost: x\r\n\r\n"), "watch");
        assert_eq!(parsed(b"GET /api?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n"), "watch");
        assert_eq!(parsed(&watch[..watch.len() - 2]), "partial");
        assert_eq!(parsed(b"GE"), "partial");
        for other in [
            &b"GET /apis/g/v1/things HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"GET /api?watch=false HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /api?watch=yes HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /api?watch=true HTTP/1.0\r\nHost: x\r\n\r\n",
            b"POST /api?watch=true HTTP/1.1\r\nHost: x\r\n\r\n",
            b"PUT /api?watch=true HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET http://x/api?watch=true HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /api?watch=true HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
            b"GET /api?watch=true HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            b"GET /api?watch=true HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n",
            b"GET /api?watch=true HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n",
            b"GET /api?watch=true HTTP/1.1\r\nHost: x\r\nconnection: close\r\n\r\n",
            // A second request pipelined behind the first.
            b"GET /api?watch=true HTTP/1.1\r\nHost: x\r\n\r\nGET /api HTTP/1.1\r\n",
            b"GET /api?watch=true HTTP/1.1\r\nHo st: x\r\n\r\n",
            b"\x16\x03\x01",
        ] {
            assert_eq!(parsed(other), "other", "{}", String::from_utf8_lossy(other));
        }
        let many = format!("GET /api?watch=true HTTP/1.1\r\n{}\r\n", "a: b\r\n".repeat(MAX_HEADERS + 1));
        assert_eq!(parsed(many.as_bytes()), "other", "too many header fields are hyper's 431");
    }

    #[tokio::test]
    async fn heads_are_read_across_reads_and_anything_else_is_replayed() {
        let (mut client, mut server) = tokio::io::duplex(1 << 16);
        let reader = tokio::spawn(async move {
            let mut read = Vec::new();
            let first = super::read(&mut server, &mut read).await;
            (first, server)
        });
        tokio::io::AsyncWriteExt::write_all(&mut client, b"GET /api?watch=true HTTP/1.1\r\n").await.unwrap();
        tokio::task::yield_now().await;
        tokio::io::AsyncWriteExt::write_all(&mut client, b"Host: x\r\n\r\n").await.unwrap();
        let (first, _server) = reader.await.unwrap();
        assert!(matches!(first, FirstHead::Watch(_, _)), "{first:?}");

        let (mut client, mut server) = tokio::io::duplex(1 << 16);
        let big = format!("GET /api?watch=true HTTP/1.1\r\nx-big: {}\r\n\r\n", "y".repeat(FIRST_HEAD_LIMIT));
        tokio::io::AsyncWriteExt::write_all(&mut client, big.as_bytes()).await.unwrap();
        let mut read = Vec::new();
        let FirstHead::Other(bytes) = super::read(&mut server, &mut read).await else { panic!("a big head was taken") };
        assert!(bytes.len() >= FIRST_HEAD_LIMIT && big.as_bytes().starts_with(&bytes));
        let mut replayed = Replayed::new(server, bytes);
        let mut again = vec![0; big.len()];
        replayed.read_exact(&mut again).await.unwrap();
        assert_eq!(again, big.as_bytes(), "the replay and the rest, in order");

        let (client, mut server) = tokio::io::duplex(1 << 16);
        drop(client);
        assert!(matches!(super::read(&mut server, &mut Vec::new()).await, FirstHead::Gone));
    }
}
