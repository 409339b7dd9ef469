//! What one client connection is doing, for its timeouts and for the connection cap: requests
//! in flight and since when none is, whether the head of a next request is arriving, whether
//! any request on it authenticated, and a request to close it.
//!
//! The timeouts are Go's `http.Server` ones as k8s.io/apiserver sets them: a new connection
//! has `ReadHeaderTimeout` (32 s) to deliver its first request's head; a kept-alive one waits
//! `IdleTimeout` (90 s) for the next request to begin, and once its first bytes arrive has the
//! header timeout again to complete the head. HTTP/2 multiplexes, so only its idle time counts.
//!
//! Owns this bookkeeping and the deadlines derived from it. Must not close anything itself
//! (`connection` does) nor choose which connection gives way (`listener`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

// tokio's clock, so that deadlines follow the runtime's time (paused in the fuzz harness and
// in tests, which run connections in virtual time).
use tokio::sync::Notify;
use tokio::time::Instant;

/// No time recorded.
const NEVER: u64 = u64::MAX;

/// How a connection's time runs out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// No request is under way and none will be answered: drop the connection (a client that
    /// never completed a request head, as Go's server drops it).
    Drop,
    /// Idle between requests: close it gracefully (HTTP/2 says GOAWAY first).
    Close,
}

/// How a connection stands when the open-connection cap makes one give way, least worth
/// keeping first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Standing {
    /// Handshaking, or connected without having sent a request yet.
    Unused,
    /// Between requests, none of which authenticated.
    IdleAnonymous,
    /// Between requests, one of which at least authenticated.
    Idle,
}

/// One connection's activity. Shared by its task, its requests and the listener.
pub struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    /// Requests started on the connection, ever.
    started: AtomicU64,
    /// Milliseconds after `opened` of the last start or end of a request.
    last_change_ms: AtomicU64,
    /// Milliseconds after `opened` at which bytes arrived with no request in flight after
    /// the last one ended: the next head is arriving (`NEVER` while none is).
    head_since_ms: AtomicU64,
    http2: AtomicBool,
    authenticated: AtomicBool,
    /// Milliseconds after `opened` at which the connection was asked to give way (`NEVER`:
    /// not asked).
    evicted_ms: AtomicU64,
    /// Wakes the connection's watchdog when its deadline may have moved or it must go.
    changed: Notify,
    /// Told whenever the connection goes idle (the listener, while a client waits for room).
    idle_listener: Option<Arc<IdleSignal>>,
}

/// Connections going idle, for whoever waits for one to evict.
#[derive(Default)]
pub struct IdleSignal {
    pub waiting: AtomicBool,
    pub notify: Notify,
}

impl Activity {
    pub fn new(idle_listener: Option<Arc<IdleSignal>>) -> Activity {
        Activity {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            started: AtomicU64::new(0),
            last_change_ms: AtomicU64::new(0),
            head_since_ms: AtomicU64::new(NEVER),
            http2: AtomicBool::new(false),
            authenticated: AtomicBool::new(false),
            evicted_ms: AtomicU64::new(NEVER),
            changed: Notify::new(),
            idle_listener,
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(NEVER - 1)
    }

    fn at(&self, ms: u64) -> Instant {
        self.opened + Duration::from_millis(ms)
    }

    /// The TLS handshake is done: the first request's head is due from now.
    pub fn handshaken(&self) {
        self.last_change_ms.store(self.now_ms(), Ordering::Relaxed);
        self.changed.notify_one();
    }

    /// The connection speaks HTTP/2 (by ALPN, or its first request).
    pub fn set_http2(&self) {
        self.http2.store(true, Ordering::Relaxed);
    }

    /// A request on the connection authenticated as someone.
    pub fn set_authenticated(&self) {
        self.authenticated.store(true, Ordering::Relaxed);
    }

    /// Bytes arrived from the client.
    pub fn received(&self) {
        if self.in_flight.load(Ordering::Relaxed) == 0
            && self.started.load(Ordering::Relaxed) > 0
            && self.head_since_ms.load(Ordering::Relaxed) == NEVER
        {
            self.head_since_ms.store(self.now_ms(), Ordering::Relaxed);
            self.changed.notify_one();
        }
    }

    fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.started.fetch_add(1, Ordering::Relaxed);
        self.head_since_ms.store(NEVER, Ordering::Relaxed);
        self.last_change_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    fn request_ended(&self) {
        self.last_change_ms.store(self.now_ms(), Ordering::Relaxed);
        if self.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.changed.notify_one();
            if let Some(listener) = &self.idle_listener
                && listener.waiting.load(Ordering::Relaxed)
            {
                listener.notify.notify_one();
            }
        }
    }

