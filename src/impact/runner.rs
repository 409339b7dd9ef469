//! Impact analyses in the running server: asked for through the API
//! (`serveddefinitions/<name>/impact`, the candidate as the body) and run after every live
//! reload that changed a definition. Each runs on a thread of its own below the requests'
//! priority, and shows in the definition's status object (`status.impact`): `Running` with the
//! objects scanned so far, then `Done` with the report (or `Cancelled`, `Failed`). The status is
//! written by whichever replica runs the analysis, so a cancellation (a `Cancelled` state
//! written by any replica) or a newer analysis (another id) is seen by the one running it at
//! its next progress write, and it stops.
//!
//! Owns the analyses under way in this process; what they find is `analyze`'s.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::candidate::{self, Acceptance};
use super::{Options, Report, Stop, Subject};
use crate::api::objects::put;
use crate::definitions::Definition;
use crate::definitions::load::{Loaded, Refusal};
use crate::definitions::reload::Served;
use crate::lifecycle::{status, stored_versions};
use crate::store::{Backend, Store, key};

/// How often a running analysis writes its progress (and looks for a cancellation).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// What is served now, as the reloads left it.
pub type ServedSet = Arc<dyn Fn() -> HashMap<String, Served> + Send + Sync>;

/// Why an analysis was not started (or cancelled).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("no served definition is named {0:?}")]
    NotServed(String),
    /// The candidate is not a valid definition.
    #[error("the candidate is refused")]
    Candidate(Refusal),
    #[error("the name of the object ({object}) does not match the name on the URL ({url})")]
    WrongName { url: String, object: String },
    #[error(transparent)]
    Store(#[from] crate::store::Error),
}

/// What started an analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Request,
    Reload,
}

impl Trigger {
    fn as_str(self) -> &'static str {
        match self {
            Trigger::Request => "Request",
            Trigger::Reload => "Reload",
        }
    }
}

/// The analyses of one server.
pub struct Runner {
    store: Backend,
    served: ServedSet,
    options: Options,
    runtime: tokio::runtime::Handle,
    /// The analyses running in this process, by definition: their id and stop flag.
    running: Mutex<HashMap<String, (String, Arc<AtomicBool>)>>,
}

/// One analysis to run.
struct Job {
    id: String,
    trigger: Trigger,
    /// The served set it is checked against (for a reload's, only the form served before).
    served: HashMap<String, Served>,
    candidate: Loaded,
    stored_versions: Vec<String>,
}

impl Runner {
    pub fn new(store: Backend, served: ServedSet, options: Options, runtime: tokio::runtime::Handle) -> Arc<Runner> {
        Arc::new(Runner { store, served, options, runtime, running: Mutex::default() })
    }

    /// Starts an analysis of `body` (a CustomResourceDefinition, JSON or YAML) as a change of
    /// the served definition `name`; returns its id, which the status shows.
    pub async fn request(self: &Arc<Self>, name: &str, body: &[u8]) -> Result<String, RequestError> {
        let served = (self.served)();
        if !served.contains_key(name) {
            return Err(RequestError::NotServed(name.to_string()));
        }
        let body = body.to_vec();
        // Checking a definition compiles its rules: CPU work, off the runtime's workers.
        let parsed = tokio::task::spawn_blocking(move || candidate::parse(&body, "the request body")).await;
        let candidate = parsed
            .map_err(|e| RequestError::Candidate(Refusal::undecodable(e.to_string())))?
            .map_err(RequestError::Candidate)?;
        if candidate.definition.name != name {
            return Err(RequestError::WrongName { url: name.to_string(), object: candidate.definition.name.clone() });
        }
        let stored_versions = stored_versions::read(&self.store, name).await?;
        let id = uuid::Uuid::new_v4().to_string();
        let job = Job { id: id.clone(), trigger: Trigger::Request, served, candidate, stored_versions };
        self.start(job).await?;
        Ok(id)
    }

