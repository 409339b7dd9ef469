//! The body of a watch response: encoded event lines handed from the watch's task to the
//! connection under a byte budget per watch.
//!
//! A line's share of the budget comes back only when the connection lets go of the line's
//! bytes: hyper (HTTP/1.1, writing `Bytes` as they are) and h2 (holding a stream's data until
//! flow control lets it out) keep a body's `Bytes` until they have handed them to the
//! transport. A watch whose client does not read therefore holds at most [`BUDGET`] bytes of
//! rendered lines (room is taken before a line is rendered), and renders nothing more until the socket drains: its state (the initial
//! objects, its queue of events) stays shared with the store until then. A line may come in
//! pieces, some of them slices of the store's own bytes (`send_pieces_in`): each piece is a
//! frame of the body, and a stalled connection then holds references to the stored object
//! rather than a copy of it.
//!
//! Owns the budget and the body's channel; knows nothing of events or objects.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Frame;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::api::body::RespBody;

/// Bytes of rendered lines one watch may have between its task and the transport. A longer
/// line takes the whole budget and goes alone.
pub const BUDGET: usize = 32 << 10;
/// Lines one watch may have queued for the connection, however small.
pub const LINES: usize = 64;

/// Where a watch's task writes its lines.
pub struct Sink {
    lines: mpsc::Sender<Vec<Bytes>>,
    budget: Arc<Semaphore>,
}

/// A line's last piece and the line's share of the budget, returned when the last handle to
/// that piece is dropped: the connection writes a body's frames in order, so by then it has
/// let go of the line's earlier pieces too.
struct Held<B> {
    bytes: B,
    _share: OwnedSemaphorePermit,
}

impl<B: AsRef<[u8]>> AsRef<[u8]> for Held<B> {
    fn as_ref(&self) -> &[u8] {
        self.bytes.as_ref()
    }
}

/// The body of a watch: each queued line's pieces, one frame each, in order.
struct Lines {
    queued: mpsc::Receiver<Vec<Bytes>>,
    /// The rest of the line being handed over.
    pieces: std::vec::IntoIter<Bytes>,
}

impl http_body::Body for Lines {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        loop {
            if let Some(piece) = self.pieces.next() {
                return Poll::Ready(Some(Ok(Frame::data(piece))));
            }
            match ready!(self.queued.poll_recv(cx)) {
                Some(line) => self.pieces = line.into_iter(),
                None => return Poll::Ready(None),
            }
        }
    }
}

/// A watch body and the sink that feeds it. The body ends when the sink is dropped (after
/// the lines already queued).
pub fn channel() -> (Sink, RespBody) {
    let (lines, queued) = mpsc::channel::<Vec<Bytes>>(LINES);
    let sink = Sink { lines, budget: Arc::new(Semaphore::new(BUDGET)) };
    (sink, BodyExt::boxed_unsync(Lines { queued, pieces: Vec::new().into_iter() }))
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
    #[cfg(test)]
    pub async fn send(&self, line: Vec<u8>) -> bool {
        match self.room(line.capacity()).await {
            Some(room) => self.send_in(room, line).await,
            None => false,
        }
    }

    /// Queues `line`, rendered in `room`; a line longer than its room waits for the rest of
    /// its share first.
    pub async fn send_in(&self, room: Room, line: Vec<u8>) -> bool {
        let Some(share) = self.grow(room, line.capacity()).await else { return false };
        self.lines.send(vec![Bytes::from_owner(Held { bytes: line, _share: share })]).await.is_ok()
    }

    /// Queues a line made of `pieces` (slices of shared bytes, and what was rendered between
    /// them), in `room`: counted against the budget by its length, as a rendered line is.
    pub async fn send_pieces_in(&self, room: Room, mut pieces: Vec<Bytes>) -> bool {
        let bytes = pieces.iter().map(Bytes::len).sum();
        let Some(share) = self.grow(room, bytes).await else { return false };
        let Some(last) = pieces.pop() else { return true };
        pieces.push(Bytes::from_owner(Held { bytes: last, _share: share }));
        self.lines.send(pieces).await.is_ok()
    }

    /// `room` grown to the share of a line of `bytes`: a line longer than its room waits for
    /// the rest first.
    async fn grow(&self, Room(mut share): Room, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let missing = share_of(bytes).saturating_sub(share.num_permits());
        if missing > 0 {
            let Room(more) = self.room(missing).await?;
            share.merge(more);
        }
        Some(share)
    }

    /// Queues a line that is never counted against the budget (the opening error event).
    pub fn try_send_now(&self, line: Vec<u8>) -> bool {
        self.lines.try_send(vec![Bytes::from(line)]).is_ok()
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
    async fn a_line_in_pieces_is_handed_over_in_order_and_its_share_comes_back_with_the_last() {
        let (sink, mut body) = channel();
        let stored = Bytes::from(vec![b's'; BUDGET / 2]);
        let pieces = vec![Bytes::from_static(b"{"), stored.slice(..10), Bytes::from(b"|".to_vec()), stored.slice(10..)];
        assert!(sink.send_pieces_in(sink.room(BUDGET).await.unwrap(), pieces).await);
        let mut next = std::pin::pin!(sink.send(b"n\n".to_vec()));
        assert!(futures_util::FutureExt::now_or_never(next.as_mut()).is_none(), "the line took the whole budget");
        let frames: Vec<Bytes> = (0..4).map(|_| next_line(&mut body).unwrap()).collect();
        assert_eq!(frames.concat(), [&b"{"[..], &stored[..10], b"|", &stored[10..]].concat());
        // The stored pieces are the stored bytes, not copies of them.
        assert_eq!(frames[1].as_ptr(), stored.as_ptr());
        assert_eq!(frames[3].as_ptr(), stored[10..].as_ptr());
        let mut frames = frames.into_iter();
        let last = frames.next_back().unwrap();
        drop(frames);
        assert!(futures_util::FutureExt::now_or_never(next.as_mut()).is_none(), "the last piece holds the share");
        drop(last);
        assert!(next.await, "the line's share came back with its last piece");
        assert_eq!(next_line(&mut body).unwrap(), Bytes::from_static(b"n\n"));
    }

    #[tokio::test]
    async fn a_sink_whose_body_is_gone_reports_it() {
        let (sink, body) = channel();
        drop(body);
        sink.closed().await;
        assert!(!sink.send(b"a\n".to_vec()).await);
    }
}
