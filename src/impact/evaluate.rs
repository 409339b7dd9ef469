//! One page of stored objects under the candidate definition, through the functions the server
//! itself runs: read as the API reads a stored object (`api::present::read_coerce`: pruning,
//! defaulting), converted to each served version (`api::write::convert_all_to`, the
//! candidate's conversion), validated as a create would validate it and as an update that
//! leaves the object unchanged (`api::write::findings`: OpenAPI schema with ratcheting, list
//! types, CEL rules with their runtime cost), and compared with the current definition's
//! outcome. What it finds goes into [`Totals`].
//!
//! Never writes: the objects are read, and changed only in memory.

use std::sync::Arc;

use serde_json::Value;

use super::convert::{Converted, PageConversions};
use super::tally::{CostHistogram, ErrorGroups, Finding, Limits, PathCounts, VersionCounts};
use crate::api::{objects, present, write};
use crate::core::field::{FieldError, Path};
use crate::definitions::registry::Served;
use crate::definitions::{Definition, Version};
use crate::store::KeyValue;

/// The definition as served now (`None`: not served, a new definition) and its candidate.
#[derive(Debug, Clone)]
pub struct Forms {
    pub current: Option<Arc<Definition>>,
    pub candidate: Arc<Definition>,
}

/// A served version of the candidate, and what is known of it before any object is read.
pub struct VersionPlan {
    pub candidate: Served,
    /// The same version of the current definition, when it has one.
    pub current: Option<Served>,
    /// Its schema (and so its rules) is the current one's, word for word.
    pub unchanged: bool,
    /// Some rule reads `oldSelf`: an unchanged update runs it, a create does not.
    pub transition_rules: bool,
}

impl VersionPlan {
    /// The served versions of the candidate, in its order.
    pub fn of(forms: &Forms) -> Vec<VersionPlan> {
        forms
            .candidate
            .served_versions()
            .map(|version| {
                let current = forms.current.as_ref().and_then(|d| d.version(&version.name).map(|v| (d, v)));
                let unchanged = current.is_some_and(|(_, v)| v.openapi_schema == version.openapi_schema);
                VersionPlan {
                    candidate: Served::unserved(forms.candidate.clone(), version.clone()),
                    current: current.map(|(d, v)| Served::unserved(d.clone(), v.clone())),
                    unchanged,
                    transition_rules: version.cel_rules().is_some_and(|r| r.has_transition_rules()),
                }
            })
            .collect()
    }
}

/// What the objects of one served version of the candidate came to.
#[derive(Debug, Default)]
pub struct VersionTotals {
    /// Objects with at least one error.
    pub failing: u64,
    /// Of those, the ones the current definition finds valid (or that it does not serve in
    /// this version): the change makes them fail.
    pub newly_failing: u64,
    /// Objects with an error ratcheting does not tolerate: even an update that leaves every
    /// field as it is fails (a controller writing its status back is refused).
    pub failing_unchanged: u64,
    pub errors: ErrorGroups,
    /// The CEL rules' runtime cost per object, under the candidate and the current definition.
    pub candidate_cost: CostHistogram,
    pub current_cost: CostHistogram,
}

/// Everything a scan found.
#[derive(Debug, Default)]
pub struct Totals {
    pub objects: u64,
    /// Objects per version they are stored in.
    pub stored_versions: VersionCounts,
    /// By served version of the candidate, in [`VersionPlan::of`]'s order.
    pub versions: Vec<VersionTotals>,
    /// Fields the next write would drop (candidate's schema), that the current one keeps.
    pub pruned: PathCounts,
    /// Fields the next write would add from defaults, that the current one does not.
    pub defaulted: PathCounts,
    /// Objects the candidate's conversion fails to convert, by message.
    pub conversion_failures: ErrorGroups,
    /// Objects whose stored bytes are not a JSON object.
    pub unreadable: ErrorGroups,
}

impl Totals {
    pub fn new(plans: &[VersionPlan]) -> Totals {
        Totals { versions: plans.iter().map(|_| VersionTotals::default()).collect(), ..Totals::default() }
    }
}

