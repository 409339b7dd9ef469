//! Serving the definitions as the files say, while the server runs: the first load at start,
//! then a reload after every burst of file events (`definitions::watch`). A reload reads every
//! file again (`definitions::scan`, which reuses what unchanged files gave), decides what to
//! serve (`definitions::reload::plan`: Kubernetes' create and update checks, the names of the
//! definition served first), records the storage versions and accepted names in the store,
//! builds the new catalog (discovery, OpenAPI) off the request path and swaps it in whole
//! (`Api::replace_catalog`). What it found wrong is logged with its file and kept in
//! `definitions::reload_status`. With cluster definitions (`kube::cluster_definitions`), the
//! main apiserver's selected CustomResourceDefinitions join the files' scan
//! (`definitions::cluster`), and a change among them is one more reload.
//!
//! Owns the reload loop and the last served set. A definition that is no longer served keeps
//! its objects in the store; this module never deletes objects.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::api::{Api, Catalog};
use crate::definitions::accepted::{Accepted, Recollection, accepted_forms};
use crate::definitions::cluster::ClusterCache;
use crate::definitions::reload::{self, Context, Plan, Served};
use crate::definitions::reload_status::ReloadStatus;
use crate::definitions::scan::{FileCache, Origin};
use crate::definitions::watch::{self, DefinitionsWatcher};
use crate::definitions::{Problem, Registry};
use crate::kube::cluster_definitions::ClusterDefinitions;
use crate::lifecycle::{accepted, stored_versions};
use crate::store::Backend;

/// The store's records a plan needs: every one at the first load, those of the definitions it
/// checks as updates on a reload.
#[derive(Default)]
struct Records {
    /// `status.storedVersions`, by definition name.
    stored: HashMap<String, Vec<String>>,
    /// The last accepted form, by definition name.
    accepted: HashMap<String, Accepted>,
}

impl Records {
    /// The stored versions of the definitions `scan` changes, and the accepted form (and stored
    /// versions) of those it gives that `served` does not serve.
    async fn read_for_reload(
        store: &Backend,
        served: &HashMap<String, Served>,
        scan: &crate::definitions::scan::Scan,
    ) -> Result<Records, crate::store::Error> {
        let newcomers = reload::new_names(served, scan);
        let read = futures_util::future::join_all(newcomers.iter().map(|name| accepted::read(store, name))).await;
        let mut records = Records::default();
        for (name, read) in newcomers.into_iter().zip(read) {
            if let Some(found) = read? {
                records.accepted.insert(name, found);
            }
        }
        let mut names = reload::updated_names(served, scan);
        names.extend(records.accepted.keys().cloned());
        let read = futures_util::future::join_all(names.iter().map(|name| stored_versions::read(store, name))).await;
        for (name, read) in names.into_iter().zip(read) {
            records.stored.insert(name, read?);
        }
        Ok(records)
    }
}

/// Changed definitions: the form served until a reload, and the one it serves.
type Replaced = Vec<(Served, Served)>;

/// What the reloads remember between them.
#[derive(Default)]
struct State {
    cache: FileCache,
    cluster_cache: ClusterCache,
    served: HashMap<String, Served>,
    /// Whether the first load was served.
    loaded: bool,
    /// Whether the last plan had every cluster follower's list.
    cluster_synced: bool,
    /// The served set was planned without the store's records (it could not be read at
    /// start): it is planned again, as a first load, once they can be read.
    provisional: bool,
    /// When each served definition was first served (`accepted_names::ages`), as the last
    /// reload left the records.
    ages: Option<HashMap<String, u64>>,
    /// The definitions served when the server last stopped (those with an accepted-names record
    /// at the first load) that have not been planned since: one that comes later (a cluster
    /// definition listed after the first load) is planned from its last accepted form, as a
    /// start plans the files'.
    served_at_stop: HashSet<String>,
}

/// Loads and reloads the definitions of `paths`.
pub struct LiveDefinitions {
    paths: Vec<PathBuf>,
    store: Backend,
    state: Arc<Mutex<State>>,
    status: Arc<ReloadStatus>,
    cluster: Option<Arc<ClusterDefinitions>>,
    /// Analyses what a changed definition does to its stored objects, after each reload.
    impacts: Option<Arc<crate::impact::runner::Runner>>,
}

impl LiveDefinitions {
    pub fn new(paths: Vec<PathBuf>, store: Backend, status: Arc<ReloadStatus>) -> LiveDefinitions {
        LiveDefinitions { paths, store, state: Arc::default(), status, cluster: None, impacts: None }
    }

