//! The command line: flags named as k8s.io/apiserver names them, and the subcommands
//! `serve`, `check`, `validate`, `impact`, `dev-pki`, `manifests`, `delete-objects`, `backup`
//! and `restore`, `takeover` and `handback`.
//!
//! Owns turning flags into a checked configuration and starting the parts. Holds no request
//! logic.

pub mod accepted_names;
pub mod admission;
pub mod auth_flags;
pub mod backup;
pub mod checks;
pub mod cluster_definitions;
pub mod delegation;
pub mod delete_objects;
pub mod impact;
pub mod live_definitions;
pub mod manifests;
pub mod migrate_storage;
pub mod pki;
pub mod reload;
pub mod serve;
pub mod server_client;
pub mod storage_flags;
pub mod storage_metrics;
pub mod takeover;
pub mod validate;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "crd-apiserver",
    version,
    about = "Serves the resources of CustomResourceDefinitions as an aggregated Kubernetes apiserver"
)]
pub struct Cli {
    /// Number for the log level verbosity, as klog's: 0 start-up, errors and warnings; 2
    /// steady-state information; 3 one line per request; 4 debug; 5 and more, dependencies'
    /// debug and trace lines. RUST_LOG, when set, selects instead.
    #[arg(short = 'v', long = "v", global = true, default_value_t = 0, value_name = "LEVEL")]
    pub verbosity: u32,
    /// Sets the log format. Permitted formats: "json", "text".
    #[arg(long, global = true, default_value = "text", value_name = "FORMAT")]
    pub logging_format: crate::logs::Format,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server.
    Serve(Box<ServeArgs>),
    /// Check definition files and report every problem, as loading would.
    Check(CheckArgs),
    /// Validate objects offline against definitions, as the server's write path would.
    Validate(validate::ValidateArgs),
    /// Tell what a changed definition would do to the objects already stored, before applying
    /// it: whether the change is accepted, objects that would fail validation, fields pruned or
    /// defaulted, CEL costs, storage migration, conversion (exit 0 fine, 1 objects would fail,
    /// 2 refused, 3 not analysed).
    Impact(impact::ImpactArgs),
    /// Write a development PKI (serving, client and front-proxy CAs and certificates).
    DevPki(DevPkiArgs),
    /// Print the definitions ConfigMap and one APIService per served group version.
    Manifests(manifests::ManifestsArgs),
    /// Rewrite every object stored in an older version into its definition's storage version,
    /// in a stopped server's store, then drop the emptied versions from storedVersions.
    MigrateStorage(migrate_storage::MigrateStorageArgs),
    /// Delete the stored objects of a definition no longer served (a stopped server's store).
    DeleteObjects(delete_objects::DeleteObjectsArgs),
    /// Write a backup of every object and the definitions' state, consistent at one
    /// revision: from a running server (--server) while it serves writes, or from the store.
    Backup(backup::BackupArgs),
    /// Load a backup into an empty store (sled or etcd); resourceVersions go on above the
    /// backup's, and clients holding older ones get 410 Expired and list again.
    Restore(backup::RestoreArgs),
    /// Move definitions' objects from the main apiserver to a running server: freeze writes,
    /// copy, switch the APIServices, lift the freeze (the server does it; see README).
    Takeover(takeover::TakeoverArgs),
    /// Give taken-over definitions back to the main apiserver, objects included.
    Handback(takeover::TakeoverArgs),
}

/// `--openapi-v2`: what /openapi/v2 publishes of the served resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OpenApiV2 {
    Full,
    Empty,
    Definitions,
}

