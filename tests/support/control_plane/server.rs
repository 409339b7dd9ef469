//! The double's HTTPS front door: TLS (its own serving certificate; client certificates from
//! the cluster client CA verified at the handshake, optional), authentication (client
//! certificate, then static bearer token; none: anonymous), then dispatch: aggregated groups
//! are proxied without authorizing here (the backend's SubjectAccessReview decides); the
//! double's own endpoints are authorized by the rule table.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::CertificateDer;

use super::aggregator::{self, Backend, Caller};
use super::rbac::{self, User};
use super::respond::{self, Response};
use super::state::{State, lock};
use super::{
    apiservices, core_api, crd_api, custom_resources, discovery, faults, impersonation, openapi, reviews, stored_api,
};

/// Everything a request may need.
pub struct Plane {
    pub state: Arc<State>,
    pub backend: tokio::sync::RwLock<Option<Arc<Backend>>>,
    pub port: u16,
}

fn subject(cert: &CertificateDer<'_>) -> Option<User> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert).ok()?;
    let name = parsed.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    let groups: Vec<String> =
        parsed.subject().iter_organization().filter_map(|o| o.as_str().ok().map(str::to_string)).collect();
    Some(User { name, groups, ..User::default() })
}

fn authenticate(plane: &Plane, headers: &http::HeaderMap, peer: &[CertificateDer<'static>]) -> Result<User, Response> {
    let mut user = if let Some(user) = peer.first().and_then(subject) {
        user
    } else if let Some(token) =
        headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
    {
        lock(&plane.state.tokens).get(token.trim()).cloned().ok_or_else(respond::unauthorized)?
    } else {
        return Ok(User::new("system:anonymous", &["system:unauthenticated"]));
    };
    if !user.groups.iter().any(|g| g == "system:authenticated") {
        user.groups.push("system:authenticated".into());
    }
    Ok(user)
}

async fn handle(
    plane: Arc<Plane>,
    request: http::Request<Incoming>,
    remote: SocketAddr,
    peer: Arc<Vec<CertificateDer<'static>>>,
) -> Response {
    let target = request.uri().path_and_query().map_or_else(|| request.uri().path().to_string(), |p| p.to_string());
    match plane.state.faults.arrive(request.method(), &target) {
        faults::Door::Pass => {}
        faults::Door::Held(mut released) => {
            let apply = released.wait_for(Option::is_some).await.ok().and_then(|r| *r).unwrap_or(false);
            if !apply {
                return respond::status(503, "ServiceUnavailable", "the request was dropped (a test's hold)", None);
            }
        }
    }
    let user = match authenticate(&plane, request.headers(), &peer) {
        Ok(user) => user,
        Err(response) => return response,
    };
    let path = request.uri().path().to_string();
    let requested = {
        let query: Vec<(String, String)> =
            form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes()).into_owned().collect();
        respond::attributes(request.method(), &path, &query)
    };
    let mut request = request;
    let user = match impersonation::resolve(&plane.state, request.headers_mut(), user, &requested) {
        Ok(user) => user,
        Err(response) => return response,
    };
    let backend = plane.backend.read().await.clone();
    if let Some(server_name) = aggregator::server_name_for(&plane.state, &path) {
        let Some(backend) = backend else { return aggregator::unavailable("no backend") };
        let (parts, body) = request.into_parts();
        let body = body.map_err(|e| Box::new(e) as respond::BoxError).boxed_unsync();
        return match aggregator::forward_via(
            &plane.state,
            &backend,
            &server_name,
            &parts,
            body,
            Caller { user: &user, remote: Some(remote) },
        )
        .await
        {
            Ok(response) => response,
            Err(e) => aggregator::unavailable(&e),
        };
    }
    let query: Vec<(String, String)> =
        form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes()).into_owned().collect();
    let attrs = respond::attributes(request.method(), &path, &query);
    let rules = lock(&plane.state.rules).clone();
    if rbac::decide(&rules, &user, &attrs).is_none() {
        return respond::forbidden(&user, &attrs);
    }
    if request.method() == http::Method::GET && path.starts_with("/openapi/v3/") {
        let (parts, body) = request.into_parts();
        let body = body.map_err(|e| Box::new(e) as respond::BoxError).boxed_unsync();
        return openapi::v3_document(&plane.state, backend.as_deref(), &parts, body, &user, remote).await;
    }
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let headers = Headers {
        accept: header("accept").unwrap_or_default(),
        if_none_match: header("if-none-match"),
        content_type: header("content-type").unwrap_or_default(),
    };
    let method = request.method().clone();
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return respond::status(400, "BadRequest", &e.to_string(), None),
    };
    if let Some(response) = custom_resources::serve(&plane.state, &method, &path, &query, &attrs, &user, &body) {
        return response;
    }
    route(&plane, backend.as_deref(), &method, &path, &query, &attrs, &headers, body).await
}

