//! A real etcd for the end-to-end tests: Debian's `etcd` binary (package `etcd-server`, installed
//! by hack/test.sh) on free loopback ports, in a temporary directory, killed when dropped; one
//! member, or a cluster of several.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

pub struct TestEtcd {
    child: Option<Child>,
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    /// Plain-HTTP port of `/health` (and metrics), whatever the client port speaks.
    metrics_port: u16,
    extra: Vec<String>,
    /// Client connections are TLS, with client certificates required.
    tls: bool,
    /// The member's name and the `--initial-cluster` it was created with.
    name: String,
    initial_cluster: String,
}

/// The files of a TLS etcd: its CA, its serving certificate and key.
pub struct EtcdTls<'a> {
    pub ca: &'a std::path::Path,
    pub cert: &'a std::path::Path,
    pub key: &'a std::path::Path,
}

/// A free loopback port below Linux's ephemeral range (32768 and up), so that no outgoing
/// connection can take it while a killed member is down and needs it back.
fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let seed = (std::process::id() % 12_000) as u16;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + seed.wrapping_add(n.wrapping_mul(37)) % 12_000;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

impl TestEtcd {
    /// Starts a one-member cluster with `extra` flags.
    pub fn start_with(extra: &[&str]) -> TestEtcd {
        let mut etcd = TestEtcd::new(extra, false);
        etcd.resume();
        etcd
    }

    /// Starts a member that serves clients over TLS and requires certificates signed by `ca`.
    pub fn start_tls(files: &EtcdTls) -> TestEtcd {
        let paths = [files.ca, files.cert, files.key].map(|p| p.to_str().unwrap().to_string());
        let extra =
            ["--trusted-ca-file", &paths[0], "--cert-file", &paths[1], "--key-file", &paths[2], "--client-cert-auth"];
        let mut etcd = TestEtcd::new(&extra, true);
        etcd.resume();
        etcd
    }

    fn new(extra: &[&str], tls: bool) -> TestEtcd {
        let peer_port = free_port();
        TestEtcd {
            child: None,
            dir: tempfile::tempdir().unwrap(),
            client_port: free_port(),
            peer_port,
            metrics_port: free_port(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            tls,
            name: "test".into(),
            initial_cluster: format!("test=http://127.0.0.1:{peer_port}"),
        }
    }

    /// Starts a cluster of `size` members and waits until every one answers healthy (which
    /// needs a quorum, so they are all launched before any is waited for).
    pub fn cluster(size: usize) -> Vec<TestEtcd> {
        let mut members: Vec<TestEtcd> = (0..size).map(|_| TestEtcd::new(&[], false)).collect();
        let initial = members
            .iter()
            .enumerate()
            .map(|(i, m)| format!("m{i}=http://127.0.0.1:{}", m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        for (i, member) in members.iter_mut().enumerate() {
            member.name = format!("m{i}");
            member.initial_cluster = initial.clone();
            member.launch();
        }
        for member in &mut members {
            member.wait_healthy();
        }
        members
    }

    /// Whether this member leads its cluster now (etcd's `etcd_server_is_leader` metric).
    pub fn is_leader(&self) -> bool {
        self.plain_get("/metrics").lines().any(|l| l.trim() == "etcd_server_is_leader 1")
    }

    pub fn start() -> TestEtcd {
        TestEtcd::start_with(&[])
    }

    pub fn endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Kills the member (as an outage would); `resume` starts it again on its data.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the member (again) and waits until it answers.
    pub fn resume(&mut self) {
        self.launch();
        self.wait_healthy();
    }

    fn launch(&mut self) {
        let client = self.endpoint();
        let metrics = format!("http://127.0.0.1:{}", self.metrics_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.path().join("etcd.log")).unwrap();
        let child = Command::new("etcd")
            .args(["--name", &self.name, "--data-dir"])
            .arg(self.data_dir())
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .arg(format!("--initial-cluster={}", self.initial_cluster))
            .args(["--initial-cluster-state", "new", "--initial-cluster-token", "crd-apiserver-test"])
            .arg(format!("--listen-metrics-urls={metrics}"))
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("etcd must be installed (hack/test.sh installs Debian's etcd-server)");
        self.child = Some(child);
    }

    fn wait_healthy(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                let log = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
                panic!("etcd exited with {status}:\n{log}");
            }
            if self.health_answer().contains("\"health\":\"true\"") {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("etcd did not become healthy within 30s");
    }

    fn health_answer(&self) -> String {
        self.plain_get("/health")
    }

    /// Writes `key` through etcd's JSON gateway (`/v3/kv/put`, plain-HTTP members only), as
    /// another client of the same etcd would; answers etcd's revision after the write.
    pub fn put(&self, key: &str, value: &str) -> u64 {
        use base64::Engine;
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let body = format!(r#"{{"key":"{}","value":"{}"}}"#, b64(key), b64(value));
        let mut stream = TcpStream::connect(("127.0.0.1", self.client_port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let request = format!(
            "POST /v3/kv/put HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        let json = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        let parsed: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {answer}"));
        parsed["header"]["revision"].as_str().and_then(|r| r.parse().ok()).unwrap_or_else(|| panic!("{answer}"))
    }

    /// A GET on the member's plain-HTTP metrics port: the whole answer, or empty.
    fn plain_get(&self, path: &str) -> String {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.metrics_port)) else {
            return String::new();
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        if stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes()).is_err() {
            return String::new();
        }
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    }
}

impl Drop for TestEtcd {
    fn drop(&mut self) {
        self.kill();
    }
}
