//! Object metadata on unstructured objects: reading the ObjectMeta fields, and the system
//! fields the server sets on create and keeps on update (Kubernetes' `BeforeCreate`,
//! `BeforeUpdate` and the custom resource strategy).

use serde_json::{Map, Value};

use crate::core::field::{FieldError, Path};
use crate::core::names;
use crate::core::status::ApiError;

/// The ObjectMeta fields; anything else under `metadata` is dropped as an unknown field.
pub const OBJECT_META_FIELDS: &[&str] = &[
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
];

/// Sets `key` on a JSON object (no-op on anything else): indexing assignment without the
/// panic serde_json's `IndexMut` has for non-objects.
pub fn put(target: &mut Value, key: &str, value: Value) {
    if let Value::Object(map) = target {
        map.insert(key.to_string(), value);
    }
}

pub fn metadata(object: &Value) -> Option<&Map<String, Value>> {
    object.get("metadata").and_then(Value::as_object)
}

pub fn metadata_mut(object: &mut Value) -> Option<&mut Map<String, Value>> {
    object.get_mut("metadata").and_then(Value::as_object_mut)
}

/// A string field of `metadata` ("" when absent or not a string).
pub fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    metadata(object).and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or_default()
}

pub fn name(object: &Value) -> &str {
    meta_str(object, "name")
}

pub fn namespace(object: &Value) -> &str {
    meta_str(object, "namespace")
}

pub fn uid(object: &Value) -> &str {
    meta_str(object, "uid")
}

pub fn resource_version(object: &Value) -> &str {
    meta_str(object, "resourceVersion")
}

pub fn generation(object: &Value) -> i64 {
    metadata(object).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0)
}

pub fn finalizers(object: &Value) -> Vec<String> {
    metadata(object)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

pub fn is_deleting(object: &Value) -> bool {
    metadata(object).and_then(|m| m.get("deletionTimestamp")).is_some_and(|v| !v.is_null())
}

/// Sets `metadata.resourceVersion`.
pub fn set_resource_version(object: &mut Value, revision: u64) {
    if let Some(meta) = metadata_mut(object) {
        meta.insert("resourceVersion".into(), Value::String(revision.to_string()));
    }
}

/// Makes sure `metadata` is an object (creating it when absent). A non-object `metadata` is
/// a malformed request.
pub fn ensure_metadata(object: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let Value::Object(root) = object else {
        return Err(ApiError::bad_request("the body of the request must be an object"));
    };
    let meta = root.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if meta.is_null() {
        *meta = Value::Object(Map::new());
    }
    match meta {
        Value::Object(m) => Ok(m),
        other => Err(ApiError::bad_request(format!(
            "invalid metadata: expected object, got {}",
            super::codec::compact(other)
        ))),
    }
}

/// Drops unknown fields under `metadata`, returning their paths (`metadata.foo`).
pub fn drop_unknown_metadata(meta: &mut Map<String, Value>) -> Vec<String> {
    let unknown: Vec<String> = meta.keys().filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str())).cloned().collect();
    for key in &unknown {
        meta.remove(key);
    }
    unknown.into_iter().map(|k| format!("metadata.{k}")).collect()
}

/// What the request says about where the object lives.
pub struct Placement<'a> {
    /// `Some` for namespaced resources.
    pub namespace: Option<&'a str>,
    pub status_subresource: bool,
    /// A write to the status subresource: it never changes the desired state, so never the
    /// generation (the status strategy keeps the old one).
    pub status_write: bool,
}

/// Sets what the server owns on create: name from generateName, namespace, uid,
/// creationTimestamp, generation 1; clears deletion fields; drops status when the status
/// subresource is enabled. Returns field errors for a missing or invalid name.
pub fn prepare_create(object: &mut Value, placement: &Placement<'_>) -> Result<Vec<FieldError>, ApiError> {
    let meta = ensure_metadata(object)?;
    if meta.get("resourceVersion").and_then(Value::as_str).is_some_and(|rv| !rv.is_empty() && rv != "0") {
        return Err(ApiError::bad_request("resourceVersion should not be set on objects to be created"));
    }
    set_namespace(meta, placement.namespace)?;
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    meta.remove("resourceVersion");
    meta.remove("selfLink");
    meta.insert("generation".into(), Value::from(1));
    meta.insert("uid".into(), Value::String(crate::core::random::uuid_v4().to_string()));
    meta.insert("creationTimestamp".into(), Value::String(crate::core::time::now_rfc3339()));
    let mut errors = Vec::new();
    let name = meta.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    let generate = meta.get("generateName").and_then(Value::as_str).unwrap_or_default().to_string();
    if name.is_empty() && !generate.is_empty() {
        for problem in names::object_name(&generate, true) {
            errors.push(FieldError::invalid(Path::new("metadata").child("generateName"), generate.as_str(), problem));
        }
        if errors.is_empty() {
            meta.insert("name".into(), Value::String(names::generate_name(&generate)));
        }
    } else if name.is_empty() {
        errors.push(FieldError::required(Path::new("metadata").child("name"), "name or generateName is required"));
    } else {
        for problem in names::object_name(&name, false) {
            errors.push(FieldError::invalid(Path::new("metadata").child("name"), name.as_str(), problem));
        }
    }
    // The namespace came from the URL (the body's must equal it): `ValidateObjectMetaAccessor`
    // checks it as a namespace name, so a URL's `Bad_NS` is refused, never stored.
    if let Some(namespace) = placement.namespace {
        let at = Path::new("metadata").child("namespace");
        if namespace.is_empty() {
            errors.push(FieldError::required(at, ""));
        } else {
            for problem in names::dns1123_label(namespace) {
                errors.push(FieldError::invalid(at.clone(), namespace, problem));
            }
        }
    }
    if placement.status_subresource
        && let Value::Object(root) = object
    {
        root.remove("status");
    }
    Ok(errors)
}

