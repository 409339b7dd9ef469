//! Which etcd members requests go to. The client spreads requests over every endpoint of
//! `--etcd-servers`, and a call that lands on a dead member fails (a refused connection) even
//! while the others hold a quorum: losing one member of three would fail a share of requests
//! and make `/readyz` flap. So each member is probed on its own, as etcd's Go client does with
//! its health balancer: one that stops answering, or answers with no leader, is taken out of
//! the client's endpoints, and put back once it answers with a leader again. The last member
//! in is never taken out (then the store's own probe says etcd is unavailable).

use std::sync::Arc;
use std::time::Duration;

use etcd_client::Client;

use super::EtcdOptions;
use super::connect;
use super::store::Shared;

/// How often each member is probed.
const PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// A member slower than this to answer is taken out.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

struct Member {
    endpoint: String,
    /// A client of this member alone, for its probe.
    probe: Client,
    /// Whether the shared client sends requests to it now.
    serving: bool,
}

/// Probes the members while there are several (one endpoint has no other to go to).
pub(super) async fn spawn(shared: Arc<Shared>, options: &EtcdOptions) -> Option<tokio::task::JoinHandle<()>> {
    if options.servers.len() < 2 {
        return None;
    }
    let mut members = Vec::new();
    for endpoint in &options.servers {
        let single = EtcdOptions { servers: vec![endpoint.clone()], ..options.clone() };
        match connect::client(&single).await {
            Ok(probe) => members.push(Member { endpoint: endpoint.clone(), probe, serving: true }),
            Err(e) => tracing::warn!(endpoint, error = %e, "cannot probe this etcd member on its own"),
        }
    }
    Some(tokio::spawn(async move {
        loop {
            let mut health = Vec::with_capacity(members.len());
            for member in &members {
                health.push(answers_with_leader(&member.probe).await);
            }
            for (index, healthy) in health.into_iter().enumerate() {
                let others_serving = members.iter().enumerate().any(|(i, m)| i != index && m.serving);
                let Some(member) = members.get_mut(index) else { continue };
                if member.serving && !healthy && others_serving {
                    match shared.client.remove_endpoint(&member.endpoint).await {
                        Ok(()) => {
                            member.serving = false;
                            tracing::warn!(endpoint = %member.endpoint, "etcd member unreachable or without a leader; requests go to the others");
                        }
                        Err(e) => tracing::warn!(endpoint = %member.endpoint, error = %e, "taking an etcd member out"),
                    }
                } else if !member.serving && healthy {
                    match shared.client.add_endpoint(&member.endpoint).await {
                        Ok(()) => {
                            member.serving = true;
                            tracing::info!(endpoint = %member.endpoint, "etcd member answers again; requests go to it too");
                        }
                        Err(e) => {
                            tracing::warn!(endpoint = %member.endpoint, error = %e, "putting an etcd member back")
                        }
                    }
                }
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
    }))
}

/// Whether the member answers its status in time and knows a leader.
async fn answers_with_leader(client: &Client) -> bool {
    let mut maintenance = client.maintenance_client();
    matches!(tokio::time::timeout(PROBE_TIMEOUT, maintenance.status()).await, Ok(Ok(status)) if status.leader() != 0)
}
