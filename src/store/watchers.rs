//! A backend's watchers: each one's bounded queue of events, filled by the store (`Watcher`) and
//! emptied by the `Watch` its caller holds, and the watchers of a backend by resource
//! (`Registry`).
//!
//! The registry has a lock of its own, apart from the history's window, so that a `Watch` that
//! is dropped takes its watcher out at once: a watcher must cost nothing once its client went,
//! whether or not its resource changes again (10,000 watches that went and left their queues
//! registered until the next event kept ~1 KiB each).
//!
//! Owns queuing, its limits, and registration. Must not do I/O or know the window: the history
//! decides what is delivered and when.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Notify;

use crate::store::Event;

/// Events queued per watcher; a watcher that falls this far behind is dropped. Each is a
/// pointer to the shared event: 1024 of them cost a watcher 8 KiB at most, and absorb bursts
/// (a migration's page, a `deletecollection`) for watchers that do read.
pub(crate) const WATCHER_EVENTS: usize = 1024;
/// Bytes of values queued per watcher: what one watcher that stopped reading can keep alive
/// after the window has let the values go.
pub(crate) const WATCHER_BYTES: usize = 16 << 20;
/// Queue slots an emptied queue keeps: a burst's larger buffer is let go once it is taken.
const KEPT_SLOTS: usize = 16;

pub(crate) fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing here panics while holding a lock; a poisoned one still holds consistent state.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The bytes of values an event holds in a watcher's queue (shared with the window and every
/// other watcher, but kept alive by the queue for as long as it holds them).
fn queued_bytes(event: &Event) -> usize {
    event.value.len() + event.prev.as_ref().map_or(0, bytes::Bytes::len)
}

#[derive(Default)]
struct Queued {
    events: VecDeque<Arc<Event>>,
    /// `queued_bytes` of `events`.
    bytes: usize,
    /// The store let the watcher go (it fell behind, the store was reset or closed): what is
    /// queued can still be taken, then the watch ends.
    ended: bool,
}

/// What a watcher's two sides share: the events queued, and whether the store dropped the
/// watcher because the queue filled.
#[derive(Default)]
pub(crate) struct Queue {
    queued: Mutex<Queued>,
    overflowed: std::sync::atomic::AtomicBool,
    /// Wakes the one taker: an event was queued, or the queue ended.
    ready: Notify,
    /// Wakes those waiting for an overflow (`Watch::fell_behind`).
    overflow: Notify,
}

enum Taken {
    Event(Arc<Event>),
    Empty,
    Ended,
}

impl Queue {
    /// Queues `event`; false when the watcher must be dropped: its queue is full in events or in bytes (a watcher that stopped reading). A single event
    /// larger than the byte limit still goes into an empty queue.
    fn offer(&self, event: &Arc<Event>) -> bool {
        let size = queued_bytes(event);
        let mut queued = locked(&self.queued);
        let over_bytes = queued.bytes > 0 && queued.bytes + size > WATCHER_BYTES;
        if queued.events.len() >= WATCHER_EVENTS || over_bytes {
            drop(queued);
            self.overflowed.store(true, std::sync::atomic::Ordering::Release);
            self.overflow.notify_waiters();
            return false;
        }
        queued.events.push_back(event.clone());
        queued.bytes += size;
        drop(queued);
        self.ready.notify_one();
        true
    }

    fn take(&self) -> Taken {
        let mut queued = locked(&self.queued);
        match queued.events.pop_front() {
            Some(event) => {
                queued.bytes -= queued_bytes(&event);
                if queued.events.is_empty() && queued.events.capacity() > KEPT_SLOTS {
                    queued.events.shrink_to(KEPT_SLOTS);
                }
                Taken::Event(event)
            }
            None if queued.ended => Taken::Ended,
            None => Taken::Empty,
        }
    }

    fn is_empty(&self) -> bool {
        locked(&self.queued).events.is_empty()
    }

    fn end(&self) {
        locked(&self.queued).ended = true;
        self.ready.notify_one();
    }

    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        locked(&self.queued).bytes
    }
}

/// The store's side of one watch: the key prefix it watches and the queue it fills. Dropping
/// it (the store let the watcher go) ends the watch once the queue is taken.
pub(crate) struct Watcher {
    prefix: String,
    queue: Arc<Queue>,
}

impl Watcher {
    /// Queues `event` if it is under this watcher's prefix; false when the watcher must be
    /// dropped (`Queue::offer`).
    pub fn deliver(&self, event: &Arc<Event>) -> bool {
        !event.key.starts_with(&self.prefix) || self.queue.offer(event)
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.queue.end();
    }
}

/// The watchers of one backend by resource prefix (`/group/plural/`).
#[derive(Default)]
pub(crate) struct Registry {
    by_resource: HashMap<String, HashMap<u64, Watcher>>,
    next_id: u64,
}

