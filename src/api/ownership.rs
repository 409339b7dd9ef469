//! Field ownership for resource writes: which field manager a request writes as
//! (`fieldManager`, else the User-Agent prefix), the write options Kubernetes checks
//! (`fieldManager` required for apply, `force` only with apply), which fields each endpoint
//! resets, and the glue between calls and [`crate::fieldmanager`]: every create, update,
//! patch and apply leaves `metadata.managedFields` as Kubernetes would.

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::call::{Call, Subresource};
use crate::core::field::{FieldError, Path as FieldPath};
use crate::core::gvr::GroupKind;
use crate::core::status::ApiError;
use crate::definitions::Definition;
use crate::fieldmanager::{self, FieldManager, PathElement, Schema, Set, Versions};

/// `fieldManager` may be at most this long (`FieldManagerMaxLength`).
const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// The versions of a definition, for comparing managers that wrote at other versions.
pub struct DefinitionVersions<'a>(pub &'a Definition);

impl Versions for DefinitionVersions<'_> {
    fn schema(&self, api_version: &str) -> Option<&Schema> {
        let (group, version) = api_version.rsplit_once('/')?;
        if group != self.0.group {
            return None;
        }
        self.0.version(version).map(|v| v.field_schema.as_ref())
    }

    fn convert(&self, object: &Value, api_version: &str) -> Result<Value, String> {
        let name = api_version.rsplit_once('/').map(|(_, v)| v).unwrap_or(api_version);
        let target = self.0.version(name).ok_or_else(|| format!("no version {name}"))?;
        let mut out = object.clone();
        // As Kubernetes' schema-coercing converter: the target version's schema prunes the
        // fields it does not declare (another version may preserve them), so that comparing
        // in the target version never meets a field its type does not have.
        super::write::convert_to(self.0, &mut out, target).map_err(|e| e.message)?;
        Ok(out)
    }
}

/// The one version of `autoscaling/v1` `Scale`.
struct ScaleVersions;

static SCALE_SCHEMA: LazyLock<Schema> = LazyLock::new(Schema::scale);

impl Versions for ScaleVersions {
    fn schema(&self, api_version: &str) -> Option<&Schema> {
        (api_version == fieldmanager::SCALE_API_VERSION).then_some(&*SCALE_SCHEMA)
    }

    fn convert(&self, _: &Value, api_version: &str) -> Result<Value, String> {
        Err(format!("Scale has no version {api_version}"))
    }
}

/// The fields an endpoint resets, which its writers never own (`GetResetFields`).
fn reset_fields(call: &Call) -> Set {
    let field = |name: &str| vec![PathElement::field(name)];
    match call.subresource {
        Subresource::Status => Set::of(&[field("metadata"), field("spec")]),
        Subresource::None if call.served.version.status_subresource => Set::of(&[field("status")]),
        _ => Set::new(),
    }
}

fn subresource_name(call: &Call) -> &'static str {
    match call.subresource {
        Subresource::None => "",
        Subresource::Status => "status",
        Subresource::Scale => "scale",
    }
}