    /// Analyses, after every reload, what each changed definition does to its stored objects.
    pub fn with_impacts(mut self, impacts: Arc<crate::impact::runner::Runner>) -> LiveDefinitions {
        self.impacts = Some(impacts);
        self
    }

    /// What is served now, as the last reload left it (for the impact analyses' checks).
    pub fn served_set(&self) -> crate::impact::runner::ServedSet {
        let state = self.state.clone();
        Arc::new(move || state.lock().map(|s| s.served.clone()).unwrap_or_default())
    }

    /// Serves the main apiserver's definitions that `cluster` follows besides the files.
    pub fn with_cluster(mut self, cluster: Option<Arc<ClusterDefinitions>>) -> LiveDefinitions {
        self.cluster = cluster;
        self
    }

    /// The first load: what the server starts serving.
    pub async fn load(&self) -> Registry {
        let registry = match self.plan_and_record(None).await {
            Some((mut plan, _, _)) => std::mem::take(&mut plan.registry),
            None => Registry::default(),
        };
        self.cluster_served();
        registry
    }

    /// Tells the cluster's followers that what they all listed is served.
    fn cluster_served(&self) {
        if let Some(cluster) = &self.cluster
            && self.state.lock().map(|s| s.cluster_synced).unwrap_or(false)
        {
            cluster.mark_served();
        }
    }

    /// Reads the files again and serves what they say, if anything changed. `since` is when
    /// the file events that asked for it began.
    pub async fn reload(&self, api: &Api, since: std::time::Instant) {
        let Some((plan, Some(catalog), replaced)) = self.plan_and_record(Some(api.catalog())).await else {
            self.cluster_served();
            return;
        };
        let served = catalog.registry.definitions().iter().filter(|d| !d.read_only).count();
        api.replace_catalog(catalog);
        warm_openapi(api.catalog());
        self.cluster_served();
        tracing::info!(
            added = plan.added.len(),
            changed = plan.changed.len(),
            removed = plan.removed.len(),
            served,
            since_file_event = %crate::logs::duration::GoDuration(since.elapsed()),
            "definitions reloaded"
        );
        for name in &plan.added {
            tracing::info!(definition = %name, "serving a new definition");
        }
        for name in &plan.changed {
            tracing::info!(definition = %name, "serving the changed definition; its watches end");
        }
        for name in &plan.removed {
            tracing::info!(definition = %name, "no longer serving the definition; its objects stay in the store");
        }
        if let Some(impacts) = &self.impacts {
            impacts.after_reload(replaced);
        }
    }