impl From<OpenApiV2> for crate::api::openapi::V2Content {
    fn from(flag: OpenApiV2) -> Self {
        match flag {
            OpenApiV2::Full => crate::api::openapi::V2Content::Full,
            OpenApiV2::Empty => crate::api::openapi::V2Content::Empty,
            OpenApiV2::Definitions => crate::api::openapi::V2Content::Definitions,
        }
    }
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Development mode: creates a PKI under --cert-dir, stores data under ./data, serves
    /// manifests/examples, authenticates by the dev client certificate and allows every
    /// authenticated user everything.
    #[arg(long)]
    pub dev: bool,
    /// The port to serve HTTPS on.
    #[arg(long, default_value_t = 8443)]
    pub secure_port: u16,
    /// The address to listen on (default: 0.0.0.0, or 127.0.0.1 in development mode, whose
    /// certificates and open authorization are for this machine only).
    #[arg(long)]
    pub bind_address: Option<String>,
    /// Serving certificate (PEM, chain allowed).
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// Serving certificate's private key (PEM).
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// Where development certificates are written and read.
    #[arg(long, default_value = "certs/dev")]
    pub cert_dir: PathBuf,
    /// CA bundle that signs client certificates (user = CN, groups = O). When not given, the
    /// cluster's extension-apiserver-authentication ConfigMap provides it.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Definition manifests: a file or a directory (repeatable). Multi-document YAML or JSON.
    #[arg(long = "definitions")]
    pub definitions: Vec<PathBuf>,
    /// Also serve the main apiserver's CustomResourceDefinitions that this label selector
    /// picks (e.g. crd-apiserver.io/serve=true), followed live; needs the main apiserver.
    #[arg(long)]
    pub cluster_definitions_selector: Option<String>,
    /// Also serve these CustomResourceDefinitions of the main apiserver, by name
    /// (<plural>.<group>, comma-separated, repeatable), followed live.
    #[arg(long, value_delimiter = ',')]
    pub cluster_definitions: Vec<String>,
    /// Storage: sled's directory or kube-apiserver's etcd flags.
    #[command(flatten)]
    pub storage: storage_flags::StorageFlags,
    /// How this replica uses etcd: compaction, the watch cache, leader election.
    #[command(flatten)]
    pub serving_storage: storage_flags::ServingFlags,
    /// Paths anyone may read without authorization.
    #[arg(long, value_delimiter = ',', default_value = "/healthz,/readyz,/livez")]
    pub authorization_always_allow_paths: Vec<String>,
    /// Most concurrent read-only requests (watches excluded).
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: usize,
    /// Most concurrent mutating requests.
    #[arg(long, default_value_t = 200)]
    pub max_mutating_requests_inflight: usize,
    /// Seconds a watch without timeoutSeconds lasts at least (randomized up to twice this).
    #[arg(long, default_value_t = 1800)]
    pub min_request_timeout: u64,
    /// What /openapi/v2 publishes: `full`, every served version as Kubernetes publishes a
    /// definition's; `definitions`, the same definitions without paths (what clients of
    /// kube-apiserver's aggregated /openapi/v2 look kinds up in, at a fraction of its cost);
    /// `empty`, a valid document with no paths or definitions, so that kube-apiserver's
    /// aggregated /openapi/v2 holds nothing of ours (OpenAPI v3, which `kubectl explain` and
    /// `kubectl apply` read since 1.27, stays whole).
    #[arg(long, value_enum, default_value_t = OpenApiV2::Full)]
    pub openapi_v2: OpenApiV2,
    /// How often objects of namespaces that no longer exist are removed (namespaces come from
    /// the cluster; development mode has none).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub namespace_sweep_interval: std::time::Duration,
    /// Requests (get, list, create, update, patch, delete) slower than this are logged with
    /// where their time went, at every verbosity (kube-apiserver traces these verbs beyond
    /// 500ms); 0 turns it off.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub slow_request_threshold: std::time::Duration,
    /// Objects the storage-version migration rewrites per second at most (0: no limit).
    #[arg(long, default_value_t = 10_000)]
    pub storage_migration_rate: u32,
    /// How often stored objects are counted for `apiserver_storage_objects` (Kubernetes counts
    /// once a minute).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub storage_metrics_interval: std::time::Duration,
    /// Deadline of non-watch requests, e.g. 60s.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub request_timeout: std::time::Duration,
    /// The Service (`NAMESPACE/NAME`) a takeover points APIServices at: this server's.
    #[arg(long, default_value = "crd-apiserver/crd-apiserver")]
    pub takeover_service: String,
    /// The port of --takeover-service.
    #[arg(long, default_value_t = 443)]
    pub takeover_service_port: u16,
    /// The CA bundle (PEM) that signs this server's serving certificate, written into the
    /// APIServices a takeover switches; takeovers are refused without it.
    #[arg(long)]
    pub takeover_ca_file: Option<PathBuf>,
    /// Take over automatically every definition served from the main apiserver's
    /// CustomResourceDefinitions (--cluster-definitions-selector, --cluster-definitions) as
    /// soon as it is served, once (one handed back is left alone); needs --takeover-ca-file.
    /// With several replicas on etcd, only the elected one runs takeovers.
    #[arg(long)]
    pub takeover_cluster_definitions: bool,
    /// How long a takeover waits for the freeze to take effect, and for the switched
    /// APIServices to reach this server, before it rolls back.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub takeover_timeout: std::time::Duration,
    /// Most client connections open at once; at it, a new client takes the place of a
    /// connection doing nothing (one that never sent a request, then an idle anonymous one,
    /// then the one idle longest), and waits while every connection has a request in flight.
    /// 0 means the open-file limit less a reserve for the server's own files.
    #[arg(long, default_value_t = 0)]
    pub max_open_connections: usize,
    /// Time a new client gets to finish its TLS handshake, and then an HTTP/1.1 client to send
    /// a request's headers (the first from the handshake's end, each next one from its first
    /// bytes), as Go's ReadHeaderTimeout in kube-apiserver, e.g. 32s.
    #[arg(long, default_value = "32s", value_parser = parse_duration)]
    pub http_header_read_timeout: std::time::Duration,
    /// A kept-alive connection with no request in flight for this long since its last one is
    /// closed (Go's IdleTimeout in kube-apiserver; also a new HTTP/2 connection that opens no
    /// stream), e.g. 90s.
    #[arg(long, default_value = "90s", value_parser = parse_duration)]
    pub http_idle_timeout: std::time::Duration,
    /// Admission plugins to enable besides the default ones (kube-apiserver's names:
    /// NamespaceLifecycle, MutatingAdmissionWebhook, MutatingAdmissionPolicy,
    /// ValidatingAdmissionPolicy, ValidatingAdmissionWebhook, ResourceQuota).
    #[arg(long, value_delimiter = ',')]
    pub enable_admission_plugins: Vec<String>,
    /// Admission plugins to disable although on by default.
    #[arg(long, value_delimiter = ',')]
    pub disable_admission_plugins: Vec<String>,
    /// Time between SIGTERM and the end of serving: /readyz fails at once, everything else is
    /// served as usual meanwhile, so load balancers can stop sending traffic first, e.g. 10s.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub shutdown_delay_duration: std::time::Duration,
    /// Once the server stops accepting requests, the time over which its watches are ended
    /// (spread, at least 200 a second); 0 ends them all at once.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub shutdown_watch_termination_grace_period: std::time::Duration,
    /// After --shutdown-delay-duration, go on listening until requests in flight finished,
    /// answering new ones 429 with Retry-After (probes and metrics excepted).
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub shutdown_send_retry_after: bool,
    /// Delegated authentication and authorization (front proxy, TokenReview,
    /// SubjectAccessReview, the main apiserver's kubeconfigs).
    #[command(flatten)]
    pub auth: auth_flags::AuthFlags,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Definition files or directories.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Check the definitions as an update of those in this file or directory (repeatable), as
    /// a running server checks a changed file: Kubernetes' update rules on top of the create
    /// checks (immutable scope and kind, stored versions kept in spec.versions, names held).
    /// The stored versions are the previous storage version and the previous manifest's
    /// status.storedVersions, if it has one.
    #[arg(long = "previous", value_name = "PATH")]
    pub previous: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DevPkiArgs {
    #[arg(long, default_value = "certs/dev")]
    pub dir: PathBuf,
    /// Port written into the kubeconfig.
    #[arg(long, default_value_t = 8443)]
    pub port: u16,
}

/// Parses `60s`, `5m`, `1h` or plain seconds.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    // A bare number is seconds (accepted since the first release); otherwise Go's
    // `time.ParseDuration` forms, as Kubernetes' duration flags take them: `500ms`, `1m30s`, `1.5h`.
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(std::time::Duration::from_secs(seconds));
    }
    let invalid = || format!("time: invalid duration {text:?}");
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let unit_end = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let nanoseconds = match unit {
            "ns" => 1.0,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(format!("time: missing unit in duration {text:?}")),
            other => return Err(format!("time: unknown unit {other:?} in duration {text:?}")),
        };
        total += value * nanoseconds;
        rest = after;
    }
    if !total.is_finite() || total > u64::MAX as f64 {
        return Err(invalid());
    }
    Ok(std::time::Duration::from_nanos(total.round() as u64))
}