/// Checks or fills the namespace of the body against the request's (`ValidNamespace`);
/// clears it for cluster-scoped resources.
fn set_namespace(meta: &mut Map<String, Value>, namespace: Option<&str>) -> Result<(), ApiError> {
    match namespace {
        Some(ns) => {
            let body_ns = meta.get("namespace").and_then(Value::as_str).unwrap_or_default();
            if body_ns.is_empty() {
                meta.insert("namespace".into(), Value::String(ns.to_string()));
            } else if body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        None => {
            meta.remove("namespace");
        }
    }
    Ok(())
}

/// Carries the server-owned fields from the stored object into an update, bumps generation
/// when anything outside `metadata` changed, and keeps `status` when the status subresource
/// owns it. Returns field errors for immutable fields.
pub fn prepare_update(object: &mut Value, old: &Value, placement: &Placement<'_>) -> Result<Vec<FieldError>, ApiError> {
    let old_meta = metadata(old).cloned().unwrap_or_default();
    let meta = ensure_metadata(object)?;
    set_namespace(meta, placement.namespace)?;
    let mut errors = Vec::new();
    match meta.get("uid").and_then(Value::as_str) {
        None | Some("") => {
            if let Some(uid) = old_meta.get("uid") {
                meta.insert("uid".into(), uid.clone());
            }
        }
        Some(uid) if Some(uid) != old_meta.get("uid").and_then(Value::as_str) => {
            errors.push(FieldError::invalid(Path::new("metadata").child("uid"), uid, "field is immutable"));
        }
        Some(_) => {}
    }
    for field in ["creationTimestamp", "generation"] {
        match old_meta.get(field) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.remove(field),
        };
    }
    if let Some(ts) = old_meta.get("deletionTimestamp").filter(|v| !v.is_null()) {
        meta.insert("deletionTimestamp".into(), ts.clone());
    }
    if let Some(grace) = old_meta.get("deletionGracePeriodSeconds").filter(|v| !v.is_null())
        && meta.get("deletionGracePeriodSeconds").is_none_or(Value::is_null)
    {
        meta.insert("deletionGracePeriodSeconds".into(), grace.clone());
    }
    meta.remove("selfLink");
    if is_deleting(old) {
        let old_finalizers = finalizers(old);
        let added: Vec<String> = finalizers(object).into_iter().filter(|f| !old_finalizers.contains(f)).collect();
        if !added.is_empty() {
            errors.push(FieldError::forbidden(
                Path::new("metadata").child("finalizers"),
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {}",
                    go_string_list(&added)
                ),
            ));
        }
    }
    if let (Value::Object(new_root), Value::Object(old_root)) = (&mut *object, old) {
        if placement.status_subresource {
            match old_root.get("status") {
                Some(status) => {
                    new_root.insert("status".into(), status.clone());
                }
                None => {
                    new_root.remove("status");
                }
            }
        }
        let changed =
            new_root.iter().filter(|(k, _)| *k != "metadata").ne(old_root.iter().filter(|(k, _)| *k != "metadata"));
        if changed
            && !placement.status_write
            && let Some(meta) = new_root.get_mut("metadata").and_then(Value::as_object_mut)
        {
            let next = old_meta.get("generation").and_then(Value::as_i64).unwrap_or(0) + 1;
            meta.insert("generation".into(), Value::from(next));
        }
    }
    Ok(errors)
}