/// Runs `f` with the field manager of the call's endpoint.
fn with_manager<T>(call: &Call, f: impl FnOnce(&FieldManager<'_>) -> T) -> T {
    let ignored = reset_fields(call);
    let api_version = call.api_version();
    let versions = DefinitionVersions(&call.served.definition);
    let manager = FieldManager {
        versions: &versions,
        api_version: &api_version,
        kind: &call.served.definition.kind,
        subresource: subresource_name(call),
        ignored: &ignored,
    };
    f(&manager)
}

/// Runs `f` with the field manager of the scale subresource.
fn with_scale_manager<T>(f: impl FnOnce(&FieldManager<'_>) -> T) -> T {
    let ignored = Set::new();
    let manager = FieldManager {
        versions: &ScaleVersions,
        api_version: fieldmanager::SCALE_API_VERSION,
        kind: "Scale",
        subresource: "scale",
        ignored: &ignored,
    };
    f(&manager)
}

/// The manager a write is recorded as: `fieldManager`, else the User-Agent up to its first
/// `/`, printable characters only, at most 128 bytes (`managerOrUserAgent`).
pub fn manager_name(call: &Call) -> String {
    if let Some(manager) = call.query.get("fieldManager").filter(|m| !m.is_empty()) {
        return manager.to_string();
    }
    let agent = call.header(http::header::USER_AGENT).unwrap_or_default();
    let prefix = agent.split('/').next().unwrap_or_default();
    let mut out = String::new();
    for c in prefix.chars().filter(|c| is_print(*c)) {
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// `ValidateDryRun`: every value must be `All`. The bad value is the whole list (a JSON array
/// in the message, as 1.36 prints a `[]string`).
pub fn dry_run_error(values: &[&str]) -> Option<FieldError> {
    if values.iter().all(|v| *v == "All") {
        return None;
    }
    let listed = serde_json::Value::Array(values.iter().map(|v| serde_json::Value::from(*v)).collect());
    Some(FieldError::not_supported(FieldPath::new("dryRun"), listed, &["All"]))
}

/// Go's `unicode.IsPrint`: graphic characters and the ASCII space.
fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    let format = matches!(c, '\u{ad}' | '\u{600}'..='\u{605}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}');
    !c.is_control() && !c.is_whitespace() && !format
}

/// Checks the options Kubernetes validates for writes (`ValidateCreateOptions` & co.):
/// `kind` is `CreateOptions`, `UpdateOptions` or `PatchOptions`.
pub fn check_options(call: &Call, kind: &str, apply: bool) -> Result<(), ApiError> {
    let path = FieldPath::new("fieldManager");
    let manager = call.query.get("fieldManager").unwrap_or_default();
    let mut errors = Vec::new();
    if apply && manager.is_empty() {
        errors.push(FieldError::required(path.clone(), "is required for apply patch"));
    }
    if !apply && kind == "PatchOptions" && call.query.get("force").is_some() {
        errors.push(FieldError::forbidden(FieldPath::new("force"), "may not be specified for non-apply patch"));
    }
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        errors.push(FieldError::too_long(path.clone(), FIELD_MANAGER_MAX_LENGTH as i64));
    }
    for (i, c) in manager.char_indices() {
        if !is_print(c) {
            errors.push(FieldError::invalid(
                path.clone(),
                manager,
                format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    errors.extend(dry_run_error(&call.query.all("dryRun").collect::<Vec<_>>()));
    if let Some(mode) = call.query.get("fieldValidation")
        && !["", "Ignore", "Strict", "Warn"].contains(&mode)
    {
        errors.push(FieldError::not_supported(
            FieldPath::new("fieldValidation"),
            mode,
            &["", "Ignore", "Strict", "Warn"],
        ));
    }
    if errors.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(&GroupKind::new("meta.k8s.io", kind), "", &errors))
}

/// `force`, as Kubernetes converts a query boolean (`force=maybe` forces).
pub fn force(call: &Call) -> bool {
    call.query.get("force").is_some_and(crate::core::strconv::query_bool)
}

/// What a resource looks like before it exists: its apiVersion and kind only.
pub fn placeholder(call: &Call) -> Value {
    json!({"apiVersion": call.api_version(), "kind": call.served.definition.kind})
}

/// Records a create in the new object's managedFields.
pub fn track_create(call: &Call, object: &mut Value) {
    let manager = manager_name(call);
    with_manager(call, |fm| fm.create(object, &manager, fieldmanager::now()));
}

/// Records an update (PUT, JSON or merge patch, status writes) of `live` into `object`.
pub fn track_update(call: &Call, live: &Value, object: &mut Value) {
    let manager = manager_name(call);
    with_manager(call, |fm| fm.update(live, object, &manager, fieldmanager::now()));
}

/// Applies `config` to `live` (or to nothing yet, [`placeholder`]): the new object.
pub fn apply(call: &Call, live: &Value, config: &Value, force: bool) -> Result<Value, ApiError> {
    let manager = call.query.get("fieldManager").unwrap_or_default().to_string();
    with_manager(call, |fm| fm.apply(live, config, &manager, force, fieldmanager::now())).map_err(to_api_error)
}

/// The replicas paths of the definition's versions, for the scale subresource.
fn replicas_paths(call: &Call) -> fieldmanager::ReplicasPaths {
    let definition = &call.served.definition;
    let paths = definition
        .versions
        .iter()
        .map(|v| {
            let path = v.scale.as_ref().map(|s| fieldmanager::replicas_path(&s.spec_replicas_path));
            (format!("{}/{}", definition.group, v.name), path)
        })
        .collect();
    fieldmanager::ReplicasPaths { paths, api_version: call.api_version() }
}

fn managed_of(object: &Value) -> Result<fieldmanager::Managed, ApiError> {
    match object.pointer("/metadata/managedFields") {
        None | Some(Value::Null) => Ok(fieldmanager::Managed::default()),
        Some(Value::Array(entries)) => fieldmanager::Managed::decode(entries).map_err(|e| ApiError::internal(e.0)),
        Some(_) => Err(ApiError::internal("managedFields must be a list")),
    }
}

fn put_managed(object: &mut Value, managed: &fieldmanager::Managed) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    let entries = managed.encode();
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
}

/// The managedFields a resource's `Scale` shows: the owners of the replicas path.
pub fn scale_managed_fields(call: &Call, resource: &Value, scale: &mut Value) -> Result<(), ApiError> {
    let parent = managed_of(resource)?;
    put_managed(scale, &replicas_paths(call).to_subresource(&parent));
    Ok(())
}

/// A write of the scale subresource: records `new_scale` (an update, or the result of an
/// apply already recorded) and moves the scale managers back into `resource`.
pub fn track_scale(
    call: &Call,
    old: &Value,
    old_scale: &Value,
    new_scale: &mut Value,
    applied: bool,
    resource: &mut Value,
) -> Result<(), ApiError> {
    if !applied {
        let manager = manager_name(call);
        with_scale_manager(|fm| fm.update(old_scale, new_scale, &manager, fieldmanager::now()));
    }
    let parent = managed_of(old)?;
    let scale = managed_of(new_scale)?;
    put_managed(resource, &replicas_paths(call).to_parent(&parent, &scale));
    Ok(())
}

/// Applies a `Scale` configuration to the resource's current `Scale`.
pub fn apply_scale(call: &Call, old_scale: &Value, config: &Value, force: bool) -> Result<Value, ApiError> {
    let manager = call.query.get("fieldManager").unwrap_or_default().to_string();
    with_scale_manager(|fm| fm.apply(old_scale, config, &manager, force, fieldmanager::now())).map_err(to_api_error)
}

/// A field manager error as a Kubernetes Status error: conflicts are 409 with one
/// `FieldManagerConflict` cause each; the errors k8s.io/apimachinery's field manager returns as
/// plain Go errors are 500 without a reason, as kube-apiserver passes them on.
fn to_api_error(error: fieldmanager::Error) -> ApiError {
    match error {
        fieldmanager::Error::Conflicts(conflicts) => {
            let mut out = ApiError::new(409, "Conflict", conflicts.to_string());
            for c in &conflicts.0 {
                out = out.with_cause("FieldManagerConflict", &c.cause_message(), &c.field());
            }
            out
        }
        fieldmanager::Error::BadRequest(message) => ApiError::bad_request(message),
        fieldmanager::Error::Internal(message) => ApiError::unknown(message),
    }
}

/// Keeps the stored times when a write changes nothing but managedFields times
/// (`IgnoreManagedFieldsTimestampsTransformer`), so an unchanged object is not written again.
pub fn keep_times_of_unchanged(old: &Value, new: &mut Value) {
    let (Some(before), Some(after)) = (managed_entries(old), managed_entries(new)) else { return };
    if before.len() != after.len() || after.is_empty() {
        return;
    }
    if before.iter().zip(after).all(|(b, a)| b.get("time") == a.get("time")) {
        return;
    }
    if before.iter().zip(after).any(|(b, a)| !equal_but_time(b, a)) || !equal_but_managed_fields(old, new) {
        return;
    }
    let times: Vec<Option<Value>> = before.iter().map(|b| b.get("time").cloned()).collect();
    let Some(after) = new.pointer_mut("/metadata/managedFields").and_then(Value::as_array_mut) else { return };
    for (a, t) in after.iter_mut().zip(times) {
        if let Some(map) = a.as_object_mut() {
            match t {
                Some(t) => map.insert("time".into(), t),
                None => map.remove("time"),
            };
        }
    }
}

fn managed_entries(object: &Value) -> Option<&Vec<Value>> {
    object.get("metadata")?.get("managedFields")?.as_array()
}

/// Whether two managedFields entries are equal but for their times (entries that are not
/// objects compare whole).
fn equal_but_time(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else { return a == b };
    let others = |m: &serde_json::Map<String, Value>| m.keys().filter(|k| *k != "time").count();
    others(a) == others(b) && a.iter().filter(|(k, _)| *k != "time").all(|(k, v)| b.get(k) == Some(v))
}

fn equal_but_managed_fields(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else { return a == b };
    a.len() == b.len()
        && a.iter().all(|(key, value)| match (key.as_str(), b.get(key)) {
            ("metadata", Some(other)) => match (value.as_object(), other.as_object()) {
                (Some(x), Some(y)) => {
                    let strip =
                        |m: &serde_json::Map<String, Value>| m.iter().filter(|(k, _)| *k != "managedFields").count();
                    strip(x) == strip(y)
                        && x.iter().filter(|(k, _)| *k != "managedFields").all(|(k, v)| y.get(k) == Some(v))
                }
                _ => value == other,
            },
            (_, Some(other)) => value == other,
            (_, None) => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_only_changes_are_reverted() {
        let entry = |time: &str, field: &str| json!({"manager": "m", "operation": "Apply", "time": time, "fieldsV1": {field: {}}});
        let old = json!({"metadata": {"name": "x", "managedFields": [entry("2024-01-01T00:00:00Z", "f:a")]}, "spec": {"a": 1}});
        let mut same = old.clone();
        same["metadata"]["managedFields"][0]["time"] = json!("2024-01-02T00:00:00Z");
        keep_times_of_unchanged(&old, &mut same);
        assert_eq!(same, old);
        let mut changed = same.clone();
        changed["metadata"]["managedFields"][0]["time"] = json!("2024-01-02T00:00:00Z");
        changed["spec"]["a"] = json!(2);
        keep_times_of_unchanged(&old, &mut changed);
        assert_eq!(changed["metadata"]["managedFields"][0]["time"], "2024-01-02T00:00:00Z");
        let mut other_fields = old.clone();
        other_fields["metadata"]["managedFields"][0] = entry("2024-01-02T00:00:00Z", "f:b");
        keep_times_of_unchanged(&old, &mut other_fields);
        assert_eq!(other_fields["metadata"]["managedFields"][0]["time"], "2024-01-02T00:00:00Z");
    }

    #[test]
    fn printable_characters_as_go_sees_them() {
        assert!(is_print('a') && is_print(' ') && !is_print('\u{7}') && !is_print('\u{200b}'));
    }
}
