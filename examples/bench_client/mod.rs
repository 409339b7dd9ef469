//! The HTTPS client the load generators share (`load`, `apply_bench`, `objectbench`,
//! `watchload`, `etcd_load`): a client-certificate TLS configuration, keep-alive HTTP/1.1
//! connections, one request, timed phases over many connections, percentiles, and the CPU
//! time processes on the machine spent on a phase (`Cpu`).
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

/// The CPU time (user + system, from `/proc/PID/stat`) that named processes and this client
/// spent, for a phase's figure per request: on a machine of few cores the server, etcd and
/// the client share them, so that the rate follows from what each spends per request.
#[derive(Clone, Default)]
pub struct Cpu {
    /// Name and pid of each process watched besides this one.
    processes: Vec<(String, u32)>,
}

/// Clock ticks per second of `/proc/PID/stat` (`USER_HZ`, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

impl Cpu {
    /// From `--cpu-of name=PID,name=PID` (empty: this client only).
    pub fn parse(spec: &str) -> Cpu {
        let processes = spec
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (name, pid) = p.split_once('=').expect("--cpu-of name=PID,...");
                (name.to_string(), pid.parse().expect("a pid"))
            })
            .collect();
        Cpu { processes }
    }

    /// Ticks used so far by each watched process, then by this client.
    pub fn snapshot(&self) -> Vec<u64> {
        let mut ticks: Vec<u64> = self.processes.iter().map(|(_, pid)| ticks_of(&pid.to_string())).collect();
        ticks.push(ticks_of("self"));
        ticks
    }

    /// "cpu/req server=120us etcd=80us client=60us" between two snapshots, over `requests`.
    pub fn per_request(&self, before: &[u64], after: &[u64], requests: usize) -> String {
        let names = self.processes.iter().map(|(name, _)| name.as_str()).chain(["client"]);
        let parts: Vec<String> = names
            .zip(before.iter().zip(after))
            .map(|(name, (b, a))| {
                let micros = a.saturating_sub(*b) as f64 / TICKS_PER_SECOND * 1e6 / requests.max(1) as f64;
                format!("{name}={micros:.0}us")
            })
            .collect();
        format!("cpu/req {}", parts.join(" "))
    }
}

/// utime + stime of `/proc/WHO/stat` (0 when the process is gone).
fn ticks_of(who: &str) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{who}/stat")) else { return 0 };
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the line are the 12th and 13th after the name.
    let at = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    at(11) + at(12)
}
