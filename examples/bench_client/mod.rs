//! The HTTPS client the load generators share (`load`, `apply_bench`, `objectbench`,
//! `watchload`): a client-certificate TLS configuration, keep-alive HTTP/1.1 connections,
//! one request, timed phases over many connections, and percentiles.
// Each example uses only part of this module.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

pub type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;
pub type TlsStream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// A TLS configuration trusting the PEM roots in `ca`, presenting the `cert` / `key` pair.
pub fn tls_config(ca: &str, cert: &str, key: &str) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let certs: Vec<_> = CertificateDer::pem_file_iter(cert).unwrap().map(|c| c.unwrap()).collect();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, PrivateKeyDer::from_pem_file(key).unwrap())
        .unwrap();
    Arc::new(config)
}

/// A TLS connection to the server on the loopback `port`.
pub async fn tls(port: u16, config: Arc<rustls::ClientConfig>) -> TlsStream {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    tokio_rustls::TlsConnector::from(config).connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap()
}

/// A keep-alive HTTP/1.1 connection.
pub async fn connect(port: u16, config: Arc<rustls::ClientConfig>) -> Sender {
    let (sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls(port, config).await)).await.unwrap();
    tokio::spawn(conn);
    sender
}

/// One request, as the phases send it.
pub struct Request {
    pub method: &'static str,
    pub path: String,
    pub content_type: Option<&'static str>,
    pub accept: Option<&'static str>,
    pub body: Vec<u8>,
    /// The status the server must answer.
    pub expect: u16,
}

impl Request {
    pub fn new(method: &'static str, path: String, expect: u16) -> Request {
        Request { method, path, content_type: None, accept: None, body: Vec::new(), expect }
    }

    /// With a JSON body.
    pub fn json(mut self, body: Vec<u8>) -> Request {
        self.content_type = Some("application/json");
        self.body = body;
        self
    }
}

/// Sends a request and reads the whole answer: its status and body.
pub async fn send(sender: &mut Sender, request: Request) -> (u16, Bytes) {
    sender.ready().await.unwrap();
    let mut builder = http::Request::builder().method(request.method).uri(&request.path).header("host", "localhost");
    if let Some(accept) = request.accept {
        builder = builder.header("accept", accept);
    }
    if let Some(content_type) = request.content_type {
        builder = builder.header("content-type", content_type);
    }
    let response = sender.send_request(builder.body(Full::new(Bytes::from(request.body))).unwrap()).await.unwrap();
    let status = response.status().as_u16();
    (status, response.into_body().collect().await.unwrap().to_bytes())
}

/// Runs `op(connection, i)` on every connection for `seconds`, each request checked against
/// its expected status. Returns every latency, the time taken, and the fewest requests one
/// connection made.
pub async fn phase<F>(senders: &mut Vec<Sender>, seconds: u64, op: F) -> (Vec<Duration>, Duration, usize)
where
    F: Fn(usize, usize) -> Request + Send + Sync + Clone + 'static,
{
    phase_while(senders, seconds, move |c, i| Some(op(c, i))).await
}

/// As `phase`, but a connection stops early once `op` has no request left for it (`None`):
/// a phase over a fixed set of objects, such as deletes of the objects created before.
pub async fn phase_while<F>(senders: &mut Vec<Sender>, seconds: u64, op: F) -> (Vec<Duration>, Duration, usize)
where
    F: Fn(usize, usize) -> Option<Request> + Send + Sync + Clone + 'static,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (c, mut sender) in std::mem::take(senders).into_iter().enumerate() {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = 0;
            while Instant::now() < deadline {
                let Some(request) = op(c, i) else { break };
                let (method, path, expect) = (request.method, request.path.clone(), request.expect);
                let t = Instant::now();
                let (status, _) = send(&mut sender, request).await;
                assert_eq!(status, expect, "{method} {path}");
                latencies.push(t.elapsed());
                i += 1;
            }
            (sender, latencies)
        }));
    }
    let mut all = Vec::new();
    let mut fewest = usize::MAX;
    for t in tasks {
        let (sender, latencies) = t.await.unwrap();
        senders.push(sender);
        fewest = fewest.min(latencies.len());
        all.extend(latencies);
    }
    (all, start.elapsed(), fewest)
}

/// The `p` quantile of sorted samples (zero when there are none).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let n = sorted.len();
    sorted.get(((n as f64 * p) as usize).min(n.saturating_sub(1))).copied().unwrap_or_default()
}

/// Milliseconds, for printing.
pub fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
