//! The double's kube-aggregator: proxies `/apis/<g>/<v>/...` of registered APIServices to the
//! backend over HTTP/2 with the front-proxy client certificate and `X-Remote-*` identity
//! headers (incoming `X-Remote-*` and `Authorization` dropped), and fetches the backend's own
//! discovery and OpenAPI as the aggregator's users do.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::rbac::User;
use super::respond::{self, Body, Response};
use super::state::{State, lock};

/// The APIService's service and how it is trusted (its caBundle): one endpoint per replica.
/// With one endpoint it is always used; with several, each request goes to the next ready one
/// in turn, as kube-aggregator's endpoint routing sends it to a ready endpoint of the Service
/// (readiness from the replicas' `/readyz`, as the kubelet's probe sets it).
pub struct Backend {
    endpoints: Vec<Endpoint>,
    next: AtomicUsize,
    /// The name checked in the backend's serving certificate: `<service>.<namespace>.svc`.
    pub server_name: String,
    pub ca_bundle: Vec<CertificateDer<'static>>,
    /// The front-proxy client certificate and key (swappable: CA rotation).
    pub identity: Mutex<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
}

/// One replica behind the service.
struct Endpoint {
    port: u16,
    ready: AtomicBool,
    /// One HTTP/2 connection per TLS server name (each APIService's proxy transport sends its
    /// own Service's name), as the aggregator multiplexes requests; rebuilt when it closes or
    /// the identity changes.
    connections: tokio::sync::Mutex<HashMap<String, hyper::client::conn::http2::SendRequest<Body>>>,
}

impl Backend {
    pub fn new(
        port: u16,
        server_name: &str,
        ca_bundle: Vec<CertificateDer<'static>>,
        identity: (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>),
    ) -> Backend {
        Backend::replicas(&[port], server_name, ca_bundle, identity)
    }

    /// A service whose endpoints are the replicas listening on `ports`, all ready at first.
    pub fn replicas(
        ports: &[u16],
        server_name: &str,
        ca_bundle: Vec<CertificateDer<'static>>,
        identity: (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>),
    ) -> Backend {
        Backend {
            endpoints: ports
                .iter()
                .map(|&port| Endpoint {
                    port,
                    ready: AtomicBool::new(true),
                    connections: tokio::sync::Mutex::new(HashMap::new()),
                })
                .collect(),
            next: AtomicUsize::new(0),
            server_name: server_name.into(),
            ca_bundle,
            identity: Mutex::new(identity),
        }
    }

    /// Swaps the proxy's client certificate; the next request opens a new connection.
    pub async fn set_identity(&self, identity: (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)) {
        *lock(&self.identity) = identity;
        for endpoint in &self.endpoints {
            endpoint.connections.lock().await.clear();
        }
    }

    /// The replica ports and whether each is ready.
    pub fn readiness(&self) -> Vec<(u16, bool)> {
        self.endpoints.iter().map(|e| (e.port, e.ready.load(Ordering::SeqCst))).collect()
    }

