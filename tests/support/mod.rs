//! Test support: starts the real server binary on a free loopback port with its own PKI,
//! store and definitions; drives it with real kubectl and with a small HTTPS client; and a
//! control-plane double (`control_plane`) that fronts it as kube-aggregator and answers its
//! calls to kube-apiserver (`cluster` puts the two together).
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::result_large_err
)]

pub mod admission_webhook;
pub mod cluster;
pub mod control_plane;
pub mod etcd;
pub mod http;
pub mod informer;
pub mod kubectl;
pub mod watches;
pub mod webhook;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crd_apiserver::cli::pki::DevPki;

/// The server binary cargo built for these tests.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_crd-apiserver")
}

/// A free loopback port.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The seed's CronTab definition.
pub const CRONTAB_CRD: &str = include_str!("../../manifests/examples/crontabs.yaml");
pub const SHIRT_CRD: &str = include_str!("../../manifests/examples/shirts.yaml");
pub const TENANT_CRD: &str = include_str!("../../manifests/examples/tenants.yaml");

/// A running server and everything it was started with.
pub struct TestServer {
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub pki: DevPki,
    child: Option<Child>,
    /// A command (and its arguments) the server is started under, ending in `exec "$@"`
    /// style: the server's path and arguments follow it. Empty: started directly.
    pub launcher: Vec<String>,
    /// `None`: development mode; else delegated mode with this kubeconfig of the main
    /// apiserver (the serving certificate still comes from the development PKI).
    delegated: Option<PathBuf>,
}

impl TestServer {
    /// Starts a development-mode server serving `definitions` (YAML texts).
    pub fn start(definitions: &[&str]) -> TestServer {
        let mut server = TestServer::prepare(definitions, None);
        server.spawn(&[]);
        server
    }

    /// Starts a server in delegated mode: authentication and authorization by the main
    /// apiserver reached with `kubeconfig`.
    pub fn start_delegated(definitions: &[&str], kubeconfig: &Path, extra: &[&str]) -> TestServer {
        let mut server = TestServer::prepare(definitions, Some(kubeconfig.to_path_buf()));
        server.spawn(extra);
        server
    }

    /// Writes the definitions and the PKI without starting anything.
    pub fn prepare(definitions: &[&str], delegated: Option<PathBuf>) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let defs = dir.path().join("definitions");
        std::fs::create_dir_all(&defs).unwrap();
        for (i, text) in definitions.iter().enumerate() {
            std::fs::write(defs.join(format!("{i:02}.yaml")), text).unwrap();
        }
        let pki = DevPki::ensure(&dir.path().join("certs")).unwrap();
        TestServer { dir, port: free_port(), pki, child: None, launcher: Vec::new(), delegated }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn definitions_dir(&self) -> PathBuf {
        self.dir.path().join("definitions")
    }

    /// Starts the server process (again) with the same directories and extra flags.
    pub fn spawn(&mut self, extra: &[&str]) {
        self.launch(extra);
        self.pki.write_kubeconfig(&format!("https://127.0.0.1:{}", self.port)).unwrap();
        self.wait_ready();
    }

    /// Starts the server process and waits until it answers `/livez` (ready or not).
    pub fn spawn_live(&mut self, extra: &[&str]) {
        self.launch(extra);
        self.pki.write_kubeconfig(&format!("https://127.0.0.1:{}", self.port)).unwrap();
        self.wait_for_health("/livez");
    }

