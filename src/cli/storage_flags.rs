//! The storage flags: `--storage` and `--storage-cache-mb` for sled, and kube-apiserver's
//! `--storage-backend` and `--etcd-*` flags for etcd (every command that opens a store); a
//! serving replica's own (compaction, watch cache, leader election); and opening the store
//! they describe.
//!
//! Owns turning these flags into an open `store::Backend`. Holds no request logic.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{StorageUrl, parse_duration};
use crate::store::Backend;
use crate::store::etcd::{EtcdOptions, EtcdStore};
use crate::store::leadership::ElectionTiming;
use crate::store::sled::{SledOptions, SledStore};

/// Where objects are stored.
#[derive(Debug, Clone, Args)]
pub struct StorageFlags {
    /// The sled backend's directory (`PATH` or `sled://PATH`).
    #[arg(long)]
    pub storage: Option<String>,
    /// sled's page cache, in MiB.
    #[arg(long, default_value_t = 256)]
    pub storage_cache_mb: u64,
    /// The storage backend: `sled` (embedded, one replica) or `etcd3` (several replicas on
    /// one etcd cluster; needs a build with the `etcd` feature).
    #[arg(long, default_value = "sled", value_parser = ["sled", "etcd3"])]
    pub storage_backend: String,
    /// List of etcd servers to connect with (scheme://ip:port), comma separated.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// The prefix to prepend to all resource paths in etcd.
    #[arg(long, default_value = crate::store::etcd::DEFAULT_PREFIX)]
    pub etcd_prefix: String,
    /// SSL Certificate Authority file used to secure etcd communication.
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    /// SSL certification file used to secure etcd communication.
    #[arg(long)]
    pub etcd_certfile: Option<PathBuf>,
    /// SSL key file used to secure etcd communication.
    #[arg(long)]
    pub etcd_keyfile: Option<PathBuf>,
}

/// How a serving replica uses etcd, beside the store itself: compaction, the watch cache and
/// the election of the replica that runs the run-once work. `serve` only: the tools that open
/// a store (`backup`, `restore`) never compact, cache or stand for election.
#[derive(Debug, Clone, Args)]
pub struct ServingFlags {
    /// The interval of compaction requests. If 0, the compaction request from the apiserver
    /// is disabled.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub etcd_compaction_interval: Duration,
    /// With etcd3: answer gets and lists from the replica's watch-fed cache where
    /// Kubernetes' consistency rules allow it. false: every read goes to etcd.
    #[arg(long, num_args = 0..=1, default_value_t = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub watch_cache: bool,
    /// With etcd3: elect one replica to run the work that must run once (the namespace
    /// sweeper, storage-version migrations, the serveddefinitions status). false: this
    /// replica always runs it (only for a single replica).
    #[arg(long, num_args = 0..=1, default_value_t = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// How long a leader's etcd lease lasts unrenewed: the longest a dead leader's work waits
    /// for another replica to take it over.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// The leader steps down when it could not renew its lease for this long.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often the leader renews its lease, and how long a failed campaign waits.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,
}

impl ServingFlags {
    /// The election's timing, checked as Kubernetes checks it; `None` with `--leader-elect=false`.
    pub fn election(&self) -> Result<Option<ElectionTiming>, String> {
        if !self.leader_elect {
            return Ok(None);
        }
        let timing = ElectionTiming {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
        };
        timing.validate().map_err(|e| format!("--leader-elect-*: {e}"))?;
        Ok(Some(timing))
    }
}

impl StorageFlags {
    /// The store the flags name; `dev_default` is used for sled when `--storage` is absent.
    pub fn url(&self, dev_default: Option<PathBuf>) -> Result<StorageUrl, String> {
        if self.storage_backend == "etcd3" {
            if self.etcd_servers.is_empty() {
                return Err("--etcd-servers is required with --storage-backend=etcd3".into());
            }
            if self.storage.is_some() {
                return Err("--storage names a sled directory; it cannot be used with --storage-backend=etcd3".into());
            }
            return Ok(StorageUrl::Etcd(self.etcd_servers.clone()));
        }
        match (&self.storage, dev_default) {
            (Some(text), _) => StorageUrl::parse(text),
            (None, Some(dir)) => Ok(StorageUrl::Sled(dir)),
            (None, None) => Err("--storage is required (or use --dev, or --storage-backend=etcd3)".into()),
        }
    }

