//! A small blocking HTTPS client for tests: TLS with an optional client certificate, one
//! HTTP/1.1 (or, when asked, HTTP/2) request per connection.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;

use super::TestServer;

/// A response, read whole.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub version: http::Version,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Response {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// An HTTPS client bound to one server.
#[derive(Clone)]
pub struct Client {
    port: u16,
    config: Arc<rustls::ClientConfig>,
    headers: Vec<(String, String)>,
    http2: bool,
    /// A hang guard: a request not answered in full within it fails with `TimedOut`.
    limit: Option<std::time::Duration>,
}

fn certs(path: &std::path::Path) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(path).unwrap().map(|c| c.unwrap()).collect()
}

impl Client {
    /// Trusts the server's CA; presents `identity` (cert, key files) if given.
    pub fn new(server: &TestServer, identity: Option<(&std::path::Path, &std::path::Path)>) -> Client {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in certs(&server.pki.serving_ca()) {
            roots.add(cert).unwrap();
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match identity {
            Some((cert, key)) => {
                builder.with_client_auth_cert(certs(cert), PrivateKeyDer::from_pem_file(key).unwrap()).unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        Client { port: server.port, config: Arc::new(config), headers: Vec::new(), http2: false, limit: None }
    }

    /// A client of the control-plane double (trusting its serving CA) that authenticates with
    /// a bearer token, as kubectl and controllers reach kube-apiserver.
    pub fn to_plane(plane: &super::control_plane::ControlPlane, token: &str) -> Client {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(plane.serving_ca_pem().as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Client { port: plane.port, config: Arc::new(config), headers: Vec::new(), http2: false, limit: None }
            .header("Authorization", &format!("Bearer {token}"))
    }

    /// The development admin (client certificate in system:masters).
    pub fn admin(server: &TestServer) -> Client {
        Client::new(server, Some((&server.pki.path("admin.crt"), &server.pki.path("admin.key"))))
    }

    /// The same client speaking HTTP/2 (negotiated by ALPN, as Go's clients do).
    pub fn http2(mut self) -> Client {
        let mut config = (*self.config).clone();
        config.alpn_protocols = vec![b"h2".to_vec()];
        self.config = Arc::new(config);
        self.http2 = true;
        self
    }

    /// The same client failing any request not answered within `limit` (a hang guard, for
    /// tests where a request that never ends is the failure looked for).
    pub fn within(mut self, limit: std::time::Duration) -> Client {
        self.limit = Some(limit);
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Client {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn get(&self, path: &str) -> std::io::Result<Response> {
        self.request("GET", path, None, None)
    }

    pub fn send(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: impl Into<Bytes>,
    ) -> std::io::Result<Response> {
        self.request(method, path, Some(content_type), Some(body.into()))
    }

    pub fn send_json(&self, method: &str, path: &str, body: &Value) -> Response {
        self.send(method, path, "application/json", serde_json::to_vec(body).unwrap()).unwrap()
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<Bytes>,
    ) -> std::io::Result<Response> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let request = self.request_async(method, path, content_type, body);
        match self.limit {
            None => runtime.block_on(request),
            Some(limit) => {
                runtime.block_on(async { tokio::time::timeout(limit, request).await }).unwrap_or_else(|_| {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("{method} {path} not answered within {limit:?}"),
                    ))
                })
            }
        }
    }

    async fn request_async(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<Bytes>,
    ) -> std::io::Result<Response> {
        let io_err = |e: &dyn std::fmt::Display| std::io::Error::other(e.to_string());
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let tls = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await?;
        let io = hyper_util::rt::TokioIo::new(tls);
        let mut request = http::Request::builder().method(method);
        if self.http2 {
            // HTTP/2 carries the authority in the URI (:authority), not in a Host header.
            request = request.uri(format!("https://localhost:{}{path}", self.port));
        } else {
            request = request.uri(path).header("host", "localhost");
        }
        if let Some(ct) = content_type {
            request = request.header("content-type", ct);
        }
        for (k, v) in &self.headers {
            request = request.header(k.as_str(), v.as_str());
        }
        let request = request.body(Full::new(body.unwrap_or_default())).map_err(|e| io_err(&e))?;
        let response = if self.http2 {
            let (mut sender, connection) =
                hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                    .await
                    .map_err(|e| io_err(&e))?;
            tokio::spawn(connection);
            sender.send_request(request).await.map_err(|e| io_err(&e))?
        } else {
            let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.map_err(|e| io_err(&e))?;
            tokio::spawn(connection);
            sender.send_request(request).await.map_err(|e| io_err(&e))?
        };
        let status = response.status().as_u16();
        let version = response.version();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.map_err(|e| io_err(&e))?.to_bytes();
        Ok(Response { status, version, headers, body })
    }
}

impl Client {
    /// Opens a TLS connection (handshake done) and sends nothing.
    pub async fn connect_tls(&self) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await
    }

    /// Opens a TLS connection and sends a bare HTTP/1.1 GET (with the client's headers),
    /// returning the connection for the caller to read (or not read) at its own pace.
    pub async fn raw_get(&self, path: &str) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        self.raw_get_accepting(path, "application/json").await
    }

    /// `raw_get` with an `Accept` header of the caller's choice.
    pub async fn raw_get_accepting(
        &self,
        path: &str,
        accept: &str,
    ) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        self.raw_get_on(path, accept, None).await
    }

    /// `raw_get` on a socket whose receive buffer is `bytes` (the kernel's autotuning off):
    /// a client that does not read stops the server's writes after a bounded amount.
    pub async fn raw_get_with_receive_buffer(
        &self,
        path: &str,
        bytes: u32,
    ) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        self.raw_get_on(path, "application/json", Some(bytes)).await
    }

    async fn raw_get_on(
        &self,
        path: &str,
        accept: &str,
        receive_buffer: Option<u32>,
    ) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        use tokio::io::AsyncWriteExt;
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        if let Some(bytes) = receive_buffer {
            socket.set_recv_buffer_size(bytes).unwrap();
        }
        let tcp = socket.connect(([127, 0, 0, 1], self.port).into()).await.unwrap();
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let mut tls = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
        let mut request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
        if !self.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("accept")) {
            request.push_str(&format!("Accept: {accept}\r\n"));
        }
        for (name, value) in &self.headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        tls.write_all(request.as_bytes()).await.unwrap();
        tls.flush().await.unwrap();
        tls
    }
}