    /// Cancels the analysis of `name` under way, on whichever replica runs it; false when none
    /// is.
    pub async fn cancel(&self, name: &str) -> Result<bool, RequestError> {
        let Some(current) = (self.served)().get(name).map(|s| s.loaded.definition.clone()) else {
            return Err(RequestError::NotServed(name.to_string()));
        };
        let mut change = |shown: Option<&Value>| {
            let shown = shown.filter(|s| s.get("state").and_then(Value::as_str) == Some("Running"))?;
            let mut cancelled = shown.clone();
            put(&mut cancelled, "state", json!("Cancelled"));
            put(&mut cancelled, "finishedAt", json!(crate::core::time::now_rfc3339()));
            Some(cancelled)
        };
        let written = status::update_impact(&self.store, &current, &mut change).await?;
        if let Some((_, stop)) = self.running.lock().ok().and_then(|r| r.get(name).cloned()) {
            stop.store(true, Ordering::Relaxed);
        }
        Ok(written.is_some())
    }

    /// Analyses what each reload's change did to the stored objects (`changed`: the form served
    /// before and the one served now), one definition after the other, on a thread of its own.
    /// Only the replica that writes the status objects (the store's leader) does it.
    pub fn after_reload(self: &Arc<Self>, changed: Vec<(Served, Served)>) {
        if changed.is_empty() || !self.store.leadership().is_leader() {
            return;
        }
        let runner = self.clone();
        let spawned = std::thread::Builder::new()
            .name("impact-after-reload".into())
            .stack_size(crate::core::nesting::THREAD_STACK_BYTES)
            .spawn(move || {
            crate::core::priority::lower_this_thread();
            for (before, now) in changed {
                let name = now.name().to_string();
                let stored_versions = runner.runtime.block_on(stored_versions::read(&runner.store, &name));
                let id = uuid::Uuid::new_v4().to_string();
                let registered = stored_versions.map_err(RequestError::from).map(|stored_versions| {
                    let served = HashMap::from([(name.clone(), before)]);
                    Job { id, trigger: Trigger::Reload, served, candidate: now.loaded, stored_versions }
                });
                let started = registered.and_then(|job| {
                    let stop = runner.runtime.block_on(runner.register(&job))?;
                    Ok((job, stop))
                });
                match started {
                    Ok((job, stop)) => runner.run(&job, &stop),
                    Err(e) => {
                        tracing::warn!(definition = %name, error = %e, "the impact of the reloaded definition is not analysed")
                    }
                }
            }
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "the impact of the reloaded definitions is not analysed");
        }
    }

    /// Shows the analysis as running and runs it on a thread of its own.
    async fn start(self: &Arc<Self>, job: Job) -> Result<(), RequestError> {
        let name = job.candidate.definition.name.clone();
        let stop = self.register(&job).await?;
        let runner = self.clone();
        let spawned = std::thread::Builder::new()
            .name("impact-analysis".into())
            .stack_size(crate::core::nesting::THREAD_STACK_BYTES)
            .spawn(move || {
                crate::core::priority::lower_this_thread();
                runner.run(&job, &stop);
            });
        if let Err(e) = spawned {
            self.forget(&name, None);
            return Err(RequestError::Store(crate::store::Error::Backend(format!("starting the analysis: {e}"))));
        }
        Ok(())
    }

    /// Shows the analysis as running in the status and in this process' table; one running
    /// before it for the same definition in this process is told to stop. Returns its stop flag.
    async fn register(&self, job: &Job) -> Result<Arc<AtomicBool>, RequestError> {
        let shown = running(&job.id, job.trigger);
        status::update_impact(&self.store, &job.candidate.definition, &mut |_| Some(shown.clone())).await?;
        let stop = Arc::new(AtomicBool::new(false));
        let name = job.candidate.definition.name.clone();
        if let Ok(mut running) = self.running.lock()
            && let Some((_, previous)) = running.insert(name, (job.id.clone(), stop.clone()))
        {
            previous.store(true, Ordering::Relaxed);
        }
        Ok(stop)
    }

    fn forget(&self, name: &str, id: Option<&str>) {
        if let Ok(mut running) = self.running.lock()
            && running.get(name).is_some_and(|(running_id, _)| id.is_none_or(|id| id == running_id))
        {
            running.remove(name);
        }
    }

