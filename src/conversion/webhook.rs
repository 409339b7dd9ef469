//! The HTTPS client of one conversion webhook: the endpoint (a URL, or a Service reached at
//! `https://<name>.<namespace>.svc:<port><path>`), the roots it trusts (the definition's
//! `caBundle`, else the system's), pooled connections, and Kubernetes' 30 s call timeout.
//! Admission webhooks reach their endpoints through the same client ([`Client::connect`],
//! [`Client::post`]), with their own URL and timeout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::Value;

use crate::definitions::conversion::{Endpoint, Webhook};

/// Kubernetes' default timeout of webhook calls.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response accepted.
const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// The clients of every webhook configuration in use, shared by the definitions that name the
/// same one (as Kubernetes' webhook client manager caches them) and kept across reloads, so
/// their pooled connections are reused.
pub fn shared_client(webhook: &Webhook) -> Result<Arc<Client>, String> {
    static CLIENTS: OnceLock<Mutex<HashMap<Webhook, Arc<Client>>>> = OnceLock::new();
    let clients = CLIENTS.get_or_init(Default::default);
    let mut clients = clients.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(client) = clients.get(webhook) {
        return Ok(client.clone());
    }
    let client = Arc::new(Client::new(webhook)?);
    clients.insert(webhook.clone(), client.clone());
    Ok(client)
}

pub struct Client {
    http: HttpClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    uri: http::Uri,
}

/// The URL of an endpoint.
pub fn url_of(endpoint: &Endpoint) -> String {
    match endpoint {
        Endpoint::Url(url) => url.clone(),
        Endpoint::Service { name, namespace, port, path } => format!("https://{name}.{namespace}.svc:{port}{path}"),
    }
}

impl Client {
    pub fn new(webhook: &Webhook) -> Result<Client, String> {
        Client::connect(&webhook.endpoint, &webhook.ca_bundle)
    }

    /// A client of an endpoint trusting `ca_bundle` (PEM; empty: the system's roots).
    pub fn connect(endpoint: &Endpoint, ca_bundle: &[u8]) -> Result<Client, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let builder = if ca_bundle.is_empty() {
            builder.with_provider_and_native_roots(provider).map_err(|e| format!("system roots: {e}"))?
        } else {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca_bundle) {
                let cert = cert.map_err(|e| format!("invalid caBundle: {e}"))?;
                roots.add(cert).map_err(|e| format!("invalid caBundle: {e}"))?;
            }
            let tls = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots)
                .with_no_client_auth();
            builder.with_tls_config(tls)
        };
        let connector = builder.https_only().enable_http1().enable_http2().build();
        let uri: http::Uri = url_of(endpoint).parse().map_err(|e| format!("invalid webhook URL: {e}"))?;
        Ok(Client { http: HttpClient::builder(TokioExecutor::new()).build(connector), uri })
    }

    /// POSTs JSON to `uri` (this client's endpoint, maybe with a query) and reads the answer
    /// within `timeout`: its status code and body, or the failure worded as Go's HTTP client
    /// words it (`Post "<url>": ...`).
    pub async fn post(&self, uri: &http::Uri, body: Vec<u8>, timeout: Duration) -> Result<(u16, Bytes), String> {
        let request = http::Request::post(uri.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let exchange = async {
            let response = self.http.request(request).await.map_err(|e| format!("Post \"{uri}\": {e}"))?;
            let status = response.status().as_u16();
            let bytes = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|e| format!("Post \"{uri}\": {e}"))?
                .to_bytes();
            Ok((status, bytes))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(format!("Post \"{uri}\": context deadline exceeded")),
        }
    }

    /// The endpoint's URL.
    pub fn uri(&self) -> &http::Uri {
        &self.uri
    }

    /// POSTs a ConversionReview and decodes the response.
    pub async fn call(&self, review: &Value) -> Result<Value, String> {
        self.call_within(review, CALL_TIMEOUT).await
    }

    /// [`Client::call`] with another timeout than Kubernetes' (an impact analysis' own).
    pub async fn call_within(&self, review: &Value, timeout: Duration) -> Result<Value, String> {
        let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
        let request = http::Request::post(self.uri.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let exchange = async {
            let response = self.http.request(request).await.map_err(|e| format!("Post \"{}\": {e}", self.uri))?;
            let status = response.status();
            let bytes = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            if !status.is_success() {
                return Err(format!(
                    "the server responded with the status code {} but did not return more information",
                    status.as_u16()
                ));
            }
            crate::core::nesting::from_slice::<Value>(&bytes).map_err(|e| e.to_string())
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(format!("Post \"{}\": context deadline exceeded", self.uri)),
        }
    }
}
