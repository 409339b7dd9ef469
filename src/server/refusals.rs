//! Status bodies for the requests refused before any service sees them.
//!
//! HTTP/1.1: hyper refuses a request line whose URI is longer than 65,534 bytes (414) and a
//! head larger than the read buffer or with too many headers (431) with an empty body;
//! clients of a Kubernetes apiserver expect a `Status` to read, so a transport wrapper swaps
//! hyper's bare answer for one that carries a Status, and lets the client read it before the
//! close. A write that is exactly hyper's bare 414 or 431 head (no body) is replaced; every
//! other byte passes untouched. After such a refusal the shutdown drains what the client still
//! sends for a moment, as Go's server does, so that the close does not reset the connection
//! under the answer.
//!
//! HTTP/2: h2 answers a header list past its own limit with a bare 431 (and closes a connection
//! that pushes four times more). Its limit is therefore set above Go's (`HTTP2_DECODED_HEADER_LIST_BYTES`)
//! and [`header_list_refusal`] answers every list h2 delivers above Go's limit with a 431
//! Status, before the request reaches the filter chain, so that its header map is freed before
//! h2 decodes the next stream.
//!
//! Owns only these refusals; the limits' other effects (buffer sizes, h2 settings) are set by
//! `connection`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{Request, Response, Version};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::api::body::{RespBody, error_response};
use crate::api::negotiate::Encoding;
use crate::core::status::ApiError;

/// How long a refused client gets to finish sending before the connection closes.
const DRAIN_FOR: Duration = Duration::from_millis(500);

const URI_TOO_LONG: &str = "the request URI is longer than the server accepts (65534 bytes)";
const HEADERS_TOO_LARGE: &str = "the request's header fields are larger than the server accepts";

/// Largest HTTP/2 header list answered normally, in HTTP/2's measure (each field's name and
/// value plus 32 bytes, pseudo-header fields included): Go's `MaxHeaderBytes` (1 MiB) padded
/// as Go's HTTP/2 server pads it, for ten fields' overhead.
pub const HTTP2_MAX_HEADER_LIST_BYTES: usize = (1 << 20) + 10 * 32;

/// h2's own limit on a decoded header list, four times ours, so that lists between the two
/// reach [`header_list_refusal`] and get a Status. Beyond it h2 answers a bare 431; beyond four
/// times it (or about 5 MiB of encoded header block) h2 closes the connection. It also bounds
/// the decoded headers one connection holds while a header block is being received.
pub const HTTP2_DECODED_HEADER_LIST_BYTES: u32 = 4 << 20;

/// Overhead HTTP/2 counts per header field (RFC 9113, SETTINGS_MAX_HEADER_LIST_SIZE).
const FIELD_OVERHEAD: usize = 32;

/// The size of an HTTP/2 request's header list as h2 and Go measure it.
fn header_list_size<B>(request: &Request<B>) -> usize {
    let uri = request.uri();
    let field = |name: usize, value: usize| name + value + FIELD_OVERHEAD;
    let pseudo = field(":method".len(), request.method().as_str().len())
        + uri.scheme_str().map_or(0, |s| field(":scheme".len(), s.len()))
        + uri.authority().map_or(0, |a| field(":authority".len(), a.as_str().len()))
        + uri.path_and_query().map_or(0, |p| field(":path".len(), p.as_str().len()));
    pseudo + request.headers().iter().map(|(name, value)| field(name.as_str().len(), value.len())).sum::<usize>()
}

/// The 431 answer to an HTTP/2 request whose header list is larger than Go's limit, if it is.
/// HTTP/1.1 heads are bounded (and refused) by hyper's read buffer instead.
pub fn header_list_refusal<B>(request: &Request<B>) -> Option<Response<RespBody>> {
    if request.version() != Version::HTTP_2 || header_list_size(request) <= HTTP2_MAX_HEADER_LIST_BYTES {
        return None;
    }
    Some(error_response(&ApiError::new(431, "RequestHeaderFieldsTooLarge", HEADERS_TOO_LARGE), Encoding::Json))
}

/// A connection's stream with hyper's bare refusals replaced by Status answers.
pub struct WithRefusalBodies<S> {
    inner: S,
    /// The replacement being written, how much of it is written, and how many of hyper's
    /// bytes it stands for.
    replacing: Option<(Vec<u8>, usize, usize)>,
    refused: bool,
    drain_deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WithRefusalBodies<S> {
    pub fn new(inner: S) -> Self {
        WithRefusalBodies { inner, replacing: None, refused: false, drain_deadline: None }
    }
}

/// The answer to write instead of `head` when it is one of hyper's bare refusals.
fn replacement(head: &[u8]) -> Option<Vec<u8>> {
    let (code, reason, message) = if head.starts_with(b"HTTP/1.1 414 ") {
        (414, "URI Too Long", URI_TOO_LONG)
    } else if head.starts_with(b"HTTP/1.1 431 ") {
        (431, "Request Header Fields Too Large", HEADERS_TOO_LARGE)
    } else {
        return None;
    };
    // Exactly a head with no body: ends at its blank line and declares an empty body.
    let text = std::str::from_utf8(head).ok()?;
    let head_text = text.strip_suffix("\r\n\r\n")?;
    if head_text.contains("\r\n\r\n") || !head_text.lines().any(|l| l.eq_ignore_ascii_case("content-length: 0")) {
        return None;
    }
    let date = head_text.lines().find(|l| l.to_ascii_lowercase().starts_with("date:"));
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason.replace(' ', ""),
        "code": code,
    })
    .to_string();
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    if let Some(date) = date {
        out.push_str(date);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.push_str(&body);
    Some(out.into_bytes())
}

