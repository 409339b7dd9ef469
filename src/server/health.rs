//! Health checks by name on `/healthz`, `/livez` and `/readyz`, answered as k8s.io/apiserver's
//! `pkg/server/healthz` answers them: each path runs its own list of named checks in order;
//! `?verbose` lists every check (`[+]ping ok`), `?exclude=<name>` skips one, `/<path>/<name>`
//! runs one alone, and a failure answers 500 with the reason withheld from the body (the body
//! is public) but written to the log.
//!
//! Owns the check lists, the answers' texts and the checks that look at nothing but the process
//! (`ping`, `log`) or at flags others set (`informer-sync`). Must not know what the other checks
//! look at: the store's, the followers' and the shutdown check come in as [`NamedCheck`]s
//! built by `cli` and `server::shutdown`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

use crate::api::body::{self, RespBody};
use crate::core::request_info::Query;

/// One named check; `Err` carries the reason, which goes to the log only.
pub struct NamedCheck {
    name: String,
    run: Box<dyn Fn() -> Result<(), String> + Send + Sync>,
}

impl NamedCheck {
    pub fn new(name: impl Into<String>, run: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(NamedCheck { name: name.into(), run: Box::new(run) })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn run(&self) -> Result<(), String> {
        (self.run)()
    }
}

/// The three health paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    Healthz,
    Livez,
    Readyz,
}

impl Probe {
    /// The name Kubernetes' texts use (`readyz check failed`).
    pub fn name(self) -> &'static str {
        match self {
            Probe::Healthz => "healthz",
            Probe::Livez => "livez",
            Probe::Readyz => "readyz",
        }
    }
}

/// The checks of each path, fixed at start.
#[derive(Default)]
pub struct Health {
    pub healthz: Vec<Arc<NamedCheck>>,
    pub livez: Vec<Arc<NamedCheck>>,
    pub readyz: Vec<Arc<NamedCheck>>,
}

/// The outcome of running a path's checks.
#[derive(Debug, PartialEq, Eq)]
pub struct Report {
    /// One line per check (and the warning about unknown exclusions), as the body lists them.
    pub lines: String,
    /// The names of the failed checks and their reasons, for the log.
    pub failures: Vec<(String, String)>,
}

impl Health {
    fn checks(&self, probe: Probe) -> &[Arc<NamedCheck>] {
        match probe {
            Probe::Healthz => &self.healthz,
            Probe::Livez => &self.livez,
            Probe::Readyz => &self.readyz,
        }
    }

    /// Runs every check of `probe` but the `excluded` ones.
    pub fn report<'a>(&self, probe: Probe, excluded: impl IntoIterator<Item = &'a str>) -> Report {
        let mut unknown: std::collections::BTreeSet<&str> = excluded.into_iter().collect();
        let excluded = unknown.clone();
        let mut lines = String::new();
        let mut failures = Vec::new();
        for check in self.checks(probe) {
            let name = check.name();
            if excluded.contains(name) {
                unknown.remove(name);
                lines.push_str(&format!("[+]{name} excluded: ok\n"));
                continue;
            }
            match check.run() {
                Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
                Err(reason) => {
                    lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
                    failures.push((name.to_string(), reason));
                }
            }
        }
        if !unknown.is_empty() {
            let names = unknown.iter().map(|n| go_quote(n)).collect::<Vec<_>>().join(",");
            lines.push_str(&format!("warn: some health checks cannot be excluded: no matches for {names}\n"));
            tracing::debug!("cannot exclude some health checks, no health checks are installed matching {names}");
        }
        Report { lines, failures }
    }

    /// The answer to `path` (`/readyz` or `/readyz/<check>`, and the same under the other two
    /// paths) with its query; `None` when the path names no check of the probe (a 404).
    pub fn serve(&self, probe: Probe, path: &str, query: &Query) -> Option<Response<RespBody>> {
        let rest = path.strip_prefix('/')?.strip_prefix(probe.name())?;
        if rest.is_empty() {
            return Some(self.serve_all(probe, query));
        }
        let name = rest.strip_prefix('/').filter(|n| !n.is_empty() && !n.contains('/'))?;
        let check = self.checks(probe).iter().find(|c| c.name() == name)?;
        Some(match check.run() {
            Ok(()) => text(StatusCode::OK, "ok"),
            Err(reason) => {
                tracing::info!(check = name, reason = %reason, "{} check failed: {name}", probe.name());
                text(StatusCode::INTERNAL_SERVER_ERROR, format!("internal server error: {reason}\n"))
            }
        })
    }

    fn serve_all(&self, probe: Probe, query: &Query) -> Response<RespBody> {
        let report = self.report(probe, query.all("exclude"));
        let name = probe.name();
        if !report.failures.is_empty() {
            let failed: Vec<&str> = report.failures.iter().map(|(n, _)| n.as_str()).collect();
            let reasons: Vec<String> = report.failures.iter().map(|(n, r)| format!("[-]{n} failed: {r}")).collect();
            tracing::info!(checks = %failed.join(","), reasons = %reasons.join("; "), "{name} check failed");
            // Failures are always listed, whether or not `verbose` was asked for.
            return text(StatusCode::INTERNAL_SERVER_ERROR, format!("{}{name} check failed\n", report.lines));
        }
        if query.has("verbose") {
            text(StatusCode::OK, format!("{}{name} check passed\n", report.lines))
        } else {
            text(StatusCode::OK, "ok")
        }
    }
}

