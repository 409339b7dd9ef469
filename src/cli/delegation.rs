//! Builds authentication and authorization from the flags and the cluster, as a delegating
//! k8s.io/apiserver does: front proxy, client certificates and bearer tokens (TokenReview);
//! system:masters, always-allowed paths, then SubjectAccessReview. Development mode keeps
//! certificates only (a bearer token is refused: nothing could verify it) and allows every
//! authenticated user everything.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::ServeArgs;
use super::pki::{DEV_FRONT_PROXY_CN, DevPki};
use super::reload;
use super::serve::StartError;
use crate::auth::authz::{self, AllowAuthenticated, Authorizer, AuthzError, Decision};
use crate::auth::requestheader::{RequestHeaderAuthenticator, RequestHeaderConfig};
use crate::auth::sar::{CacheTtls, SubjectAccessReviewAuthorizer};
use crate::auth::sources::AuthenticationSources;
use crate::auth::token::{TokenAuthenticator, UnverifiableTokens};
use crate::auth::x509::{CaBundle, ClientCertAuthenticator};
use crate::auth::{self, Authenticator, BoxFuture};
use crate::core::request_info::RequestInfo;
use crate::core::user::UserInfo;
use crate::kube::auth_configmap::{self, LookupError};
use crate::kube::namespaces::NamespaceCache;
use crate::kube::reviews::{ClusterReviews, DEFAULT_TIMEOUT};
use crate::server::filters::authn::Authentication;
use crate::server::filters::authz::Authorization;
use crate::server::health::Synced;
use crate::server::shutdown::Stop;

/// How long the first read of the authentication ConfigMap may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The request path's identity and access decisions, and what feeds them.
pub struct Delegation {
    pub authentication: Authentication,
    pub authorization: Authorization,
    pub sources: Arc<AuthenticationSources>,
    /// The cluster's namespaces (every namespace exists when there is no cluster).
    pub namespaces: Arc<NamespaceCache>,
    /// The client of the main apiserver (`--kubeconfig` or in-cluster; none in development
    /// mode), for what the server reads from the cluster besides authentication.
    pub cluster: Option<::kube::Client>,
    /// The first read of the authentication ConfigMap; an error must stop the server.
    pub loaded: JoinHandle<Result<(), LookupError>>,
}

/// Denies everyone (system:masters is allowed before this is asked): the authorizer when no
/// main apiserver can be asked.
struct DenyAll;

impl Authorizer for DenyAll {
    fn authorize<'a>(&'a self, _: &'a UserInfo, _: &'a RequestInfo) -> BoxFuture<'a, Result<Decision, AuthzError>> {
        Box::pin(async { Ok(Decision::NoOpinion) })
    }
}

fn read_bundle(path: &Path) -> Result<CaBundle, StartError> {
    let pem = std::fs::read(path).map_err(|e| StartError::Config(format!("reading {}: {e}", path.display())))?;
    CaBundle::from_pem(&pem).map_err(|e| StartError::Config(format!("{}: {e}", path.display())))
}

/// The front-proxy settings given by flags (or the development PKI's front-proxy CA).
fn request_header_from_flags(
    args: &ServeArgs,
    dev: Option<&DevPki>,
) -> Result<Option<RequestHeaderConfig>, StartError> {
    let flags = &args.auth;
    let (ca_file, allowed_names) = match (&flags.requestheader_client_ca_file, dev) {
        (Some(file), _) => (file.clone(), flags.requestheader_allowed_names.clone()),
        // The development front-proxy CA signs one proxy certificate; a certificate of
        // another name from the same CA is not the proxy, unless the flags say otherwise.
        (None, Some(dev)) if flags.requestheader_allowed_names.is_empty() => {
            (dev.front_proxy_ca(), vec![DEV_FRONT_PROXY_CN.to_string()])
        }
        (None, Some(dev)) => (dev.front_proxy_ca(), flags.requestheader_allowed_names.clone()),
        (None, None) => return Ok(None),
    };
    Ok(Some(RequestHeaderConfig {
        ca: read_bundle(&ca_file)?,
        allowed_names,
        username_headers: flags.requestheader_username_headers.clone(),
        uid_headers: flags.requestheader_uid_headers.clone(),
        group_headers: flags.requestheader_group_headers.clone(),
        extra_prefixes: flags.requestheader_extra_headers_prefix.clone(),
    }))
}

