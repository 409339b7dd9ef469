//! The body of a watch response: encoded event lines handed from the watch's task to the
//! connection under a byte budget per watch.
//!
//! A line's share of the budget comes back only when the connection lets go of the line's
//! bytes: hyper (HTTP/1.1, writing `Bytes` as they are) and h2 (holding a stream's data until
//! flow control lets it out) keep a body's `Bytes` until they have handed them to the
//! transport. A watch whose client does not read therefore holds at most [`BUDGET`] bytes of
//! rendered lines (room is taken before a line is rendered), and renders nothing more until the socket drains: its state (the initial
//! objects, its queue of events) stays shared with the store until then.
//!
//! Owns the budget and the body's channel; knows nothing of events or objects.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use crate::api::body::RespBody;

/// Bytes of rendered lines one watch may have between its task and the transport. A longer
/// line takes the whole budget and goes alone.
pub const BUDGET: usize = 32 << 10;
/// Lines one watch may have queued for the connection, however small.
pub const LINES: usize = 64;

/// Where a watch's task writes its lines.
pub struct Sink {
    lines: mpsc::Sender<Bytes>,
    budget: Arc<Semaphore>,
}

/// A line and its share of the budget, returned when the last handle to its bytes is dropped.
struct Line {
    bytes: Vec<u8>,
    _share: OwnedSemaphorePermit,
}

impl AsRef<[u8]> for Line {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// A watch body and the sink that feeds it. The body ends when the sink is dropped (after
/// the lines already queued).
pub fn channel() -> (Sink, RespBody) {
    let (lines, receiver) = mpsc::channel::<Bytes>(LINES);
    let frames = ReceiverStream::new(receiver).map(|line| Ok::<_, Infallible>(Frame::data(line)));
    let sink = Sink { lines, budget: Arc::new(Semaphore::new(BUDGET)) };
    (sink, BodyExt::boxed_unsync(StreamBody::new(frames)))
}

/// A share of the budget taken before a line is rendered, so that a watch whose connection
/// takes nothing holds no rendered line beyond its budget.
pub struct Room(OwnedSemaphorePermit);

/// A line's share of the budget: the bytes it holds (its capacity), at least one, at most the
/// whole budget.
fn share_of(bytes: usize) -> usize {
    bytes.clamp(1, BUDGET)
}

impl Sink {
    /// Waits until the budget has room for a line of about `bytes`; `None` when the response
    /// is gone.
    pub async fn room(&self, bytes: usize) -> Option<Room> {
        let share = u32::try_from(share_of(bytes)).unwrap_or(u32::MAX);
        tokio::select! {
            biased;
            share = self.budget.clone().acquire_many_owned(share) => share.ok().map(Room),
            () = self.lines.closed() => None,
        }
    }

    /// Queues `line` once the budget has room for it; false when the response is gone.
    pub async fn send(&self, line: Vec<u8>) -> bool {
        match self.room(line.capacity()).await {
            Some(room) => self.send_in(room, line).await,
            None => false,
        }
    }

    /// Queues `line`, rendered in `room`; a line longer than its room waits for the rest of
    /// its share first.
    pub async fn send_in(&self, Room(mut share): Room, line: Vec<u8>) -> bool {
        let missing = share_of(line.capacity()).saturating_sub(share.num_permits());
        if missing > 0 {
            let Some(Room(more)) = self.room(missing).await else { return false };
            share.merge(more);
        }
        self.lines.send(Bytes::from_owner(Line { bytes: line, _share: share })).await.is_ok()
    }

    /// Queues a line that is never counted against the budget (the opening error event).
    pub fn try_send_now(&self, line: Vec<u8>) -> bool {
        self.lines.try_send(Bytes::from(line)).is_ok()
    }

    /// Resolves when the response's body is gone (the client left).
    pub async fn closed(&self) {
        self.lines.closed().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn next_line(body: &mut RespBody) -> Option<Bytes> {
        let frame = futures_util::FutureExt::now_or_never(body.frame())?;
        frame.map(|f| f.unwrap().into_data().unwrap())
    }

    #[tokio::test]
    async fn lines_wait_until_the_connection_lets_go_of_earlier_ones() {
        let (sink, mut body) = channel();
        let half = vec![b'a'; BUDGET / 2];
        assert!(sink.send(half.clone()).await);
        assert!(sink.send(half.clone()).await);
        // The budget is spent: a third line waits, even once the body handed the first two on,
        // for as long as the connection holds their bytes.
        let first = next_line(&mut body).unwrap();
        let second = next_line(&mut body).unwrap();
        let mut third = std::pin::pin!(sink.send(b"c\n".to_vec()));
        assert!(futures_util::FutureExt::now_or_never(third.as_mut()).is_none());
        drop(first);
        assert!(third.await, "the first line's share came back");
        drop(second);
        assert_eq!(next_line(&mut body).unwrap(), Bytes::from_static(b"c\n"));
    }

    #[tokio::test]
    async fn a_line_longer_than_the_budget_goes_alone() {
        let (sink, mut body) = channel();
        assert!(sink.send(vec![b'x'; BUDGET * 3]).await);
        let mut next = std::pin::pin!(sink.send(b"y\n".to_vec()));
        assert!(futures_util::FutureExt::now_or_never(next.as_mut()).is_none());
        let long = next_line(&mut body).unwrap();
        assert_eq!(long.len(), BUDGET * 3);
        drop(long);
        assert!(next.await);
    }

    #[tokio::test]
    async fn the_body_ends_after_queued_lines_when_the_sink_goes() {
        let (sink, mut body) = channel();
        assert!(sink.send(b"a\n".to_vec()).await);
        drop(sink);
        assert_eq!(next_line(&mut body).unwrap(), Bytes::from_static(b"a\n"));
        assert!(futures_util::FutureExt::now_or_never(body.frame()).unwrap().is_none());
    }

    #[tokio::test]
    async fn a_sink_whose_body_is_gone_reports_it() {
        let (sink, body) = channel();
        drop(body);
        sink.closed().await;
        assert!(!sink.send(b"a\n".to_vec()).await);
    }
}