    /// Probes every replica's `/readyz` every `period` (without credentials, as the kubelet
    /// does), for as long as the backend is registered.
    pub fn probe_readiness(self: &Arc<Backend>, period: std::time::Duration) {
        let backend = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some(backend) = backend.upgrade() {
                for endpoint in &backend.endpoints {
                    let ready = backend.probe(endpoint.port).await;
                    endpoint.ready.store(ready, Ordering::SeqCst);
                }
                drop(backend);
                tokio::time::sleep(period).await;
            }
        });
    }

    async fn probe(&self, port: u16) -> bool {
        let attempt = async {
            let config = self.tls_config(false)?;
            let tls = self.connect(port, config, &self.server_name).await?;
            let (mut sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            let request = http::Request::get(format!("https://{}/readyz", self.server_name))
                .body(respond::full(Bytes::new()))
                .map_err(|e| e.to_string())?;
            let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(response.status() == http::StatusCode::OK)
        };
        tokio::time::timeout(std::time::Duration::from_secs(1), attempt).await.is_ok_and(|r| r.unwrap_or(false))
    }

    fn tls_config(&self, client_auth: bool) -> Result<rustls::ClientConfig, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in &self.ca_bundle {
            roots.add(cert.clone()).map_err(|e| e.to_string())?;
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots);
        let mut config = if client_auth {
            let (chain, key) = {
                let identity = lock(&self.identity);
                (identity.0.clone(), identity.1.clone_key())
            };
            builder.with_client_auth_cert(chain, key).map_err(|e| e.to_string())?
        } else {
            builder.with_no_client_auth()
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }

    async fn connect(
        &self,
        port: u16,
        config: rustls::ClientConfig,
        server_name: &str,
    ) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.map_err(|e| e.to_string())?;
        let name = ServerName::try_from(server_name.to_string()).map_err(|e| e.to_string())?;
        tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.map_err(|e| e.to_string())
    }

    /// The next ready endpoint in turn (the only one, ready or not, when there is one).
    fn pick(&self) -> Result<&Endpoint, String> {
        if let [only] = self.endpoints.as_slice() {
            return Ok(only);
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..self.endpoints.len())
            .map(|i| &self.endpoints[(start + i) % self.endpoints.len()])
            .find(|e| e.ready.load(Ordering::SeqCst))
            .ok_or_else(|| "no endpoints available for service".to_string())
    }

    async fn sender(&self, server_name: &str) -> Result<hyper::client::conn::http2::SendRequest<Body>, String> {
        let endpoint = self.pick()?;
        let mut connections = endpoint.connections.lock().await;
        if let Some(sender) = connections.get(server_name).filter(|s| !s.is_closed()) {
            return Ok(sender.clone());
        }
        let config = self.tls_config(true)?;
        let tls = self.connect(endpoint.port, config, server_name).await?;
        let (sender, connection) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        connections.insert(server_name.to_string(), sender.clone());
        Ok(sender)
    }
}

/// Hop-by-hop and identity headers never passed on.
fn dropped(name: &str) -> bool {
    name.starts_with("x-remote-")
        || matches!(
            name,
            "authorization"
                | "host"
                | "connection"
                | "keep-alive"
                | "proxy-connection"
                | "transfer-encoding"
                | "upgrade"
                | "te"
                | "impersonate-user"
                | "impersonate-group"
        )
}

/// Go's `url.PathEscape` for the key of an extra header (unreserved characters stay).
fn escape_key(key: &str) -> String {
    key.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The query re-encoded with its keys sorted, as Go's `url.Values.Encode` writes it.
fn sorted_query(query: Option<&str>) -> String {
    let mut pairs: Vec<(String, String)> =
        form_urlencoded::parse(query.unwrap_or_default().as_bytes()).into_owned().collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

/// Who asks, and from where.
pub struct Caller<'a> {
    pub user: &'a User,
    pub remote: Option<SocketAddr>,
}

/// The TLS server name of the Service of the APIService that `/apis/<g>/<v>...` (or its
/// OpenAPI v3 document, `/openapi/v3/apis/<g>/<v>`) belongs to, if one is registered:
/// kube-aggregator's proxy for an APIService dials that APIService's own Service
/// (`remote.BuildTransportConfig` sets `ServerName` to `<service>.<namespace>.svc`), so with
/// one Service per group each group's requests arrive under its own name.
pub fn server_name_for(state: &State, path: &str) -> Option<String> {
    let path = path.strip_prefix("/openapi/v3").unwrap_or(path);
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["apis", group, version, ..] => lock(&state.services)
            .iter()
            .find(|s| s.group == *group && s.version == *version)
            .map(|s| s.server_name.clone()),
        _ => None,
    }
}

/// Proxies one request to the backend through the Service of the APIService its path belongs
/// to (`server_name_for`), else the project's own Service.
pub async fn forward(
    state: &State,
    backend: &Backend,
    parts: &http::request::Parts,
    body: Body,
    caller: Caller<'_>,
) -> Result<http::Response<Body>, String> {
    let server_name = server_name_for(state, parts.uri.path()).unwrap_or_else(|| backend.server_name.clone());
    forward_via(state, backend, &server_name, parts, body, caller).await
}

