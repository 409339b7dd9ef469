//! The lifecycle controller: a background task that follows the served definitions (the API's
//! catalog, swapped whole on every reload) and, for each, records its storage version in
//! storedVersions, runs storage-version migrations one definition at a time (definitions without
//! objects, whose passes rewrite nothing, settle in groups, committed together), and keeps its
//! `serveddefinitions` status object current (with the last reload's problems with it, from
//! `definitions::reload_status`; every object, counts included, after each reload), and one for
//! each source a reload refused that no served definition shows. Reloads are noticed within a
//! second; a migration asked for through the API (`request_migration`) wakes it at once. When a
//! migration takes versions out of storedVersions it asks for a reload, so that a file refused
//! for dropping them is served as soon as that is allowed. Replicas on one etcd elect one (`store::leadership`) to migrate and
//! write the status objects; every replica records storage versions. It also answers, for the
//! running server, whether a definition's objects may be deleted (`delete_objects`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, Notify, watch};

use super::migrate::progress::{Progress, Requested};
use super::migrate::{self, Stop};
use super::{removed, status, stored_versions};
use crate::api::{Api, Catalog};
use crate::definitions::Definition;
use crate::definitions::reload_status::{ReloadError, ReloadOutcome, ReloadStatus};
use crate::store::Backend;

/// How often the catalog is looked at for a reload nobody announced.
const POLL: Duration = Duration::from_secs(1);
/// How long a failed migration waits before it is tried again.
const RETRY: Duration = Duration::from_secs(10);
/// How often every status object is refreshed (object counts change with every create).
const REFRESH: Duration = Duration::from_secs(60);
/// How often a running migration's progress reaches the log and the status object.
const REPORT_EVERY: Duration = Duration::from_secs(1);
/// Most status objects written at once (committed together by the store).
const WRITE_TOGETHER: usize = 32;
/// Most definitions without stored objects settled at once: their passes rewrite nothing, and
/// their records and status objects reach the disk in shared commits. A definition with
/// objects migrates alone.
const SETTLE_TOGETHER: usize = 32;

/// The running controller; shared with whoever announces reloads and their errors.
pub struct Controller {
    api: Arc<Api>,
    options: migrate::Options,
    wake: Notify,
    /// What the last reload of the files said (`lastReloadError`).
    reloads: Arc<ReloadStatus>,
    /// The definition whose migration under way reported progress, for the status writer.
    progress: watch::Sender<Option<Arc<Definition>>>,
    /// Definitions whose migration was asked for, for the loop's next round.
    requested: std::sync::Mutex<Vec<String>>,
    /// The last reload error each status object was written with, by object name. Held for
    /// the whole of a status write (or of a group of distinct objects' writes), so that writes
    /// happen one at a time and what this says is
    /// what the last write of each object showed: an object whose write failed is written
    /// again, and a refused source's object is not written again while its problems stay.
    written: Mutex<HashMap<String, Written>>,
}

/// Whether `name`'s last failed migration is still waiting for its retry.
fn waits(retry_at: &HashMap<String, Instant>, name: &str) -> bool {
    retry_at.get(name).is_some_and(|at| Instant::now() < *at)
}

/// What settling a definition takes, looked at before it is settled.
enum Work {
    /// Nothing: no pass is needed.
    Settled,
    /// A pass over a definition with no stored object.
    PassWithoutObjects,
    /// A pass over stored objects, which may rewrite them.
    PassOverObjects,
}

impl Work {
    fn rewrites_nothing(&self) -> bool {
        !matches!(self, Work::PassOverObjects)
    }
}

/// What settling a definition did.
struct Pass {
    /// Nothing is left to do for it.
    done: bool,
    /// The pass that ran, if one did: its status object is to be written.
    progress: Option<Progress>,
    /// The pass took versions out of storedVersions.
    dropped_versions: bool,
}

/// What the last write of a status object showed as its last reload error.
#[derive(Debug, PartialEq)]
enum Written {
    Shown(Option<String>),
    /// The write failed: whatever the object shows, it is written again.
    Failed,
}