    /// etcd's options: a serving replica's (`serving`), or a tool's, which reads and writes
    /// etcd directly and nothing else.
    pub fn etcd_options(
        &self,
        servers: &[String],
        request_timeout: Duration,
        serving: Option<&ServingFlags>,
    ) -> EtcdOptions {
        EtcdOptions {
            election: serving.and_then(|s| s.election().ok().flatten()),
            servers: servers.to_vec(),
            prefix: self.etcd_prefix.clone(),
            ca_file: self.etcd_cafile.clone(),
            cert_file: self.etcd_certfile.clone(),
            key_file: self.etcd_keyfile.clone(),
            compaction_interval: serving.map_or(Duration::ZERO, |s| s.etcd_compaction_interval),
            watch_cache: serving.is_some_and(|s| s.watch_cache),
            request_timeout,
        }
    }

    /// Opens the store at `url`. etcd calls are bounded by `request_timeout`, capped so that a
    /// request still has time to answer once its store call failed.
    pub async fn open(
        &self,
        url: &StorageUrl,
        request_timeout: Duration,
        serving: Option<&ServingFlags>,
    ) -> Result<Backend, crate::store::Error> {
        match url {
            StorageUrl::Sled(dir) => {
                let options = SledOptions { cache_capacity: self.storage_cache_mb << 20, ..SledOptions::default() };
                Ok(Backend::Sled(SledStore::open(dir, options)?))
            }
            StorageUrl::Etcd(servers) => {
                let timeout = (request_timeout / 2).clamp(Duration::from_secs(1), Duration::from_secs(10));
                Ok(Backend::Etcd(EtcdStore::open(self.etcd_options(servers, timeout, serving)).await?))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        storage: StorageFlags,
        #[command(flatten)]
        serving: ServingFlags,
    }

    fn url(args: &[&str]) -> Result<StorageUrl, String> {
        let flags =
            Flags::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map_err(|e| e.to_string())?;
        flags.storage.url(None)
    }

    #[test]
    fn backends_from_kube_apiserver_flags() {
        assert_eq!(url(&["--storage", "./data"]), Ok(StorageUrl::Sled("./data".into())));
        assert_eq!(
            url(&["--storage-backend=etcd3", "--etcd-servers=http://a:2379,http://b:2379"]),
            Ok(StorageUrl::Etcd(vec!["http://a:2379".into(), "http://b:2379".into()]))
        );
        assert!(url(&["--storage-backend=etcd3"]).unwrap_err().contains("--etcd-servers is required"));
        assert!(url(&["--storage-backend=etcd2"]).is_err());
        assert!(url(&[]).unwrap_err().contains("--storage is required"));
        let flags = Flags::try_parse_from(["x", "--etcd-compaction-interval=0"]).unwrap();
        assert!(flags.serving.etcd_compaction_interval.is_zero());
        assert_eq!(flags.storage.etcd_prefix, "/crd-apiserver");
    }

    #[test]
    fn leader_election_flags_are_checked_as_kubernetes_checks_them() {
        let election = |args: &[&str]| {
            Flags::try_parse_from(std::iter::once("x").chain(args.iter().copied())).unwrap().serving.election()
        };
        let timing = election(&[]).unwrap().unwrap();
        assert_eq!(
            (timing.lease_duration, timing.renew_deadline, timing.retry_period),
            (Duration::from_secs(15), Duration::from_secs(10), Duration::from_secs(2))
        );
        assert_eq!(election(&["--leader-elect=false"]).unwrap().map(|_| ()), None);
        assert!(election(&["--leader-elect"]).unwrap().is_some());
        let refused = election(&["--leader-elect-lease-duration=10s"]).unwrap_err();
        assert!(refused.contains("leaseDuration must be greater than renewDeadline"), "{refused}");
        let refused = election(&["--leader-elect-retry-period=9s"]).unwrap_err();
        assert!(refused.contains("renewDeadline must be greater than retryPeriod*JitterFactor"), "{refused}");
    }
}