/// A stored object decoded and read as the API reads it, under both forms.
pub struct Decoded {
    /// `namespace/name` (or `name`).
    pub name: String,
    pub stored_version: String,
    /// The object as stored, but for its `metadata` (which neither form's schema prunes or
    /// defaults, and so is never compared: see [`changes`]).
    pub raw: Value,
    /// Read under the candidate.
    pub read: Value,
    /// Read under the current definition, when it differs from `read`'s reading.
    pub read_current: Option<Value>,
}

/// Decodes a page; objects that are not JSON are counted in `totals` and left out.
pub fn decode(forms: &Forms, page: &[KeyValue], totals: &mut Totals, limits: &Limits) -> Vec<Decoded> {
    let mut decoded = Vec::with_capacity(page.len());
    // Whether the forms read objects of a stored version differently, by version: the same for
    // every object of a version.
    let mut differs: Vec<(String, bool)> = Vec::new();
    for kv in page {
        totals.objects += 1;
        // However deep it nests, as the API reads it (`core::nesting`; the scan's thread has the
        // stack for it).
        let mut read: Value = match crate::core::nesting::from_slice(&kv.value) {
            Ok(value @ Value::Object(_)) => value,
            Ok(_) | Err(_) => {
                let relative = crate::store::key::relative_to_resource(&kv.key);
                let error = FieldError::internal(Path::nil(), "the stored object is not a JSON object");
                totals.unreadable.add(relative, &[Finding { error: &error, tolerated: false }], limits);
                continue;
            }
        };
        let stored_version = read
            .get("apiVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.rsplit_once('/'))
            .map(|(_, v)| v.to_string())
            .unwrap_or_default();
        *totals.stored_versions.entry(stored_version.clone()).or_default() += 1;
        let name = display_name(&read, || crate::store::key::relative_to_resource(&kv.key).to_string());
        let read_current = forms.current.as_ref().filter(|d| {
            let known = differs.iter().find(|(v, _)| *v == stored_version).map(|(_, d)| *d);
            known.unwrap_or_else(|| {
                let d = reads_differently(d, &forms.candidate, &stored_version);
                differs.push((stored_version.clone(), d));
                d
            })
        });
        let read_current = read_current.map(|current| {
            let mut read = read.clone();
            present::read_coerce(current, &mut read);
            read
        });
        let raw = without_metadata(&read);
        present::read_coerce(&forms.candidate, &mut read);
        decoded.push(Decoded { name, stored_version, raw, read, read_current });
    }
    decoded
}

/// A copy of a stored object but for its `metadata`, the bulk of most objects.
fn without_metadata(object: &Value) -> Value {
    match object {
        Value::Object(map) => {
            Value::Object(map.iter().filter(|(k, _)| *k != "metadata").map(|(k, v)| (k.clone(), v.clone())).collect())
        }
        other => other.clone(),
    }
}

/// Whether the two forms read an object stored in `version` differently, or write it back in
/// another version or schema. Only what reading takes from a schema counts (its structure,
/// defaults, nullability, embedded resources): a change of validations alone (a new rule, a
/// tighter maximum) reads every object alike.
fn reads_differently(current: &Definition, candidate: &Definition, version: &str) -> bool {
    let reading = |v: Option<&Version>| {
        v.map(|v| {
            v.openapi_schema_value().map(|mut schema| {
                strip_validations(&mut schema);
                schema
            })
        })
    };
    reading(current.version(version).map(|v| &**v)) != reading(candidate.version(version).map(|v| &**v))
        || current.storage.name != candidate.storage.name
        || reading(Some(&current.storage)) != reading(Some(&candidate.storage))
}

/// The keywords of a schema that only validate: reading an object (pruning, defaulting,
/// dropping nulls, embedded resources) never looks at them.
const VALIDATION_ONLY: [&str; 24] = [
    "description",
    "title",
    "example",
    "externalDocs",
    "x-kubernetes-validations",
    "maximum",
    "minimum",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "multipleOf",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
];

/// Removes the [`VALIDATION_ONLY`] keywords of `schema`, at every level.
fn strip_validations(schema: &mut Value) {
    let Value::Object(node) = schema else { return };
    node.retain(|k, _| !VALIDATION_ONLY.contains(&k.as_str()));
    for (keyword, value) in node.iter_mut() {
        match (keyword.as_str(), value) {
            ("properties" | "patternProperties" | "definitions", Value::Object(children)) => {
                children.values_mut().for_each(strip_validations);
            }
            ("allOf" | "anyOf" | "oneOf", Value::Array(branches)) => branches.iter_mut().for_each(strip_validations),
            ("items" | "additionalProperties" | "not", child) => strip_validations(child),
            _ => {}
        }
    }
}

/// `namespace/name`, as kubectl names objects; the key's part when the object has no name.
fn display_name(object: &Value, relative: impl FnOnce() -> String) -> String {
    let (namespace, name) = (objects::namespace(object), objects::name(object));
    match (namespace.is_empty(), name.is_empty()) {
        (_, true) => relative(),
        (true, false) => name.to_string(),
        (false, false) => format!("{namespace}/{name}"),
    }
}

/// Evaluates the decoded objects of a page, their conversions done (`conversions`: to the
/// candidate's storage version, then to each served version of `plans`).
pub fn evaluate(
    forms: &Forms,
    plans: &[VersionPlan],
    page: &[Decoded],
    conversions: &PageConversions,
    totals: &mut Totals,
    limits: &Limits,
) {
    for (i, object) in page.iter().enumerate() {
        let mut conversion_failed = false;
        if let Some(Converted::Failed(message)) = conversions.storage.get(i) {
            let error = FieldError::internal(Path::nil(), message.clone());
            totals.conversion_failures.add(&object.name, &[Finding { error: &error, tolerated: false }], limits);
            conversion_failed = true;
        } else if let Some(next_write) = conversions.storage.get(i).and_then(|c| c.value(&object.read)) {
            written_differently(forms, object, next_write, totals, limits);
        }
        for (j, plan) in plans.iter().enumerate() {
            let (Some(version_totals), Some(converted)) =
                (totals.versions.get_mut(j), conversions.served.get(j).and_then(|c| c.get(i)))
            else {
                continue;
            };
            match converted.value(&object.read) {
                Some(value) => one_version(forms, plan, object, value, version_totals, limits),
                None if !conversion_failed => {
                    if let Converted::Failed(message) = converted {
                        let error = FieldError::internal(Path::nil(), message.clone());
                        totals.conversion_failures.add(
                            &object.name,
                            &[Finding { error: &error, tolerated: false }],
                            limits,
                        );
                        conversion_failed = true;
                    }
                }
                None => {}
            }
        }
    }
}

/// The fields the next write would prune or default under the candidate and not under the
/// current definition (every one when there is none).
fn written_differently(forms: &Forms, object: &Decoded, next_write: &Value, totals: &mut Totals, limits: &Limits) {
    let mut candidate = Changes::default();
    changes(&object.raw, next_write, &Path::nil(), true, &mut candidate);
    if candidate.is_empty() {
        return;
    }
    let mut current = Changes::default();
    if let Some(definition) = &forms.current {
        // Both forms read and write the object alike: nothing is the candidate's doing.
        let Some(read_current) = &object.read_current else { return };
        let mut written = read_current.clone();
        if definition.storage.name != object.stored_version {
            // Only the `None` conversion is redone for the current form (a webhook is not
            // called twice): the paths it prunes count as the current form's too.
            if write::convert_to(definition, &mut written, &definition.storage).is_err() {
                written = read_current.clone();
            }
        }
        changes(&object.raw, &written, &Path::nil(), true, &mut current);
    }
    candidate.removed.retain(|p| !current.removed.contains(p));
    candidate.added.retain(|p| !current.added.contains(p));
    totals.pruned.add(&candidate.removed, limits);
    totals.defaulted.add(&candidate.added, limits);
}

/// The paths a write would remove and add.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    pub removed: Vec<String>,
    pub added: Vec<String>,
}

