//! Moving a definition's objects from the main apiserver to this server, and back.
//!
//! A takeover (`crd-apiserver takeover CRD-NAME`, run by the server: it holds the store and
//! the main apiserver's credentials) goes: (a) freeze writes to the resource in the main
//! apiserver (`freeze`), (b) copy every object into our store at one resourceVersion, with our
//! revisions moved above the main apiserver's first (`copy`), (c) switch the APIServices to
//! our Service (`switch`), (d) lift the freeze and report. A failure before (c) lifts the
//! freeze and removes what was copied; a failure during (c) also puts the APIServices back.
//! Progress is recorded in our store (`record`): running the command again after a crash
//! resumes where it stopped. A handback reverses it: freeze, write our objects back into the
//! main apiserver, give the APIServices back to kube-aggregator, lift the freeze.
//!
//! Owns none of the request path: it reads the served definitions from `api`, writes the
//! store directly (objects keep their metadata, bypassing the write path as a restore does),
//! and calls the main apiserver through `cluster`.

pub mod auto;
pub mod cluster;
pub mod copy;
pub mod freeze;
mod handback;
pub mod json;
pub mod record;
pub mod switch;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::api::Api;
use crate::definitions::Definition;
use crate::store::{Revision, Store, key};
use cluster::{Cluster, object_path};
use record::{Phase, Record};
use switch::{Pointing, Target};

/// How far above the main apiserver's revision our revisions start after a takeover: the
/// main apiserver keeps handing out revisions (other resources, bookmarks) until the switch,
/// and none of them may reach ours. Kubernetes advises as much for etcd's `--bump-revision`.
pub const REVISION_MARGIN: Revision = 1_000_000_000;

/// Why a takeover or handback stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A precondition failed; nothing was changed.
    #[error("{0}")]
    Refused(String),
    /// The main apiserver refused a call for want of a permission.
    #[error("{0} (the server's service account needs this permission: see the chart's takeover.rbac value)")]
    Forbidden(String),
    #[error("{0}")]
    Cluster(String),
    #[error("storage: {0}")]
    Store(String),
}

/// What a takeover or handback did (or, dry, would do).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub name: String,
    pub dry_run: bool,
    pub objects: u64,
    pub bytes: u64,
    /// Seconds writes were refused (freeze to lift); 0 for a dry run.
    pub freeze_seconds: f64,
    /// Objects moved per second while frozen.
    pub objects_per_second: f64,
    pub main_revision: Revision,
    pub api_services: Vec<String>,
    /// Where the old copies stay in the main apiserver's etcd (a takeover), or the objects
    /// whose uid could not be kept (a handback).
    pub notes: Vec<String>,
}

/// Takes definitions over, one run per definition at a time.
pub struct Takeovers {
    api: Arc<Api>,
    cluster: Option<Cluster>,
    target: Option<Target>,
    running: Mutex<HashSet<String>>,
    /// How long each wait (freeze in effect, APIServices reached) lasts at most.
    pub wait: Duration,
}

/// Progress lines for whoever asked.
pub type Progress = tokio::sync::mpsc::Sender<String>;

async fn say(progress: &Progress, line: String) {
    tracing::info!(target: "takeover", "{line}");
    let _ = progress.send(line).await;
}

/// How often every replica reads the takeover records again for their floors: a takeover
/// made by another replica (etcd) expires the main apiserver's resourceVersions here too.
pub const FLOOR_POLL: Duration = Duration::from_secs(1);

/// Sets the floors of every resource taken over, from the records; clears those of `held`
/// (the prefixes set by the previous call) whose record is gone or handed back. Returns the
/// prefixes set.
pub async fn load_floors(
    api: &Api,
    held: &std::collections::HashSet<String>,
) -> Result<std::collections::HashSet<String>, Error> {
    let mut set = std::collections::HashSet::new();
    for (_, record) in record::read_all(api.store()).await? {
        if record.phase != Phase::HandedBack {
            let prefix = key::resource_prefix(&record.group, &record.plural);
            api.set_floor(&prefix, Some(record.floor));
            set.insert(prefix);
        }
    }
    for gone in held.difference(&set) {
        api.set_floor(gone, None);
    }
    Ok(set)
}

