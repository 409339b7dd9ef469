//! Sends a response that trickles out (a watch) on an HTTP/1.1 connection without hyper, byte
//! for byte as hyper's HTTP/1.1 server sends it: its status line, the response's headers in
//! their order, `transfer-encoding: chunked` and `date`, then each body frame as a chunk
//! (`{size:X}\r\n`, the bytes, `\r\n`) and `0\r\n\r\n` at the end. While it sends, it watches
//! the client's side as hyper does mid-response: the client closing the connection ends the
//! response (and the watch); bytes it sends meanwhile (a next request) are kept for whoever
//! serves the connection next.
//!
//! Holds nothing of its own between frames but the frame being written (each frame's bytes go
//! as soon as the transport took them, which returns them to the watch's budget) and a
//! 64-byte read buffer. Owns only this encoding; which responses are sent so is `connection`'s
//! choice ([`head`] says which it can send as hyper would).

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Response, StatusCode, Version, header};
use http_body::Body;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::api::body::RespBody;

/// The head hyper's HTTP/1.1 server writes for `response` (answering a GET), if it is one whose
/// body hyper would send chunked and whose head has nothing hyper treats apart (its length,
/// encoding, connection, date or trailer fields, a reason phrase of its own): `None` otherwise.
pub fn head(response: &Response<RespBody>) -> Option<Vec<u8>> {
    let status = response.status();
    let body = response.body();
    if response.version() != Version::HTTP_11
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
        || response.extensions().get::<hyper::ext::ReasonPhrase>().is_some()
        || body.is_end_stream()
        || body.size_hint().exact().is_some()
    {
        return None;
    }
    let headers = response.headers();
    let apart = [header::CONTENT_LENGTH, header::TRANSFER_ENCODING, header::CONNECTION, header::DATE, header::TRAILER];
    if apart.iter().any(|name| headers.contains_key(name)) {
        return None;
    }
    let mut head = Vec::with_capacity(64 + headers.len() * 32);
    head.extend_from_slice(b"HTTP/1.1 ");
    head.extend_from_slice(status.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes());
    head.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"transfer-encoding: chunked\r\ndate: ");
    head.extend_from_slice(httpdate::fmt_http_date(std::time::SystemTime::now()).as_bytes());
    head.extend_from_slice(b"\r\n\r\n");
    Some(head)
}

/// How sending ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    /// The response is sent in full; the client sent these bytes meanwhile (the start of its
    /// next request, or nothing).
    Done(Vec<u8>),
    /// The client closed the connection, or writing failed: the connection is gone.
    Gone,
}

/// Sends `head` and then `body` chunked on `stream`.
pub async fn send<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, head: Vec<u8>, body: RespBody) -> Sent {
    let mut sending = Sending { out: Some(Out::Head(head, 0)), body, ended: false, received: Vec::new() };
    std::future::poll_fn(|cx| sending.poll(cx, stream)).await
}

/// What is being written.
enum Out {
    /// The head, and how much of it is written.
    Head(Vec<u8>, usize),
    /// A chunk: its size line, its bytes, and how much of the whole is written.
    Chunk(SizeLine, Bytes, usize),
    /// The last chunk, and how much of it is written.
    End(usize),
}

const CRLF: &[u8] = b"\r\n";
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// A chunk's size line, `{size:X}\r\n`.
struct SizeLine {
    bytes: [u8; 18],
    len: usize,
}

impl SizeLine {
    fn new(size: usize) -> SizeLine {
        let mut line = SizeLine { bytes: [0; 18], len: 0 };
        let digits = format!("{size:X}\r\n");
        for (slot, byte) in line.bytes.iter_mut().zip(digits.bytes()) {
            *slot = byte;
            line.len += 1;
        }
        line
    }

    fn as_slice(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }
}

struct Sending {
    out: Option<Out>,
    body: RespBody,
    /// The body has ended: the last chunk is (being) written.
    ended: bool,
    received: Vec<u8>,
}

/// What remains of `parts` after `written` bytes of them, as slices.
fn remaining<'a>(parts: [&'a [u8]; 3], mut written: usize) -> [IoSlice<'a>; 3] {
    parts.map(|part| {
        let skip = written.min(part.len());
        written -= skip;
        IoSlice::new(part.get(skip..).unwrap_or_default())
    })
}

impl Sending {
    fn poll<S: AsyncRead + AsyncWrite + Unpin>(&mut self, cx: &mut Context<'_>, stream: &mut S) -> Poll<Sent> {
        // The client's side, as hyper watches it while it sends a response: an end (or an
        // error) there ends the response; bytes are kept, and reading stops until the response
        // is sent.
        if self.received.is_empty() {
            let mut scratch = [0u8; 64];
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut *stream).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Sent::Gone),
                Poll::Ready(Ok(())) => self.received.extend_from_slice(buf.filled()),
                Poll::Ready(Err(_)) => return Poll::Ready(Sent::Gone),
                Poll::Pending => {}
            }
        }
        loop {
            let Some(out) = self.out.as_mut() else {
                if self.ended {
                    return match Pin::new(&mut *stream).poll_flush(cx) {
                        Poll::Ready(Ok(())) => Poll::Ready(Sent::Done(std::mem::take(&mut self.received))),
                        Poll::Ready(Err(_)) => Poll::Ready(Sent::Gone),
                        Poll::Pending => Poll::Pending,
                    };
                }
                match Pin::new(&mut self.body).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => {
                        // Empty frames are not chunks (an empty chunk ends the body); trailers
                        // are not sent (hyper sends them only to clients that ask).
                        if let Ok(data) = frame.into_data()
                            && !data.is_empty()
                        {
                            self.out = Some(Out::Chunk(SizeLine::new(data.len()), data, 0));
                        }
                    }
                    Poll::Ready(Some(Err(never))) => match never {},
                    Poll::Ready(None) => {
                        self.ended = true;
                        self.out = Some(Out::End(0));
                    }
                    Poll::Pending => {
                        // Nothing more to send for now: what is written goes out.
                        return match Pin::new(&mut *stream).poll_flush(cx) {
                            Poll::Ready(Err(_)) => Poll::Ready(Sent::Gone),
                            _ => Poll::Pending,
                        };
                    }
                }
                continue;
            };
            let (slices, written, total) = match out {
                Out::Head(head, written) => (remaining([head.as_slice(), &[], &[]], *written), written, head.len()),
                Out::Chunk(size, data, written) => {
                    let total = size.len + data.len() + CRLF.len();
                    (remaining([size.as_slice(), data, CRLF], *written), written, total)
                }
                Out::End(written) => (remaining([LAST_CHUNK, &[], &[]], *written), written, LAST_CHUNK.len()),
            };
            match Pin::new(&mut *stream).poll_write_vectored(cx, &slices) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(Sent::Gone),
                Poll::Ready(Ok(n)) => {
                    *written += n;
                    if *written >= total {
                        // Written: the frame's bytes go now.
                        self.out = None;
                    }
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_lines_are_hyper_s() {
        assert_eq!(SizeLine::new(0x1a2b).as_slice(), b"1A2B\r\n");
        assert_eq!(SizeLine::new(usize::MAX).as_slice(), format!("{:X}\r\n", usize::MAX).as_bytes());
    }

    #[test]
    fn remaining_skips_what_is_written() {
        let left = remaining([b"ab", b"cde", b"f"], 3);
        let left: Vec<&[u8]> = left.iter().map(|s| &s[..]).collect();
        assert_eq!(left, [&b""[..], b"de", b"f"]);
    }
}
