//! The field manager of one endpoint (k8s.io/apimachinery's managedfields `FieldManager` and
//! its chain of managers), for updates (create, update, patch: never fails, keeps the old
//! managedFields when ownership cannot be computed) and for applies:
//!
//! 1. version check: the configuration must be the endpoint's apiVersion and kind;
//! 2. last-applied: `kubectl`'s server-side apply may take over fields it applied
//!    client-side (the `kubectl.kubernetes.io/last-applied-configuration` annotation) and
//!    keeps that annotation in step;
//! 3. objects without managedFields start tracking on create; the first apply to an object
//!    without managedFields records its fields as `before-first-apply`;
//! 4. at most ten update managers; older ones merge into `ancient-changes`;
//! 5. managers are identified by name, operation, subresource and (updates) apiVersion;
//! 6. changed managers get the current time;
//! 7. apiVersion, kind and the server-owned metadata are never owned.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use jiff::Timestamp;
use serde_json::Value;

use super::managed::{Entry, Managed, Manager, Operation, VersionedSet, entry_value, is_reset};
use super::path::{Path, PathElement};
use super::set::Set;
use super::updater::{Error, Updater, Versions};
use super::{last_applied, typed};

/// At most this many update managers are kept (`DefaultMaxUpdateManagers`).
const MAX_UPDATE_MANAGERS: usize = 10;
/// Placeholder key of the running update while its fields are computed.
const CURRENT_OPERATION: &str = "current-operation";

/// What an endpoint's writes are tracked as.
pub struct FieldManager<'a> {
    pub versions: &'a dyn Versions,
    /// The endpoint's apiVersion (`group/version`) and kind.
    pub api_version: &'a str,
    pub kind: &'a str,
    /// `""`, `status` or `scale`.
    pub subresource: &'a str,
    /// Fields this endpoint resets; see [`Updater::ignored`].
    pub ignored: &'a Set,
}

fn managed_fields(object: &Value) -> Option<&Value> {
    object.get("metadata").and_then(|m| m.get("managedFields")).filter(|v| !v.is_null())
}

fn set_managed_fields(object: &mut Value, managed: &Managed) {
    put_entries(object, managed.encode());
}

/// Sets the managedFields entries of `object`; none removes them.
fn put_entries(object: &mut Value, entries: Vec<Value>) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
}

/// Removes the managedFields a client sent with `object`.
fn take_managed_fields(object: &mut Value) -> Option<Value> {
    object.get_mut("metadata").and_then(Value::as_object_mut).and_then(|m| m.remove("managedFields"))
}

fn decode(entries: Option<&Value>) -> Result<Managed, String> {
    match entries {
        None => Ok(Managed::default()),
        Some(Value::Array(items)) => Managed::decode(items).map_err(|e| e.0),
        Some(_) => Err("managedFields must be a list".to_string()),
    }
}

/// The paths apiVersion, kind and server-owned metadata, which no manager owns.
static STRIPPED: LazyLock<Set> = LazyLock::new(|| {
    let meta = |field: &str| vec![PathElement::field("metadata"), PathElement::field(field)];
    let mut paths: Vec<Path> = vec![
        vec![PathElement::field("apiVersion")],
        vec![PathElement::field("kind")],
        vec![PathElement::field("metadata")],
    ];
    for field in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        paths.push(meta(field));
    }
    Set::of(&paths)
});

fn strip(managed: &mut Managed, key: &str) {
    if let Some(entry) = managed.entries.get_mut(key) {
        entry.fields.set.difference_with(&STRIPPED);
        if entry.fields.set.is_empty() {
            managed.entries.remove(key);
        }
    }
}

fn uid(object: &Value) -> &str {
    object.get("metadata").and_then(|m| m.get("uid")).and_then(Value::as_str).unwrap_or_default()
}

/// `namespace/name; group/version, Kind=kind`, as errors name an object.
fn describe(object: &Value) -> String {
    let meta =
        |f: &str| object.get("metadata").and_then(|m| m.get(f)).and_then(Value::as_str).unwrap_or_default().to_string();
    format!("{}/{}; {}", meta("namespace"), meta("name"), gvk_of(object))
}

