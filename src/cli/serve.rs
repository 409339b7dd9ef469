//! `crd-apiserver serve`: opens the store, loads definitions, builds the request path and
//! serves until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::pki::DevPki;
use super::{ServeArgs, StorageUrl};
use crate::api::{Api, ApiOptions};
use crate::auth::authz::{self, AllowAuthenticated, Authorizer, Decision};
use crate::auth::x509::{CaBundle, ClientCertAuthenticator};
use crate::auth::{self, Authenticator};
use crate::definitions::{Registry, load_paths};
use crate::server::filters::authn::Authentication;
use crate::server::filters::authz::Authorization;
use crate::server::router::{Readiness, Router};
use crate::server::stack::{self, StackConfig};
use crate::server::{self, tls};
use crate::store::Backend;
use crate::store::sled::{SledOptions, SledStore};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Config(String),
    #[error("development PKI: {0}")]
    Pki(#[from] super::pki::Error),
    #[error("serving certificate: {0}")]
    Tls(#[from] tls::Error),
    #[error("storage: {0}")]
    Storage(#[from] crate::store::Error),
    #[error("listening on {addr}: {message}")]
    Listen { addr: String, message: String },
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
    let dev = if args.dev { Some(DevPki::ensure(&args.cert_dir)?) } else { None };
    let tls_cert = args.tls_cert_file.clone().or_else(|| dev.as_ref().map(DevPki::serving_cert));
    let tls_key = args.tls_private_key_file.clone().or_else(|| dev.as_ref().map(DevPki::serving_key));
    let (Some(tls_cert), Some(tls_key)) = (tls_cert, tls_key) else {
        return Err(StartError::Config(
            "--tls-cert-file and --tls-private-key-file are required (or use --dev)".into(),
        ));
    };
    let storage = match &args.storage {
        Some(text) => StorageUrl::parse(text).map_err(StartError::Config)?,
        None if args.dev => StorageUrl::Sled(PathBuf::from("data")),
        None => {
            return Err(StartError::Config("--storage is required (or use --dev)".into()));
        }
    };
    let mut definitions = args.definitions.clone();
    if definitions.is_empty() && args.dev {
        definitions.push(PathBuf::from("manifests/examples"));
    }
    let client_ca = args.client_ca_file.clone().or_else(|| dev.as_ref().map(DevPki::client_ca));
    Ok(Resolved { tls_cert, tls_key, client_ca, storage, definitions, dev })
}

fn open_store(url: &StorageUrl, args: &ServeArgs) -> Result<Backend, StartError> {
    match url {
        StorageUrl::Sled(dir) => {
            let options = SledOptions { cache_capacity: args.storage_cache_mb << 20, ..SledOptions::default() };
            Ok(Backend::Sled(SledStore::open(dir, options)?))
        }
        StorageUrl::Etcd(_) => Err(StartError::Config(
            "the etcd backend is not part of this build; use a sled directory for --storage".into(),
        )),
    }
}

/// Denies everyone (system:masters is allowed before this is asked): the authorizer when no
/// delegated authorization is configured.
struct DenyAll;

impl Authorizer for DenyAll {
    fn authorize<'a>(
        &'a self,
        _user: &'a crate::core::user::UserInfo,
        _info: &'a crate::core::request_info::RequestInfo,
    ) -> auth::BoxFuture<'a, Result<Decision, authz::AuthzError>> {
        Box::pin(async { Ok(Decision::NoOpinion) })
    }
}

fn load_registry(paths: &[PathBuf]) -> Registry {
    let report = load_paths(paths);
    let (registry, conflicts) = Registry::build(report.definitions);
    for problem in report.problems.iter().chain(conflicts.iter()) {
        tracing::error!("{problem}");
    }
    for definition in registry.definitions() {
        tracing::info!(definition = %definition.name, source = %definition.source, "serving");
        for warning in &definition.warnings {
            tracing::warn!(definition = %definition.name, "{warning}");
        }
    }
    registry
}

/// Starts the server and serves until a shutdown signal.
pub async fn run(args: ServeArgs) -> Result<(), StartError> {
    let resolved = resolve(&args)?;
    let provider = tls::provider();
    let serving = Arc::new(tls::ServingCert(ArcSwap::from_pointee(tls::load_certified_key(
        &resolved.tls_cert,
        &resolved.tls_key,
        &provider,
    )?)));
    let tls_config = Arc::new(tls::server_config(serving, provider)?);
    let store = open_store(&resolved.storage, &args)?;
    let registry = load_registry(&resolved.definitions);
    let api = Arc::new(Api::new(
        store.clone(),
        registry,
        ApiOptions { min_request_timeout: Duration::from_secs(args.min_request_timeout) },
    ));

    let mut authenticators: Vec<Box<dyn Authenticator>> = Vec::new();
    if let Some(path) = &resolved.client_ca {
        let pem = std::fs::read(path).map_err(|e| StartError::Config(format!("reading {}: {e}", path.display())))?;
        let bundle = CaBundle::from_pem(&pem).map_err(|e| StartError::Config(format!("{}: {e}", path.display())))?;
        authenticators.push(Box::new(ClientCertAuthenticator::new(Arc::new(ArcSwap::from_pointee(bundle)))));
    }
    let delegate: Box<dyn Authorizer> = if args.dev {
        tracing::warn!("development mode: every authenticated user may do everything; never use --dev in a cluster");
        Box::new(AllowAuthenticated)
    } else {
        Box::new(DenyAll)
    };
    let readiness = Arc::new(Readiness::default());
    let router = Arc::new(Router { api: api.clone(), readiness: readiness.clone() });
    let handler = stack::build(
        StackConfig {
            authentication: Authentication {
                chain: Arc::new(auth::Chain::new(authenticators)),
                proxy_header_prefixes: Arc::new(Vec::new()),
            },
            authorization: Authorization {
                chain: Arc::new(authz::Chain::new(args.authorization_always_allow_paths.clone(), delegate)),
            },
            max_read_only_in_flight: args.max_requests_inflight,
            max_mutating_in_flight: args.max_mutating_requests_inflight,
            request_timeout: args.request_timeout,
        },
        router,
    );

    let addr: SocketAddr = format!("{}:{}", bracket(&args.bind_address), args.secure_port)
        .parse()
        .map_err(|e| StartError::Config(format!("--bind-address {}: {e}", args.bind_address)))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| StartError::Listen { addr: addr.to_string(), message: e.to_string() })?;
    let local =
        listener.local_addr().map_err(|e| StartError::Listen { addr: addr.to_string(), message: e.to_string() })?;
    readiness.set_ready(true);
    tracing::info!(address = %local, "serving securely");
    if let Some(pki) = &resolved.dev {
        let kubeconfig = pki.write_kubeconfig(&format!("https://127.0.0.1:{}", local.port()))?;
        let absolute = std::fs::canonicalize(&kubeconfig).unwrap_or(kubeconfig);
        println!("crd-apiserver is serving on https://127.0.0.1:{} (development mode)", local.port());
        println!(
            "Use it with:\n  export KUBECONFIG={}\n  kubectl api-resources\n  kubectl get crontabs",
            absolute.display()
        );
    }
    server::serve(listener, tls_config, handler, shutdown_signal()).await;
    readiness.set_ready(false);
    store.close();
    tracing::info!("stopped");
    Ok(())
}

fn bracket(address: &str) -> String {
    if address.contains(':') && !address.starts_with('[') { format!("[{address}]") } else { address.to_string() }
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