/// A set of strings as Kubernetes prints it with `%#v` of its sorted list:
/// `[]string{"a", "b"}`.
fn go_string_list(items: &[String]) -> String {
    let set: std::collections::BTreeSet<&str> = items.iter().map(String::as_str).collect();
    let quoted: Vec<String> = set.into_iter().map(crate::core::field::go_quote).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NAMESPACED: Placement<'static> =
        Placement { namespace: Some("default"), status_subresource: false, status_write: false };

    #[test]
    fn create_fills_system_fields() {
        let mut obj = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x", "deletionTimestamp": "2020-01-01T00:00:00Z"}});
        assert!(prepare_create(&mut obj, &NAMESPACED).unwrap().is_empty());
        let meta = metadata(&obj).unwrap();
        assert_eq!(meta["namespace"], "default");
        assert_eq!(meta["generation"], 1);
        assert_eq!(meta["uid"].as_str().unwrap().len(), 36);
        assert!(meta.get("deletionTimestamp").is_none());
    }

    #[test]
    fn create_generates_and_validates_names() {
        let mut obj = json!({"metadata": {"generateName": "web-"}});
        prepare_create(&mut obj, &NAMESPACED).unwrap();
        assert!(name(&obj).starts_with("web-") && name(&obj).len() == 9);
        let mut missing = json!({"metadata": {}});
        let errs = prepare_create(&mut missing, &NAMESPACED).unwrap();
        assert_eq!(errs[0].to_string(), "metadata.name: Required value: name or generateName is required");
        let mut bad = json!({"metadata": {"name": "Bad_Name"}});
        assert!(
            prepare_create(&mut bad, &NAMESPACED).unwrap()[0]
                .to_string()
                .starts_with("metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain")
        );
    }

    #[test]
    fn create_checks_namespace_and_resource_version() {
        let mut other = json!({"metadata": {"name": "x", "namespace": "other"}});
        assert_eq!(prepare_create(&mut other, &NAMESPACED).unwrap_err().code, 400);
        let mut with_rv = json!({"metadata": {"name": "x", "resourceVersion": "5"}});
        assert_eq!(
            prepare_create(&mut with_rv, &NAMESPACED).unwrap_err().message,
            "resourceVersion should not be set on objects to be created"
        );
        let bad_namespace = Placement { namespace: Some("Bad_NS"), ..NAMESPACED };
        let errs = prepare_create(&mut json!({"metadata": {"name": "Bad_Name"}}), &bad_namespace).unwrap();
        let texts: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(texts[0].starts_with("metadata.name: Invalid value: \"Bad_Name\""), "{texts:?}");
        assert_eq!(
            texts[1],
            "metadata.namespace: Invalid value: \"Bad_NS\": a lowercase RFC 1123 label must consist of lower case \
             alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  \
             or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        );
        let mut cluster = json!({"metadata": {"name": "x", "namespace": "ignored"}});
        prepare_create(&mut cluster, &Placement { namespace: None, status_subresource: false, status_write: false })
            .unwrap();
        assert_eq!(namespace(&cluster), "");
    }

    #[test]
    fn update_bumps_generation_only_for_non_metadata_changes() {
        let old =
            json!({"metadata": {"name": "x", "uid": "u", "generation": 3, "creationTimestamp": "t"}, "spec": {"a": 1}});
        let mut labels_only =
            json!({"metadata": {"name": "x", "labels": {"a": "b"}, "generation": 9}, "spec": {"a": 1}});
        prepare_update(&mut labels_only, &old, &NAMESPACED).unwrap();
        assert_eq!(generation(&labels_only), 3);
        assert_eq!(uid(&labels_only), "u");
        let mut spec_change = json!({"metadata": {"name": "x"}, "spec": {"a": 2}});
        prepare_update(&mut spec_change, &old, &NAMESPACED).unwrap();
        assert_eq!(generation(&spec_change), 4);
    }

    #[test]
    fn update_keeps_status_under_the_status_subresource() {
        let placement = Placement { namespace: Some("default"), status_subresource: true, status_write: false };
        let old = json!({"metadata": {"name": "x", "generation": 1}, "spec": {}, "status": {"ok": true}});
        let mut new = json!({"metadata": {"name": "x"}, "spec": {}, "status": {"ok": false}});
        prepare_update(&mut new, &old, &placement).unwrap();
        assert_eq!(new["status"]["ok"], true);
        assert_eq!(generation(&new), 1);
    }

    #[test]
    fn status_writes_keep_the_generation() {
        let placement = Placement { namespace: Some("default"), status_subresource: false, status_write: true };
        let old = json!({"metadata": {"name": "x", "generation": 2}, "spec": {}, "status": {"ok": true}});
        let mut new = json!({"metadata": {"name": "x"}, "spec": {}, "status": {"ok": false}});
        prepare_update(&mut new, &old, &placement).unwrap();
        assert_eq!(generation(&new), 2);
    }

    #[test]
    fn no_new_finalizers_while_deleting() {
        let old = json!({"metadata": {"name": "x", "deletionTimestamp": "t", "finalizers": ["a"]}});
        let mut new = json!({"metadata": {"name": "x", "finalizers": ["a", "c", "b", "c"]}});
        let errs = prepare_update(&mut new, &old, &NAMESPACED).unwrap();
        assert_eq!(
            errs[0].to_string(),
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b\", \"c\"}"
        );
    }
}
