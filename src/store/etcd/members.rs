//! Which etcd members requests go to. The client spreads requests over every endpoint of
//! `--etcd-servers`, and a call that lands on a dead member fails (a refused connection) even
//! while the others hold a quorum: losing one member of three would fail a share of requests
//! and make `/readyz` flap. So each member is probed on its own, as etcd's Go client does with
//! its health balancer: one that stops answering, or answers with no leader, is taken out of
//! the client's endpoints, and put back once it answers with a leader again. The last member
//! in is never taken out (then the store's own probe says etcd is unavailable).
//!
//! The first round runs before the store's first read (`EtcdStore::open`), and again before
//! each retry of it, so that a replica starting while a member is down never asks that member.

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

/// The members of `--etcd-servers` and whether requests go to each.
pub(super) struct Members {
    members: Vec<Member>,
    /// Clients besides the store's that follow the same routing (the election's).
    others: Vec<Client>,
}

impl Members {
    /// A client of each member on its own; `None` with one endpoint (it has no other to go to).
    pub async fn of(options: &EtcdOptions) -> Option<Members> {
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
        Some(Members { members, others: Vec::new() })
    }

    /// Routes `client`'s requests as the store's from now on: the members taken out so far are
    /// taken out of it too.
    pub async fn route_too(&mut self, client: Client) {
        for member in self.members.iter().filter(|m| !m.serving) {
            if let Err(e) = client.remove_endpoint(&member.endpoint).await {
                tracing::warn!(endpoint = %member.endpoint, error = %e, "taking an etcd member out");
            }
        }
        self.others.push(client);
    }

    /// Probes every member once (at the same time) and takes out of `client`'s endpoints the
    /// ones that do not answer with a leader, or puts back the ones that do again.
    pub async fn round(&mut self, client: &Client) {
        let health = futures_util::future::join_all(self.members.iter().map(|m| answers_with_leader(&m.probe))).await;
        for (index, healthy) in health.into_iter().enumerate() {
            let others_serving = self.members.iter().enumerate().any(|(i, m)| i != index && m.serving);
            let Some(member) = self.members.get_mut(index) else { continue };
            if member.serving && !healthy && others_serving {
                match reroute(client, &self.others, &member.endpoint, false).await {
                    Ok(()) => {
                        member.serving = false;
                        tracing::warn!(endpoint = %member.endpoint, "etcd member unreachable or without a leader; requests go to the others");
                    }
                    Err(e) => tracing::warn!(endpoint = %member.endpoint, error = %e, "taking an etcd member out"),
                }
            } else if !member.serving && healthy {
                match reroute(client, &self.others, &member.endpoint, true).await {
                    Ok(()) => {
                        member.serving = true;
                        tracing::info!(endpoint = %member.endpoint, "etcd member answers again; requests go to it too");
                    }
                    Err(e) => tracing::warn!(endpoint = %member.endpoint, error = %e, "putting an etcd member back"),
                }
            }
        }
    }

    /// Goes on probing every `PROBE_INTERVAL` for the store's lifetime.
    pub fn spawn(mut self, shared: Arc<Shared>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_INTERVAL).await;
                self.round(&shared.client).await;
            }
        })
    }
}

/// Puts `endpoint` into (`serving`) or takes it out of the endpoints of `client` and `others`.
async fn reroute(client: &Client, others: &[Client], endpoint: &str, serving: bool) -> Result<(), etcd_client::Error> {
    for client in std::iter::once(client).chain(others) {
        if serving {
            client.add_endpoint(endpoint).await?;
        } else {
            client.remove_endpoint(endpoint).await?;
        }
    }
    Ok(())
}

/// Whether the member answers its status in time and knows a leader.
async fn answers_with_leader(client: &Client) -> bool {
    let mut maintenance = client.maintenance_client();
    matches!(tokio::time::timeout(PROBE_TIMEOUT, maintenance.status()).await, Ok(Ok(status)) if status.leader() != 0)
}
