//! A real etcd for the end-to-end tests: Debian's `etcd` binary (package `etcd-server`, installed
//! by hack/test.sh) on free loopback ports, in a temporary directory, killed when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
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
}

/// The files of a TLS etcd: its CA, its serving certificate and key.
pub struct EtcdTls<'a> {
    pub ca: &'a std::path::Path,
    pub cert: &'a std::path::Path,
    pub key: &'a std::path::Path,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
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
        TestEtcd {
            child: None,
            dir: tempfile::tempdir().unwrap(),
            client_port: free_port(),
            peer_port: free_port(),
            metrics_port: free_port(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            tls,
        }
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
        let client = self.endpoint();
        let metrics = format!("http://127.0.0.1:{}", self.metrics_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.path().join("etcd.log")).unwrap();
        let child = Command::new("etcd")
            .args(["--name", "test", "--data-dir"])
            .arg(self.data_dir())
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .arg(format!("--initial-cluster=test={peer}"))
            .arg(format!("--listen-metrics-urls={metrics}"))
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("etcd must be installed (hack/test.sh installs Debian's etcd-server)");
        self.child = Some(child);
        self.wait_healthy();
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
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.metrics_port)) else {
            return String::new();
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        if stream.write_all(b"GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n").is_err() {
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