impl<S: AsyncRead + Unpin> AsyncRead for WithRefusalBodies<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for WithRefusalBodies<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.replacing.is_none() {
            match replacement(buf) {
                Some(answer) => {
                    this.refused = true;
                    this.replacing = Some((answer, 0, buf.len()));
                }
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        // hyper offers the same bytes again after a `Pending`: go on with the replacement.
        loop {
            let Some((answer, written, claimed)) = this.replacing.as_mut() else {
                return Poll::Ready(Ok(0));
            };
            let rest = answer.get(*written..).unwrap_or_default();
            if rest.is_empty() {
                let claimed = *claimed;
                this.replacing = None;
                return Poll::Ready(Ok(claimed));
            }
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, rest))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
    }

    /// hyper writes vectored when the transport can: it then keeps a body's `Bytes` until they
    /// are written instead of copying them into a buffer of its own (up to its 1 MiB read and
    /// write limit per connection), which is what bounds the memory of a watch whose client
    /// does not read (`api::watch`). A bare refusal is a head alone: one slice, checked as
    /// `poll_write` checks it.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut slices = bufs.iter().filter(|b| !b.is_empty());
        match (slices.next(), slices.next()) {
            (None, _) => Poll::Ready(Ok(0)),
            (Some(only), None) => self.poll_write(cx, only),
            _ if self.replacing.is_some() => {
                let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &b[..]);
                self.poll_write(cx, first)
            }
            _ => Pin::new(&mut self.inner).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.drain_deadline.is_none() {
            ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
            if !this.refused {
                return Poll::Ready(Ok(()));
            }
            this.drain_deadline = Some(Box::pin(tokio::time::sleep(DRAIN_FOR)));
        }
        // Read and drop what the refused client still sends, until it closes or time is up.
        let mut scratch = [0u8; 8192];
        loop {
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => continue,
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Pending => {
                    return match this.drain_deadline.as_mut().map(|d| d.as_mut().poll(cx)) {
                        Some(Poll::Pending) => Poll::Pending,
                        _ => Poll::Ready(Ok(())),
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bare_refusals_are_replaced() {
        let bare = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: Wed, 25 Nov 2026 02:29:42 GMT\r\n\r\n";
        let answer = String::from_utf8(replacement(bare).unwrap()).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(head.contains("\r\ndate: Wed, 25 Nov 2026 02:29:42 GMT"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let status: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            (status["code"].as_u64(), status["reason"].as_str()),
            (Some(431), Some("RequestHeaderFieldsTooLarge"))
        );
        assert!(replacement(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n\r\n").is_some());
        // Our own answers (with bodies), other codes, and heads followed by more bytes pass.
        assert!(replacement(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 2\r\n\r\n").is_none());
        assert!(replacement(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n\r\n{}").is_none());
        assert!(replacement(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").is_none());
        assert!(replacement(b"\x00\x00\x12\x04").is_none());
    }

    fn h2_request(header: usize) -> Request<()> {
        Request::builder()
            .version(Version::HTTP_2)
            .uri("https://localhost:8443/api")
            .header("x-big", "x".repeat(header))
            .body(())
            .unwrap()
    }

    #[test]
    fn http2_header_lists_are_measured_as_go_measures_them() {
        // :method GET, :scheme https, :authority localhost:8443, :path /api, x-big.
        let fixed = (7 + 3 + 32) + (7 + 5 + 32) + (10 + 14 + 32) + (5 + 4 + 32) + (5 + 32);
        assert_eq!(header_list_size(&h2_request(10)), fixed + 10);
        let at_limit = HTTP2_MAX_HEADER_LIST_BYTES - fixed;
        assert!(header_list_refusal(&h2_request(at_limit)).is_none());
        let refused = header_list_refusal(&h2_request(at_limit + 1)).unwrap();
        assert_eq!(refused.status(), 431);
        assert_eq!(refused.headers()["content-type"], "application/json");
        // HTTP/1.1 requests are hyper's to bound.
        let mut http1 = h2_request(at_limit + 1);
        *http1.version_mut() = Version::HTTP_11;
        assert!(header_list_refusal(&http1).is_none());
    }
}
