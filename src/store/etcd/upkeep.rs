//! What keeps the etcd backend going besides requests: the first contact at start-up, the
//! health probe behind the `etcd` check of `/readyz` and `/healthz` (and the database size of
//! `apiserver_storage_size_bytes`), and the compactor.
//!
//! The compactor follows kube-apiserver's: every interval each replica tries to bump the
//! version of the `compact_rev_key` key in a transaction; the one that succeeds compacts etcd
//! at the revision recorded one interval earlier. Replicas (and kube-apiserver instances
//! sharing the etcd) therefore compact once per interval between them, with no election.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse};

use super::EtcdOptions;
use super::connect::{describe, is_permanent, revision};
use super::members::Members;
use super::restore::{Meta, read_meta};
use super::store::Shared;
use crate::store::{Error, Result, Revision};

/// How often etcd is probed for health.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// A probe slower than this fails the check.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How often etcd's database size is read.
const SIZE_INTERVAL: Duration = Duration::from_secs(30);

/// The key the compacting servers agree through (kube-apiserver's name, outside any prefix).
const COMPACT_KEY: &str = "compact_rev_key";

/// What the store reads from etcd before it starts.
pub(super) struct Contact {
    /// etcd's revision when it answered.
    pub revision: i64,
    /// The restore record (`restore`) and its `mod_revision` (0: none).
    pub meta: Meta,
    pub meta_revision: i64,
}

/// Reads etcd's current revision and the restore record, retrying both while etcd is
/// unreachable (each failure logged with its cause; the members are probed again before each
/// attempt, so that none is asked while it is down) and failing at once when retrying cannot
/// help.
pub(super) async fn first_contact(
    client: &Client,
    prefix: &str,
    options: &EtcdOptions,
    members: &mut Option<Members>,
) -> Result<Contact> {
    let mut delay = Duration::from_millis(500);
    loop {
        if let Some(members) = members.as_mut() {
            members.round(client).await;
        }
        let cause = match read_start(client, prefix, options).await {
            Ok(contact) => {
                tracing::info!(servers = ?options.servers, revision = revision(contact.revision), "connected to etcd");
                return Ok(contact);
            }
            Err(Error::Unavailable(cause) | Error::Timeout(cause)) => cause,
            Err(e) => return Err(e),
        };
        if is_permanent(&cause) {
            return Err(Error::Backend(format!(
                "etcd at {} refused this server's credentials: {cause} (check --etcd-cafile, --etcd-certfile \
                 and --etcd-keyfile)",
                options.servers.join(",")
            )));
        }
        // With TLS 1.3 a refused client certificate often shows only as a connection etcd
        // closes right after the handshake: say what it most likely means.
        let hint = if options.cert_file.is_some() && cause.contains("connection closed") {
            "; etcd closes the TLS connections: it may refuse this client certificate (check --etcd-certfile, \
             --etcd-keyfile and etcd's --trusted-ca-file)"
        } else {
            ""
        };
        tracing::error!(
            servers = %options.servers.join(","),
            cause = %format!("{cause}{hint}"),
            retry_in = ?delay,
            "etcd is unreachable; retrying (the server is not ready until etcd answers)"
        );
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// One attempt at the reads of `first_contact`, each bounded by the request timeout.
async fn read_start(client: &Client, prefix: &str, options: &EtcdOptions) -> Result<Contact> {
    let late = || Error::Timeout(format!("no answer within {:?}", options.request_timeout));
    let mut kv = client.kv_client();
    let probe = GetOptions::new().with_count_only();
    let response = tokio::time::timeout(options.request_timeout, kv.get(prefix.to_string(), Some(probe)))
        .await
        .map_err(|_| late())?
        .map_err(|e| Error::Unavailable(describe(&e)))?;
    let revision = response.header().map_or(0, |h| h.revision());
    let (meta, meta_revision) =
        tokio::time::timeout(options.request_timeout, read_meta(client, prefix)).await.map_err(|_| late())??;
    Ok(Contact { revision, meta, meta_revision })
}

/// Probes etcd every second: a failed or slow read marks the store faulty until one succeeds.
pub(super) fn spawn_probe(shared: Arc<Shared>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last_size_check: Option<tokio::time::Instant> = None;
        loop {
            let mut kv = shared.kv();
            let probe = GetOptions::new().with_count_only();
            let outcome = tokio::time::timeout(PROBE_TIMEOUT, kv.get(format!("{}/health", shared.prefix), Some(probe)));
            let fault = match outcome.await {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(format!("etcd is unreachable: {}", describe(&e))),
                Err(_) => Some(format!("etcd did not answer within {PROBE_TIMEOUT:?}")),
            };
            let was_faulty = shared.fault.lock().map(|f| f.is_some()).unwrap_or(false);
            match (&fault, was_faulty) {
                (Some(cause), false) => tracing::error!(%cause, "storage unavailable"),
                (None, true) => tracing::info!("etcd answers again"),
                _ => {}
            }
            let healthy = fault.is_none();
            shared.set_fault(fault);
            if healthy && last_size_check.is_none_or(|t| t.elapsed() >= SIZE_INTERVAL) {
                let mut maintenance = shared.client.maintenance_client();
                if let Ok(Ok(status)) = tokio::time::timeout(PROBE_TIMEOUT, maintenance.status()).await {
                    shared.db_size.store(u64::try_from(status.db_size()).unwrap_or(0), Ordering::Relaxed);
                    last_size_check = Some(tokio::time::Instant::now());
                }
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
    })
}

/// Compacts etcd every `interval`, in turn with the other servers on it.
pub(super) fn spawn_compactor(shared: Arc<Shared>, interval: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // The version of `compact_rev_key` last seen, and the revision recorded with it.
        let mut seen_version = 0i64;
        let mut recorded: Revision = 0;
        loop {
            tokio::time::sleep(interval).await;
            match compact_turn(&shared, seen_version, recorded).await {
                Ok((version, revision)) => (seen_version, recorded) = (version, revision),
                Err(e) => tracing::warn!(error = %e, "compacting etcd"),
            }
        }
    })
}

/// One turn: claims this interval by bumping `compact_rev_key` from `version`; if the claim
/// wins, compacts at `recorded` (the revision of the previous turn).
async fn compact_turn(shared: &Shared, version: i64, recorded: Revision) -> Result<(i64, Revision)> {
    let claim = Txn::new()
        .when([Compare::version(COMPACT_KEY, CompareOp::Equal, version)])
        .and_then([TxnOp::put(COMPACT_KEY, shared.history().durable().to_string(), None)])
        .or_else([TxnOp::get(COMPACT_KEY, None)]);
    let mut kv = shared.kv();
    let response = shared.call(kv.txn(claim)).await?;
    let now = response.header().map_or(0, |h| shared.rev(h.revision()));
    if !response.succeeded() {
        // Another server claimed it: follow its count, compact next time if it stops.
        let current = response.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(get) => get.kvs().first().map(etcd_client::KeyValue::version),
            _ => None,
        });
        return Ok((current.unwrap_or(0), now));
    }
    if recorded > 0 {
        let mut kv = shared.kv();
        shared.call(kv.compact(shared.etcd_rev(recorded), None)).await?;
        shared.compacted.fetch_max(recorded, Ordering::SeqCst);
        tracing::info!(revision = recorded, "compacted etcd");
    }
    Ok((version + 1, now))
}