    /// Scans, plans and, when the served set changes (or on the first load), records the
    /// accepted names and builds the catalog (when given the one served now, whose unchanged
    /// parts it reuses), off the request path. `None` when nothing changed. Also gives each
    /// changed definition's form served until now and its form from now on (for what the change
    /// does to its objects).
    ///
    /// The store's records are read whole at the first load only; a reload uses the ages kept
    /// since and reads the storedVersions of the definitions whose files changed, so that its
    /// cost follows what changed rather than how many definitions are served.
    async fn plan_and_record(&self, serving: Option<Arc<Catalog>>) -> Option<(Plan, Option<Catalog>, Replaced)> {
        let (loaded, provisional, kept_ages) =
            self.state.lock().map(|s| (s.loaded, s.provisional, s.ages.clone())).unwrap_or((true, false, None));
        let (ages, records, unread) = if !loaded || provisional {
            // Every record at once (each a listing of the store).
            let (ages, stored_versions, accepted) = tokio::join!(
                super::accepted_names::ages(&self.store),
                stored_versions::read_all(&self.store),
                accepted::read_all(&self.store)
            );
            match stored_versions.and_then(|stored| Ok(Records { stored, accepted: accepted? })) {
                Ok(records) => (ages, Some(records), false),
                Err(e) if !loaded => {
                    // A store that cannot be read at start (a full disk keeps it closed): serve
                    // what the files say, so that requests are answered (with the store's error),
                    // and plan again once the records can be read.
                    tracing::error!(error = %e, "reading status.storedVersions failed; serving the definitions as the files say until it can be read");
                    (ages, Some(Records::default()), true)
                }
                Err(e) => {
                    // Without the record, the update rule cannot be applied: nothing changes.
                    tracing::error!(error = %e, "reading status.storedVersions failed; the definitions are not reloaded");
                    return None;
                }
            }
        } else {
            let ages = match kept_ages {
                Some(ages) => ages,
                None => super::accepted_names::ages(&self.store).await,
            };
            (ages, None, false)
        };
        let whole = records.is_some();
        // What was served until now, when it is planned again as a first load.
        let mut provisionally_served = None;
        if provisional && let Ok(mut state) = self.state.lock() {
            // Planned as a first load, with every check the records allow.
            provisionally_served = Some(std::mem::take(&mut state.served));
            state.loaded = false;
            state.provisional = false;
        }
        let (paths, state, store) = (self.paths.clone(), self.state.clone(), self.store.clone());
        let cluster = self.cluster.as_ref().map(|c| c.snapshot());
        let runtime = tokio::runtime::Handle::current();
        // A reload while serving yields the processor to requests (the first load has none).
        let planned = off_request_path(serving.is_some(), move || {
            let mut state = state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            // At the first load, a definition the store last accepted in the very form the file
            // gives is not checked again (kube-apiserver does not check its stored
            // CustomResourceDefinitions again when it starts).
            // Nor is a file parsed whose bytes are those the records say gave their forms.
            let scan = match &records {
                Some(records) => {
                    let recollection = Recollection::of(&records.accepted);
                    state.cache.scan_trusting(
                        &paths,
                        &|manifest, schemas| {
                            crate::definitions::accepted::vouches_for(&records.accepted, manifest, schemas)
                        },
                        &|file, sha256| recollection.documents(file, sha256),
                    )
                }
                None => state.cache.scan(&paths),
            };
            if whole {
                let counts = state.cache.last_counts();
                tracing::info!(
                    parsed = counts.parsed,
                    from_records = counts.recalled,
                    "definition files read (those unchanged since the store recorded what they gave are not parsed)"
                );
            }
            let (scan, conflicts) = match &cluster {
                Some(cluster) => state.cluster_cache.combine(scan, &cluster.definitions),
                None => (scan, Vec::new()),
            };
            state.cluster_synced = cluster.as_ref().is_some_and(|c| c.synced);
            // The update rule needs the stored versions of the definitions checked as updates,
            // and the last accepted form of those not served now.
            let records = match records {
                Some(all) => all,
                None => runtime.block_on(Records::read_for_reload(&store, &state.served, &scan))?,
            };
            // At start, what was served before the stop is what the store last accepted; so it
            // is for a definition served at the stop that comes later (the cluster's, listed
            // after the first load).
            if whole {
                state.served_at_stop = ages.keys().cloned().collect();
            }
            let at_stop = |name: &str| state.served_at_stop.contains(name);
            let at_start = accepted_forms(&scan, &records.accepted, &at_stop);
            let merged: HashMap<String, Served>;
            let previous = match (whole, at_start.is_empty()) {
                (true, _) => &at_start,
                (false, true) => &state.served,
                (false, false) => {
                    merged = state.served.clone().into_iter().chain(at_start.clone()).collect();
                    &merged
                }
            };
            let age = |name: &str| ages.get(name).copied();
            let stored = |name: &str| records.stored.get(name).cloned().unwrap_or_default();
            let accepted = |name: &str| records.accepted.get(name).map(|a| a.manifest.clone());
            let context = Context { age: &age, stored_versions: &stored, accepted: &accepted };
            let mut plan = reload::plan(previous, &scan, &context);
            plan.problems.extend(conflicts);
            if !whole {
                // Planned as served before, they were not: served now, they are new.
                newly_served(&mut plan, at_start.keys(), &state.served);
            }
            // Planned from its last accepted form once: from now on it is served or not.
            for name in plan.served.keys().chain(plan.problems.iter().filter_map(|p| p.name.as_ref())) {
                state.served_at_stop.remove(name);
            }
            let changed = !plan.is_unchanged() || !state.loaded;
            // Which file bytes gave each definition newly served, for its record.
            let newly = |name: &String| whole || plan.added.contains(name) || plan.changed.contains(name);
            let origins: HashMap<String, Origin> = plan
                .served
                .iter()
                .filter(|(name, _)| changed && newly(name))
                .filter_map(|(name, served)| Some((name.clone(), state.cache.origin_of(&served.file, &served.loaded)?)))
                .collect();
            let catalog = match serving {
                Some(serving) if changed => Some(Catalog::next(&serving, std::mem::take(&mut plan.registry))),
                _ => None,
            };
            Ok::<_, crate::store::Error>((plan, changed, catalog, ages, records, origins))
        })
        .await;
        let (mut plan, changed, catalog, ages, records, origins) = match planned {
            Ok(Ok(planned)) => planned,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "reading the definitions' records failed; the definitions are not reloaded");
                return None;
            }
            Err(e) => {
                tracing::error!(error = %e, "reloading the definitions failed; serving the previous ones");
                return None;
            }
        };
        self.report(&plan.problems, &plan.served);
        if !changed {
            if let Ok(mut state) = self.state.lock() {
                state.ages = Some(ages);
            }
            return None;
        }
        if let Err(e) = self.record(&plan, catalog.as_ref(), &records, whole, &origins).await {
            let first = !self.state.lock().map(|s| s.loaded).unwrap_or(true);
            self.status.record_failure(&e);
            if !first {
                tracing::error!(error = %e, "the definitions are not reloaded");
                return None;
            }
            // At start there is nothing else to serve; writes need the same store anyway.
            tracing::error!(error = %e, "serving the definitions all the same: there is nothing else to serve");
        }
        let registry = catalog.as_ref().map_or(&plan.registry, |c| &c.registry);
        let ages = super::accepted_names::record(&self.store, registry, &ages).await;
        let served = i64::try_from(registry.definitions().len()).unwrap_or(i64::MAX);
        crate::metrics::global().definitions_served.store(served, Ordering::Relaxed);
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let before = provisionally_served.as_ref().unwrap_or(&state.served);
        let replaced = plan
            .changed
            .iter()
            .filter_map(|name| Some((before.get(name)?.clone(), plan.served.get(name)?.clone())))
            .collect();
        // What the caller needs of the plan is the rest of it.
        state.served = std::mem::take(&mut plan.served);
        state.loaded = true;
        state.provisional = unread;
        state.ages = Some(ages);
        drop(state);
        Some((plan, catalog, replaced))
    }

    /// Before any object can be written through a definition newly served (at the first load
    /// every one, on a reload those it added or changed), its storage version is among the
    /// stored versions and its form is the store's last accepted one; if that cannot be
    /// recorded, the new set is not served (`Err` says why). A record is written again when the
    /// file bytes its form came from (`origins`) are newly known.
    async fn record(
        &self,
        plan: &Plan,
        catalog: Option<&Catalog>,
        records: &Records,
        whole: bool,
        origins: &HashMap<String, Origin>,
    ) -> Result<(), String> {
        let registry = catalog.map_or(&plan.registry, |c| &c.registry);
        let newly =
            |name: &str| whole || plan.added.iter().any(|n| n == name) || plan.changed.iter().any(|n| n == name);
        let unrecorded = |d: &&Arc<crate::definitions::Definition>| {
            let recorded = records.stored.get(&d.name).is_some_and(|versions| versions.contains(&d.storage.name));
            !recorded && newly(&d.name)
        };
        let serving = registry.definitions().iter().filter(unrecorded).map(|d| &**d);
        stored_versions::record_storage_versions(&self.store, serving)
            .await
            .map_err(|e| format!("recording status.storedVersions failed: {e}"))?;
        let unaccepted = plan.served.values().filter_map(|served| {
            let origin = origins.get(served.name());
            // Without an origin now, the record's (if any) still names bytes that gave this form.
            let same = records.accepted.get(served.name()).is_some_and(|a| {
                a.compact
                    && a.same_spec(&served.loaded)
                    && a.manifest.metadata == served.loaded.manifest.metadata
                    && (origin.is_none() || a.origin.as_ref() == origin)
            });
            (newly(served.name()) && !same).then_some((served, origin))
        });
        accepted::record(&self.store, unaccepted)
            .await
            .map_err(|e| format!("recording the accepted definitions failed: {e}"))
    }

    /// Logs the problems (each with its file) and keeps them for the status.
    fn report(&self, problems: &[Problem], served: &HashMap<String, Served>) {
        // The same problems as last time (a file event that changed nothing else) are not
        // logged again.
        let last = self.status.last();
        let repeated = last.time.is_some()
            && last.errors.len() == problems.len()
            && last.errors.iter().zip(problems).all(|(e, p)| e.message == p.to_string());
        let metrics = crate::metrics::global();
        for problem in problems.iter().filter(|_| !repeated) {
            metrics.definition_load_errors.fetch_add(1, Ordering::Relaxed);
            match problem.name.as_ref().and_then(|name| served.get(name)) {
                Some(kept) => tracing::error!(
                    served_from = %kept.loaded.definition.source,
                    "{problem}\n(the definition goes on being served as it was)"
                ),
                None => tracing::error!("{problem}"),
            }
        }
        self.status.record(problems, served);
    }

    /// Whether a set of definitions is served with the store's records (the first load serves
    /// the files without them when the store cannot be read, e.g. a full disk kept it closed).
    fn loaded(&self) -> bool {
        self.state.lock().map(|s| s.loaded && !s.provisional).unwrap_or(true)
    }

    /// Follows the files from now on: every burst of changes is one reload. Until a set is
    /// served with the store's records, the files are loaded again every second.
    pub fn follow(self, api: Arc<Api>) -> Result<(), watch::Error> {
        let (watcher, mut events) = DefinitionsWatcher::start(&self.paths)?;
        tokio::spawn(async move {
            // What changed between the first load and the start of the watch.
            self.reload(&api, std::time::Instant::now()).await;
            let mut retry = tokio::time::interval(std::time::Duration::from_secs(1));
            let cluster = self.cluster.clone();
            loop {
                let status = self.status.clone();
                let unloaded = !self.loaded();
                // Only the wait for a burst's first event is raced (receiving is cancel-safe);
                // the burst is then waited out whole.
                tokio::select! {
                    first = events.recv() => {
                        if first.is_none() {
                            break;
                        }
                        let Some(began) = watch::end_of_burst(&mut events).await else { break };
                        self.reload(&api, began).await;
                        // A directory swapped whole is a new directory: watch it.
                        watcher.rearm();
                    }
                    // A refused change may be acceptable now (a stored version it dropped left
                    // status.storedVersions): the files are read again.
                    () = status.asked_again() => self.reload(&api, std::time::Instant::now()).await,
                    // Until the store's records could be read, the files are read again.
                    _ = retry.tick(), if unloaded => self.reload(&api, std::time::Instant::now()).await,
                    // The cluster's definitions changed: after a moment's quiet (a chart
                    // upgrade changes several), read everything again.
                    () = cluster_changed(cluster.as_deref()) => {
                        let began = std::time::Instant::now();
                        tokio::time::sleep(watch::QUIET).await;
                        self.reload(&api, began).await;
                    }
                }
            }
        });
        Ok(())
    }
}

