//! A streamed response body that runs something once, with the bytes it sent, when it ends or
//! is dropped (the client went away): what the request log, the request metrics and graceful
//! termination each need to know of a list or a watch. Whole bodies never take it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use crate::api::body::RespBody;

/// `inner`, then `done` with the bytes sent.
pub fn on_end<F>(inner: RespBody, done: F) -> RespBody
where
    F: FnOnce(u64) + Send + Unpin + 'static,
{
    OnEnd { inner, bytes: 0, done: Some(done) }.boxed_unsync()
}

struct OnEnd<F: FnOnce(u64)> {
    inner: RespBody,
    bytes: u64,
    /// Taken when run, so that the end and the drop run it once.
    done: Option<F>,
}

impl<F: FnOnce(u64)> OnEnd<F> {
    fn finish(&mut self) {
        if let Some(done) = self.done.take() {
            done(self.bytes);
        }
    }
}

impl<F: FnOnce(u64) + Unpin> Body for OnEnd<F> {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.bytes += data.len() as u64;
                }
            }
            Poll::Ready(None) => self.finish(),
            _ => {}
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

impl<F: FnOnce(u64)> Drop for OnEnd<F> {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use futures_util::StreamExt;
    use http_body_util::StreamBody;

    use super::*;

    fn streamed() -> RespBody {
        let chunks = futures_util::stream::iter(["ab", "cde"]).map(|c| Ok(Frame::data(Bytes::from(c))));
        StreamBody::new(chunks).boxed_unsync()
    }

    #[tokio::test]
    async fn runs_once_at_the_end_with_the_bytes_sent() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let body = on_end(streamed(), move |bytes| record.lock().unwrap().push(bytes));
        assert_eq!(body.collect().await.unwrap().to_bytes(), "abcde");
        assert_eq!(*seen.lock().unwrap(), [5]);
    }

    #[tokio::test]
    async fn runs_when_dropped_before_the_end() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let mut body = on_end(streamed(), move |bytes| record.lock().unwrap().push(bytes));
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "ab");
        drop(body);
        assert_eq!(*seen.lock().unwrap(), [2]);
    }
}