/// A plain-text answer with the headers Kubernetes' health handlers set.
fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<RespBody> {
    let mut response = body::bytes_response(status, "text/plain; charset=utf-8", body);
    response.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// A name quoted as Go's `%q` quotes it (the warning about unknown exclusions lists them so).
fn go_quote(name: &str) -> String {
    let mut out = String::from("\"");
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `ping`: answers, so the server does.
pub fn ping() -> Arc<NamedCheck> {
    NamedCheck::new("ping", || Ok(()))
}

/// How often the `log` check's flusher writes through, and how stale its last success may be.
const LOG_FLUSH_INTERVAL: Duration = Duration::from_secs(60);
const LOG_STALE_AFTER: Duration = Duration::from_secs(120);

/// `log`: fails when logging has been blocked for two minutes, as k8s.io/apiserver's check
/// does. A thread started by the first check takes the log's output (standard error) every
/// minute and flushes it; a log write stuck on a full pipe holds that lock, so the flusher
/// stops reporting in.
pub fn log() -> Arc<NamedCheck> {
    let started = Once::new();
    let last = Arc::new(Mutex::new(Instant::now()));
    NamedCheck::new("log", move || {
        started.call_once(|| {
            *last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
            let last = last.clone();
            let spawned = std::thread::Builder::new().name("log-flusher".into()).spawn(move || {
                loop {
                    std::thread::sleep(LOG_FLUSH_INTERVAL);
                    let _ = std::io::stderr().lock().flush();
                    *last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
                }
            });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start the log check's flusher");
            }
        });
        let verified = *last.lock().unwrap_or_else(|p| p.into_inner());
        if verified.elapsed() < LOG_STALE_AFTER { Ok(()) } else { Err("logging blocked".to_string()) }
    })
}

/// Whether one follower of the main apiserver has its first list.
#[derive(Debug, Default, Clone)]
pub struct Synced(Arc<AtomicBool>);

impl Synced {
    pub fn mark(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

type SyncedFn = Box<dyn Fn() -> bool + Send + Sync>;

/// The followers (list+watch of the main apiserver's objects) a server keeps, by name:
/// `informer-sync` passes once every one has its first list, as k8s.io/apiserver's check
/// passes once its informers synced.
#[derive(Default)]
pub struct Informers {
    followers: RwLock<Vec<(String, SyncedFn)>>,
}

impl Informers {
    /// Adds a follower whose first list `synced` tells.
    pub fn register(&self, name: impl Into<String>, synced: impl Fn() -> bool + Send + Sync + 'static) {
        self.followers.write().unwrap_or_else(|p| p.into_inner()).push((name.into(), Box::new(synced)));
    }

    /// Adds a follower and returns the flag its first list sets.
    pub fn flag(&self, name: impl Into<String>) -> Synced {
        let flag = Synced::default();
        let read = flag.clone();
        self.register(name, move || read.is_set());
        flag
    }

    /// The followers still waiting for their first list.
    pub fn pending(&self) -> Vec<String> {
        let followers = self.followers.read().unwrap_or_else(|p| p.into_inner());
        followers.iter().filter(|(_, synced)| !synced()).map(|(name, _)| name.clone()).collect()
    }

    /// The `informer-sync` check.
    pub fn check(self: &Arc<Self>) -> Arc<NamedCheck> {
        let informers = self.clone();
        NamedCheck::new("informer-sync", move || {
            let pending = informers.pending();
            if pending.is_empty() {
                Ok(())
            } else {
                Err(format!("{} informers not started yet: [{}]", pending.len(), pending.join(" ")))
            }
        })
    }
}

#[cfg(test)]
mod tests;
