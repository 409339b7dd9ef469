//! Ownership bookkeeping for one write (structured-merge-diff's `merge.Updater`):
//!
//! - an update takes ownership of what it changed and takes it away from the other managers
//!   (it never conflicts);
//! - an apply merges the configuration into the live object, owns exactly the configuration's
//!   fields, removes the fields it applied last time and no longer applies (unless another
//!   manager owns them), and conflicts when it changes a field another manager owns, unless
//!   forced.
//!
//! Managers that wrote at another version are compared at their version; managers at
//! versions the definition no longer has are dropped.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;

use super::conflict::{Conflict, Conflicts};
use super::managed::{Entry, Managed, Manager, VersionedSet};
use super::path::values_equal;
use super::schema::Schema;
use super::set::Set;
use super::typed::{self, Comparison};

/// The versions a resource has: their schemas, and conversion between them.
pub trait Versions {
    /// The schema of `api_version`; `None` when the resource has no such version.
    fn schema(&self, api_version: &str) -> Option<&Schema>;
    /// `object` converted to `api_version` (one of the versions [`Versions::schema`] knows).
    fn convert(&self, object: &Value, api_version: &str) -> Result<Value, String>;
}

/// Why ownership could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Conflicts(#[from] Conflicts),
    /// The request is wrong (a configuration that does not fit the schema, ...).
    #[error("{0}")]
    BadRequest(String),
    /// What Kubernetes' field manager returns as a plain Go error (`fmt.Errorf`), whoever is
    /// at fault: a 500 without a reason.
    #[error("{0}")]
    Internal(String),
}

pub struct Updater<'a> {
    pub versions: &'a dyn Versions,
    /// The version writes arrive in.
    pub version: &'a str,
    /// Fields this endpoint resets (status on the main resource, spec and metadata on the
    /// status subresource): nobody gains or loses them through it.
    pub ignored: &'a Set,
}

fn api_version_of(object: &Value) -> &str {
    object.get("apiVersion").and_then(Value::as_str).unwrap_or_default()
}