    /// Runs one analysis to its end on this thread, writing its progress and outcome.
    fn run(&self, job: &Job, stop: &AtomicBool) {
        let definition = job.candidate.definition.clone();
        let name = definition.name.clone();
        let prefix = key::resource_prefix(&definition.group, &definition.plural);
        let total = self.runtime.block_on(self.store.count(&prefix)).ok();
        let mut last = Instant::now();
        let mut progress = |scanned: u64| {
            if last.elapsed() < PROGRESS_EVERY {
                return;
            }
            last = Instant::now();
            let mut change = |shown: Option<&Value>| {
                let ours = shown.filter(|s| is_running(s, &job.id))?;
                let mut update = ours.clone();
                put(&mut update, "scannedObjects", json!(scanned));
                if let Some(total) = total {
                    put(&mut update, "totalObjects", json!(total));
                }
                Some(update)
            };
            match self.runtime.block_on(status::update_impact(&self.store, &definition, &mut change)) {
                // Cancelled, or superseded by a newer analysis.
                Ok(None) => stop.store(true, Ordering::Relaxed),
                Ok(Some(_)) => {}
                Err(e) => {
                    tracing::debug!(definition = %name, error = %e, "writing an impact analysis' progress failed")
                }
            }
        };
        let subject = Subject {
            served: &job.served,
            candidate: &job.candidate,
            file: Path::new(&job.candidate.definition.source),
            stored_versions: &job.stored_versions,
        };
        let outcome = super::analyze(&self.store, &self.runtime, &subject, &self.options, stop, &mut progress);
        // Cancelled after its last page: cancelled all the same.
        let outcome =
            outcome.and_then(|report| if stop.load(Ordering::Relaxed) { Err(Stop::Cancelled) } else { Ok(report) });
        let outcome = outcome.map(|mut report| {
            if job.trigger == Trigger::Reload {
                // Served already: the reload accepted it.
                report.change = Acceptance { accepted: true, ..Acceptance::default() };
            }
            report
        });
        self.finish(job, &definition, outcome);
        self.forget(&name, Some(&job.id));
    }

    /// Writes how the analysis ended, unless another replaced it meanwhile, and logs it.
    fn finish(&self, job: &Job, definition: &Definition, outcome: Result<Report, Stop>) {
        let name = &definition.name;
        let mut change = |shown: Option<&Value>| {
            let ours = shown.filter(|s| s.get("id").and_then(Value::as_str) == Some(job.id.as_str()))?;
            if ours.get("state").and_then(Value::as_str) == Some("Cancelled") {
                // As the cancellation left it.
                return None;
            }
            let mut done = ours.clone();
            put(&mut done, "finishedAt", json!(crate::core::time::now_rfc3339()));
            match &outcome {
                Ok(report) => {
                    put(&mut done, "state", json!("Done"));
                    put(&mut done, "scannedObjects", json!(report.objects));
                    put(&mut done, "summary", json!(report.summary()));
                    put(&mut done, "exitCode", json!(report.exit_code()));
                    put(&mut done, "report", serde_json::to_value(report).unwrap_or(Value::Null));
                }
                Err(Stop::Cancelled) => {
                    put(&mut done, "state", json!("Cancelled"));
                }
                Err(Stop::Store(e)) => {
                    put(&mut done, "state", json!("Failed"));
                    put(&mut done, "error", json!(e));
                }
            }
            Some(done)
        };
        if let Err(e) = self.runtime.block_on(status::update_impact(&self.store, definition, &mut change)) {
            tracing::warn!(definition = %name, error = %e, "writing the outcome of an impact analysis failed");
        }
        match (&outcome, job.trigger) {
            (Ok(report), Trigger::Reload) if report.exit_code() != 0 => tracing::warn!(
                definition = %name,
                summary = %report.summary(),
                "the reloaded definition makes stored objects invalid (it is served all the same, as Kubernetes does); see the status of serveddefinitions/{name}"
            ),
            (Ok(report), _) => {
                tracing::info!(definition = %name, trigger = job.trigger.as_str(), summary = %report.summary(), "impact analysis done")
            }
            (Err(e), _) => {
                tracing::info!(definition = %name, trigger = job.trigger.as_str(), error = %e, "impact analysis stopped")
            }
        }
    }
}

/// The status of an analysis that just started.
fn running(id: &str, trigger: Trigger) -> Value {
    json!({"id": id, "trigger": trigger.as_str(), "state": "Running",
           "startedAt": crate::core::time::now_rfc3339(), "scannedObjects": 0})
}

fn is_running(shown: &Value, id: &str) -> bool {
    shown.get("id").and_then(Value::as_str) == Some(id) && shown.get("state").and_then(Value::as_str) == Some("Running")
}