/// Why a migration could not be asked for.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// No served definition (of the files) has this name.
    #[error("no served definition is named {0:?}")]
    NotServed(String),
    #[error(transparent)]
    Store(#[from] crate::store::Error),
}

impl Controller {
    /// Starts the controller on the current runtime.
    pub fn spawn(api: Arc<Api>, options: migrate::Options, reloads: Arc<ReloadStatus>) -> Arc<Controller> {
        let (progress, updates) = watch::channel(None);
        let controller = Arc::new(Controller {
            api,
            options,
            wake: Notify::new(),
            reloads,
            progress,
            requested: std::sync::Mutex::new(Vec::new()),
            written: Mutex::default(),
        });
        tokio::spawn(controller.clone().run());
        tokio::spawn(controller.clone().write_progress(updates));
        tokio::spawn(controller.clone().follow_reloads());
        controller
    }

    /// Looks at the served definitions and the requested migrations now rather than within a
    /// second.
    fn wake(&self) {
        self.wake.notify_one();
    }

    /// Asks for a storage-version migration pass over the served definition named `name` (a
    /// request through `serveddefinitions/<name>/migrate`): every object is read and any stored
    /// in another version than the storage version rewritten, as when the storage version
    /// changes. The request is recorded in the store (the progress record, `Running`), so that
    /// it survives a restart and whichever replica migrates runs it; this replica's loop is
    /// woken (on a replica that is not the leader, the leader's next refresh finds it).
    /// `dry_run` checks and records nothing.
    pub async fn request_migration(&self, name: &str, dry_run: bool) -> Result<(Requested, String), RequestError> {
        let catalog = self.api.catalog();
        let Some(definition) = served(&catalog).find(|d| d.name == name).cloned() else {
            return Err(RequestError::NotServed(name.to_string()));
        };
        let storage = definition.storage.name.clone();
        if dry_run {
            let running = migrate::progress::read(self.store(), name)
                .await?
                .is_some_and(|p| p.storage_version == storage && p.state == migrate::progress::State::Running);
            let requested = if running { Requested::AlreadyRunning } else { Requested::Started };
            return Ok((requested, storage));
        }
        let requested = migrate::progress::request(self.store(), name, &storage).await?;
        if let Ok(mut names) = self.requested.lock() {
            names.push(name.to_string());
        }
        self.wake();
        if requested == Requested::Started && self.store().leadership().is_leader() {
            // The status says Running from now on, not once the loop picks the request up.
            self.write_status(&definition, None).await;
        }
        tracing::info!(definition = %name, storageVersion = %storage, outcome = ?requested, "storage-version migration requested");
        Ok((requested, storage))
    }

    /// Whether the objects of the definition named `name` may be deleted: it is not served, and
    /// no file that the last reload could not read through may define it. `Err` says why not.
    pub fn check_unserved(&self, name: &str) -> Result<(), String> {
        let catalog = self.api.catalog();
        if catalog.registry.definitions().iter().any(|d| d.name == name) {
            return Err(format!("{name} is served: remove it from the definitions before deleting its objects"));
        }
        let last = self.reloads.last();
        if let Some(problem) = last.errors.iter().find(|e| e.definition.as_deref().is_none_or(|d| d == name)) {
            return Err(format!(
                "the definitions cannot be read through, so {name} may still be among them: {}",
                problem.message
            ));
        }
        Ok(())
    }

    /// Whether the store knows the definition named `name` (`removed::known`).
    pub async fn known(&self, name: &str) -> Result<(), removed::Error> {
        removed::known(self.store(), name).await
    }

    /// Counts, and with `delete` deletes, the objects of the definition named `name`, which
    /// must not be served (checked again before every page); `report` sees the count so far.
    pub async fn delete_objects(
        &self,
        name: &str,
        delete: bool,
        report: &mut (dyn FnMut(u64) + Send),
    ) -> Result<u64, removed::Error> {
        let unserved = || self.check_unserved(name);
        removed::sweep(self.store(), name, delete, &unserved, report).await
    }

    fn store(&self) -> &Backend {
        self.api.store()
    }