fn gvk_of(object: &Value) -> String {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    gvk(api_version, kind)
}

/// A GroupVersionKind as Go prints it: `group/version, Kind=kind`.
fn gvk(api_version: &str, kind: &str) -> String {
    let (group, version) = match api_version.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    format!("{group}/{version}, Kind={kind}")
}

impl FieldManager<'_> {
    fn updater(&self) -> Updater<'_> {
        Updater { versions: self.versions, version: self.api_version, ignored: self.ignored }
    }

    fn schema(&self) -> Result<&super::schema::Schema, Error> {
        self.versions
            .schema(self.api_version)
            .ok_or_else(|| Error::Internal(format!("no schema for {}", self.api_version)))
    }

    /// Records the write of `new` over `live` (an empty object for creates) by `manager`
    /// in `new`'s managedFields. Client-sent managedFields are used when valid (an empty
    /// list clears them); subresources always start from the live object's.
    pub fn update(&self, live: &Value, new: &mut Value, manager: &str, now: Timestamp) {
        let requested = take_managed_fields(new);
        let managed = self.starting_point(live, requested.as_ref());
        if managed.is_empty()
            && self.is_placeholder(live)
            && let Some(entries) = self.created(new, manager, now)
        {
            put_entries(new, entries);
            return;
        }
        self.update_from(live, new, managed, manager, now);
    }

    /// Records the create of `new` by `manager`: [`FieldManager::update`] over the
    /// placeholder (apiVersion and kind only), which is built only when the general path
    /// computes the entries.
    pub fn create(&self, new: &mut Value, manager: &str, now: Timestamp) {
        let requested = take_managed_fields(new);
        // The placeholder has no managedFields: the same starting point as no object.
        let managed = self.starting_point(&Value::Null, requested.as_ref());
        if managed.is_empty()
            && let Some(entries) = self.created(new, manager, now)
        {
            put_entries(new, entries);
            return;
        }
        let placeholder = serde_json::json!({"apiVersion": self.api_version, "kind": self.kind});
        self.update_from(&placeholder, new, managed, manager, now);
    }

    /// Whether `live` is the placeholder of an object that does not exist yet.
    fn is_placeholder(&self, live: &Value) -> bool {
        live.as_object().is_some_and(|m| {
            m.len() == 2
                && m.get("apiVersion").and_then(Value::as_str) == Some(self.api_version)
                && m.get("kind").and_then(Value::as_str) == Some(self.kind)
        })
    }

    /// The managedFields of a create (no managers yet) from one walk of `new`
    /// ([`typed::created_fields`]): the entries the general path computes, which it is left
    /// to when this returns `None`.
    pub(super) fn created(&self, new: &Value, manager: &str, now: Timestamp) -> Option<Vec<Value>> {
        let schema = self.versions.schema(self.api_version)?;
        // Validating `new` also validates the placeholder: the same type, a subset of the
        // same fields.
        let type_meta = [("apiVersion", self.api_version), ("kind", self.kind)];
        let fields = typed::created_fields(schema, schema.root(), &type_meta, new, self.ignored, &STRIPPED).ok()?;
        if fields.is_empty() {
            return Some(Vec::new());
        }
        let name = if manager.is_empty() { "unknown" } else { manager };
        let fields = Value::Object(fields);
        Some(vec![entry_value((name, self.subresource), Operation::Update, self.api_version, fields, Some(now))])
    }

    /// [`FieldManager::update`] from the managers `managed`, through the general compare.
    pub(super) fn update_from(&self, live: &Value, new: &mut Value, managed: Managed, manager: &str, now: Timestamp) {
        match self.track_update(live, new, managed, manager, now) {
            Ok(managed) => set_managed_fields(new, &managed),
            Err(_) => {
                // As UpdateNoErrors: a write never fails for its bookkeeping.
                if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                    match managed_fields(live) {
                        Some(entries) => meta.insert("managedFields".into(), entries.clone()),
                        None => meta.remove("managedFields"),
                    };
                }
            }
        }
    }

    /// The managers a write starts from (`decodeLiveOrNew`).
    fn starting_point(&self, live: &Value, requested: Option<&Value>) -> Managed {
        let from_live = || decode(managed_fields(live)).unwrap_or_default();
        if !self.subresource.is_empty() {
            return from_live();
        }
        match requested {
            Some(Value::Array(items)) if is_reset(items) => Managed::default(),
            Some(Value::Array(items)) => match Managed::decode(items) {
                Ok(managed) if !managed.is_empty() => managed,
                _ => from_live(),
            },
            _ => from_live(),
        }
    }

    fn track_update(
        &self,
        live: &Value,
        new: &Value,
        mut managed: Managed,
        manager: &str,
        now: Timestamp,
    ) -> Result<Managed, Error> {
        // Objects that lost their managedFields are not tracked again until the next apply.
        if managed.is_empty() && !uid(live).is_empty() {
            return Ok(managed);
        }
        self.update_managers(live, new, &mut managed, manager, now)?;
        Ok(managed)
    }

    /// The update path below the skip: build the identifier, compute, strip, time, cap.
    fn update_managers(
        &self,
        live: &Value,
        new: &Value,
        managed: &mut Managed,
        manager: &str,
        now: Timestamp,
    ) -> Result<(), Error> {
        let name = if manager.is_empty() { "unknown" } else { manager };
        let id = Manager::new(name, Operation::Update, self.api_version, self.subresource);
        let key = id.identifier();
        let schema = self.schema()?;
        typed::validate(schema, schema.root(), new, true).map_err(|e| {
            Error::Internal(format!("failed to convert new object ({}) to smd typed: {e}", describe(new)))
        })?;
        typed::validate(schema, schema.root(), live, true).map_err(|e| {
            Error::Internal(format!("failed to convert live object ({}) to smd typed: {e}", describe(live)))
        })?;
        self.updater().update(live, new, managed, CURRENT_OPERATION, &id)?;
        strip(managed, CURRENT_OPERATION);
        if let Some(current) = managed.entries.remove(CURRENT_OPERATION) {
            let mut set = current.fields.set;
            if let Some(previous) = managed.entries.get(&key) {
                set.union_with(&previous.fields.set);
            }
            let fields = VersionedSet { set, api_version: current.fields.api_version, applied: false };
            managed.entries.insert(key, Entry { manager: id, fields, time: Some(now) });
        }
        cap_update_managers(managed);
        Ok(())
    }

    /// Applies `config` to `live` (an object holding only apiVersion and kind when the object
    /// does not exist yet) for `manager`: the new object with its managedFields.
    pub fn apply(
        &self,
        live: &Value,
        config: &Value,
        manager: &str,
        force: bool,
        now: Timestamp,
    ) -> Result<Value, Error> {
        let managed = decode(managed_fields(live))
            .map_err(|e| Error::Internal(format!("failed to decode managed fields: {e}")))?;
        if gvk_of(config) != gvk(self.api_version, self.kind) {
            return Err(Error::BadRequest(format!("invalid object type: {}", gvk_of(config))));
        }
        let mut object = self.apply_with_last_applied(live, config, managed, manager, force, now)?;
        if manager == "kubectl" && last_applied::has(&object.0) {
            last_applied::set(&mut object.0, &last_applied::build(config));
        }
        set_managed_fields(&mut object.0, &object.1);
        Ok(object.0)
    }

    /// Applies; for `kubectl`, conflicts over fields it set by client-side apply (and that
    /// still hold those values) are forced.
    fn apply_with_last_applied(
        &self,
        live: &Value,
        config: &Value,
        managed: Managed,
        manager: &str,
        force: bool,
        now: Timestamp,
    ) -> Result<(Value, Managed), Error> {
        let first = self.apply_tracked(live, config, managed, manager, force, now);
        let Err(Error::Conflicts(conflicts)) = &first else {
            return first;
        };
        if manager != "kubectl" {
            return first;
        }
        // Rare: read the live managers again rather than copy them for every apply.
        let Ok(managed) = decode(managed_fields(live)) else {
            return first;
        };
        let Some(allowed) = self.schema().ok().and_then(|s| last_applied::allowed_conflicts(s, self.api_version, live))
        else {
            return first;
        };
        let remaining: Vec<_> = conflicts.0.iter().filter(|c| !allowed.has(&c.path)).cloned().collect();
        if !remaining.is_empty() {
            return Err(Error::Conflicts(super::conflict::Conflicts(remaining)));
        }
        self.apply_tracked(live, config, managed, manager, true, now)
    }

    fn apply_tracked(
        &self,
        live: &Value,
        config: &Value,
        mut managed: Managed,
        manager: &str,
        force: bool,
        now: Timestamp,
    ) -> Result<(Value, Managed), Error> {
        if managed.is_empty() {
            let empty = serde_json::json!({"apiVersion": self.api_version, "kind": self.kind});
            self.update_managers(&empty, live, &mut managed, "before-first-apply", now)
                .map_err(|e| Error::Internal(format!("failed to create manager for existing fields: {e}")))?;
        }
        let id = Manager::new(manager, Operation::Apply, self.api_version, self.subresource);
        let key = id.identifier();
        if managed_fields(config).is_some() {
            return Err(Error::BadRequest("metadata.managedFields must be nil".to_string()));
        }
        let schema = self.schema()?;
        typed::validate(schema, schema.root(), config, false).map_err(|e| {
            // A plain error in Kubernetes (`structuredmerge.go`), though the request is at fault.
            Error::Internal(format!("failed to create typed patch object ({}): {e}", describe(config)))
        })?;
        typed::validate(schema, schema.root(), live, true)
            .map_err(|e| Error::Internal(format!("failed to create typed live object ({}): {e}", describe(live))))?;
        let result = self.updater().apply(live, config, &mut managed, &key, &id, force)?;
        strip(&mut managed, &key);
        let object = match result {
            Some(object) => {
                if let Some(entry) = managed.entries.get_mut(&key) {
                    entry.time = Some(now);
                }
                object
            }
            None => {
                let mut object = live.clone();
                if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("managedFields");
                }
                object
            }
        };
        Ok((object, managed))
    }
}