/// Follows the takeover records for as long as the server runs (every `FLOOR_POLL`): the
/// floors are set at start and kept as other replicas take resources over or hand them back.
pub async fn follow_floors(api: std::sync::Arc<Api>) {
    let mut held = std::collections::HashSet::new();
    let mut failing = false;
    loop {
        match load_floors(&api, &held).await {
            Ok(set) => {
                held = set;
                failing = false;
            }
            Err(e) if !failing => {
                tracing::warn!(error = %e, "reading the takeover records failed; trying again every second");
                failing = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(FLOOR_POLL).await;
    }
}

fn elapsed_since(frozen_at: &str) -> f64 {
    frozen_at
        .parse::<jiff::Timestamp>()
        .map(|t| (jiff::Timestamp::now().as_millisecond() - t.as_millisecond()) as f64 / 1000.0)
        .unwrap_or(0.0)
}

/// Releases a definition's run when dropped.
struct Running<'a>(&'a Mutex<HashSet<String>>, String);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.1);
    }
}

impl Takeovers {
    pub fn new(api: Arc<Api>, cluster: Option<::kube::Client>, target: Option<Target>) -> Takeovers {
        Takeovers {
            api,
            cluster: cluster.map(Cluster::new),
            target,
            running: Mutex::new(HashSet::new()),
            wait: Duration::from_secs(60),
        }
    }

