//! `crd-apiserver serve`: opens the store, loads definitions, builds the request path and
//! serves until SIGINT or SIGTERM, then terminates gracefully (`server::shutdown`) and closes
//! the store.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::live_definitions::LiveDefinitions;
use super::pki::DevPki;
use super::{ServeArgs, StorageUrl};
use crate::api::namespaces::Namespaces;
use crate::api::{Api, ApiOptions};
use crate::core::namespace::NamespaceState;
use crate::definitions::reload_status::ReloadStatus;
use crate::server::health::Informers;
use crate::server::router::Router;
use crate::server::shutdown::{Lifecycle, ShutdownOptions};
use crate::server::stack::{self, StackConfig};
use crate::server::{self, tls};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Config(String),
    // The causes are part of the message, not sources: the error is then printed once.
    #[error("development PKI: {0}")]
    Pki(super::pki::Error),
    #[error("serving certificate: {0}")]
    Tls(tls::Error),
    #[error("storage: {0}")]
    Storage(crate::store::Error),
    #[error("listening on {addr}: {message}")]
    Listen { addr: String, message: String },
}

impl From<super::pki::Error> for StartError {
    fn from(e: super::pki::Error) -> Self {
        StartError::Pki(e)
    }
}

impl From<tls::Error> for StartError {
    fn from(e: tls::Error) -> Self {
        StartError::Tls(e)
    }
}

impl From<crate::store::Error> for StartError {
    fn from(e: crate::store::Error) -> Self {
        StartError::Storage(e)
    }
}

/// Settings resolved from flags (development defaults applied).
pub struct Resolved {
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    pub client_ca: Option<PathBuf>,
    pub storage: StorageUrl,
    pub definitions: Vec<PathBuf>,
    pub dev: Option<DevPki>,
}

/// Applies development defaults and checks that the required settings are present.
pub fn resolve(args: &ServeArgs) -> Result<Resolved, StartError> {
    let mut definitions = args.definitions.clone();
    if definitions.is_empty() && args.dev {
        definitions.push(dev_definitions()?);
    }
    let dev = if args.dev { Some(DevPki::ensure(&args.cert_dir)?) } else { None };
    let tls_cert = args.tls_cert_file.clone().or_else(|| dev.as_ref().map(DevPki::serving_cert));
    let tls_key = args.tls_private_key_file.clone().or_else(|| dev.as_ref().map(DevPki::serving_key));
    let (Some(tls_cert), Some(tls_key)) = (tls_cert, tls_key) else {
        return Err(StartError::Config(
            "--tls-cert-file and --tls-private-key-file are required (or use --dev)".into(),
        ));
    };
    let storage = args.storage.url(args.dev.then(|| PathBuf::from("data"))).map_err(StartError::Config)?;
    args.serving_storage.election().map_err(StartError::Config)?;
    let client_ca = args.client_ca_file.clone().or_else(|| dev.as_ref().map(DevPki::client_ca));
    Ok(Resolved { tls_cert, tls_key, client_ca, storage, definitions, dev })
}

/// What `--dev` serves without `--definitions`: the repository's examples, from its top
/// directory. Elsewhere there are none, and serving nothing (with nothing to watch) would only
/// puzzle: the start stops and says what to do.
fn dev_definitions() -> Result<PathBuf, StartError> {
    let examples = PathBuf::from("manifests/examples");
    if examples.is_dir() {
        return Ok(examples);
    }
    let here = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_else(|_| ".".into());
    Err(StartError::Config(format!(
        "--dev serves the definitions in manifests/examples when no --definitions is given, and {here} has no \
         manifests/examples directory: run it from the repository's top directory, or give --definitions PATH (a \
         file or directory of CustomResourceDefinition manifests)"
    )))
}

/// Where a takeover points APIServices: `--takeover-service` with the CA of
/// `--takeover-ca-file` (`None` without it: takeovers are refused and say why).
fn takeover_target(args: &ServeArgs) -> Result<Option<crate::takeover::switch::Target>, StartError> {
    if args.takeover_cluster_definitions {
        if args.takeover_ca_file.is_none() {
            return Err(StartError::Config(
                "--takeover-cluster-definitions needs --takeover-ca-file (the CA bundle the APIServices get)".into(),
            ));
        }
        if super::cluster_definitions::wanted(args)?.is_empty() {
            return Err(StartError::Config(
                "--takeover-cluster-definitions takes over the definitions --cluster-definitions-selector or \
                 --cluster-definitions select: give one of them"
                    .into(),
            ));
        }
    }
    let Some(ca_file) = &args.takeover_ca_file else { return Ok(None) };
    let ca_bundle = std::fs::read(ca_file)
        .map_err(|e| StartError::Config(format!("--takeover-ca-file {}: {e}", ca_file.display())))?;
    let Some((namespace, name)) = args.takeover_service.split_once('/') else {
        return Err(StartError::Config(format!(
            "--takeover-service {}: expected NAMESPACE/NAME",
            args.takeover_service
        )));
    };
    Ok(Some(crate::takeover::switch::Target {
        namespace: namespace.to_string(),
        name: name.to_string(),
        port: args.takeover_service_port,
        ca_bundle,
    }))
}

