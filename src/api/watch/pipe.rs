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
//! The budget, the queue of lines and the wakeups between the two ends share one small
//! allocation: a watch whose client does not read lasts as long as its client likes, and ten
//! thousand of them should cost little more than their connections (a tokio channel and
//! semaphore cost a watch ~2 KiB).
//!
//! Owns the budget and the body's queue; knows nothing of events or objects.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Frame;
use tokio::sync::{Notify, Semaphore};

use crate::api::body::RespBody;

/// Bytes of rendered lines one watch may have between its task and the transport. A longer
/// line takes the whole budget and goes alone.
pub const BUDGET: usize = 32 << 10;
/// Lines one watch may have queued for the connection, however small.
pub const LINES: usize = 64;

/// What the two ends share.
struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the sink's waits: a line taken from the queue, or the body gone.
    changed: Notify,
    /// The budget, in bytes of lines handed over and not yet let go.
    budget: Semaphore,
}

#[derive(Default)]
struct Queue {
    lines: VecDeque<Vec<Bytes>>,
    /// The body, waiting for a line.
    body_waiting: Option<Waker>,
    body_gone: bool,
    sink_gone: bool,
}

impl Shared {
    /// The queue; one that a panic left locked is still whole (every change to it is one
    /// call that cannot panic halfway).
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Resolves when the body is gone.
    async fn body_gone(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the look, so that a change between the two wakes it.
            changed.as_mut().enable();
            if self.queue().body_gone {
                return;
            }
            changed.await;
        }
    }

    /// Takes `share` of the budget, which the caller gives back (`give_back`); `None` when the
    /// body is gone.
    async fn take(&self, share: u32) -> Option<u32> {
        tokio::select! {
            biased;
            taken = self.budget.acquire_many(share) => {
                taken.ok()?.forget();
                Some(share)
            }
            () = self.body_gone() => None,
        }
    }

    fn give_back(&self, share: u32) {
        self.budget.add_permits(share as usize);
    }
}

/// Where a watch's task writes its lines.
pub struct Sink {
    shared: Arc<Shared>,
}

/// A share of the budget taken before a line is rendered, so that a watch whose connection
/// takes nothing holds no rendered line beyond its budget. Given back when dropped unused.
pub struct Room {
    shared: Arc<Shared>,
    share: u32,
}

impl Drop for Room {
    fn drop(&mut self) {
        self.shared.give_back(self.share);
    }
}

/// A line's last piece and the line's share of the budget, given back when the last handle to
/// that piece is dropped: the connection writes a body's frames in order, so by then it has
/// let go of the line's earlier pieces too.
struct Held<B> {
    bytes: B,
    _room: Room,
}

impl<B: AsRef<[u8]>> AsRef<[u8]> for Held<B> {
    fn as_ref(&self) -> &[u8] {
        self.bytes.as_ref()
    }
}

/// The body of a watch: each queued line's pieces, one frame each, in order.
struct Lines {
    shared: Arc<Shared>,
    /// The rest of the line being handed over.
    pieces: std::vec::IntoIter<Bytes>,
}

impl http_body::Body for Lines {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(piece) = self.pieces.next() {
            return Poll::Ready(Some(Ok(Frame::data(piece))));
        }
        let mut queue = self.shared.queue();
        let Some(line) = queue.lines.pop_front() else {
            if queue.sink_gone {
                return Poll::Ready(None);
            }
            queue.body_waiting = Some(cx.waker().clone());
            return Poll::Pending;
        };
        drop(queue);
        self.shared.changed.notify_waiters();
        self.pieces = line.into_iter();
        match self.pieces.next() {
            Some(piece) => Poll::Ready(Some(Ok(Frame::data(piece)))),
            // No line is queued empty (`Sink::push`); were one, the next poll goes on.
            None => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let queued = {
            let mut queue = self.shared.queue();
            queue.body_gone = true;
            std::mem::take(&mut queue.lines)
        };
        // The queued lines' shares come back (outside the lock: nothing waits on it for them).
        drop(queued);
        self.shared.changed.notify_waiters();
    }
}

/// A watch body and the sink that feeds it. The body ends when the sink is dropped (after
/// the lines already queued).
pub fn channel() -> (Sink, RespBody) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue::default()),
        changed: Notify::new(),
        budget: Semaphore::new(BUDGET),
    });
    let body = Lines { shared: shared.clone(), pieces: Vec::new().into_iter() };
    (Sink { shared }, BodyExt::boxed_unsync(body))
}

/// A line's share of the budget: the bytes it holds (its capacity), at least one, at most the
/// whole budget.
fn share_of(bytes: usize) -> u32 {
    u32::try_from(bytes.clamp(1, BUDGET)).unwrap_or(u32::MAX)
}