impl Updater<'_> {
    /// `object` at `version` with its schema; `None` when the resource has no such version.
    fn at<'v>(&'v self, object: &'v Value, version: &str) -> Result<Option<(Cow<'v, Value>, &'v Schema)>, Error> {
        let Some(schema) = self.versions.schema(version) else {
            return Ok(None);
        };
        if api_version_of(object) == version {
            return Ok(Some((Cow::Borrowed(object), schema)));
        }
        let converted = self.versions.convert(object, version).map_err(Error::Internal)?;
        Ok(Some((Cow::Owned(converted), schema)))
    }

    fn schema(&self, version: &str) -> Result<&Schema, Error> {
        self.versions.schema(version).ok_or_else(|| Error::Internal(format!("no schema for version {version}")))
    }

    fn compare(&self, schema: &Schema, old: &Value, new: &Value) -> Result<Comparison, Error> {
        typed::compare(schema, schema.root(), old, new)
            .map(|c| c.excluding(self.ignored))
            .map_err(|e| Error::Internal(format!("failed to compare objects: {e}")))
    }

    /// Rewrites sets recorded when parts of the schema were granular and are now atomic;
    /// drops managers whose version is gone.
    fn reconcile(&self, managed: &mut Managed) {
        let mut gone = Vec::new();
        for (key, entry) in managed.entries.iter_mut() {
            // Only the schema matters here: the walk follows the set, not the object.
            let Some(schema) = self.versions.schema(&entry.fields.api_version) else {
                gone.push(key.clone());
                continue;
            };
            if let Some(reconciled) = typed::reconcile_with_schema(schema, schema.root(), &entry.fields.set) {
                entry.fields.set = reconciled;
            }
        }
        for key in gone {
            managed.entries.remove(&key);
        }
    }

    /// Takes from every manager but `writer` the fields that changed from `old` to `new`
    /// (conflicts unless `force`) and the fields that were removed. Returns the comparison at
    /// `version`.
    fn take_changed(
        &self,
        old: &Value,
        new: &Value,
        version: &str,
        managed: &mut Managed,
        writer: &str,
        force: bool,
    ) -> Result<Comparison, Error> {
        let comparison = self.compare(self.schema(version)?, old, new)?;
        // Each other version's comparison once, with what changed in it (modified or added).
        let mut at_version: BTreeMap<String, (Comparison, Set)> = BTreeMap::new();
        let mut gone = Vec::new();
        for (key, entry) in &managed.entries {
            let v = &entry.fields.api_version;
            if key == writer || v == version || at_version.contains_key(v) {
                continue;
            }
            let (Some((o, schema)), Some((n, _))) = (self.at(old, v)?, self.at(new, v)?) else {
                gone.push(key.clone());
                continue;
            };
            let cmp = self.compare(schema, &o, &n)?;
            let changed = cmp.modified.union(&cmp.added);
            at_version.insert(v.clone(), (cmp, changed));
        }
        let mut changed_here: Option<Set> = None;
        let mut conflicts: Vec<(String, Set)> = Vec::new();
        let mut removed: Vec<(String, &Set)> = Vec::new();
        for (key, entry) in &managed.entries {
            if key == writer {
                continue;
            }
            let v = &entry.fields.api_version;
            let (cmp, changed) = if v == version {
                (&comparison, &*changed_here.get_or_insert_with(|| comparison.modified.union(&comparison.added)))
            } else {
                match at_version.get(v) {
                    Some((c, changed)) => (c, changed),
                    None => continue,
                }
            };
            let conflict = entry.fields.set.intersection(changed);
            if !conflict.is_empty() {
                conflicts.push((key.clone(), conflict));
            }
            if !cmp.removed.is_empty() {
                removed.push((key.clone(), &cmp.removed));
            }
        }
        for key in gone {
            managed.entries.remove(&key);
        }
        if !force && !conflicts.is_empty() {
            return Err(Error::Conflicts(conflicts_of(managed, &conflicts)));
        }
        let taken = conflicts.iter().map(|(k, s)| (k, s)).chain(removed.iter().map(|(k, s)| (k, *s)));
        for (key, set) in taken {
            if let Some(entry) = managed.entries.get_mut(key) {
                entry.fields.set.difference_with(set);
            }
        }
        managed.entries.retain(|_, e| !e.fields.set.is_empty());
        Ok(comparison)
    }

    /// An update from `live` to `new` by `writer` (`Updater.Update`).
    pub fn update(
        &self,
        live: &Value,
        new: &Value,
        managed: &mut Managed,
        writer: &str,
        manager: &Manager,
    ) -> Result<(), Error> {
        let version = self.version;
        self.reconcile(managed);
        let comparison = self.take_changed(live, new, version, managed, writer, true)?;
        let previous = managed.entries.remove(writer);
        let time = previous.as_ref().and_then(|e| e.time);
        let mut set = previous.map(|e| e.fields.set).unwrap_or_default();
        set.difference_with(&comparison.removed);
        set.merge(comparison.modified);
        set.merge(comparison.added);
        set.recursive_difference_with(self.ignored);
        if !set.is_empty() {
            let fields = VersionedSet { set, api_version: version.to_string(), applied: false };
            managed.entries.insert(writer.to_string(), Entry { manager: manager.clone(), fields, time });
        }
        Ok(())
    }

    /// An apply of `config` to `live` by `writer` (`Updater.Apply`): the merged object, or
    /// `None` when it equals `live`.
    pub fn apply(
        &self,
        live: &Value,
        config: &Value,
        managed: &mut Managed,
        writer: &str,
        manager: &Manager,
        force: bool,
    ) -> Result<Option<Value>, Error> {
        let version = self.version;
        self.reconcile(managed);
        let schema = self.schema(version)?;
        let merged = typed::merge(schema, schema.root(), live, config)
            .map_err(|e| Error::Internal(format!("failed to merge config: {e}")))?
            .unwrap_or(Value::Null);
        let last = managed.entries.get(writer).map(|e| e.fields.clone());
        let time = managed.entries.get(writer).and_then(|e| e.time);
        let set = typed::to_field_set(schema, schema.root(), config).recursive_difference(self.ignored);
        let fields = VersionedSet { set, api_version: version.to_string(), applied: true };
        managed.entries.insert(writer.to_string(), Entry { manager: manager.clone(), fields, time });
        // Nothing to prune when the writer still applies everything it applied last time.
        let still_applied = last.as_ref().is_none_or(|l| {
            l.api_version == version
                && managed.entries.get(writer).is_some_and(|e| l.set.difference(&e.fields.set).is_empty())
        });
        let merged = if still_applied { merged } else { self.prune(merged, managed, writer, version, last.as_ref())? };
        self.take_changed(live, &merged, version, managed, writer, force)?;
        Ok(if values_equal(live, &merged) { None } else { Some(merged) })
    }

    /// Removes what `writer` applied last time and no longer applies, unless someone else
    /// (or the new configuration) owns it, or it was never only the writer's.
    fn prune(
        &self,
        merged: Value,
        managed: &Managed,
        writer: &str,
        version: &str,
        last: Option<&VersionedSet>,
    ) -> Result<Value, Error> {
        let Some(last) = last.filter(|l| !l.set.is_empty()) else {
            return Ok(merged);
        };
        let Some((merged_v, schema)) = self.at(&merged, &last.api_version)? else {
            return Ok(merged);
        };
        let named = |set: &Set| typed::ensure_named_fields_are_members(schema, schema.root(), set);
        let pruned = typed::remove_items(schema, schema.root(), &merged_v, &named(&last.set));
        let pruned = self.add_back_owned(&merged_v, pruned, &last.api_version, managed)?;
        let pruned = self.add_back_dangling(&merged_v, schema, pruned, last)?;
        let target = managed.entries.get(writer).map(|e| e.fields.api_version.as_str()).unwrap_or(version);
        match self.at(&pruned, target)? {
            Some((out, _)) => Ok(out.into_owned()),
            None => Ok(pruned),
        }
    }

    /// Puts back what prune removed but some manager owns, version by version (the pruned
    /// version first).
    fn add_back_owned(
        &self,
        merged: &Value,
        mut pruned: Value,
        pruned_version: &str,
        managed: &Managed,
    ) -> Result<Value, Error> {
        let mut owned: BTreeMap<&str, Set> = BTreeMap::new();
        for entry in managed.entries.values() {
            owned.entry(entry.fields.api_version.as_str()).or_default().union_with(&entry.fields.set);
        }
        let mut order: Vec<&str> = Vec::with_capacity(owned.len());
        if owned.contains_key(pruned_version) {
            order.push(pruned_version);
        }
        order.extend(owned.keys().copied().filter(|v| *v != pruned_version));
        // Conversions are cumulative, as in Kubernetes: each version starts from the last.
        let mut converted: Option<Value> = None;
        for version in order {
            let Some(set) = owned.get(version) else { continue };
            let base = converted.as_ref().unwrap_or(merged);
            let (Some((m, schema)), Some((p, _))) = (self.at(base, version)?, self.at(&pruned, version)?) else {
                continue;
            };
            let named = |s: &Set| typed::ensure_named_fields_are_members(schema, schema.root(), s);
            let merged_set = named(&typed::to_field_set(schema, schema.root(), &m));
            let pruned_set = named(&typed::to_field_set(schema, schema.root(), &p));
            let remove = merged_set.difference(&pruned_set.union(&named(set)));
            let next = typed::remove_items(schema, schema.root(), &m, &remove);
            let next_merged = match m {
                Cow::Owned(v) => Some(v),
                Cow::Borrowed(_) => None,
            };
            pruned = next;
            if next_merged.is_some() {
                converted = next_merged;
            }
        }
        Ok(pruned)
    }

    /// Keeps prune from removing what the writer did not own alone last time: only fields
    /// in the writer's last set are removed.
    fn add_back_dangling(
        &self,
        merged: &Value,
        schema: &Schema,
        pruned: Value,
        last: &VersionedSet,
    ) -> Result<Value, Error> {
        let Some((pruned_v, _)) = self.at(&pruned, &last.api_version)? else {
            return Ok(merged.clone());
        };
        let named = |s: &Set| typed::ensure_named_fields_are_members(schema, schema.root(), s);
        let pruned_set = named(&typed::to_field_set(schema, schema.root(), &pruned_v));
        let merged_set = named(&typed::to_field_set(schema, schema.root(), merged));
        let remove = merged_set.difference(&pruned_set).intersection(&named(&last.set));
        Ok(typed::remove_items(schema, schema.root(), merged, &remove))
    }
}

/// The conflicts of each manager, managers by identifier, paths in set order.
fn conflicts_of(managed: &Managed, conflicts: &[(String, Set)]) -> Conflicts {
    let mut out = Vec::new();
    let mut sorted: Vec<&(String, Set)> = conflicts.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (key, set) in sorted {
        let Some(entry) = managed.entries.get(key) else { continue };
        for path in set.paths() {
            out.push(Conflict { identifier: key.clone(), manager: entry.manager.clone(), path });
        }
    }
    Conflicts(out)
}
