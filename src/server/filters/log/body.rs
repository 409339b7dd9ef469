//! A streamed response body (a watch) whose request log line is written when it ends, as
//! kube-apiserver logs a watch when it is over, with its whole duration as latency.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::line::Line;
use crate::api::body::RespBody;

pub struct LoggedBody {
    inner: RespBody,
    /// Taken when written, so that the end and the drop write it once.
    line: Option<Line>,
    started: Instant,
}

impl LoggedBody {
    pub fn new(inner: RespBody, line: Line, started: Instant) -> LoggedBody {
        LoggedBody { inner, line: Some(line), started }
    }

    fn finish(&mut self) {
        if let Some(line) = self.line.take() {
            line.write(self.started.elapsed());
        }
    }
}

impl Body for LoggedBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    /// The client went away (or the connection closed) before the end.
    fn drop(&mut self) {
        self.finish();
    }
}