/// CA bundles given as files are re-read when they change.
fn watch_ca_files(
    sources: &Arc<AuthenticationSources>,
    client_ca: Option<PathBuf>,
    request_header_ca: Option<PathBuf>,
) {
    let reload = |e: StartError| e.to_string();
    if let Some(path) = client_ca {
        let target = sources.client_ca.clone();
        reload::watch("client CA", vec![path.clone()], reload::POLL_INTERVAL, move || {
            target.store(Arc::new(read_bundle(&path).map_err(reload)?));
            Ok(())
        });
    }
    if let Some(path) = request_header_ca {
        let target = sources.request_header.clone();
        reload::watch("requestheader CA", vec![path.clone()], reload::POLL_INTERVAL, move || {
            let mut config = RequestHeaderConfig::clone(&target.load());
            config.ca = read_bundle(&path).map_err(reload)?;
            target.store(Arc::new(config));
            Ok(())
        });
    }
}

/// Clients of the main apiserver, one per kubeconfig (the three flags often name the same
/// file; the in-cluster account is `None`).
#[derive(Default)]
struct Clients(Vec<(Option<PathBuf>, Option<::kube::Client>)>);

impl Clients {
    /// A client from `specific`, else `--kubeconfig`, else (outside development mode) the
    /// in-cluster service account.
    async fn get(&mut self, args: &ServeArgs, specific: Option<&Path>) -> Result<Option<::kube::Client>, StartError> {
        let path = specific.or(args.auth.kubeconfig.as_deref()).map(Path::to_path_buf);
        if path.is_none() && args.dev {
            return Ok(None);
        }
        if let Some((_, client)) = self.0.iter().find(|(p, _)| *p == path) {
            return Ok(client.clone());
        }
        let client = crate::kube::connect(path.as_deref()).await.map_err(|e| StartError::Config(e.to_string()))?;
        self.0.push((path, client.clone()));
        Ok(client)
    }
}

/// Reads the authentication ConfigMap once, then follows it in the background.
fn start_lookup(
    client: ::kube::Client,
    sources: Arc<AuthenticationSources>,
    tolerate: bool,
) -> JoinHandle<Result<(), LookupError>> {
    tokio::spawn(async move {
        let first = match tokio::time::timeout(LOOKUP_TIMEOUT, auth_configmap::load(client.clone(), &sources)).await {
            Ok(result) => result,
            Err(_) => {
                Err(LookupError::Unreachable { message: format!("no answer within {}s", LOOKUP_TIMEOUT.as_secs()) })
            }
        };
        let version = match first {
            Ok(version) => version,
            Err(e) if tolerate => {
                tracing::error!(error = %e, "looking up the cluster's authentication configuration failed");
                tracing::warn!(
                    "continuing without it: front-proxy and cluster client-CA requests are anonymous until it can be read"
                );
                String::new()
            }
            Err(e) => return Err(e),
        };
        tokio::spawn(auth_configmap::follow(client, sources, version));
        Ok(())
    })
}

/// A failed first read of the cluster's settings, kept for the caller to report.
pub type Fatal = Arc<std::sync::Mutex<Option<String>>>;

/// What stops the server: `signal`, or a failed first read of the cluster's authentication
/// settings (its message left in the returned slot). Marks the authentication ConfigMap
/// `synced` (for `/readyz`'s informer-sync) when the first read succeeds.
pub fn stop_when(
    signal: impl Future<Output = ()> + Send + 'static,
    loaded: JoinHandle<Result<(), LookupError>>,
    synced: Synced,
) -> (impl Future<Output = Stop> + Send + 'static, Fatal) {
    let fatal: Fatal = Arc::default();
    let slot = fatal.clone();
    let stop = async move {
        let failure = async move {
            match loaded.await {
                Ok(Ok(())) => {
                    synced.mark();
                    std::future::pending::<String>().await
                }
                Ok(Err(e)) => e.to_string(),
                Err(e) => format!("loading the authentication settings: {e}"),
            }
        };
        tokio::select! {
            _ = signal => Stop::Signal,
            message = failure => {
                if let Ok(mut slot) = slot.lock() {
                    *slot = Some(message);
                }
                Stop::Failure
            }
        }
    };
    (stop, fatal)
}