impl Registry {
    /// The watchers of `resource`, for delivering one of its events (`Watcher::deliver`);
    /// those for which `keep` is false are dropped.
    pub fn deliver(&mut self, resource: &str, mut keep: impl FnMut(&Watcher) -> bool) {
        if let Some(watchers) = self.by_resource.get_mut(resource) {
            watchers.retain(|_, watcher| keep(watcher));
            if watchers.is_empty() {
                self.by_resource.remove(resource);
            }
        }
    }

    /// Drops every watcher: their watches end once they took what is queued.
    pub fn clear(&mut self) {
        self.by_resource.clear();
    }

    #[cfg(test)]
    pub(crate) fn count(&self, resource: &str) -> usize {
        self.by_resource.get(resource).map_or(0, HashMap::len)
    }

    /// The slots the watchers of `resource` hold, taken or not.
    #[cfg(test)]
    pub(crate) fn slots(&self, resource: &str) -> usize {
        self.by_resource.get(resource).map_or(0, HashMap::capacity)
    }

    fn remove(&mut self, resource: &str, id: u64) {
        let Some(watchers) = self.by_resource.get_mut(resource) else {
            return;
        };
        watchers.remove(&id);
        if watchers.is_empty() {
            self.by_resource.remove(resource);
        } else if watchers.capacity() > 64 && watchers.len() * 4 < watchers.capacity() {
            // After thousands of watchers went, their slots go too (halving at most as often
            // as the count halves twice, so removals stay constant time on average).
            watchers.shrink_to(watchers.len() * 2);
        }
    }
}

/// A backend's `Registry`, shared with the `Watch`es it hands out.
pub(crate) type SharedRegistry = Arc<Mutex<Registry>>;

/// Registers a watcher of `prefix` under `resource`: the `Watch` that takes its events, with
/// `backlog` (the events before it registered) first.
pub(crate) fn register(
    registry: &SharedRegistry,
    resource: String,
    prefix: &str,
    backlog: VecDeque<Arc<Event>>,
) -> Watch {
    let queue = Arc::new(Queue::default());
    let mut watchers = locked(registry);
    let id = watchers.next_id;
    watchers.next_id += 1;
    let watcher = Watcher { prefix: prefix.to_string(), queue: queue.clone() };
    watchers.by_resource.entry(resource.clone()).or_default().insert(id, watcher);
    drop(watchers);
    Watch { backlog, queue, registration: Registration { registry: Arc::downgrade(registry), resource, id } }
}

/// Where a `Watch`'s watcher is registered, to take it out when the watch is dropped.
struct Registration {
    /// Weak: a closed store lets its watchers go, whoever still holds their watches.
    registry: Weak<Mutex<Registry>>,
    resource: String,
    id: u64,
}

/// A stream of events for one watch.
///
/// Events are shared: every watcher of a change holds the same `Arc<Event>`, whose values are
/// the very `Bytes` the store keeps, so a watcher's queue costs a pointer per event. The queue
/// is bounded (`WATCHER_EVENTS` events, `WATCHER_BYTES` bytes of values);
/// a watcher that lets it fill is dropped by the store, which `fell_behind` reports at once.
pub struct Watch {
    /// Events that happened before the watch registered, in revision order.
    backlog: VecDeque<Arc<Event>>,
    queue: Arc<Queue>,
    registration: Registration,
}

impl Watch {
    /// The next event; `None` when the store ended the watch (shutdown, or this watcher fell
    /// too far behind and was dropped so that it cannot slow writers or other watchers).
    pub async fn next(&mut self) -> Option<Arc<Event>> {
        if let Some(event) = self.backlog.pop_front() {
            return Some(event);
        }
        loop {
            match self.queue.take() {
                Taken::Event(event) => return Some(event),
                Taken::Ended => return None,
                // One taker: a wakeup given while it was not waiting is kept for it.
                Taken::Empty => self.queue.ready.notified().await,
            }
        }
    }

    /// True when every event delivered so far has been taken. Every event at or below the
    /// store's current revision is delivered before that revision becomes current, so an idle
    /// watch read after `current_revision()` has seen everything up to it.
    pub fn is_idle(&self) -> bool {
        self.backlog.is_empty() && self.queue.is_empty()
    }

    /// Resolves once the store dropped this watcher because its queue was full (it did not
    /// take its events as fast as they came). What is queued can still be taken, but a caller
    /// that cannot keep up should end the watch instead, freeing what it holds (as
    /// Kubernetes' cacher terminates an unresponsive watcher).
    pub async fn fell_behind(&self) {
        loop {
            let woken = self.queue.overflow.notified();
            if self.queue.overflowed.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            woken.await;
        }
    }

    #[cfg(test)]
    pub(crate) fn queue(&self) -> &Queue {
        &self.queue
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // The watcher's queue, and the events in it, go with the last of its two handles:
        // this one, once the registry let go of the other.
        if let Some(registry) = self.registration.registry.upgrade() {
            locked(&registry).remove(&self.registration.resource, self.registration.id);
        }
    }
}