/// Merges the oldest update managers into per-version `ancient-changes` entries until at
/// most [`MAX_UPDATE_MANAGERS`] remain.
fn cap_update_managers(managed: &mut Managed) {
    let mut updaters: Vec<(i64, String)> = managed
        .entries
        .iter()
        .filter(|(_, e)| !e.fields.applied)
        .map(|(k, e)| (e.time.map(|t| t.as_second()).unwrap_or(0), k.clone()))
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort();
    let mut remaining = updaters.len();
    let mut first_of_version: BTreeMap<String, String> = BTreeMap::new();
    for (_, key) in updaters {
        if remaining <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(entry) = managed.entries.get(&key).cloned() else { continue };
        let version = entry.fields.api_version.clone();
        let bucket = Manager::new("ancient-changes", Operation::Update, &version, "");
        let bucket_key = bucket.identifier();
        let Some(first) = first_of_version.get(&version).cloned() else {
            first_of_version.insert(version, key);
            continue;
        };
        if !managed.entries.contains_key(&bucket_key) {
            if let Some(moved) = managed.entries.remove(&first) {
                managed.entries.insert(bucket_key.clone(), Entry { manager: bucket.clone(), ..moved });
            }
        }
        let merged = match managed.entries.get(&bucket_key) {
            Some(existing) => entry.fields.set.union(&existing.fields.set),
            None => entry.fields.set.clone(),
        };
        let fields = VersionedSet { set: merged, api_version: version, applied: entry.fields.applied };
        managed.entries.insert(bucket_key, Entry { manager: bucket, fields, time: entry.time });
        managed.entries.remove(&key);
        remaining -= 1;
    }
}
