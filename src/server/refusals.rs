//! Status bodies for the HTTP/1.1 requests hyper refuses before any service sees them: a
//! request line whose URI is longer than 65,534 bytes (414) and a head larger than the read
//! buffer or with too many headers (431). hyper answers those with an empty body; clients of
//! a Kubernetes apiserver expect a `Status` to read, so this transport wrapper swaps hyper's
//! bare answer for one that carries a Status, and lets the client read it before the close.
//!
//! Owns only that rewrite, on the connection's byte stream: a write that is exactly hyper's
//! bare 414 or 431 head (no body) is replaced; every other byte passes untouched. After such a
//! refusal the shutdown drains what the client still sends for a moment, as Go's server does,
//! so that the close does not reset the connection under the answer.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How long a refused client gets to finish sending before the connection closes.
const DRAIN_FOR: Duration = Duration::from_millis(500);

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
        (414, "URI Too Long", "the request URI is longer than the server accepts (65534 bytes)")
    } else if head.starts_with(b"HTTP/1.1 431 ") {
        (431, "Request Header Fields Too Large", "the request's header fields are larger than the server accepts")
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
}