impl Changes {
    fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }
}

/// The fields in `before` and not in `after` (removed) and the reverse (added), object by
/// object and list item by list item; the root's `apiVersion`, `kind` and `metadata` are the
/// server's, not the schema's, and left out.
pub fn changes(before: &Value, after: &Value, path: &Path, root: bool, out: &mut Changes) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let servers = |key: &str| root && matches!(key, "apiVersion" | "kind" | "metadata");
            for (key, value) in b {
                if servers(key) {
                    continue;
                }
                match a.get(key) {
                    // Only objects and lists hold fields to compare (and a path is built only
                    // for them: this runs for every field of every stored object).
                    Some(other) if both_hold_fields(value, other) => {
                        changes(value, other, &path.child(key), false, out)
                    }
                    Some(_) => {}
                    None => out.removed.push(path.child(key).to_string()),
                }
            }
            for key in a.keys() {
                if !b.contains_key(key) && !servers(key) {
                    out.added.push(path.child(key).to_string());
                }
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, (x, y)) in b.iter().zip(a).enumerate() {
                if both_hold_fields(x, y) {
                    changes(x, y, &path.index(i), false, out);
                }
            }
        }
        _ => {}
    }
}

fn both_hold_fields(before: &Value, after: &Value) -> bool {
    matches!((before, after), (Value::Object(_), Value::Object(_)) | (Value::Array(_), Value::Array(_)))
}

