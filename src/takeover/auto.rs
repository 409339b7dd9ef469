//! The automatic mode (`--takeover-cluster-definitions`): every definition served from the
//! main apiserver's CustomResourceDefinitions (`--cluster-definitions-selector`,
//! `--cluster-definitions`) is taken over as soon as it is served, as `crd-apiserver takeover`
//! would, once.
//!
//! Once: a definition with a takeover record is left alone when it is done or was handed back
//! (a handback is the admin's choice; `crd-apiserver takeover` takes it over again), and
//! resumed when a run stopped half way (a crash, leadership lost). Only the replica that leads
//! the store's run-once work (`store::leadership`) takes definitions over, and it stops a run
//! the moment it no longer leads (as a crash would: the record stays, and the next leader
//! resumes or rolls it back), so no two replicas move one definition at a time. A failed run
//! is tried again after a delay that doubles up to ten minutes, not at every catalog change:
//! each attempt freezes the resource's writes for a moment.
//!
//! Owns only the decision of what to take over and when; the takeover itself is `Takeovers`'.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Takeovers;
use super::record::{self, Phase};
use crate::api::Api;
use crate::definitions::cluster::source_of;

/// The first delay after a failed automatic takeover; it doubles with each failure.
const FIRST_RETRY: Duration = Duration::from_secs(10);
/// The longest delay between two attempts.
const LAST_RETRY: Duration = Duration::from_secs(600);

/// What the automatic mode does with a served cluster definition, given its takeover record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// No record: take it over.
    TakeOver,
    /// A run stopped in this phase: run it again (it resumes or rolls back).
    Resume(Phase),
    /// Ours already.
    Done,
    /// Handed back: left to the main apiserver until someone runs `takeover`.
    HandedBack,
}

pub fn decide(phase: Option<Phase>) -> Decision {
    match phase {
        None => Decision::TakeOver,
        Some(Phase::Done) => Decision::Done,
        Some(Phase::HandedBack) => Decision::HandedBack,
        Some(phase) => Decision::Resume(phase),
    }
}

/// The delay before the next attempt after `failures` failed ones in a row.
pub fn retry_after(failures: u32) -> Duration {
    let doubled = FIRST_RETRY.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    doubled.min(LAST_RETRY)
}

/// What the loop remembers between rounds, per definition name.
#[derive(Default)]
struct Memory {
    /// Failed attempts in a row and when the next one may start.
    failures: HashMap<String, (u32, Instant)>,
    /// The decisions already logged, so that each is logged once per change.
    logged: HashMap<String, Decision>,
}

/// Starts the automatic mode.
pub fn spawn(takeovers: Arc<Takeovers>, api: Arc<Api>) {
    tokio::spawn(async move {
        let mut changes = api.catalog_changes();
        let mut leadership = api.store().leadership();
        let mut memory = Memory::default();
        loop {
            leadership.until_leading().await;
            let next = round(&takeovers, &api, &mut memory).await;
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(next) => {}
                // Leadership lost and won again: the new term looks at every definition.
                _ = lost_and_regained(api.store().leadership()) => {}
            }
        }
    });
}

async fn lost_and_regained(mut leadership: crate::store::leadership::Leadership) {
    leadership.until_following().await;
    leadership.until_leading().await;
}

/// One look at every served cluster definition; answers when to look again at the latest.
async fn round(takeovers: &Takeovers, api: &Api, memory: &mut Memory) -> Duration {
    let mut next = LAST_RETRY;
    let catalog = api.catalog();
    let names: Vec<String> = catalog
        .registry
        .definitions()
        .iter()
        .filter(|d| !d.read_only && d.source == source_of(&d.name))
        .map(|d| d.name.clone())
        .collect();
    memory.failures.retain(|name, _| names.contains(name));
    for name in names {
        let leadership = api.store().leadership();
        if !leadership.is_leader() {
            break;
        }
        if let Some((_, at)) = memory.failures.get(&name) {
            let now = Instant::now();
            if *at > now {
                next = next.min(*at - now);
                continue;
            }
        }
        let decision = match record::read(api.store(), &name).await {
            Ok(found) => decide(found.map(|(r, _)| r.phase)),
            Err(e) => {
                tracing::warn!(target: "takeover", definition = %name, error = %e, "automatic takeover: reading its record failed");
                next = next.min(FIRST_RETRY);
                continue;
            }
        };
        if memory.logged.get(&name) != Some(&decision) {
            memory.logged.insert(name.clone(), decision);
            match decision {
                Decision::Done => {
                    tracing::info!(target: "takeover", definition = %name, "automatic takeover: already taken over")
                }
                Decision::HandedBack => tracing::info!(
                    target: "takeover",
                    definition = %name,
                    "automatic takeover: handed back, left to the main apiserver (crd-apiserver takeover takes it over again)"
                ),
                Decision::TakeOver | Decision::Resume(_) => {}
            }
        }
        if matches!(decision, Decision::Done | Decision::HandedBack) {
            continue;
        }
        tracing::info!(target: "takeover", definition = %name, ?decision, "automatic takeover: starting");
        if let Some(wait) = attempt(takeovers, &name, leadership, memory).await {
            next = next.min(wait);
        }
    }
    next
}

/// Runs one takeover, stopped if leadership is lost; answers the delay before the next
/// attempt when it failed.
async fn attempt(
    takeovers: &Takeovers,
    name: &str,
    mut leadership: crate::store::leadership::Leadership,
    memory: &mut Memory,
) -> Option<Duration> {
    // Progress goes to the log (`say`); nobody reads the channel.
    let (progress, _) = tokio::sync::mpsc::channel(1);
    let outcome = tokio::select! {
        outcome = takeovers.take_over(name, false, &progress) => Some(outcome),
        _ = leadership.until_following() => None,
    };
    match outcome {
        Some(Ok(report)) => {
            memory.failures.remove(name);
            tracing::info!(
                target: "takeover",
                definition = %name,
                objects = report.objects,
                bytes = report.bytes,
                freeze_seconds = report.freeze_seconds,
                "automatic takeover: done"
            );
            None
        }
        Some(Err(e)) => {
            let failures = memory.failures.get(name).map_or(0, |(n, _)| *n).saturating_add(1);
            let wait = retry_after(failures);
            memory.failures.insert(name.to_string(), (failures, Instant::now() + wait));
            memory.logged.remove(name);
            tracing::warn!(
                target: "takeover",
                definition = %name,
                error = %e,
                retry_in = ?wait,
                "automatic takeover failed"
            );
            Some(wait)
        }
        None => {
            tracing::warn!(
                target: "takeover",
                definition = %name,
                "automatic takeover stopped: this replica no longer leads (the leader resumes it)"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_is_taken_over_once_and_resumed_when_a_run_stopped() {
        assert_eq!(decide(None), Decision::TakeOver);
        for phase in [Phase::Copying, Phase::Copied, Phase::Switched] {
            assert_eq!(decide(Some(phase)), Decision::Resume(phase));
        }
        assert_eq!(decide(Some(Phase::Done)), Decision::Done);
        assert_eq!(decide(Some(Phase::HandedBack)), Decision::HandedBack);
    }

    #[test]
    fn failed_attempts_wait_longer_each_time_up_to_ten_minutes() {
        let delays: Vec<u64> = [1, 2, 3, 4, 6, 7, 40, u32::MAX].iter().map(|n| retry_after(*n).as_secs()).collect();
        assert_eq!(delays, [10, 20, 40, 80, 320, 600, 600, 600]);
    }
}