    /// When the connection's time runs out as it stands now, and how (`None`: a request is
    /// in flight, which no timeout of the connection cuts).
    pub fn deadline(&self, header_read_timeout: Duration, idle_timeout: Duration) -> Option<(Instant, Expiry)> {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let http2 = self.http2.load(Ordering::Relaxed);
        let last_change = self.at(self.last_change_ms.load(Ordering::Relaxed));
        if self.started.load(Ordering::Relaxed) == 0 {
            // From the end of the TLS handshake (before it, from the connection's opening: the
            // handshake gets the header timeout too).
            let limit = if http2 { idle_timeout } else { header_read_timeout };
            return Some((last_change + limit, Expiry::Drop));
        }
        let head_since = self.head_since_ms.load(Ordering::Relaxed);
        if !http2 && head_since != NEVER {
            return Some((self.at(head_since) + header_read_timeout, Expiry::Drop));
        }
        Some((last_change + idle_timeout, Expiry::Close))
    }

    /// Resolves when the connection's time runs out (as `deadline` says, looked at again
    /// whenever it may have moved) or it is asked to give way.
    pub async fn expired(&self, header_read_timeout: Duration, idle_timeout: Duration) -> Expiry {
        loop {
            if self.evicted_ms.load(Ordering::Relaxed) != NEVER {
                return self.eviction();
            }
            match self.deadline(header_read_timeout, idle_timeout) {
                Some((at, expiry)) if at <= Instant::now() => return expiry,
                Some((at, _)) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = self.changed.notified() => {}
                    }
                }
                // Busy: the end of the request wakes us. A request that starts meanwhile only
                // moves the deadline later, so the sleep above may wake early, never late.
                None => self.changed.notified().await,
            }
        }
    }

    /// How an evicted connection goes: dropped if nothing was ever asked on it or a head is
    /// half received, closed gracefully otherwise (a request that slipped in finishes).
    fn eviction(&self) -> Expiry {
        let unused = self.started.load(Ordering::Relaxed) == 0 || self.head_since_ms.load(Ordering::Relaxed) != NEVER;
        if unused && self.in_flight.load(Ordering::Relaxed) == 0 { Expiry::Drop } else { Expiry::Close }
    }

    /// How the connection stands for the cap, or `None` while a request is in flight or it
    /// is already going.
    pub fn standing(&self) -> Option<(Standing, Instant)> {
        if self.evicted_ms.load(Ordering::Relaxed) != NEVER || self.in_flight.load(Ordering::Relaxed) > 0 {
            return None;
        }
        if self.started.load(Ordering::Relaxed) == 0 {
            return Some((Standing::Unused, self.opened));
        }
        let since = self.at(self.last_change_ms.load(Ordering::Relaxed));
        let standing =
            if self.authenticated.load(Ordering::Relaxed) { Standing::Idle } else { Standing::IdleAnonymous };
        Some((standing, since))
    }

    /// Asks the connection to give way.
    pub fn evict(&self) {
        let _ = self.evicted_ms.compare_exchange(NEVER, self.now_ms(), Ordering::Relaxed, Ordering::Relaxed);
        self.changed.notify_one();
    }

    /// Asked to give way less than `grace` ago, and idle: it is closing and about to go (a
    /// busy one finishes its requests first, which may take long).
    pub fn evicted_and_idle(&self, grace: Duration) -> bool {
        let evicted = self.evicted_ms.load(Ordering::Relaxed);
        evicted != NEVER && self.at(evicted) + grace > Instant::now() && self.in_flight.load(Ordering::Relaxed) == 0
    }
}

/// Marks one request in flight on a connection until dropped.
pub struct InFlight(Arc<Activity>);