impl Sink {
    /// Waits until the budget has room for a line of about `bytes`; `None` when the response
    /// is gone.
    pub async fn room(&self, bytes: usize) -> Option<Room> {
        let share = self.shared.take(share_of(bytes)).await?;
        Some(Room { shared: self.shared.clone(), share })
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
        let Some(room) = self.grow(room, line.capacity()).await else { return false };
        self.push(vec![Bytes::from_owner(Held { bytes: line, _room: room })]).await
    }

    /// Queues a line made of `pieces` (slices of shared bytes, and what was rendered between
    /// them), in `room`: counted against the budget by its length, as a rendered line is.
    pub async fn send_pieces_in(&self, room: Room, mut pieces: Vec<Bytes>) -> bool {
        let bytes = pieces.iter().map(Bytes::len).sum();
        let Some(room) = self.grow(room, bytes).await else { return false };
        let Some(last) = pieces.pop() else { return true };
        pieces.push(Bytes::from_owner(Held { bytes: last, _room: room }));
        self.push(pieces).await
    }

    /// `room` grown to the share of a line of `bytes`: a line longer than its room waits for
    /// the rest first.
    async fn grow(&self, mut room: Room, bytes: usize) -> Option<Room> {
        let missing = share_of(bytes).saturating_sub(room.share);
        if missing > 0 {
            room.share += self.shared.take(missing).await?;
        }
        Some(room)
    }

    /// Queues a line (not empty) once fewer than `LINES` are queued; false when the body is
    /// gone.
    async fn push(&self, line: Vec<Bytes>) -> bool {
        let mut line = Some(line);
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(queued) = self.try_push(&mut line) {
                return queued;
            }
            changed.await;
        }
    }

    /// Queues the line in `line` if there is room (taking it): `Some(true)`; `Some(false)`
    /// when the body is gone; `None` when the queue is full.
    fn try_push(&self, line: &mut Option<Vec<Bytes>>) -> Option<bool> {
        let mut queue = self.shared.queue();
        if queue.body_gone {
            return Some(false);
        }
        if queue.lines.len() >= LINES {
            return None;
        }
        queue.lines.extend(line.take().filter(|line| !line.is_empty()));
        if let Some(body) = queue.body_waiting.take() {
            body.wake();
        }
        Some(true)
    }

    /// Queues a line that is never counted against the budget (the opening error event).
    pub fn try_send_now(&self, line: Vec<u8>) -> bool {
        self.try_push(&mut Some(vec![Bytes::from(line)])).unwrap_or(false)
    }

    /// Resolves when the response's body is gone (the client left).
    pub async fn closed(&self) {
        self.shared.body_gone().await;
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let body = {
            let mut queue = self.shared.queue();
            queue.sink_gone = true;
            queue.body_waiting.take()
        };
        if let Some(body) = body {
            body.wake();
        }
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

    #[tokio::test]
    async fn a_sink_waiting_for_room_learns_that_the_body_went() {
        let (sink, mut body) = channel();
        assert!(sink.send(vec![b'x'; BUDGET]).await);
        let held = next_line(&mut body).unwrap();
        let mut waiting = std::pin::pin!(sink.room(1));
        assert!(futures_util::FutureExt::now_or_never(waiting.as_mut()).is_none(), "the budget is spent");
        drop(body);
        assert!(waiting.await.is_none(), "the body is gone");
        // The connection still held the line: its share comes back when it lets go.
        drop(held);
        assert_eq!(sink.shared.budget.available_permits(), BUDGET);
    }

    #[tokio::test]
    async fn at_most_lines_lines_wait_for_the_connection_however_small() {
        let (sink, mut body) = channel();
        for _ in 0..LINES {
            assert!(sink.send(b"a\n".to_vec()).await);
        }
        let mut next = std::pin::pin!(sink.send(b"b\n".to_vec()));
        assert!(futures_util::FutureExt::now_or_never(next.as_mut()).is_none(), "the queue is full");
        assert_eq!(next_line(&mut body).unwrap(), Bytes::from_static(b"a\n"));
        assert!(next.await, "a line taken makes room for the next");
        let lines: Vec<Bytes> = std::iter::from_fn(|| next_line(&mut body)).collect();
        assert_eq!(lines.len(), LINES);
        assert_eq!(lines.last().unwrap(), &Bytes::from_static(b"b\n"));
        drop(lines);
        // Unused room is given back.
        drop(sink.room(10).await.unwrap());
        assert_eq!(sink.shared.budget.available_permits(), BUDGET);
    }
}
