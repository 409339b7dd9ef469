//! How a command reaches a running server (`backup --server`, `takeover`, `handback`): the
//! flags naming its CA and the client's credentials, the HTTPS client they make, and one
//! request whose non-2xx answer becomes an error carrying the Status message. Holds no request
//! logic of the server.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use clap::Args;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};

/// The credentials for a running server (`--server`).
#[derive(Debug, Args)]
pub struct ServerFlags {
    /// With --server: the CA bundle that signs the server's serving certificate.
    #[arg(long)]
    pub certificate_authority: Option<PathBuf>,
    /// With --server: a client certificate to authenticate with (the server's client CA
    /// must sign it), with --client-key.
    #[arg(long)]
    pub client_certificate: Option<PathBuf>,
    /// With --server: the private key of --client-certificate.
    #[arg(long)]
    pub client_key: Option<PathBuf>,
    /// With --server: a file holding a bearer token to authenticate with (TokenReview).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
}

/// An HTTPS client of one running server, with the flags' credentials.
pub struct ServerClient {
    client: hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        http_body_util::Full<Bytes>,
    >,
    token: Option<String>,
}

impl ServerClient {
    pub fn new(flags: &ServerFlags) -> Result<ServerClient, String> {
        let tls = client_tls(
            flags.certificate_authority.as_deref(),
            flags.client_certificate.as_deref(),
            flags.client_key.as_deref(),
        )?;
        let connector =
            hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_only().enable_http1().build();
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build::<_, http_body_util::Full<Bytes>>(connector);
        let token = match &flags.token_file {
            Some(path) => Some(read("--token-file", path).map(|t| String::from_utf8_lossy(&t).trim().to_string())?),
            None => None,
        };
        Ok(ServerClient { client, token })
    }

    /// Sends `method uri` with no body; the body of a 2xx answer, else an error naming the
    /// request and the server's message.
    pub async fn send(&self, method: http::Method, uri: &http::Uri) -> Result<Incoming, String> {
        match self.send_body(method, uri, None).await? {
            Ok(body) => Ok(body),
            Err(refused) => Err(refused.to_string()),
        }
    }

    /// Sends `method uri` with a JSON body (or none). A request that could not be made is the
    /// outer error; the server's non-2xx answer is the inner one, with its Status.
    pub async fn send_body(
        &self,
        method: http::Method,
        uri: &http::Uri,
        json: Option<Bytes>,
    ) -> Result<Result<Incoming, Refused>, String> {
        let mut request = http::Request::builder().method(method.clone()).uri(uri.clone());
        if let Some(token) = &self.token {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if json.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = request.body(http_body_util::Full::new(json.unwrap_or_default())).map_err(|e| e.to_string())?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| format!("{method} {uri}: {}", crate::core::error_chain::describe(&e)))?;
        let status = response.status();
        let body = response.into_body();
        if status.is_success() {
            return Ok(Ok(body));
        }
        let text = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let message = serde_json::from_slice::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&text).into_owned());
        Ok(Err(Refused { request: format!("{method} {uri}"), status, message }))
    }
}

/// A running server's non-2xx answer.
#[derive(Debug)]
pub struct Refused {
    /// `METHOD URI`.
    pub request: String,
    pub status: http::StatusCode,
    /// The Status' message (or the body).
    pub message: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: the server answered {}: {}", self.request, self.status, self.message)
    }
}

fn read(flag: &str, path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
}

/// The TLS client configuration of a command that calls a running server: its CA (else the
/// system's) and, optionally, a client certificate.
fn client_tls(
    certificate_authority: Option<&Path>,
    client_certificate: Option<&Path>,
    client_key: Option<&Path>,
) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match certificate_authority {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&read("--certificate-authority", ca)?) {
                let cert = cert.map_err(|e| format!("--certificate-authority {}: {e}", ca.display()))?;
                roots.add(cert).map_err(|e| format!("--certificate-authority {}: {e}", ca.display()))?;
            }
            builder.with_root_certificates(roots)
        }
        None => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add_parsable_certificates(system_roots());
            builder.with_root_certificates(roots)
        }
    };
    match (client_certificate, client_key) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_slice_iter(&read("--client-certificate", cert)?)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("--client-certificate {}: {e}", cert.display()))?;
            let key = PrivateKeyDer::from_pem_slice(&read("--client-key", key)?)
                .map_err(|e| format!("--client-key {}: {e}", key.display()))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| format!("client certificate: {e}"))
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err("--client-certificate and --client-key must be given together".into()),
    }
}

/// The system's trusted CAs (Debian's and Red Hat's bundle paths).
fn system_roots() -> Vec<CertificateDer<'static>> {
    let mut roots = Vec::new();
    for path in ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"] {
        if let Ok(pem) = std::fs::read(path) {
            roots.extend(CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok));
        }
    }
    roots
}