/// Where objects are stored, from `--storage` or `--storage-backend=etcd3 --etcd-servers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageUrl {
    Sled(PathBuf),
    Etcd(Vec<String>),
}

impl StorageUrl {
    /// A sled directory given to `--storage`.
    pub fn parse(text: &str) -> Result<StorageUrl, String> {
        if text.starts_with("etcd://") || text.starts_with("etcds://") {
            return Err("etcd is chosen with --storage-backend=etcd3 --etcd-servers=http://HOST:2379".into());
        }
        let path = text.strip_prefix("sled://").unwrap_or(text);
        if path.is_empty() {
            return Err("--storage needs a directory".into());
        }
        Ok(StorageUrl::Sled(PathBuf::from(path)))
    }
}

/// `crd-apiserver check`: prints every problem; exit code 1 when there is one.
pub fn check(args: &CheckArgs) -> i32 {
    use crate::definitions::reload::{Context, nothing_accepted, plan};
    use crate::definitions::scan::FileCache;
    let no_age = |_: &str| None;
    let no_stored = |_: &str| Vec::new();
    let first = Context { age: &no_age, stored_versions: &no_stored, accepted: &nothing_accepted };
    let previous = if args.previous.is_empty() {
        std::collections::HashMap::new()
    } else {
        let before = plan(&Default::default(), &FileCache::default().scan(&args.previous), &first);
        for problem in &before.problems {
            println!("previous: {problem}");
        }
        before.served
    };
    // The versions the previous manifests say objects were stored in.
    let stored = |name: &str| -> Vec<String> {
        let status = previous.get(name).and_then(|s| s.loaded.manifest.status.as_ref());
        status.and_then(|s| s.stored_versions.clone()).unwrap_or_default()
    };
    // Definitions served before keep their names against newcomers, as in a running server.
    let age = |name: &str| previous.contains_key(name).then_some(0);
    let checked = plan(
        &previous,
        &FileCache::default().scan(&args.paths),
        &Context { age: &age, stored_versions: &stored, accepted: &nothing_accepted },
    );
    for problem in &checked.problems {
        println!("{problem}");
    }
    let refused: std::collections::HashSet<&str> = checked.problems.iter().filter_map(|p| p.name.as_deref()).collect();
    let mut accepted = 0;
    for definition in checked.registry.definitions().iter().filter(|d| !refused.contains(d.name.as_str())) {
        accepted += 1;
        println!("{}: {} ok", definition.source, definition.name);
        for warning in &definition.warnings {
            println!("{}: {}: warning: {warning}", definition.source, definition.name);
        }
    }
    for name in &checked.removed {
        println!("{name}: no longer served (its objects stay in the store)");
    }
    if checked.problems.is_empty() && accepted == 0 && checked.removed.is_empty() {
        let paths: Vec<String> = args.paths.iter().map(|p| p.display().to_string()).collect();
        println!("{}: no CustomResourceDefinitions found", paths.join(", "));
        return 1;
    }
    if checked.problems.is_empty() { 0 } else { 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_urls() {
        assert_eq!(StorageUrl::parse("./data").unwrap(), StorageUrl::Sled("./data".into()));
        assert_eq!(StorageUrl::parse("sled:///var/lib/x").unwrap(), StorageUrl::Sled("/var/lib/x".into()));
        assert!(StorageUrl::parse("etcd://a:2379").unwrap_err().contains("--storage-backend=etcd3"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("60s").unwrap().as_secs(), 60);
        assert_eq!(parse_duration("5m").unwrap().as_secs(), 300);
        assert_eq!(parse_duration("7").unwrap().as_secs(), 7);
        assert!(parse_duration("5d").is_err());
        assert_eq!(parse_duration("500ms").unwrap().as_millis(), 500);
        assert_eq!(parse_duration("1m30s").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("1.5h").unwrap().as_secs(), 5400);
        assert_eq!(parse_duration("0").unwrap().as_secs(), 0);
        assert_eq!(parse_duration("5d").unwrap_err(), "time: unknown unit \"d\" in duration \"5d\"");
        assert_eq!(parse_duration("1h5").unwrap_err(), "time: missing unit in duration \"1h5\"");
        assert_eq!(parse_duration("-1s").unwrap_err(), "time: invalid duration \"-1s\"");
    }
}