impl InFlight {
    pub fn start(activity: Arc<Activity>) -> InFlight {
        activity.request_started();
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: Duration = Duration::from_secs(32);
    const IDLE: Duration = Duration::from_secs(90);

    fn due_in(activity: &Activity) -> Option<(Duration, Expiry)> {
        activity.deadline(HEADER, IDLE).map(|(at, expiry)| (at - Instant::now(), expiry))
    }

    #[tokio::test(start_paused = true)]
    async fn deadlines_follow_gos_header_and_idle_timeouts() {
        let activity = Arc::new(Activity::new(None));
        // New: the handshake and then the first head are due within the header timeout each.
        assert_eq!(due_in(&activity), Some((HEADER, Expiry::Drop)));
        tokio::time::advance(Duration::from_secs(20)).await;
        activity.handshaken();
        assert_eq!(due_in(&activity), Some((HEADER, Expiry::Drop)));
        // Bytes alone change nothing before a request.
        activity.received();
        assert_eq!(due_in(&activity), Some((HEADER, Expiry::Drop)));
        let request = InFlight::start(activity.clone());
        assert_eq!(due_in(&activity), None, "a request in flight is never cut");
        tokio::time::advance(Duration::from_secs(500)).await;
        drop(request);
        // Kept alive: the idle timeout, from the end of the last request.
        assert_eq!(due_in(&activity), Some((IDLE, Expiry::Close)));
        tokio::time::advance(Duration::from_secs(60)).await;
        // The next head begins: the header timeout, from its first bytes.
        activity.received();
        assert_eq!(due_in(&activity), Some((HEADER, Expiry::Drop)));
        tokio::time::advance(Duration::from_secs(10)).await;
        activity.received();
        assert_eq!(due_in(&activity), Some((HEADER - Duration::from_secs(10), Expiry::Drop)));
        drop(InFlight::start(activity.clone()));
        assert_eq!(due_in(&activity), Some((IDLE, Expiry::Close)));
    }

    #[tokio::test(start_paused = true)]
    async fn http2_connections_only_time_out_idle() {
        let activity = Arc::new(Activity::new(None));
        activity.set_http2();
        assert_eq!(due_in(&activity), Some((IDLE, Expiry::Drop)));
        drop(InFlight::start(activity.clone()));
        // Frames keep arriving on an idle HTTP/2 connection (pings, settings): not a head.
        activity.received();
        assert_eq!(due_in(&activity), Some((IDLE, Expiry::Close)));
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_waits_for_requests_and_answers_eviction_at_once() {
        let activity = Arc::new(Activity::new(None));
        let request = InFlight::start(activity.clone());
        let watchdog = tokio::spawn({
            let activity = activity.clone();
            async move { (activity.expired(HEADER, IDLE).await, Instant::now()) }
        });
        tokio::time::advance(Duration::from_secs(1000)).await;
        assert!(!watchdog.is_finished(), "a connection with a request in flight expired");
        let ended = Instant::now();
        drop(request);
        let (expiry, at) = watchdog.await.unwrap();
        assert_eq!((expiry, at - ended), (Expiry::Close, IDLE));

        let unused = Arc::new(Activity::new(None));
        assert_eq!(unused.standing().map(|s| s.0), Some(Standing::Unused));
        unused.evict();
        assert!(unused.evicted_and_idle(Duration::from_secs(1)));
        assert_eq!(unused.standing(), None);
        let started = Instant::now();
        assert_eq!(unused.expired(HEADER, IDLE).await, Expiry::Drop);
        assert_eq!(Instant::now(), started, "an evicted connection goes at once");
    }

    #[test]
    fn standings_rank_unused_then_anonymous_then_authenticated() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let _guard = runtime.enter();
        let anonymous = Arc::new(Activity::new(None));
        drop(InFlight::start(anonymous.clone()));
        let authenticated = Arc::new(Activity::new(None));
        let request = InFlight::start(authenticated.clone());
        authenticated.set_authenticated();
        assert_eq!(authenticated.standing(), None, "busy connections never give way");
        drop(request);
        assert_eq!(anonymous.standing().map(|s| s.0), Some(Standing::IdleAnonymous));
        assert_eq!(authenticated.standing().map(|s| s.0), Some(Standing::Idle));
        assert!(Standing::Unused < Standing::IdleAnonymous && Standing::IdleAnonymous < Standing::Idle);
    }
}