    /// Starts the server process without waiting for it.
    pub fn launch(&mut self, extra: &[&str]) {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.dir.path().join("server.log")).unwrap();
        let mut command = match self.launcher.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(binary());
                command
            }
            None => Command::new(binary()),
        };
        command.current_dir(self.dir.path()).arg("serve");
        match &self.delegated {
            None => {
                // Development mode listens on 127.0.0.1 by default.
                command.args(["--dev", "--cert-dir", self.pki.dir.to_str().unwrap()]);
            }
            Some(kubeconfig) => {
                let kubeconfig = kubeconfig.to_str().unwrap();
                command
                    .args(["--bind-address", "127.0.0.1"])
                    .args(["--tls-cert-file", self.pki.serving_cert().to_str().unwrap()])
                    .args(["--tls-private-key-file", self.pki.serving_key().to_str().unwrap()])
                    .args(["--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig])
                    .args(["--kubeconfig", kubeconfig]);
            }
        }
        // A server on etcd has no sled directory.
        if !extra.contains(&"--storage-backend=etcd3") {
            command.args(["--storage", self.data_dir().to_str().unwrap()]);
        }
        let child = command
            .args(["--secure-port", &self.port.to_string()])
            .args(["--definitions", self.definitions_dir().to_str().unwrap()])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// Waits for the server to exit by itself; returns whether it succeeded.
    pub fn wait_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let child = self.child.as_mut().expect("server running");
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status.success();
            }
            assert!(Instant::now() < deadline, "server did not exit: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the server answers `/readyz` with 200 (and fails if it exits).
    pub fn wait_ready(&mut self) {
        self.wait_for_health("/readyz");
    }

    /// Waits until a health path answers 200.
    fn wait_for_health(&mut self, path: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("server exited with {status}: {}", self.log());
            }
            // Without a client certificate: /readyz is always allowed, and a certificate the
            // server does not trust would be refused.
            if let Ok(r) = http::Client::new(self, None).get(path)
                && r.status == 200
            {
                return;
            }
            assert!(Instant::now() < deadline, "{path} never answered 200: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's process id (the launcher's, which became the server by `exec`).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server running").id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Stops the server with SIGTERM and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
            let deadline = Instant::now() + Duration::from_secs(20);
            while child.try_wait().unwrap().is_none() {
                assert!(Instant::now() < deadline, "server did not stop");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Kills the server with SIGKILL (no chance to flush or clean up).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.pki.kubeconfig()
    }

    /// Runs kubectl against this server.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        kubectl_with(&self.kubeconfig(), self.dir.path(), args, None)
    }

    /// Runs kubectl with text on stdin.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        kubectl_with(&self.kubeconfig(), self.dir.path(), args, Some(stdin))
    }

    /// Runs kubectl and requires success; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?} failed: {}\n{}", stderr(&out), self.log());
        stdout(&out)
    }

    /// Writes a file in the test directory.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn kubectl_with(kubeconfig: &Path, cwd: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", cwd)
        .current_dir(cwd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl must be on PATH");
    {
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
    }
    child.wait_with_output().unwrap()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs the server binary as a command-line tool (`backup`, `restore`, `check`, ...).
pub fn run_binary(args: &[&str]) -> Output {
    Command::new(binary()).args(args).output().unwrap()
}

/// A command's stdout and stderr, in that order, for assertions on what it printed.
pub fn printed(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

/// Splits a kubectl table into rows of whitespace-separated cells.
pub fn table(text: &str) -> Vec<Vec<String>> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
}

/// Creates `object` at `path` under a new name each time (`<name>-1`, `<name>-2`, ...) until
/// `done` accepts the answer, for at most a minute: admission configurations reach the
/// server through its watch. Returns the accepted answer and the name it was for.
pub fn create_until(
    client: &http::Client,
    path: &str,
    object: &serde_json::Value,
    done: impl Fn(&http::Response) -> bool,
) -> (http::Response, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let base = object["metadata"]["name"].as_str().unwrap_or("object");
    for n in 1.. {
        let mut attempt = object.clone();
        let name = format!("{base}-{n}");
        attempt["metadata"]["name"] = serde_json::json!(name);
        let response = client.send_json("POST", path, &attempt);
        if done(&response) {
            return (response, name);
        }
        assert!(Instant::now() < deadline, "never happened for {object}; last answer: {}", response.text());
        std::thread::sleep(Duration::from_millis(100));
    }
    unreachable!("the attempts never end")
}