    async fn run(self: Arc<Self>) {
        let mut seen: Option<Arc<Catalog>> = None;
        let mut pending: Vec<String> = Vec::new();
        let mut retry_at: HashMap<String, Instant> = HashMap::new();
        let mut refreshed = Instant::now();
        // Replicas on one etcd elect one to migrate and write the status objects; the others
        // only record storage versions, and catch up at once when they are elected.
        let leadership = self.store().leadership();
        let mut led = leadership.is_leader();
        loop {
            let catalog = self.api.catalog();
            let leading = leadership.is_leader();
            let elected = leading && !led;
            led = leading;
            let everything = seen.is_none() || elected || refreshed.elapsed() >= REFRESH;
            if everything {
                refreshed = Instant::now();
                let definitions: Vec<&Definition> = served(&catalog).map(|d| &**d).collect();
                self.catalog_changed(&catalog, &definitions, true, leading).await;
                pending = definitions.iter().map(|d| d.name.clone()).collect();
                seen = Some(catalog.clone());
            } else if let Some(before) = seen.as_ref().filter(|s| !Arc::ptr_eq(s, &catalog)) {
                // A reload: only the definitions it added or changed need looking at (the
                // others' storage versions were recorded, their status written and their
                // migrations settled or still pending).
                let (changed, removed) = changes(before, &catalog);
                self.catalog_changed(&catalog, &changed, removed, leading).await;
                for definition in changed {
                    if !pending.contains(&definition.name) {
                        pending.push(definition.name.clone());
                    }
                }
                seen = Some(catalog.clone());
            }
            let requested: Vec<String> = self.requested.lock().map(|mut r| std::mem::take(&mut *r)).unwrap_or_default();
            if !leading {
                tokio::select! {
                    () = self.wake.notified() => {}
                    () = tokio::time::sleep(POLL) => {}
                }
                continue;
            }
            for name in requested {
                // Asked for explicitly: tried now, even if the last attempt failed.
                retry_at.remove(&name);
                if !pending.contains(&name) {
                    pending.push(name);
                }
            }
            let mut left = Vec::new();
            let mut names = std::mem::take(&mut pending).into_iter().peekable();
            let mut superseded = false;
            while let Some(name) = names.next() {
                if superseded || waits(&retry_at, &name) {
                    left.push(name);
                    continue;
                }
                let Some(definition) = served(&catalog).find(|d| d.name == name).cloned() else { continue };
                // Definitions whose settling rewrites nothing settle together (`SETTLE_TOGETHER`).
                let work = self.work(&definition).await;
                let together = work.as_ref().is_ok_and(Work::rewrites_nothing);
                let (mut group, mut works) = (vec![definition], vec![work]);
                while together && group.len() < SETTLE_TOGETHER {
                    let Some(next) = names.peek() else { break };
                    if waits(&retry_at, next) {
                        break;
                    }
                    let Some(definition) = served(&catalog).find(|d| &d.name == next).cloned() else {
                        names.next();
                        continue;
                    };
                    let work = self.work(&definition).await;
                    if !work.as_ref().is_ok_and(Work::rewrites_nothing) {
                        break;
                    }
                    names.next();
                    group.push(definition);
                    works.push(work);
                }
                let settling = group.iter().zip(works).map(|(d, work)| self.settle(d, work));
                let outcomes = futures_util::future::join_all(settling).await;
                let mut settled = Vec::new();
                for (definition, outcome) in group.iter().zip(outcomes) {
                    let name = definition.name.clone();
                    match outcome {
                        Ok(pass) => {
                            if !pass.done {
                                left.push(name);
                            }
                            if let Some(progress) = pass.progress {
                                settled.push((definition, progress, pass.dropped_versions));
                            }
                        }
                        Err(Stop::Superseded) => {
                            // A reload changed what is served: this one and the rest are
                            // looked at again against the new catalog.
                            superseded = true;
                            left.push(name);
                        }
                        Err(Stop::Failed(e)) => {
                            tracing::error!(definition = %name, error = %e, "storage-version migration failed; it is tried again in {}s", RETRY.as_secs());
                            retry_at.insert(name.clone(), Instant::now() + RETRY);
                            left.push(name);
                        }
                    }
                }
                let statuses: Vec<(&Definition, Option<&Progress>)> =
                    settled.iter().map(|(d, progress, _)| (&***d, Some(progress))).collect();
                self.write_statuses(&statuses).await;
                // Versions left storedVersions: a file that dropped them, refused until now,
                // may be served as it is.
                if settled.iter().any(|(_, _, dropped)| *dropped) {
                    self.reloads.ask_again();
                }
            }
            pending = left;
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// Records the storage versions of newly served `definitions` (every one, or those a reload
    /// added or changed) and, on the leader, refreshes their status objects (every one also every
    /// `REFRESH`, for the object counts) and, when some may be gone (`removed`), removes the status
    /// objects of definitions no longer served.
    async fn catalog_changed(&self, catalog: &Catalog, definitions: &[&Definition], removed: bool, leading: bool) {
        if let Err(e) = stored_versions::record_storage_versions(self.store(), definitions.iter().copied()).await {
            tracing::error!(error = %e, "recording the definitions' storage versions in status.storedVersions failed");
        }
        if !leading {
            return;
        }
        let all: Vec<(&Definition, Option<&Progress>)> = definitions.iter().map(|&d| (d, None)).collect();
        self.write_statuses(&all).await;
        if removed {
            self.write_unserved(catalog).await;
        }
    }

    /// On the leader, writes the objects of the sources the last reload refused with no served
    /// definition to show it (`ReloadOutcome::unserved`), and removes every other object of a
    /// definition `catalog` does not serve.
    async fn write_unserved(&self, catalog: &Catalog) {
        let last = self.reloads.last();
        let names: HashSet<&str> = served(catalog).map(|d| d.name.as_str()).collect();
        let unserved = last.unserved(&|name| names.contains(name));
        // One status write at a time (see `written`).
        let mut written = self.written.lock().await;
        for entry in &unserved {
            let shown =
                Written::Shown(Some(entry.errors.iter().map(|e| e.message.as_str()).collect::<Vec<_>>().join("\n")));
            if written.get(&entry.name) == Some(&shown) {
                continue;
            }
            match status::write_unserved(self.store(), &entry.name, &entry.errors).await {
                Ok(()) => {
                    written.insert(entry.name.clone(), shown);
                }
                Err(e) => {
                    written.insert(entry.name.clone(), Written::Failed);
                    tracing::warn!(entry = %entry.name, error = %e, "writing the status of a refused definition source failed");
                }
            }
        }
        let kept = |name: &str| names.contains(name) || unserved.iter().any(|u| u.name == name);
        written.retain(|name, _| kept(name));
        if let Err(e) = status::remove_others(self.store(), &kept).await {
            tracing::warn!(error = %e, "removing the status of definitions no longer served failed");
        }
    }

    /// What settling `definition` takes (objects are counted only when it needs a pass; a
    /// count that fails counts as objects).
    async fn work(&self, definition: &Definition) -> Result<Work, Stop> {
        if !migrate::needs_pass(self.store(), definition).await? {
            return Ok(Work::Settled);
        }
        let prefix = crate::store::key::resource_prefix(&definition.group, &definition.plural);
        Ok(match crate::store::Store::count(self.store(), &prefix).await {
            Ok(0) => Work::PassWithoutObjects,
            _ => Work::PassOverObjects,
        })
    }

    /// Migrates `definition` if `work` says it needs it; its status object is the caller's to
    /// write.
    async fn settle(&self, definition: &Arc<Definition>, work: Result<Work, Stop>) -> Result<Pass, Stop> {
        if let Work::Settled = work? {
            return Ok(Pass { done: true, progress: None, dropped_versions: false });
        }
        let stored = stored_versions::read(self.store(), &definition.name).await?;
        if stored.iter().any(|v| *v != definition.storage.name) {
            tracing::info!(definition = %definition.name, storedVersions = ?stored, storageVersion = %definition.storage.name,
                "storage-version migration: rewriting objects stored in other versions into the storage version");
        } else {
            tracing::debug!(definition = %definition.name, "counting stored objects per version");
        }
        let api = self.api.clone();
        let (name, storage) = (definition.name.clone(), definition.storage.name.clone());
        let still_current =
            move || api.catalog().registry.definitions().iter().any(|d| d.name == name && d.storage.name == storage);
        let mut last_report = Instant::now();
        let mut report = |progress: &Progress| {
            if last_report.elapsed() >= REPORT_EVERY || progress.state == migrate::progress::State::Done {
                last_report = Instant::now();
                tracing::info!(definition = %definition.name, migrated = progress.migrated,
                    objects = ?progress.objects_per_version, state = progress.state.as_str(), "storage-version migration progress");
                // Progress while the pass runs; the finished pass's status is the caller's.
                if progress.state != migrate::progress::State::Done {
                    self.progress.send_replace(Some(definition.clone()));
                }
            }
        };
        let progress = migrate::migrate(self.store(), definition, self.options, &still_current, &mut report).await?;
        let done = progress.state == migrate::progress::State::Done;
        let dropped_versions = done && stored.iter().any(|v| *v != definition.storage.name);
        Ok(Pass { done, progress: Some(progress), dropped_versions })
    }

    /// On the leader, after every reload, refreshes the status objects of the definitions whose
    /// problems it changed (those it added or changed are the main loop's; a reload among
    /// thousands of definitions must not read every one's records and count its objects), writes
    /// the objects of the sources it refused with no served definition to show it and removes
    /// those of sources no longer refused; between reloads, writes again the status objects
    /// whose last write failed. On every replica,
    /// while the last reload refused something, asks for a reload whenever storedVersions
    /// change (the leader's migration may have allowed what a follower's files ask).
    async fn follow_reloads(self: Arc<Self>) {
        let mut stored: Option<HashMap<String, Vec<String>>> = None;
        // The reload the status objects were last refreshed after: the first load's are
        // written by the main loop's first round.
        let mut refreshed = Some(self.reloads.last().time);
        // The reload whose problems the status objects show.
        let mut shown = self.reloads.last();
        loop {
            tokio::time::sleep(POLL).await;
            let last = self.reloads.last();
            if last.errors.is_empty() {
                stored = None;
            } else if let Ok(now) = stored_versions::read_all(self.store()).await {
                // The first look is compared with what the refusing reload read: once more.
                if stored.as_ref().is_none_or(|before| *before != now) {
                    self.reloads.ask_again();
                }
                stored = Some(now);
            }
            if !self.store().leadership().is_leader() {
                // Elected, the main loop's first round writes everything.
                refreshed = Some(last.time);
                shown = last;
                continue;
            }
            let catalog = self.api.catalog();
            let every = refreshed != Some(last.time);
            refreshed = Some(last.time);
            let before = std::mem::replace(&mut shown, last.clone());
            let stale: Vec<&Arc<Definition>> = {
                let written = self.written.lock().await;
                // A definition not written yet is written by the main loop's first pass.
                served(&catalog)
                    .filter(|d| {
                        (every && problems_changed(&before, &last, &d.name))
                            || written.get(&d.name) == Some(&Written::Failed)
                    })
                    .collect()
            };
            let stale: Vec<(&Definition, Option<&Progress>)> = stale.into_iter().map(|d| (&**d, None)).collect();
            self.write_statuses(&stale).await;
            if every {
                self.write_unserved(&catalog).await;
            }
        }
    }

    /// Writes the status of a migration under way whenever it reports, from its record in the
    /// store (written before each report): a report taken from the channel may be older than
    /// the finished pass's status, written meanwhile by the main loop.
    async fn write_progress(self: Arc<Self>, mut updates: watch::Receiver<Option<Arc<Definition>>>) {
        while updates.changed().await.is_ok() {
            let update = updates.borrow_and_update().clone();
            if let Some(definition) = update {
                self.write_status(&definition, None).await;
            }
        }
    }

    /// Writes the status object of `definition` from the store's records (or `progress`).
    async fn write_status(&self, definition: &Definition, progress: Option<&Progress>) {
        self.write_statuses(&[(definition, progress)]).await;
    }

    /// Writes the status objects of `definitions`, up to `WRITE_TOGETHER` at once, so that
    /// the store commits them together: written one after another, each was a commit synced
    /// to disk of its own, and a fresh start among thousands of definitions spent more CPU
    /// on those commits after it was ready than on the whole start (issue 32).
    async fn write_statuses(&self, definitions: &[(&Definition, Option<&Progress>)]) {
        use futures_util::StreamExt;
        // One status write at a time (see `written`): a group of distinct objects counts as
        // one, the lock held until all of them are written.
        let mut written = self.written.lock().await;
        let mut waiting = definitions.iter();
        let mut running = futures_util::stream::FuturesUnordered::new();
        loop {
            while running.len() < WRITE_TOGETHER {
                let Some(&(definition, progress)) = waiting.next() else { break };
                running.push(self.write_status_now(definition, progress));
            }
            let Some((name, shown)) = running.next().await else { break };
            written.insert(name, shown);
        }
    }

    /// Writes the status object of `definition` (the caller holds `written`): its name and what
    /// it shows.
    async fn write_status_now(&self, definition: &Definition, progress: Option<&Progress>) -> (String, Written) {
        let store = self.store();
        let stored = stored_versions::read(store, &definition.name).await.unwrap_or_default();
        let recorded = match progress {
            Some(_) => None,
            // A record for another storage version is the last migration's: this one is to come.
            None => migrate::progress::read(store, &definition.name).await.ok().flatten().map(|p| {
                if p.storage_version == definition.storage.name {
                    p
                } else {
                    Progress::start(&definition.storage.name, Some(&p))
                }
            }),
        };
        let last = self.reloads.last();
        let reload_error = last.error_of(&definition.name);
        let problems: Vec<&ReloadError> = last.errors_of(&definition.name).collect();
        let progress = progress.or(recorded.as_ref());
        let counts = match progress {
            Some(p) => self.objects_per_version(definition, p).await,
            None => None,
        };
        let facts = status::Facts {
            stored_versions: &stored,
            progress,
            objects_per_version: counts.as_ref(),
            reload_error: reload_error.as_deref(),
            problems: &problems,
        };
        let shown = match status::write(store, definition, &facts).await {
            Ok(()) => Written::Shown(reload_error),
            Err(e) => {
                // Looked at again at the next poll.
                tracing::warn!(definition = %definition.name, error = %e, "writing the definition's status failed");
                Written::Failed
            }
        };
        (definition.name.clone(), shown)
    }
}

impl Controller {
    /// Objects per version now: the older versions as the last pass counted them (no object
    /// can be written in them since), the storage version as the rest of what is stored.
    async fn objects_per_version(&self, definition: &Definition, progress: &Progress) -> Option<BTreeMap<String, u64>> {
        let counted = progress.counts()?;
        let prefix = crate::store::key::resource_prefix(&definition.group, &definition.plural);
        let total = crate::store::Store::count(self.store(), &prefix).await.ok()?;
        let mut counts: BTreeMap<String, u64> =
            counted.iter().filter(|(v, _)| **v != definition.storage.name).map(|(v, n)| (v.clone(), *n)).collect();
        let older: u64 = counts.values().sum();
        counts.insert(definition.storage.name.clone(), total.saturating_sub(older));
        Some(counts)
    }
}

/// What a reload changed from `before` to `now`: the definitions of the files it added or
/// changed (other `Arc`s), and whether it removed any.
fn changes<'a>(before: &Catalog, now: &'a Catalog) -> (Vec<&'a Definition>, bool) {
    let previous: HashMap<&str, &Arc<Definition>> = served(before).map(|d| (d.name.as_str(), d)).collect();
    let changed: Vec<&Definition> = served(now)
        .filter(|d| previous.get(d.name.as_str()).is_none_or(|p| !Arc::ptr_eq(p, d)))
        .map(|d| &**d)
        .collect();
    let current: HashSet<&str> = served(now).map(|d| d.name.as_str()).collect();
    let removed = previous.keys().any(|name| !current.contains(name));
    (changed, removed)
}

/// Whether what the status of `definition` shows of the last reload (its error and problems)
/// differs between two reloads.
fn problems_changed(before: &ReloadOutcome, now: &ReloadOutcome, definition: &str) -> bool {
    !before.errors_of(definition).eq(now.errors_of(definition))
}

/// The definitions of the files (not the server's own read-only ones).
fn served(catalog: &Catalog) -> impl Iterator<Item = &Arc<Definition>> {
    catalog.registry.definitions().iter().filter(|d| !d.read_only)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(definition: &str, message: &str) -> ReloadError {
        ReloadError {
            definition: Some(definition.into()),
            source: format!("{definition}.yaml"),
            message: message.into(),
            reason: "Invalid",
            errors: vec![message.into()],
            concerns: Vec::new(),
        }
    }

    /// A definition of kind `Thing` in group `g<i>.example.com`.
    fn definition(i: usize) -> Arc<Definition> {
        let manifest = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("things.g{i}.example.com")},
            "spec": {"group": format!("g{i}.example.com"), "scope": "Namespaced",
                "names": {"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "string"}}}}}]}
        });
        crate::definitions::load::checked_from_value(manifest, "test").unwrap().definition
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_start_among_many_definitions_commits_their_records_and_status_objects_together() {
        const DEFINITIONS: usize = 96;
        let dir = tempfile::tempdir().unwrap();
        let store =
            crate::store::sled::SledStore::open(dir.path(), crate::store::sled::SledOptions::default()).unwrap();
        let (registry, problems) =
            crate::definitions::Registry::build_shared((0..DEFINITIONS).map(definition).collect());
        assert!(problems.is_empty(), "{problems:?}");
        let syncs_before = store.durable_syncs();
        let api = Arc::new(Api::new(Backend::Sled(store.clone()), registry, crate::api::ApiOptions::default()));
        let _controller = Controller::spawn(api, migrate::Options::default(), ReloadStatus::new());
        // Every definition's first pass done and shown in its status object.
        let mut shown = 0;
        while shown < DEFINITIONS {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let listed = crate::store::Store::list(&store, &status::prefix(), Default::default()).await.unwrap();
            shown = listed
                .items
                .iter()
                .filter(|item| {
                    let object: serde_json::Value = serde_json::from_slice(&item.value).unwrap();
                    object.pointer("/status/migration/state").and_then(serde_json::Value::as_str) == Some("Done")
                })
                .count();
        }
        // One at a time, each definition took four commits (its status object, the pass's
        // start and end, the status object again), each synced to disk on its own: 4 syncs a
        // definition (386 for 96). Together, about one (74-114 for 96): a commit takes what was
        // queued when the writer woke, so each step of a group costs a few.
        let syncs = store.durable_syncs() - syncs_before;
        assert!(syncs < 2 * DEFINITIONS as u64, "{syncs} syncs for {DEFINITIONS} definitions");
    }

    #[test]
    fn a_reload_concerns_only_the_definitions_whose_problems_it_changed() {
        let outcome = |errors: Vec<ReloadError>| ReloadOutcome { time: Some(jiff::Timestamp::now()), errors };
        let before = outcome(vec![problem("a.example.com", "bad"), problem("b.example.com", "bad")]);
        let now = outcome(vec![problem("a.example.com", "bad"), problem("c.example.com", "bad")]);
        assert!(!problems_changed(&before, &now, "a.example.com"), "the same problem");
        assert!(problems_changed(&before, &now, "b.example.com"), "fixed");
        assert!(problems_changed(&before, &now, "c.example.com"), "new");
        assert!(!problems_changed(&before, &now, "d.example.com"), "never concerned");
        let reworded = outcome(vec![problem("a.example.com", "worse"), problem("c.example.com", "bad")]);
        assert!(problems_changed(&now, &reworded, "a.example.com"));
    }
}