/// One object in one served version of the candidate.
fn one_version(
    forms: &Forms,
    plan: &VersionPlan,
    object: &Decoded,
    value: &Value,
    totals: &mut VersionTotals,
    limits: &Limits,
) {
    let created = write::findings(&plan.candidate, false, value, None, Vec::new());
    totals.candidate_cost.add(created.cel_cost);
    // Both forms read the object alike and validate it with the same schema: the current
    // outcome is the candidate's.
    let same = plan.current.is_some() && plan.unchanged && object.read_current.is_none();
    if let Some(current) = &plan.current {
        match current.version.cel_rules() {
            _ if same => totals.current_cost.add(created.cel_cost),
            None => totals.current_cost.add(0),
            Some(rules) => {
                if let Some(reading) = current_reading(forms, current, object) {
                    let spent =
                        crate::cel::RUNTIME_COST_BUDGET.saturating_sub(rules.validate(&reading, None).remaining_budget);
                    totals.current_cost.add(u64::try_from(spent).unwrap_or(0));
                }
            }
        }
    }
    let unchanged = if !created.errors.is_empty() || plan.transition_rules {
        write::findings(&plan.candidate, false, value, Some(value), Vec::new()).errors
    } else {
        Vec::new()
    };
    if created.errors.is_empty() && unchanged.is_empty() {
        return;
    }
    let mut findings: Vec<Finding<'_>> =
        created.errors.iter().map(|e| Finding { error: e, tolerated: !unchanged.contains(e) }).collect();
    let only_on_update = unchanged.iter().filter(|e| !created.errors.contains(e));
    findings.extend(only_on_update.map(|e| Finding { error: e, tolerated: false }));
    totals.failing += 1;
    if !unchanged.is_empty() {
        totals.failing_unchanged += 1;
    }
    let valid_now = match &plan.current {
        _ if same => false,
        Some(current) => match current_reading(forms, current, object) {
            Some(reading) => write::findings(current, false, &reading, None, Vec::new()).errors.is_empty(),
            // Read in this version only through the current definition's webhook, which is not
            // called: the failure is counted as the change's.
            None => true,
        },
        // A version the current definition does not serve: every failure is the change's.
        None => true,
    };
    if valid_now {
        totals.newly_failing += 1;
    }
    totals.errors.add(&object.name, &findings, limits);
}

/// The object as the current definition reads it in `current`'s version (`None` when that
/// takes a call to its conversion webhook).
fn current_reading(forms: &Forms, current: &Served, object: &Decoded) -> Option<Value> {
    let definition = forms.current.as_ref()?;
    let read = object.read_current.as_ref().unwrap_or(&object.read);
    if object.stored_version == current.version.name {
        return Some(read.clone());
    }
    if !matches!(definition.conversion, crate::definitions::conversion::Conversion::None) {
        return None;
    }
    let mut value = read.clone();
    write::convert_to(definition, &mut value, &current.version).ok()?;
    Some(value)
}

/// The versions a page is converted to: the candidate's storage version, then each served one.
pub fn targets(forms: &Forms, plans: &[VersionPlan]) -> (Arc<Version>, Vec<Arc<Version>>) {
    (forms.candidate.storage.clone(), plans.iter().map(|p| p.candidate.version.clone()).collect())
}

#[cfg(test)]
mod tests;