/// The authorizer after system:masters and the always-allowed paths.
async fn authorizer(args: &ServeArgs, clients: &mut Clients) -> Result<Box<dyn Authorizer>, StartError> {
    let flags = &args.auth;
    Ok(if args.dev {
        tracing::warn!("development mode: every authenticated user may do everything; never use --dev in a cluster");
        Box::new(AllowAuthenticated)
    } else if let Some(c) = clients.get(args, flags.authorization_kubeconfig.as_deref()).await? {
        let ttls = CacheTtls {
            authorized: flags.authorization_webhook_cache_authorized_ttl,
            unauthorized: flags.authorization_webhook_cache_unauthorized_ttl,
        };
        Box::new(SubjectAccessReviewAuthorizer::new(Arc::new(ClusterReviews::new(c, DEFAULT_TIMEOUT)), ttls))
    } else {
        tracing::warn!(
            "no --authorization-kubeconfig and not in a cluster: only system:masters and the always-allowed paths get through"
        );
        Box::new(DenyAll)
    })
}

/// Builds authentication and authorization; starts reading the cluster's settings.
pub async fn build(args: &ServeArgs, dev: Option<&DevPki>, client_ca: Option<&Path>) -> Result<Delegation, StartError> {
    let flags = &args.auth;
    let client_ca_file = client_ca.map(Path::to_path_buf);
    let client_ca = client_ca.map(read_bundle).transpose()?;
    let sources = Arc::new(AuthenticationSources::new(client_ca, request_header_from_flags(args, dev)?));
    watch_ca_files(
        &sources,
        client_ca_file,
        flags.requestheader_client_ca_file.clone().or_else(|| dev.map(DevPki::front_proxy_ca)),
    );
    let mut clients = Clients::default();
    let authn_client = clients.get(args, flags.authentication_kubeconfig.as_deref()).await?;

    let loaded = match &authn_client {
        Some(c) if sources.wants_cluster() && !flags.authentication_skip_lookup => {
            start_lookup(c.clone(), sources.clone(), flags.authentication_tolerate_lookup_failure)
        }
        _ => {
            if sources.wants_cluster() && !flags.authentication_skip_lookup {
                tracing::warn!(
                    "no --authentication-kubeconfig and not in a cluster: the front-proxy and client CAs can only come from flags"
                );
            }
            tokio::spawn(async { Ok(()) })
        }
    };

    let mut authenticators: Vec<Box<dyn Authenticator>> = vec![
        Box::new(RequestHeaderAuthenticator::new(sources.request_header.clone())),
        Box::new(ClientCertAuthenticator::new(sources.client_ca.clone())),
    ];
    match &authn_client {
        Some(c) => {
            let ttl = flags.authentication_token_webhook_cache_ttl;
            authenticators.push(Box::new(TokenAuthenticator::new(
                Arc::new(ClusterReviews::new(c.clone(), DEFAULT_TIMEOUT)),
                ttl,
                ttl,
            )));
        }
        None => authenticators.push(Box::new(UnverifiableTokens)),
    }

    let delegate = authorizer(args, &mut clients).await?;

    let cluster = clients.get(args, flags.kubeconfig.as_deref()).await?;
    let namespaces = match &cluster {
        Some(c) => NamespaceCache::start(c.clone()),
        None => NamespaceCache::without_cluster(),
    };

    Ok(Delegation {
        authentication: Authentication {
            chain: Arc::new(auth::Chain::new(authenticators)),
            request_header: sources.request_header.clone(),
        },
        authorization: Authorization {
            chain: Arc::new(authz::Chain::new(args.authorization_always_allow_paths.clone(), delegate)),
        },
        sources,
        namespaces,
        cluster,
        loaded,
    })
}