/// Makes the definitions `planned` as served before (their last accepted forms) that `served`
/// did not serve what they are: added when the plan serves them, never removed.
fn newly_served<'a>(plan: &mut Plan, planned: impl Iterator<Item = &'a String>, served: &HashMap<String, Served>) {
    for name in planned.filter(|name| !served.contains_key(*name)) {
        plan.changed.retain(|n| n != name);
        plan.removed.retain(|n| n != name);
        if plan.served.contains_key(name) && !plan.added.contains(name) {
            plan.added.push(name.clone());
        }
    }
    plan.added.sort();
}

/// Runs `work` on a thread of its own, at a lower priority when `background` (a reload while
/// serving; the first load has no requests to yield to). The threads it starts (CEL
/// compilation) inherit its priority.
async fn off_request_path<R: Send + 'static>(
    background: bool,
    work: impl FnOnce() -> R + Send + 'static,
) -> Result<R, String> {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("definitions-reload".into())
        .spawn(move || {
            if background {
                crate::core::priority::lower_this_thread();
            }
            // The receiver is gone only when the reload was abandoned.
            let _ = done.send(work());
        })
        .map_err(|e| format!("starting the reload's thread: {e}"))?;
    result.await.map_err(|_| "the reload's thread panicked".to_string())
}

/// Builds again, on a thread of its own below the requests' priority, the OpenAPI v2 documents
/// the previous catalog had built (the aggregator downloads them again when their entity tags
/// change): until each is built, its previous one is served.
fn warm_openapi(catalog: Arc<Catalog>) {
    let started = std::thread::Builder::new().name("openapi-warm".into()).spawn(move || {
        crate::core::priority::lower_this_thread();
        catalog.openapi.warm();
    });
    if let Err(e) = started {
        // Then the first request for each builds it.
        tracing::warn!(error = %e, "starting the OpenAPI warm-up thread failed");
    }
}

/// Waits for a change among the cluster's definitions (forever without any).
async fn cluster_changed(cluster: Option<&ClusterDefinitions>) {
    match cluster {
        Some(cluster) => cluster.changed().await,
        None => std::future::pending().await,
    }
}
