//! apimachinery's ObjectMeta rules on decoded metadata: names, namespace, labels, annotations
//! (and their total size), owner references, finalizers, managed fields, plus the warnings
//! for finalizer names that are not domain-qualified.

use serde_json::{Map, Value};

use crate::core::field::{FieldError, Path};
use crate::core::names;

/// Largest total size of annotation keys and values.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: i64 = 256 * 1024;
const FIELD_MANAGER_MAX_LENGTH: usize = 128;
const MAX_SUBRESOURCE_NAME_LENGTH: usize = 256;
const STANDARD_FINALIZERS: [&str; 3] = ["orphan", "foregroundDeletion", "kubernetes"];

/// How object names are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// Custom resources: DNS-1123 subdomains.
    DnsSubdomain,
    /// Embedded objects: anything usable as a URL path segment.
    PathSegment,
}

impl NameRule {
    fn check(self, name: &str, prefix: bool) -> Vec<String> {
        match self {
            NameRule::DnsSubdomain => names::object_name(name, prefix),
            NameRule::PathSegment => names::path_segment(name, prefix),
        }
    }
}

fn str_of<'a>(meta: &'a Map<String, Value>, field: &str) -> &'a str {
    meta.get(field).and_then(Value::as_str).unwrap_or_default()
}

fn strings_of(meta: &Map<String, Value>, field: &str) -> Vec<String> {
    meta.get(field)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// Everything `ValidateObjectMeta` checks on create: names, namespace, then the details.
pub fn validate_create(meta: &Map<String, Value>, rule: NameRule, namespaced: bool, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let generate = str_of(meta, "generateName");
    if !generate.is_empty() {
        for m in rule.check(generate, true) {
            errs.push(FieldError::invalid(path.child("generateName"), generate, m));
        }
    }
    let name = str_of(meta, "name");
    if name.is_empty() {
        errs.push(FieldError::required(path.child("name"), "name or generateName is required"));
    } else {
        for m in rule.check(name, false) {
            errs.push(FieldError::invalid(path.child("name"), name, m));
        }
    }
    let namespace = str_of(meta, "namespace");
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(path.child("namespace"), ""));
        }
        for m in names::dns1123_label(namespace).into_iter().filter(|_| !namespace.is_empty()) {
            errs.push(FieldError::invalid(path.child("namespace"), namespace, m));
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(path.child("namespace"), "not allowed on this type"));
    }
    errs.extend(validate_details(meta, path, true));
    errs
}

/// The rules on labels, annotations, owner references, managed fields and generation (and
/// finalizers, checked on create only).
pub fn validate_details(meta: &Map<String, Value>, path: &Path, finalizers: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(generation) = meta.get("generation").and_then(Value::as_i64)
        && generation < 0
    {
        errs.push(FieldError::invalid(path.child("generation"), generation, "must be greater than or equal to 0"));
    }
    let labels_path = path.child("labels");
    for (key, value) in meta.get("labels").and_then(Value::as_object).into_iter().flatten() {
        for m in names::qualified_name(key) {
            errs.push(FieldError::invalid(labels_path.clone(), key.as_str(), m));
        }
        let value = value.as_str().unwrap_or_default();
        for m in names::label_value(value) {
            errs.push(FieldError::invalid(labels_path.clone(), value, m));
        }
    }
    errs.extend(validate_annotations(meta, &path.child("annotations")));
    errs.extend(validate_owner_references(meta, &path.child("ownerReferences")));
    if finalizers {
        errs.extend(validate_finalizers(&strings_of(meta, "finalizers"), &path.child("finalizers")));
    }
    errs.extend(validate_managed_fields(meta, &path.child("managedFields")));
    errs
}

