//! The lifecycle controller: a background task that follows the served definitions (the API's
//! catalog, swapped whole on every reload) and, for each, records its storage version in
//! storedVersions, runs storage-version migrations one definition at a time, and keeps its
//! `serveddefinitions` status object current (with the last reload's error for it, from
//! `definitions::reload_status`). Reloads are noticed within a second (or at once through
//! [`Controller::wake`]). When a migration takes versions out of storedVersions it asks for a
//! reload, so that a file refused for dropping them is served as soon as that is allowed.
//! Replicas on one etcd elect one (`store::leadership`) to migrate and write the status
//! objects; every replica records storage versions.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};

use super::migrate::{self, Stop, progress::Progress};
use super::{status, stored_versions};
use crate::api::{Api, Catalog};
use crate::definitions::Definition;
use crate::definitions::reload_status::ReloadStatus;
use crate::store::Backend;

/// How often the catalog is looked at for a reload nobody announced.
const POLL: Duration = Duration::from_secs(1);
/// How long a failed migration waits before it is tried again.
const RETRY: Duration = Duration::from_secs(10);
/// How often every status object is refreshed (object counts change with every create).
const REFRESH: Duration = Duration::from_secs(60);
/// How often a running migration's progress reaches the log and the status object.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// The running controller; shared with whoever announces reloads and their errors.
pub struct Controller {
    api: Arc<Api>,
    options: migrate::Options,
    wake: Notify,
    /// What the last reload of the files said (`lastReloadError`).
    reloads: Arc<ReloadStatus>,
    /// The progress of the migration under way, for the status writer.
    progress: watch::Sender<Option<(Arc<Definition>, Progress)>>,
}

impl Controller {
    /// Starts the controller on the current runtime.
    pub fn spawn(api: Arc<Api>, options: migrate::Options, reloads: Arc<ReloadStatus>) -> Arc<Controller> {
        let (progress, updates) = watch::channel(None);
        let controller = Arc::new(Controller { api, options, wake: Notify::new(), reloads, progress });
        tokio::spawn(controller.clone().run());
        tokio::spawn(controller.clone().write_progress(updates));
        tokio::spawn(controller.clone().follow_reloads());
        controller
    }

    /// Looks at the served definitions now (after a reload) rather than within a second.
    pub fn wake(&self) {
        self.wake.notify_one();
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
            if seen.as_ref().is_none_or(|s| !Arc::ptr_eq(s, &catalog)) || elected || refreshed.elapsed() >= REFRESH {
                refreshed = Instant::now();
                self.catalog_changed(&catalog, leading).await;
                pending = served(&catalog).map(|d| d.name.clone()).collect();
                seen = Some(catalog.clone());
            }
            if !leading {
                tokio::select! {
                    () = self.wake.notified() => {}
                    () = tokio::time::sleep(POLL) => {}
                }
                continue;
            }
            let mut left = Vec::new();
            for name in std::mem::take(&mut pending) {
                if retry_at.get(&name).is_some_and(|at| Instant::now() < *at) {
                    left.push(name);
                    continue;
                }
                let Some(definition) = served(&catalog).find(|d| d.name == name).cloned() else { continue };
                match self.settle(&definition).await {
                    Ok(true) => {}
                    Ok(false) => left.push(name),
                    Err(Stop::Superseded) => break,
                    Err(Stop::Failed(e)) => {
                        tracing::error!(definition = %name, error = %e, "storage-version migration failed; it is tried again in {}s", RETRY.as_secs());
                        retry_at.insert(name.clone(), Instant::now() + RETRY);
                        left.push(name);
                    }
                }
            }
            pending = left;
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// Records the storage versions of a newly served set and, on the leader, refreshes every
    /// status object (also done every `REFRESH`, for the object counts).
    async fn catalog_changed(&self, catalog: &Catalog, leading: bool) {
        let definitions: Vec<&Definition> = served(catalog).map(|d| &**d).collect();
        if let Err(e) = stored_versions::record_storage_versions(self.store(), definitions.iter().copied()).await {
            tracing::error!(error = %e, "recording the definitions' storage versions in status.storedVersions failed");
        }
        if !leading {
            return;
        }
        for definition in &definitions {
            self.write_status(definition, None).await;
        }
        let names: std::collections::HashSet<&str> = definitions.iter().map(|d| d.name.as_str()).collect();
        if let Err(e) = status::remove_others(self.store(), &|name| names.contains(name)).await {
            tracing::warn!(error = %e, "removing the status of definitions no longer served failed");
        }
    }

    /// Migrates `definition` if it needs it. True when nothing is left to do for it.
    async fn settle(&self, definition: &Arc<Definition>) -> Result<bool, Stop> {
        if !migrate::needs_pass(self.store(), definition).await? {
            return Ok(true);
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
                self.progress.send_replace(Some((definition.clone(), progress.clone())));
            }
        };
        let progress = migrate::migrate(self.store(), definition, self.options, &still_current, &mut report).await?;
        self.write_status(definition, Some(&progress)).await;
        // Versions left storedVersions: a file that dropped them, refused until now, may be
        // served as it is.
        if progress.state == migrate::progress::State::Done && stored.iter().any(|v| *v != definition.storage.name) {
            self.reloads.ask_again();
        }
        Ok(progress.state == migrate::progress::State::Done)
    }

    /// On the leader, refreshes every status object after a reload that did not change the
    /// served set (a refused change shows as `lastReloadError`, and goes when fixed), also while
    /// a migration keeps the main loop busy. On every replica, while the last reload refused
    /// something, asks for a reload whenever storedVersions change (the leader's migration may
    /// have allowed what a follower's files ask).
    async fn follow_reloads(self: Arc<Self>) {
        let mut seen = self.reloads.last();
        let mut stored: Option<HashMap<String, Vec<String>>> = None;
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
            if Arc::ptr_eq(&seen, &last) {
                continue;
            }
            seen = last;
            if !self.store().leadership().is_leader() {
                continue;
            }
            let catalog = self.api.catalog();
            for definition in served(&catalog) {
                self.write_status(definition, None).await;
            }
        }
    }

    /// Writes the status of the migration under way whenever it reports.
    async fn write_progress(self: Arc<Self>, mut updates: watch::Receiver<Option<(Arc<Definition>, Progress)>>) {
        while updates.changed().await.is_ok() {
            let update = updates.borrow_and_update().clone();
            if let Some((definition, progress)) = update {
                self.write_status(&definition, Some(&progress)).await;
            }
        }
    }

    /// Writes the status object of `definition` from the store's records (or `progress`).
    async fn write_status(&self, definition: &Definition, progress: Option<&Progress>) {
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
        let reload_error = self.reloads.last_error(&definition.name);
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
        };
        if let Err(e) = status::write(store, definition, &facts).await {
            tracing::warn!(definition = %definition.name, error = %e, "writing the definition's status failed");
        }
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

/// The definitions of the files (not the server's own read-only ones).
fn served(catalog: &Catalog) -> impl Iterator<Item = &Arc<Definition>> {
    catalog.registry.definitions().iter().filter(|d| !d.read_only)
}