/// The request headers the double's own endpoints read.
struct Headers {
    accept: String,
    if_none_match: Option<String>,
    content_type: String,
}

#[allow(clippy::too_many_arguments)]
async fn route(
    plane: &Arc<Plane>,
    backend: Option<&Backend>,
    method: &http::Method,
    path: &str,
    query: &[(String, String)],
    attrs: &rbac::Attributes,
    headers: &Headers,
    body: Bytes,
) -> Response {
    let (accept, if_none_match) = (headers.accept.as_str(), headers.if_none_match.as_deref());
    let segments: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    match (method.as_str(), segments.as_slice()) {
        ("GET", ["api"]) => discovery::legacy_root(accept, if_none_match, plane.port),
        ("GET", ["api", "v1"]) => discovery::resource_list("v1").unwrap_or_else(respond::path_not_found),
        ("GET", ["apis"]) => discovery::apis(&plane.state, backend, accept, if_none_match).await,
        ("GET", ["apis", group]) => discovery::api_group(&plane.state, group).unwrap_or_else(respond::path_not_found),
        ("GET", ["apis", group, version]) => {
            discovery::resource_list(&format!("{group}/{version}")).unwrap_or_else(respond::path_not_found)
        }
        ("POST", ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"]) => {
            reviews::subject_access_review(&plane.state, body)
        }
        ("POST", ["apis", "authentication.k8s.io", "v1", "tokenreviews"]) => reviews::token_review(&plane.state, body),
        ("GET", ["openapi", "v2"]) => openapi::v2(&plane.state, backend, accept, if_none_match).await,
        ("GET", ["openapi", "v3"]) => openapi::v3_index(&plane.state, backend).await,
        ("GET", ["version"]) => respond::json(
            200,
            &serde_json::json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-control-plane-double"}),
        ),
        ("GET", ["healthz" | "livez" | "readyz"]) => respond::bytes(200, "text/plain", "ok"),
        (_, ["api", "v1", ..]) => core_api::serve(&plane.state, attrs, query, body).await,
        (_, ["apis", "apiregistration.k8s.io", "v1", "apiservices", ..]) => {
            apiservices::serve(&plane.state, backend.is_some(), attrs, query, body)
        }
        (_, ["apis", crd_api::GROUP, "v1", _, ..]) => {
            crd_api::serve(&plane.state, attrs, query, accept, &headers.content_type, body)
        }
        (
            _,
            ["apis", "admissionregistration.k8s.io" | "apps" | "rbac.authorization.k8s.io" | "policy", "v1", _, ..],
        ) => stored_api::serve(&plane.state, attrs, query, body),
        _ => respond::path_not_found(),
    }
}

/// Accepts connections until the runtime stops.
pub async fn serve(plane: Arc<Plane>, listener: tokio::net::TcpListener, tls: Arc<rustls::ServerConfig>) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let Ok((tcp, remote)) = listener.accept().await else { continue };
        // Followed before the outage is looked at, so that none starts unseen in between.
        let mut outages = plane.state.faults.outages();
        if plane.state.faults.is_down() {
            // A reset, as from a host whose apiserver is gone.
            let _ = tcp.set_zero_linger();
            drop(tcp);
            continue;
        }
        let acceptor = acceptor.clone();
        let plane = plane.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = serve_one(plane, acceptor, tcp, remote) => {}
                _ = outages.changed() => {}
            }
        });
    }
}

/// Serves one connection to its end.
async fn serve_one(
    plane: Arc<Plane>,
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
    remote: SocketAddr,
) {
    let Ok(stream) = acceptor.accept(tcp).await else { return };
    let peer: Arc<Vec<CertificateDer<'static>>> = Arc::new(
        stream
            .get_ref()
            .1
            .peer_certificates()
            .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
            .unwrap_or_default(),
    );
    let service = hyper::service::service_fn(move |request| {
        let plane = plane.clone();
        let peer = peer.clone();
        async move { Ok::<_, Infallible>(handle(plane, request, remote, peer).await) }
    });
    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(stream), service)
        .await;
}