/// Annotation keys are qualified names; keys and values hold at most 256 KiB in all.
pub fn validate_annotations(meta: &Map<String, Value>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut size: i64 = 0;
    for (key, value) in meta.get("annotations").and_then(Value::as_object).into_iter().flatten() {
        for m in names::qualified_name(&key.to_lowercase()) {
            errs.push(FieldError::invalid(path.clone(), key.as_str(), m));
        }
        size += (key.len() + value.as_str().map_or(0, str::len)) as i64;
    }
    if size > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path.clone(), TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

/// As Kubernetes 1.36 validates them (apimachinery's `ValidateOwnerReferences`): each error
/// is on `metadata.ownerReferences.<field>`, without the item's index, and `Invalid`.
fn validate_owner_references(meta: &Map<String, Value>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut first_controller: Option<String> = None;
    let refs = meta.get("ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
    for reference in &refs {
        let field = |name: &str| reference.get(name).and_then(Value::as_str).unwrap_or_default().to_string();
        let (api_version, kind) = (field("apiVersion"), field("kind"));
        // Go's ParseGroupVersion: no slash is a version, one splits group/version, more is
        // an error (which leaves no version).
        let (group, version) = match api_version.matches('/').count() {
            0 => ("", api_version.as_str()),
            1 => api_version.split_once('/').unwrap_or_default(),
            _ => ("", ""),
        };
        if version.is_empty() {
            errs.push(FieldError::invalid(path.child("apiVersion"), api_version.as_str(), "version must not be empty"));
        }
        for (name, value) in [("kind", kind.clone()), ("name", field("name")), ("uid", field("uid"))] {
            if value.is_empty() {
                errs.push(FieldError::invalid(path.child(name), value.as_str(), "must not be empty"));
            }
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            errs.push(FieldError::invalid_typed(
                path.clone(),
                owner_reference_json(reference),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if reference.get("controller").and_then(Value::as_bool) == Some(true) {
            let current = format!("{kind}/{}", field("name"));
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid_typed(
                    path.clone(),
                    format!("[{}]", refs.iter().map(owner_reference_json).collect::<Vec<_>>().join(",")),
                    format!("Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"),
                )),
                None => first_controller = Some(current),
            }
        }
    }
    errs
}

/// An owner reference as `encoding/json` writes a `metav1.OwnerReference`: its fields in their
/// declared order, the strings always, the two flags when set.
fn owner_reference_json(reference: &Value) -> String {
    let text = |name: &str| crate::core::field::go_json(reference.get(name).unwrap_or(&Value::String(String::new())));
    let mut out = format!(
        "{{\"apiVersion\":{},\"kind\":{},\"name\":{},\"uid\":{}",
        text("apiVersion"),
        text("kind"),
        text("name"),
        text("uid")
    );
    for flag in ["controller", "blockOwnerDeletion"] {
        if let Some(set) = reference.get(flag).and_then(Value::as_bool) {
            out.push_str(&format!(",\"{flag}\":{set}"));
        }
    }
    out.push('}');
    out
}

/// Finalizer names are qualified names; `orphan` and `foregroundDeletion` exclude each other.
pub fn validate_finalizers(finalizers: &[String], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for finalizer in finalizers {
        for m in names::qualified_name(finalizer) {
            errs.push(FieldError::invalid(path.clone(), finalizer.as_str(), m));
        }
    }
    if finalizers.iter().any(|f| f == "orphan") && finalizers.iter().any(|f| f == "foregroundDeletion") {
        let list: Vec<Value> = finalizers.iter().map(|f| Value::String(f.clone())).collect();
        errs.push(FieldError::invalid(
            path.clone(),
            Value::Array(list),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errs
}

fn validate_managed_fields(meta: &Map<String, Value>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, entry) in meta.get("managedFields").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = path.index(i);
        let field = |name: &str| entry.get(name).and_then(Value::as_str).unwrap_or_default();
        match field("operation") {
            "" => errs.push(FieldError::required(at.child("operation"), "must not be empty")),
            "Apply" | "Update" => {}
            other => errs.push(FieldError::not_supported(at.child("operation"), other, &["Apply", "Update"])),
        }
        let fields_type = field("fieldsType");
        if !fields_type.is_empty() && fields_type != "FieldsV1" {
            errs.push(FieldError::invalid(at.child("fieldsType"), fields_type, "must be `FieldsV1`"));
        }
        let manager = field("manager");
        if manager.len() > FIELD_MANAGER_MAX_LENGTH {
            errs.push(FieldError::too_long(at.child("manager"), FIELD_MANAGER_MAX_LENGTH as i64));
        }
        if field("subresource").len() > MAX_SUBRESOURCE_NAME_LENGTH {
            errs.push(FieldError::too_long(at.child("subresource"), MAX_SUBRESOURCE_NAME_LENGTH as i64));
        }
    }
    errs
}

/// Warnings for finalizers added by a write (`WarningsOnCreate`/`WarningsOnUpdate`).
pub fn finalizer_warnings(new: &[String], old: &[String]) -> Vec<String> {
    let mut added: Vec<&String> = new.iter().filter(|f| !old.contains(f)).collect();
    added.sort();
    added.dedup();
    let path = "metadata.finalizers";
    let mut warnings = Vec::new();
    for finalizer in added {
        let quoted = crate::core::field::go_quote(finalizer);
        for m in names::qualified_name(finalizer) {
            warnings.push(format!("{path}: {quoted}: {m}"));
        }
        if !finalizer.contains('/') && !STANDARD_FINALIZERS.contains(&finalizer.as_str()) {
            let advice = if finalizer.contains('.') {
                "prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers"
            } else {
                "prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers"
            };
            warnings.push(format!("{path}: {quoted}: {advice}"));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(meta: Value, expected: &[&str]) {
        let errs = validate_details(meta.as_object().unwrap(), &Path::new("metadata"), true);
        let got: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn labels_and_annotations() {
        check(json!({"labels": {"app": "web", "example.com/tier": ""}}), &[]);
        check(
            json!({"labels": {"bad key!": "v"}}),
            &[
                r#"metadata.labels: Invalid value: "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"#,
            ],
        );
        check(
            json!({"annotations": {"a": "x".repeat(300 * 1024)}}),
            &["metadata.annotations: Too long: may not be more than 262144 bytes"],
        );
    }

    #[test]
    fn finalizers_and_owners() {
        check(
            json!({"finalizers": ["orphan", "foregroundDeletion"]}),
            &[
                r#"metadata.finalizers: Invalid value: ["orphan","foregroundDeletion"]: finalizer orphan and foregroundDeletion cannot be both set"#,
            ],
        );
        check(
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "", "name": "n", "uid": "u"}]}),
            &["metadata.ownerReferences.kind: Invalid value: \"\": must not be empty"],
        );
        check(
            json!({"ownerReferences": [{"apiVersion": "a/b/c", "kind": "K", "name": "", "uid": "u"}]}),
            &[
                "metadata.ownerReferences.apiVersion: Invalid value: \"a/b/c\": version must not be empty",
                "metadata.ownerReferences.name: Invalid value: \"\": must not be empty",
            ],
        );
        // References print as `encoding/json` writes the typed struct (1.36's texts, taken
        // from apimachinery's own ValidateOwnerReferences).
        check(
            json!({"ownerReferences": [
                {"uid": "u", "name": "e<", "kind": "Event", "apiVersion": "v1"},
                {"apiVersion": "a/v1", "kind": "K", "name": "n", "uid": "u2", "controller": true},
                {"apiVersion": "a/v1", "blockOwnerDeletion": true, "controller": true, "kind": "K", "name": "m", "uid": "u3"},
            ]}),
            &[
                r#"metadata.ownerReferences: Invalid value: {"apiVersion":"v1","kind":"Event","name":"e\u003c","uid":"u"}: /v1, Kind=Event is disallowed from being an owner"#,
                r#"metadata.ownerReferences: Invalid value: [{"apiVersion":"v1","kind":"Event","name":"e\u003c","uid":"u"},{"apiVersion":"a/v1","kind":"K","name":"n","uid":"u2","controller":true},{"apiVersion":"a/v1","kind":"K","name":"m","uid":"u3","controller":true,"blockOwnerDeletion":true}]: Only one reference can have Controller set to true. Found "true" in references for K/n and K/m"#,
            ],
        );
    }

    #[test]
    fn finalizer_names_get_advice() {
        assert_eq!(
            finalizer_warnings(&["foo".into(), "example.com/x".into(), "a.b".into()], &[]),
            [
                r#"metadata.finalizers: "a.b": prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers"#,
                r#"metadata.finalizers: "foo": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers"#,
            ]
        );
        assert!(finalizer_warnings(&["foo".into()], &["foo".into()]).is_empty());
    }

    #[test]
    fn create_checks_names_and_namespace() {
        let meta = json!({"name": "..", "namespace": "Bad"});
        let errs = validate_create(meta.as_object().unwrap(), NameRule::PathSegment, true, &Path::new("metadata"));
        let got: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(got[0], r#"metadata.name: Invalid value: "..": may not be '..'"#);
        assert!(got[1].starts_with(r#"metadata.namespace: Invalid value: "Bad": a lowercase RFC 1123 label"#));
    }
}