/// Starts the server and serves until a shutdown signal.
pub async fn run(args: ServeArgs) -> Result<(), StartError> {
    let resolved = resolve(&args)?;
    let takeover_target = takeover_target(&args)?;
    let plugins =
        crate::admission::Plugins::from_flags(&args.enable_admission_plugins, &args.disable_admission_plugins)
            .map_err(StartError::Config)?;
    if args.enable_admission_plugins.iter().any(|p| p == "MutatingAdmissionPolicy") {
        tracing::warn!(
            "MutatingAdmissionPolicy is not run by this server: mutating admission policies are not applied"
        );
    }
    // Starts reading the cluster's authentication settings while storage opens.
    let delegation = super::delegation::build(&args, resolved.dev.as_ref(), resolved.client_ca.as_deref()).await?;
    let provider = tls::provider();
    let serving = Arc::new(tls::ServingCert(ArcSwap::from_pointee(tls::load_certified_key(
        &resolved.tls_cert,
        &resolved.tls_key,
        &provider,
    )?)));
    // A renewed serving certificate is picked up without a restart.
    super::reload::watch_serving_cert(serving.clone(), &resolved.tls_cert, &resolved.tls_key, provider.clone());
    let tls_config = Arc::new(tls::server_config(serving, provider)?);
    let store = args.storage.open(&resolved.storage, args.request_timeout, Some(&args.serving_storage)).await?;
    // Definitions are served as the files say, from the first load on, and reloaded on change.
    // The followers of the main apiserver, for /readyz's informer-sync.
    let informers = Arc::new(Informers::default());
    // The main apiserver's definitions the flags select are served besides the files.
    let cluster_definitions = super::cluster_definitions::start(&args, delegation.cluster.clone(), &informers)?;
    let reload_status = ReloadStatus::new();
    let definitions = LiveDefinitions::new(resolved.definitions.clone(), store.clone(), reload_status.clone())
        .with_cluster(cluster_definitions);
    // What a candidate or a reloaded definition would do to the stored objects.
    let impacts = crate::impact::runner::Runner::new(
        store.clone(),
        definitions.served_set(),
        crate::impact::Options::default(),
        tokio::runtime::Handle::current(),
    );
    let definitions = definitions.with_impacts(impacts.clone());
    let registry = definitions.load().await;
    let namespaces: Arc<dyn Namespaces> = Arc::new(ClusterNamespaces(delegation.namespaces.clone()));
    let namespace_cache = delegation.namespaces.clone();
    informers.register("*v1.Namespace", move || namespace_cache.is_synced());
    let authentication_synced = informers.flag("*v1.ConfigMap");
    let admission = super::admission::start(
        delegation.cluster.clone(),
        delegation.namespaces.clone(),
        plugins,
        delegation.authorization.chain.clone(),
        &informers,
    );
    let api = Arc::new(
        Api::with_namespaces(
            store.clone(),
            registry,
            ApiOptions {
                min_request_timeout: Duration::from_secs(args.min_request_timeout),
                openapi_v2: args.openapi_v2.into(),
            },
            namespaces,
        )
        .with_admission(admission),
    );
    if let Err(e) = definitions.follow(api.clone()) {
        tracing::error!(error = %e, "definitions are not reloaded when their files change");
    }
    // Objects of namespaces deleted while nobody cleaned them up go away on their own.
    crate::api::namespaces::spawn_sweeper(api.clone(), args.namespace_sweep_interval);
    let storage_id = match &resolved.storage {
        StorageUrl::Sled(dir) => format!("sled:{}", dir.display()),
        StorageUrl::Etcd(endpoints) => endpoints.join(","),
    };
    super::storage_metrics::spawn(api.clone(), args.storage_metrics_interval, storage_id);
    // Storage versions, migrations and the serveddefinitions status, as definitions are served.
    let migration = crate::lifecycle::migrate::Options {
        rate: args.storage_migration_rate,
        ..crate::lifecycle::migrate::Options::default()
    };
    let lifecycle_controller =
        crate::lifecycle::controller::Controller::spawn(api.clone(), migration, reload_status.clone());

    let lifecycle = Lifecycle::new(ShutdownOptions {
        delay: args.shutdown_delay_duration,
        watch_grace: args.shutdown_watch_termination_grace_period,
        send_retry_after: args.shutdown_send_retry_after,
        request_timeout: args.request_timeout,
    });
    let health = super::checks::build(&store, &informers, &lifecycle);
    // Resources taken over from the main apiserver expire the resourceVersions clients hold
    // from there, across restarts.
    // A store that cannot be read yet (closed on a full disk) serves nothing either: the
    // records are read as soon as it can be.
    // Followed, for takeovers and handbacks made by other replicas.
    tokio::spawn(crate::takeover::follow_floors(api.clone()));
    let mut takeovers = crate::takeover::Takeovers::new(api.clone(), delegation.cluster.clone(), takeover_target);
    takeovers.wait = args.takeover_timeout;
    let takeovers = Arc::new(takeovers);
    if args.takeover_cluster_definitions {
        crate::takeover::auto::spawn(takeovers.clone(), api.clone());
    }
    let router = Arc::new(Router {
        api: api.clone(),
        health: Arc::new(health),
        takeovers: Some(takeovers),
        lifecycle: Some(lifecycle_controller),
        impacts: Some(impacts),
    });
    let handler = stack::build(
        StackConfig {
            authentication: delegation.authentication,
            authorization: delegation.authorization,
            max_read_only_in_flight: args.max_requests_inflight,
            max_mutating_in_flight: args.max_mutating_requests_inflight,
            request_timeout: args.request_timeout,
            slow_request_threshold: args.slow_request_threshold,
            lifecycle: lifecycle.clone(),
        },
        router,
    );

    let bind_address = args.bind_address.as_deref().unwrap_or(if args.dev { "127.0.0.1" } else { "0.0.0.0" });
    let addr: SocketAddr = format!("{}:{}", bracket(bind_address), args.secure_port)
        .parse()
        .map_err(|e| StartError::Config(format!("--bind-address {bind_address}: {e}")))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| StartError::Listen { addr: addr.to_string(), message: e.to_string() })?;
    let local =
        listener.local_addr().map_err(|e| StartError::Listen { addr: addr.to_string(), message: e.to_string() })?;
    // A failed first read of the cluster's authentication settings stops the server.
    let (stop, fatal) = super::delegation::stop_when(shutdown_signal(), delegation.loaded, authentication_synced);
    tracing::info!(address = %local, "serving securely");
    if let Some(pki) = &resolved.dev {
        let kubeconfig = pki.write_kubeconfig(&format!("https://127.0.0.1:{}", local.port()))?;
        let absolute = std::fs::canonicalize(&kubeconfig).unwrap_or(kubeconfig);
        println!("crd-apiserver is serving on https://{local} (development mode)");
        println!(
            "Use it with:\n  export KUBECONFIG={}\n  kubectl api-resources\n  kubectl get crontabs",
            absolute.display()
        );
    }
    let connections = server::ConnectionSettings {
        header_read_timeout: args.http_header_read_timeout,
        idle_timeout: args.http_idle_timeout,
        ..server::ConnectionSettings::default()
    };
    let max_connections = match args.max_open_connections {
        0 => server::listener::default_max_connections(),
        n => n,
    };
    tracing::info!(max_connections, "connection limit");
    server::serve(listener, tls_config, handler, connections, max_connections, &lifecycle, stop).await;
    // The writer finishes what it was given and syncs it before the process ends.
    let closing = store.clone();
    if let Err(e) = tokio::task::spawn_blocking(move || closing.close()).await {
        tracing::error!(error = %e, "closing the store failed");
    }
    tracing::info!("[graceful-termination] store closed");
    if let Some(message) = fatal.lock().ok().and_then(|mut slot| slot.take()) {
        return Err(StartError::Config(message));
    }
    tracing::info!("stopped");
    Ok(())
}

