//! Graceful termination in k8s.io/apiserver's order (`preparedGenericAPIServer.RunWithContext`):
//! on the signal `/readyz` fails first (the `shutdown` check); the server goes on serving for
//! `--shutdown-delay-duration` while load balancers take it out; then it stops accepting new
//! requests, ends its watches cleanly (spread over `--shutdown-watch-termination-grace-period`)
//! and lets in-flight requests finish, bounded by the request timeout. With
//! `--shutdown-send-retry-after` it keeps listening until they finished and answers new
//! requests 429 meanwhile.
//!
//! Owns the lifecycle signals and the request/watch accounting the drain waits on. Must not
//! close connections (`listener`, `connection`) nor the store (`cli::serve` does, after).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use super::health::NamedCheck;

/// The termination settings (`--shutdown-*` flags; the request timeout bounds the drain).
#[derive(Debug, Clone, Default)]
pub struct ShutdownOptions {
    pub delay: Duration,
    pub watch_grace: Duration,
    pub send_retry_after: bool,
    pub request_timeout: Duration,
}

/// What ends serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM or SIGINT: the whole graceful sequence.
    Signal,
    /// The server cannot run (a failed start-up step): no delay, it was never ready.
    Failure,
}

/// Watches end at most this often during the grace period (k8s.io/apiserver's floor of 200
/// terminations a second), so that a large grace period does not keep a few watches long.
const MIN_WATCH_END_INTERVAL: Duration = Duration::from_millis(5);

/// The bound on closing connections once requests drained, with `--shutdown-send-retry-after`
/// (k8s.io/apiserver's 2 s: one second for the peer to answer a GOAWAY, and some).
const RETRY_AFTER_CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// A one-way signal: unset until fired, then set for good.
#[derive(Default)]
struct Event {
    fired: AtomicBool,
    notify: Notify,
}

impl Event {
    fn fire(&self) {
        self.fired.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn is_set(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }
}

/// Requests of one kind in flight, and a way to wait until there are none.
#[derive(Default)]
struct Tracker {
    count: AtomicUsize,
    idle: Notify,
}

impl Tracker {
    fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Marks one request in flight until dropped.
pub struct InFlight {
    lifecycle: Arc<Inner>,
    watch: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let tracker = if self.watch { &self.lifecycle.watches } else { &self.lifecycle.requests };
        if tracker.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            tracker.idle.notify_waiters();
        }
    }
}

struct Inner {
    options: ShutdownOptions,
    /// The signal arrived: `/readyz` fails.
    initiated: Event,
    /// The delay passed: no new requests are taken, watches end.
    not_accepting: Event,
    requests: Tracker,
    watches: Tracker,
    /// Watches ended so far, each one's place in the spread.
    ended_watches: AtomicU64,
    /// Nanoseconds between two watch ends, fixed when the server stops accepting.
    watch_end_interval_ns: AtomicU64,
}

/// The server's lifecycle signals, shared by the filter chain, the health checks and the
/// accept loop. Cheap to clone.
#[derive(Clone)]
pub struct Lifecycle(Arc<Inner>);

impl Lifecycle {
    pub fn new(options: ShutdownOptions) -> Lifecycle {
        Lifecycle(Arc::new(Inner {
            options,
            initiated: Event::default(),
            not_accepting: Event::default(),
            requests: Tracker::default(),
            watches: Tracker::default(),
            ended_watches: AtomicU64::new(0),
            watch_end_interval_ns: AtomicU64::new(0),
        }))
    }

    pub fn options(&self) -> &ShutdownOptions {
        &self.0.options
    }

    /// The `/readyz` check that fails from the moment shutdown starts.
    pub fn shutdown_check(&self) -> Arc<NamedCheck> {
        let lifecycle = self.clone();
        NamedCheck::new("shutdown", move || {
            if lifecycle.0.initiated.is_set() { Err("process is shutting down".to_string()) } else { Ok(()) }
        })
    }