    fn claim(&self, name: &str) -> Result<Running<'_>, Error> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if !running.insert(name.to_string()) {
            return Err(Error::Refused(format!("a takeover or handback of {name} is already running")));
        }
        Ok(Running(&self.running, name.to_string()))
    }

    fn cluster(&self) -> Result<&Cluster, Error> {
        self.cluster.as_ref().ok_or_else(|| {
            Error::Refused("this server has no client of the main apiserver (--kubeconfig, or in a cluster)".into())
        })
    }

    fn target(&self) -> Result<&Target, Error> {
        self.target.as_ref().ok_or_else(|| {
            Error::Refused(
                "--takeover-ca-file is not set: the APIServices need the CA bundle of this server's certificate".into(),
            )
        })
    }

    /// The definition named `name` that we serve, checked against the cluster's CRD.
    async fn definition(&self, name: &str) -> Result<Arc<Definition>, Error> {
        let catalog = self.api.catalog();
        let ours = catalog.registry.definitions().iter().find(|d| d.name == name && !d.read_only).cloned();
        let Some(ours) = ours else {
            return Err(Error::Refused(format!(
                "this server does not serve {name}: add its manifest to --definitions (a definition it refused is \
                 named in its log and in serveddefinitions)"
            )));
        };
        let crd_path = object_path("apiextensions.k8s.io", "v1", None, "customresourcedefinitions", name);
        let crd = self.cluster()?.get("reading the CustomResourceDefinition", &crd_path).await?.ok_or_else(|| {
            Error::Refused(format!("the main apiserver has no CustomResourceDefinition {name}: nothing to take over"))
        })?;
        let spec = &json::at(&crd, "/spec");
        let storage = json::at(spec, "/versions")
            .as_array()
            .and_then(|vs| vs.iter().find(|v| json::at(v, "/storage") == true))
            .and_then(|v| json::at(v, "/name").as_str())
            .unwrap_or_default();
        let scope_matches = (json::at(spec, "/scope") == "Namespaced") == ours.namespaced();
        if json::at(spec, "/group") != ours.group.as_str()
            || json::at(spec, "/names/plural") != ours.plural.as_str()
            || !scope_matches
        {
            return Err(Error::Refused(format!(
                "the cluster's {name} and ours differ in group, plural or scope: serve the same definition first"
            )));
        }
        if storage != ours.storage.name {
            return Err(Error::Refused(format!(
                "the cluster stores {name} in version {storage:?}, we in {:?}: serve the same storage version first",
                ours.storage.name
            )));
        }
        Ok(ours)
    }

    /// Takes `name` over (or reports what would move, dry).
    pub async fn take_over(&self, name: &str, dry_run: bool, progress: &Progress) -> Result<Report, Error> {
        let _running = self.claim(name)?;
        let cluster = self.cluster()?;
        let definition = self.definition(name).await?;
        let target = self.target()?;
        let services = switch::current(cluster, &definition, target).await?;
        for (service, _, pointing) in &services {
            if let Pointing::Elsewhere(other) = pointing {
                return Err(Error::Refused(format!(
                    "APIService {service} already sends {}.{} to the Service {other}: refusing to take it over",
                    definition.plural, definition.group
                )));
            }
        }
        let api_services: Vec<String> = services.iter().map(|(n, ..)| n.clone()).collect();
        let store = self.api.store();
        let existing = record::read(store, name).await?.map(|(r, _)| r);
        if dry_run {
            let first = copy::first_page(cluster, &definition).await?;
            let main_revision = first.revision;
            let counted = copy::count(cluster, &definition, first).await?;
            return Ok(Report {
                name: name.to_string(),
                dry_run: true,
                objects: counted.objects,
                bytes: counted.bytes,
                freeze_seconds: 0.0,
                objects_per_second: 0.0,
                main_revision,
                api_services,
                notes: match existing {
                    Some(r) => vec![format!("a takeover record exists in phase {:?}", r.phase)],
                    None => Vec::new(),
                },
            });
        }
        let all_ours = services.iter().all(|(_, _, p)| matches!(p, Pointing::Us));
        let mut record = match existing {
            Some(r) if r.phase == Phase::Done && all_ours => {
                return Err(Error::Refused(format!("{name} is already taken over")));
            }
            Some(r) if r.phase == Phase::Done => {
                return Err(Error::Refused(format!(
                    "{name} was taken over, but its APIServices {} no longer all point here: hand it back \
                     (crd-apiserver handback) before taking it over again",
                    api_services.join(", ")
                )));
            }
            Some(r) if r.phase != Phase::HandedBack => {
                say(progress, format!("{name}: resuming a takeover left in phase {:?}", r.phase)).await;
                Some(r)
            }
            _ => None,
        };
        if record.is_none() && copy::held(store, &definition).await? > 0 {
            return Err(Error::Refused(format!(
                "this server already stores objects of {}.{}: a takeover would mix them with the cluster's (delete \
                 them first)",
                definition.plural, definition.group
            )));
        }
        let started = Instant::now();
        // (a) Freeze.
        say(progress, format!("{name}: freezing writes in the main apiserver")).await;
        let frozen = async {
            freeze::freeze(cluster, &definition).await?;
            if record.as_ref().is_none_or(|r| r.phase == Phase::Copying) {
                freeze::wait_in_effect(cluster, &definition, &definition.storage.name, self.wait).await?;
            }
            Ok::<(), Error>(())
        };
        if let Err(e) = frozen.await {
            self.roll_back_copy(cluster, &definition, progress).await;
            return Err(e);
        }
        let frozen_at = record.as_ref().map_or_else(|| jiff::Timestamp::now().to_string(), |r| r.frozen_at.clone());
        // (b) Copy.
        if record.as_ref().is_none_or(|r| r.phase == Phase::Copying) {
            let copying = Instant::now();
            let copied = self.copy(cluster, &definition, &frozen_at, &services, progress).await;
            if copied.is_ok() && matches!(store, crate::store::Backend::Etcd(_)) {
                // Other replicas read the new floor within `FLOOR_POLL`: none may serve the
                // resource without it once the APIServices point here.
                tokio::time::sleep_until((copying + 2 * FLOOR_POLL).into()).await;
            }
            match copied {
                Ok(r) => record = Some(r),
                Err(e) => {
                    self.roll_back_copy(cluster, &definition, progress).await;
                    return Err(e);
                }
            }
        }
        let Some(mut record) = record else { return Err(Error::Store("no takeover record".into())) };
        // (c) Switch.
        if record.phase == Phase::Copied {
            say(progress, format!("{name}: switching the APIServices {} to this server", api_services.join(", ")))
                .await;
            let switched = async {
                switch::switch(cluster, &definition, target).await?;
                switch::wait_reached(cluster, &definition, record.floor, true, self.wait).await
            };
            if let Err(e) = switched.await {
                say(progress, format!("{name}: the switch failed ({e}); putting the APIServices back")).await;
                let originals = originals(&record);
                if let Err(e) = switch::roll_back(cluster, &originals).await {
                    say(progress, format!("{name}: rolling the APIServices back failed: {e}")).await;
                    return Err(e);
                }
                self.roll_back_copy(cluster, &definition, progress).await;
                return Err(e);
            }
            record.phase = Phase::Switched;
            record::write(store, name, &record).await?;
        }
        // (d) Lift.
        say(progress, format!("{name}: lifting the freeze")).await;
        freeze::lift(cluster, &definition).await?;
        record.phase = Phase::Done;
        record::write(store, name, &record).await?;
        let freeze_seconds = elapsed_since(&record.frozen_at).max(started.elapsed().as_secs_f64());
        Ok(Report {
            name: name.to_string(),
            dry_run: false,
            objects: record.objects,
            bytes: record.bytes,
            freeze_seconds,
            objects_per_second: record.objects as f64 / freeze_seconds.max(0.001),
            main_revision: record.main_revision,
            api_services,
            notes: vec![format!(
                "the old copies ({} bytes) stay in the main apiserver's etcd under /registry/{}/{}/ (see the README \
                 to remove them)",
                record.bytes, definition.group, definition.plural
            )],
        })
    }

    /// Step (b): our revisions moved above the main apiserver's, then every object copied.
    async fn copy(
        &self,
        cluster: &Cluster,
        definition: &Definition,
        frozen_at: &str,
        services: &[(String, Option<serde_json::Value>, Pointing)],
        progress: &Progress,
    ) -> Result<Record, Error> {
        let store = self.api.store();
        let name = &definition.name;
        copy::clear(store, definition).await?;
        let first = copy::first_page(cluster, definition).await?;
        // Far above both (sled moves its counter, etcd the offset over etcd's revision), so
        // that our history goes on above the main etcd's for a long while.
        let target = store.current_revision().max(first.revision).saturating_add(REVISION_MARGIN);
        let floor = store.advance_revision(target).await.map_err(|e| Error::Store(e.to_string()))?;
        let mut record = Record {
            phase: Phase::Copying,
            group: definition.group.clone(),
            plural: definition.plural.clone(),
            main_revision: first.revision,
            floor,
            objects: 0,
            bytes: 0,
            frozen_at: frozen_at.to_string(),
            api_services: services.iter().map(|(n, o, _)| serde_json::json!({"name": n, "original": o})).collect(),
        };
        record::write(store, name, &record).await?;
        self.api.set_floor(&key::resource_prefix(&definition.group, &definition.plural), Some(floor));
        say(
            progress,
            format!("{name}: copying the objects at the main apiserver's resourceVersion {}", first.revision),
        )
        .await;
        let copied = copy::copy(cluster, store, definition, first).await?;
        record.objects = copied.objects;
        record.bytes = copied.bytes;
        record.phase = Phase::Copied;
        record::write(store, name, &record).await?;
        say(progress, format!("{name}: copied {} objects ({} bytes)", copied.objects, copied.bytes)).await;
        Ok(record)
    }

    /// Leaves the cluster and our store as they were before the takeover: our copies and
    /// record removed, the freeze lifted. Failures are reported, not returned (the error that
    /// caused the rollback is what the caller sees).
    async fn roll_back_copy(&self, cluster: &Cluster, definition: &Definition, progress: &Progress) {
        let name = &definition.name;
        say(progress, format!("{name}: rolling back: removing the copies and lifting the freeze")).await;
        let store = self.api.store();
        if let Err(e) = copy::clear(store, definition).await {
            say(progress, format!("{name}: removing our copies failed: {e}")).await;
            return;
        }
        self.api.set_floor(&key::resource_prefix(&definition.group, &definition.plural), None);
        if let Err(e) = record::remove(store, name).await {
            say(progress, format!("{name}: removing the takeover record failed: {e}")).await;
        }
        if let Err(e) = freeze::lift(cluster, definition).await {
            say(
                progress,
                format!(
                    "{name}: lifting the freeze failed: {e}; delete the policy {} by hand",
                    freeze::policy_name(name)
                ),
            )
            .await;
        }
    }

    /// Hands `name` back to the main apiserver.
    pub async fn hand_back(&self, name: &str, progress: &Progress) -> Result<Report, Error> {
        let _running = self.claim(name)?;
        let cluster = self.cluster()?;
        let definition = self.definition(name).await?;
        handback::run(self.api.store(), cluster, &definition, self.wait, progress).await
    }
}

/// The APIServices as a record keeps them before the switch.
fn originals(record: &Record) -> Vec<(String, Option<serde_json::Value>)> {
    record
        .api_services
        .iter()
        .filter_map(|s| {
            let name = json::at(s, "/name").as_str()?.to_string();
            let original = Some(json::at(s, "/original").clone()).filter(|o| !o.is_null());
            Some((name, original))
        })
        .collect()
}