/// The cluster's namespaces, as the API's lifecycle rules ask for them.
struct ClusterNamespaces(Arc<crate::kube::namespaces::NamespaceCache>);

impl Namespaces for ClusterNamespaces {
    fn state<'a>(&'a self, name: &'a str) -> futures_util::future::BoxFuture<'a, Result<NamespaceState, String>> {
        Box::pin(async move { self.0.lookup(name).await.map_err(|e| e.to_string()) })
    }

    fn seems_missing(&self, name: &str) -> bool {
        self.0.seems_missing(name)
    }
}

fn bracket(address: &str) -> String {
    if address.contains(':') && !address.starts_with('[') { format!("[{address}]") } else { address.to_string() }
}

/// SIGINT and SIGTERM, as they arrive.
struct Signals {
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Signals {
        Signals {
            #[cfg(unix)]
            terminate: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok(),
        }
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        let terminate = async {
            match self.terminate.as_mut() {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let terminate = std::future::pending::<()>();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate => {}
        }
    }
}

/// Resolves on the first SIGINT or SIGTERM; a second one ends the process at once with exit
/// code 1, as Kubernetes' servers do.
async fn shutdown_signal() {
    let mut signals = Signals::new();
    signals.next().await;
    tokio::spawn(async move {
        signals.next().await;
        tracing::warn!("[graceful-termination] second signal: exiting at once");
        std::process::exit(1);
    });
}