    /// Whether the delay passed and new requests are no longer taken.
    pub fn is_not_accepting(&self) -> bool {
        self.0.not_accepting.is_set()
    }

    /// Counts a short request (`watch: false`) or a watch in flight until the guard drops.
    pub fn start_request(&self, watch: bool) -> InFlight {
        let tracker = if watch { &self.0.watches } else { &self.0.requests };
        tracker.count.fetch_add(1, Ordering::SeqCst);
        InFlight { lifecycle: self.0.clone(), watch }
    }

    /// Resolves when a watch must end: once the server stops accepting, at its turn in the
    /// spread over the grace period.
    pub fn watch_end(&self) -> impl Future<Output = ()> + Send + 'static {
        let inner = self.0.clone();
        async move {
            inner.not_accepting.wait().await;
            let turn = inner.ended_watches.fetch_add(1, Ordering::SeqCst);
            let interval = inner.watch_end_interval_ns.load(Ordering::SeqCst);
            let wait = Duration::from_nanos(interval.saturating_mul(turn));
            if !wait.is_zero() {
                tokio::time::sleep(wait.min(inner.options.watch_grace)).await;
            }
        }
    }

    /// How long connections get to close once the listener stopped.
    pub fn drain_timeout(&self) -> Duration {
        let options = &self.0.options;
        if options.send_retry_after {
            RETRY_AFTER_CLOSE_TIMEOUT
        } else {
            options.request_timeout.max(options.watch_grace) + RETRY_AFTER_CLOSE_TIMEOUT
        }
    }

    /// Waits for `stop`, then runs the termination up to the moment the listener must stop
    /// accepting connections.
    pub async fn stop_listening_after(&self, stop: impl Future<Output = Stop>) {
        let stop = stop.await;
        self.0.initiated.fire();
        let options = &self.0.options;
        tracing::info!("[graceful-termination] shutdown initiated: /readyz fails from now on");
        if stop == Stop::Signal && !options.delay.is_zero() {
            tracing::info!(
                delay = ?options.delay,
                "[graceful-termination] serving on for --shutdown-delay-duration while load balancers drain"
            );
            tokio::time::sleep(options.delay).await;
        }
        let watches = self.0.watches.count();
        self.0.watch_end_interval_ns.store(watch_end_interval(options.watch_grace, watches), Ordering::SeqCst);
        self.0.not_accepting.fire();
        tracing::info!(
            in_flight = self.0.requests.count(),
            watches,
            "[graceful-termination] not accepting new requests; ending watches"
        );
        if options.send_retry_after {
            // New requests are answered 429 on the connections still open; stop listening once
            // the ones in flight finished (they are bounded by the request timeout).
            let drained = async {
                self.0.requests.wait_idle().await;
                self.0.watches.wait_idle().await;
            };
            let bound = options.request_timeout.max(options.watch_grace);
            if tokio::time::timeout(bound, drained).await.is_err() {
                tracing::info!("[graceful-termination] requests still in flight after {bound:?}");
            }
        }
    }

    /// Waits (at most `limit`) until no request or watch is in flight; returns whether none is.
    pub async fn drained(&self, limit: Duration) -> bool {
        let drained = async {
            self.0.requests.wait_idle().await;
            self.0.watches.wait_idle().await;
        };
        tokio::time::timeout(limit, drained).await.is_ok()
    }
}