/// Proxies one request to the backend through the Service whose TLS server name is
/// `server_name` (`<service>.<namespace>.svc`, as an APIService names it).
pub async fn forward_via(
    state: &State,
    backend: &Backend,
    server_name: &str,
    parts: &http::request::Parts,
    body: Body,
    caller: Caller<'_>,
) -> Result<http::Response<Body>, String> {
    let query = sorted_query(parts.uri.query());
    let path = parts.uri.path();
    let target = if query.is_empty() { path.to_string() } else { format!("{path}?{query}") };
    let uri = format!("https://{server_name}:443{target}");
    let mut request = http::Request::builder().method(parts.method.clone()).uri(uri);
    let headers = request.headers_mut().ok_or("bad request")?;
    for (name, value) in &parts.headers {
        if !dropped(name.as_str()) {
            headers.append(name.clone(), value.clone());
        }
    }
    let user = caller.user;
    let mut set = |name: String, value: &str| {
        if let (Ok(n), Ok(v)) = (http::HeaderName::from_bytes(name.as_bytes()), http::HeaderValue::from_str(value)) {
            headers.append(n, v);
        }
    };
    set("x-remote-user".into(), &user.name);
    if !user.uid.is_empty() {
        set("x-remote-uid".into(), &user.uid);
    }
    for group in &user.groups {
        set("x-remote-group".into(), group);
    }
    for (key, values) in &user.extra {
        for value in values {
            set(format!("x-remote-extra-{}", escape_key(key)), value);
        }
    }
    if !parts.headers.contains_key("audit-id") {
        set("audit-id".into(), &uuid::Uuid::new_v4().to_string());
    }
    if let Some(remote) = caller.remote {
        set("x-forwarded-for".into(), &remote.ip().to_string());
    }
    // The request URI (path and query), also when HTTP/2 carried the scheme and authority.
    let request_uri = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    set("x-forwarded-uri".into(), request_uri);
    set("x-forwarded-proto".into(), "https");
    if let Some(host) = parts.headers.get("host").and_then(|h| h.to_str().ok()).or(parts.uri.host()) {
        set("x-forwarded-host".into(), host);
    }
    let request = request.body(body).map_err(|e| e.to_string())?;
    lock(&state.proxied_via).push((server_name.to_string(), path.to_string()));
    lock(&state.proxied).push(
        request
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect(),
    );
    let mut sender = backend.sender(server_name).await?;
    let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
    lock(&state.backend_statuses).push(response.status().as_u16());
    Ok(response.map(|b| b.map_err(|e| Box::new(e) as respond::BoxError).boxed_unsync()))
}

/// A backend answer read whole.
#[derive(Debug)]
pub struct Fetched {
    pub status: u16,
    pub content_type: String,
    pub etag: Option<String>,
    pub body: Bytes,
}

/// The aggregator's own GET of a backend path (discovery, OpenAPI), read whole.
pub async fn fetch(
    state: &State,
    backend: &Backend,
    path: &str,
    headers: &[(&str, &str)],
    user: &User,
) -> Result<Fetched, String> {
    fetch_via(state, backend, &backend.server_name, path, headers, user).await
}

/// The same through the Service whose TLS server name is `server_name`.
pub async fn fetch_via(
    state: &State,
    backend: &Backend,
    server_name: &str,
    path: &str,
    headers: &[(&str, &str)],
    user: &User,
) -> Result<Fetched, String> {
    let mut request = http::Request::builder().method("GET").uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let (parts, ()) = request.body(()).map_err(|e| e.to_string())?.into_parts();
    let caller = Caller { user, remote: None };
    let response = forward_via(state, backend, server_name, &parts, respond::full(Bytes::new()), caller).await?;
    let (status, content_type, etag) = {
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        (response.status().as_u16(), header("content-type").unwrap_or_default(), header("etag"))
    };
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok(Fetched { status, content_type, etag, body })
}

/// What the aggregator answers when the backend cannot be reached.
pub fn unavailable(error: &str) -> Response {
    respond::bytes(503, "text/plain; charset=utf-8", format!("service unavailable: {error}\n"))
}
