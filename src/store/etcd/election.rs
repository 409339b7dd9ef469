//! The election of the replica that runs the run-once work (`store::leadership`), with etcd's
//! own election API on a lease: each replica campaigns under `<prefix>-leader` with a lease
//! of `lease_duration`, renewed every `retry_period`; the campaign that etcd answers first
//! leads. A leader that cannot renew its lease for `renew_deadline` steps down before the
//! lease can expire, so two replicas never lead at once; when a leader dies its lease expires
//! and the next campaign in line wins.
//!
//! The campaign runs on a client of its own without a request timeout: a follower's campaign
//! waits, as long as the leader lives, for etcd to answer that it won; the lease it campaigns
//! with, kept alive meanwhile, is what ends a campaign that can no longer win.
//!
//! An etcd lease rather than a `coordination.k8s.io` Lease in the main apiserver: the work the
//! leader does writes to this etcd, so leadership lives and fails with the store it guards,
//! needs no RBAC on leases, and is decided by the same linearizable store as the writes.

use std::time::{Duration, Instant};

use etcd_client::Client;
use tokio::sync::watch;

use crate::store::leadership::{ElectionTiming, Leadership};

/// Starts campaigning; the answer follows this replica's standing.
pub(super) fn spawn(client: Client, prefix: &str, timing: ElectionTiming) -> (Leadership, tokio::task::JoinHandle<()>) {
    let (leading, answer) = watch::channel(false);
    let name = format!("{prefix}-leader");
    let identity = identity();
    let task = tokio::spawn(async move {
        loop {
            let ended = term(client.clone(), &name, &identity, timing, &leading).await;
            leading.send_replace(false);
            match ended {
                Ok(reason) => {
                    tracing::warn!(election = %name, reason = %reason, "this replica no longer leads the run-once work (namespace sweeper, storage-version migration)")
                }
                Err(e) => {
                    tracing::warn!(election = %name, error = %e, "campaigning for the run-once work failed; trying again")
                }
            }
            tokio::time::sleep(timing.retry_period).await;
        }
    });
    (Leadership::following(answer), task)
}

/// The value a leader writes under its election key: who it is.
fn identity() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "crd-apiserver".into());
    format!("{host}_{}", std::process::id())
}

/// One lease: campaign with it, lead while it is renewed. Returns why leadership ended.
async fn term(
    mut client: Client,
    name: &str,
    identity: &str,
    timing: ElectionTiming,
    leading: &watch::Sender<bool>,
) -> Result<String, etcd_client::Error> {
    let ttl = i64::try_from(timing.lease_duration.as_secs().max(1)).unwrap_or(i64::MAX);
    // The client's calls wait as long as etcd takes (for the campaign): these are bounded here.
    let lease = bounded(timing, client.lease_grant(ttl, None)).await?.id();
    let (keeper, responses) = bounded(timing, client.lease_keep_alive(lease)).await?;
    let renewal = keep_alive(keeper, responses, timing);
    tokio::pin!(renewal);
    let mut campaigner = client.clone();
    let elected = tokio::select! {
        lost = &mut renewal => return Ok(lost),
        elected = campaigner.campaign(name, identity, lease) => elected,
    };
    let leader_key = match elected {
        Ok(mut response) => response.take_leader(),
        Err(e) => {
            revoke(&mut client, lease).await;
            return Err(e);
        }
    };
    leading.send_replace(true);
    tracing::info!(election = %name, identity, "this replica leads the run-once work (namespace sweeper, storage-version migration)");
    let lost = renewal.await;
    leading.send_replace(false);
    if let Some(key) = leader_key {
        let resign = client.resign(Some(etcd_client::ResignOptions::new().with_leader(key)));
        let _ = tokio::time::timeout(Duration::from_secs(1), resign).await;
    }
    revoke(&mut client, lease).await;
    Ok(lost)
}

/// A call that must answer within the renew deadline (a lease not set up by then would be
/// late anyway).
async fn bounded<T>(
    timing: ElectionTiming,
    call: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, etcd_client::Error> {
    match tokio::time::timeout(timing.renew_deadline, call).await {
        Ok(answer) => answer,
        Err(_) => {
            Err(etcd_client::Error::ElectError(format!("etcd did not answer within {:?}", timing.renew_deadline)))
        }
    }
}

/// Renews the lease every retry period; returns when it was not renewed for the renew
/// deadline (or etcd says it expired).
async fn keep_alive(
    mut keeper: etcd_client::LeaseKeeper,
    mut responses: etcd_client::LeaseKeepAliveStream,
    timing: ElectionTiming,
) -> String {
    let mut renewed = Instant::now();
    loop {
        tokio::time::sleep(timing.retry_period).await;
        let attempt = async {
            keeper.keep_alive().await?;
            responses.message().await
        };
        match tokio::time::timeout(timing.retry_period, attempt).await {
            Ok(Ok(Some(response))) if response.ttl() > 0 => renewed = Instant::now(),
            Ok(Ok(Some(_))) => return "the lease expired".into(),
            Ok(Ok(None)) => return "etcd closed the lease's keep-alive stream".into(),
            Ok(Err(_)) | Err(_) => {}
        }
        if renewed.elapsed() >= timing.renew_deadline {
            return format!("the lease was not renewed for {:?}", timing.renew_deadline);
        }
    }
}

async fn revoke(client: &mut Client, lease: i64) {
    let _ = tokio::time::timeout(Duration::from_secs(1), client.lease_revoke(lease)).await;
}