/// The time between two watch ends: all at once without a grace period; else the grace period
/// shared among the watches open, but no more than 200 a second.
fn watch_end_interval(grace: Duration, watches: usize) -> u64 {
    if grace.is_zero() || watches == 0 {
        return 0;
    }
    let share = grace / u32::try_from(watches).unwrap_or(u32::MAX);
    u64::try_from(share.min(MIN_WATCH_END_INTERVAL).as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(delay_ms: u64, grace_ms: u64) -> ShutdownOptions {
        ShutdownOptions {
            delay: Duration::from_millis(delay_ms),
            watch_grace: Duration::from_millis(grace_ms),
            send_retry_after: false,
            request_timeout: Duration::from_secs(60),
        }
    }

    #[tokio::test]
    async fn readiness_fails_first_and_acceptance_stops_after_the_delay() {
        let lifecycle = Lifecycle::new(options(400, 0));
        let check = lifecycle.shutdown_check();
        assert_eq!(check.name(), "shutdown");
        assert_eq!(check.run(), Ok(()));
        let (signal, signalled) = tokio::sync::oneshot::channel::<()>();
        let running = {
            let lifecycle = lifecycle.clone();
            tokio::spawn(async move {
                lifecycle
                    .stop_listening_after(async {
                        let _ = signalled.await;
                        Stop::Signal
                    })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(check.run(), Ok(()));
        let signalled_at = std::time::Instant::now();
        signal.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(check.run(), Err("process is shutting down".into()));
        assert!(!lifecycle.is_not_accepting() || signalled_at.elapsed() >= Duration::from_millis(400));
        running.await.unwrap();
        assert!(signalled_at.elapsed() >= Duration::from_millis(400), "stopped accepting before the delay passed");
        assert!(lifecycle.is_not_accepting());
        assert_eq!(check.run(), Err("process is shutting down".into()));
    }

    #[tokio::test]
    async fn a_failure_skips_the_delay() {
        let lifecycle = Lifecycle::new(options(60_000, 0));
        let stopped =
            tokio::time::timeout(Duration::from_secs(10), lifecycle.stop_listening_after(async { Stop::Failure }))
                .await;
        assert!(stopped.is_ok());
        assert!(lifecycle.is_not_accepting());
    }

    #[tokio::test]
    async fn watches_end_when_acceptance_stops_spread_over_the_grace_period() {
        let lifecycle = Lifecycle::new(options(0, 1000));
        let guards: Vec<_> = (0..4).map(|_| lifecycle.start_request(true)).collect();
        let ends: Vec<_> = (0..4).map(|_| tokio::spawn(lifecycle.watch_end())).collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(ends.iter().all(|end| !end.is_finished()), "a watch ended before shutdown");
        let start = std::time::Instant::now();
        lifecycle.stop_listening_after(async { Stop::Signal }).await;
        for end in ends {
            tokio::time::timeout(Duration::from_secs(10), end).await.unwrap().unwrap();
        }
        // Four watches in one second would be 250 ms apart; 200 a second is the floor, so the
        // last one ends 15 ms after the first.
        assert!(start.elapsed() >= Duration::from_millis(15), "{:?}", start.elapsed());
        assert!(!lifecycle.drained(Duration::from_millis(10)).await);
        drop(guards);
        assert!(lifecycle.drained(Duration::from_millis(10)).await);
    }

    #[tokio::test]
    async fn retry_after_mode_keeps_listening_until_requests_finish() {
        let lifecycle = Lifecycle::new(ShutdownOptions { send_retry_after: true, ..options(0, 0) });
        let request = lifecycle.start_request(false);
        let stopping = {
            let lifecycle = lifecycle.clone();
            tokio::spawn(async move { lifecycle.stop_listening_after(async { Stop::Signal }).await })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(lifecycle.is_not_accepting());
        assert!(!stopping.is_finished(), "stopped listening with a request in flight");
        drop(request);
        tokio::time::timeout(Duration::from_secs(10), stopping).await.unwrap().unwrap();
    }

    #[test]
    fn watch_end_intervals() {
        assert_eq!(watch_end_interval(Duration::ZERO, 10), 0);
        assert_eq!(watch_end_interval(Duration::from_secs(1), 0), 0);
        assert_eq!(watch_end_interval(Duration::from_secs(10), 10_000), 1_000_000);
        assert_eq!(watch_end_interval(Duration::from_secs(10), 2), 5_000_000);
    }
}
