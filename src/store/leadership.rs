//! Which replica runs the work that must run once per store, not once per replica: the
//! namespace sweeper, storage-version migrations and the `serveddefinitions` status writes.
//!
//! A sled store has one server, which always leads. Replicas on one etcd elect a leader with
//! an etcd lease (`store::etcd::election`); the others follow and take over when the leader's
//! lease is not renewed. Owns the answer "do I lead now"; holds none of the work itself.

use std::time::Duration;

use tokio::sync::watch;

/// Timing of the election, with kube-controller-manager's flag names and defaults.
#[derive(Debug, Clone, Copy)]
pub struct ElectionTiming {
    /// How long the leader's lease lasts without renewal: another replica takes over at the
    /// latest this long after the leader died.
    pub lease_duration: Duration,
    /// The leader steps down when it could not renew its lease for this long (less than the
    /// lease duration, so that it stops before anyone else may start).
    pub renew_deadline: Duration,
    /// How often the lease is renewed, and how long a failed campaign waits.
    pub retry_period: Duration,
}

impl Default for ElectionTiming {
    fn default() -> Self {
        ElectionTiming {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl ElectionTiming {
    /// Kubernetes' checks of the three durations, in its words.
    pub fn validate(&self) -> Result<(), String> {
        if self.lease_duration <= self.renew_deadline {
            return Err("leaseDuration must be greater than renewDeadline".into());
        }
        if self.retry_period.is_zero() || self.renew_deadline.is_zero() {
            return Err("renewDeadline and retryPeriod must be greater than zero".into());
        }
        if self.renew_deadline.as_secs_f64() <= 1.2 * self.retry_period.as_secs_f64() {
            return Err("renewDeadline must be greater than retryPeriod*JitterFactor".into());
        }
        if self.lease_duration < Duration::from_secs(1) {
            return Err("leaseDuration must be at least 1s (an etcd lease's time to live is whole seconds)".into());
        }
        Ok(())
    }
}

/// Whether this replica leads now; cheap to clone and to ask.
#[derive(Clone)]
pub struct Leadership {
    leading: watch::Receiver<bool>,
}

impl Leadership {
    /// The only server of its store: always the leader.
    pub fn sole() -> Leadership {
        let (_, leading) = watch::channel(true);
        Leadership { leading }
    }

    /// Follows the answers an election sends.
    pub fn following(leading: watch::Receiver<bool>) -> Leadership {
        Leadership { leading }
    }

    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Waits until this replica leads (at once if it does).
    pub async fn until_leading(&mut self) {
        // An election that ended (the store closed) never leads again: wait forever.
        if self.leading.wait_for(|leading| *leading).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Waits until this replica no longer leads (at once if it does not). Once no election
    /// sends answers (a sole server, or a store closed), the last answer holds for good.
    pub async fn until_following(&mut self) {
        if self.leading.wait_for(|leading| !*leading).await.is_err() && *self.leading.borrow() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    #[test]
    fn a_sole_server_never_stops_leading_and_a_follower_learns_it_lost() {
        assert!(Leadership::sole().until_following().now_or_never().is_none());
        let (tx, rx) = watch::channel(true);
        let mut leadership = Leadership::following(rx);
        assert!(leadership.until_following().now_or_never().is_none());
        tx.send_replace(false);
        assert!(leadership.until_following().now_or_never().is_some());
        drop(tx);
        assert!(leadership.until_following().now_or_never().is_some(), "an ended election, last answer: following");
    }
}
