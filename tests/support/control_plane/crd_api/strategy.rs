//! What kube-apiserver's CustomResourceDefinition registry does to a write before it stores
//! it: v1 defaults (`names.singular`, `names.listKind`, `conversion.strategy`), the checks this
//! double makes (a subset of `ValidateCustomResourceDefinition`, in its words: the name is
//! `<plural>.<group>`, group, plural, kind and scope present, scope supported; on update the
//! group and, for an established definition, the scope immutable; stored versions kept in
//! `spec.versions`), the status a create starts with (`storedVersions`), what an update keeps
//! (status; uid; creation time) and the generation, and the status that the naming and
//! establishing controllers then write.
//!
//! Pure functions over JSON: no locks, no HTTP.

use serde_json::{Value, json};

use super::super::respond::{self, Response};

/// A refusal, rendered as kube-apiserver's `Status`.
#[derive(Debug, Clone)]
pub struct Failure {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Value,
}

impl Failure {
    pub fn response(&self) -> Response {
        respond::status(self.code, self.reason, &self.message, Some(self.details.clone()))
    }

    fn named(code: u16, reason: &'static str, name: &str, message: String) -> Failure {
        Failure {
            code,
            reason,
            message,
            details: json!({"name": name, "group": super::GROUP, "kind": super::RESOURCE}),
        }
    }

    pub fn not_found(name: &str) -> Failure {
        Failure::named(404, "NotFound", name, format!("{}.{} \"{name}\" not found", super::RESOURCE, super::GROUP))
    }

    pub fn already_exists(name: &str) -> Failure {
        Failure::named(
            409,
            "AlreadyExists",
            name,
            format!("{}.{} \"{name}\" already exists", super::RESOURCE, super::GROUP),
        )
    }

    pub fn conflict(name: &str) -> Failure {
        Failure::named(
            409,
            "Conflict",
            name,
            format!(
                "Operation cannot be fulfilled on {}.{} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                super::RESOURCE,
                super::GROUP
            ),
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Failure {
        Failure { code: 400, reason: "BadRequest", message: message.into(), details: json!({}) }
    }

    /// 422 Invalid for the field errors of a CustomResourceDefinition named `name`.
    pub fn invalid(name: &str, errors: &[FieldError]) -> Failure {
        Failure::invalid_kind(super::GROUP, "CustomResourceDefinition", name, errors)
    }

    /// 422 Invalid for the field errors of an object of `group`/`kind` named `name`.
    pub fn invalid_kind(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Failure {
        let rendered: Vec<String> = errors.iter().map(FieldError::to_string).collect();
        let list = match rendered.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.reason(), "message": e.detail_text(), "field": e.field}))
            .collect();
        Failure {
            code: 422,
            reason: "Invalid",
            message: format!("{kind}.{group} \"{name}\" is invalid: {list}"),
            details: if name.is_empty() {
                json!({"group": group, "kind": kind, "causes": causes})
            } else {
                json!({"name": name, "group": group, "kind": kind, "causes": causes})
            },
        }
    }
}

/// One field error, as k8s.io/apimachinery's `field.Error` prints it.
#[derive(Debug, Clone)]
pub struct FieldError {
    pub field: String,
    pub kind: ErrorKind,
}

#[derive(Debug, Clone)]
pub enum ErrorKind {
    Required,
    /// The value as Go's `%#v`-free rendering kube-apiserver uses for strings (quoted) and
    /// the detail.
    Invalid(String, String),
    NotSupported(String, &'static [&'static str]),
    Forbidden(String),
}

impl FieldError {
    fn reason(&self) -> &'static str {
        match self.kind {
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::Invalid(..) => "FieldValueInvalid",
            ErrorKind::NotSupported(..) => "FieldValueNotSupported",
            ErrorKind::Forbidden(_) => "FieldValueForbidden",
        }
    }

    fn detail_text(&self) -> String {
        match &self.kind {
            ErrorKind::Required => "Required value".into(),
            ErrorKind::Invalid(value, detail) => format!("Invalid value: {value}: {detail}"),
            ErrorKind::NotSupported(value, supported) => {
                let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
                format!("Unsupported value: \"{value}\": supported values: {}", list.join(", "))
            }
            ErrorKind::Forbidden(detail) => format!("Forbidden: {detail}"),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.detail_text())
    }
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn quoted(value: &str) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The v1 defaults (`SetDefaults_CustomResourceDefinitionSpec` and the webhook service port).
pub fn default(crd: &mut Value) {
    let kind = text(crd, "/spec/names/kind").to_string();
    if let Some(names) = crd.pointer_mut("/spec/names").and_then(Value::as_object_mut) {
        if names.get("singular").and_then(Value::as_str).unwrap_or_default().is_empty() {
            names.insert("singular".into(), json!(kind.to_lowercase()));
        }
        if names.get("listKind").and_then(Value::as_str).unwrap_or_default().is_empty() && !kind.is_empty() {
            names.insert("listKind".into(), json!(format!("{kind}List")));
        }
    }
    if let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("conversion").or_insert_with(|| json!({"strategy": "None"}));
    }
    if let Some(service) =
        crd.pointer_mut("/spec/conversion/webhook/clientConfig/service").and_then(Value::as_object_mut)
    {
        service.entry("port").or_insert(json!(443));
    }
}

/// The checks of a create (and of every update).
pub fn validate(crd: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = text(crd, "/metadata/name");
    let (group, plural) = (text(crd, "/spec/group"), text(crd, "/spec/names/plural"));
    if name != format!("{plural}.{group}") {
        errors.push(FieldError {
            field: "metadata.name".into(),
            kind: ErrorKind::Invalid(quoted(name), "must be spec.names.plural+\".\"+spec.group".into()),
        });
    }
    for (field, value) in
        [("spec.group", group), ("spec.names.plural", plural), ("spec.names.kind", text(crd, "/spec/names/kind"))]
    {
        if value.is_empty() {
            errors.push(FieldError { field: field.into(), kind: ErrorKind::Required });
        }
    }
    match text(crd, "/spec/scope") {
        "" => errors.push(FieldError { field: "spec.scope".into(), kind: ErrorKind::Required }),
        "Cluster" | "Namespaced" => {}
        other => errors.push(FieldError {
            field: "spec.scope".into(),
            kind: ErrorKind::NotSupported(other.into(), &["Cluster", "Namespaced"]),
        }),
    }
    errors
}

fn version_names(crd: &Value) -> Vec<String> {
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
    versions.iter().filter_map(|v| v["name"].as_str().map(str::to_string)).collect()
}

fn storage_version(crd: &Value) -> Option<String> {
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array)?;
    versions.iter().find(|v| v["storage"] == true).and_then(|v| v["name"].as_str()).map(str::to_string)
}

/// The status a new definition is stored with (`PrepareForCreate`).
pub fn prepare_for_create(crd: &mut Value) {
    let stored: Vec<String> = storage_version(crd).into_iter().collect();
    crd["status"] = json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": stored});
    crd["metadata"]["generation"] = json!(1);
    crd["metadata"]["uid"] = json!(uuid::Uuid::new_v4().to_string());
    crd["metadata"]["creationTimestamp"] = json!(now());
    if let Some(meta) = crd["metadata"].as_object_mut() {
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
    }
}

/// An update of the main resource (`PrepareForUpdate` and the update checks): the status,
/// uid, creation and deletion times are the old object's, the generation moves when the spec
/// changed, and a new storage version joins `status.storedVersions`.
pub fn prepare_for_update(old: &Value, new: &mut Value) -> Vec<FieldError> {
    new["status"] = old["status"].clone();
    keep_system_metadata(old, new);
    let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
    new["metadata"]["generation"] = json!(generation + i64::from(old["spec"] != new["spec"]));
    if let Some(storage) = storage_version(new)
        && let Some(stored) = new.pointer_mut("/status/storedVersions").and_then(Value::as_array_mut)
        && !stored.iter().any(|s| s == storage.as_str())
    {
        stored.push(json!(storage));
    }
    let mut errors = validate(new);
    let (old_group, new_group) = (text(old, "/spec/group"), text(new, "/spec/group"));
    if old_group != new_group {
        errors.push(FieldError {
            field: "spec.group".into(),
            kind: ErrorKind::Invalid(quoted(new_group), "field is immutable".into()),
        });
    }
    let (old_scope, new_scope) = (text(old, "/spec/scope"), text(new, "/spec/scope"));
    if old_scope != new_scope && established(old) {
        errors.push(FieldError {
            field: "spec.scope".into(),
            kind: ErrorKind::Invalid(quoted(new_scope), "field is immutable".into()),
        });
    }
    errors.extend(stored_versions_kept(new));
    errors
}

/// An update of the status subresource: only `status` changes.
pub fn prepare_for_status_update(old: &Value, sent: &Value) -> (Value, Vec<FieldError>) {
    let mut new = old.clone();
    new["status"] = sent["status"].clone();
    let names = version_names(&new);
    let stored = new.pointer("/status/storedVersions").and_then(Value::as_array).cloned().unwrap_or_default();
    let errors = stored
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let v = v.as_str().unwrap_or_default();
            (!names.iter().any(|n| n == v)).then(|| FieldError {
                field: format!("status.storedVersions[{i}]"),
                kind: ErrorKind::Invalid(quoted(v), "must appear in spec.versions".into()),
            })
        })
        .collect();
    (new, errors)
}

/// A version that was ever the storage version stays in `spec.versions` until a migration
/// took it out of `status.storedVersions`.
fn stored_versions_kept(crd: &Value) -> Vec<FieldError> {
    let names = version_names(crd);
    let stored = crd.pointer("/status/storedVersions").and_then(Value::as_array).cloned().unwrap_or_default();
    stored
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let v = v.as_str().unwrap_or_default();
            (!names.iter().any(|n| n == v)).then(|| FieldError {
                field: format!("status.storedVersions[{i}]"),
                kind: ErrorKind::Invalid(
                    quoted(v),
                    format!("missing from spec.versions; {v} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {v} and removes {v} from status.storedVersions"),
                ),
            })
        })
        .collect()
}

/// uid, creation time, deletion time and generation belong to the server, whatever a write
/// sends.
pub fn keep_system_metadata(old: &Value, new: &mut Value) {
    for key in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"] {
        match old["metadata"].get(key) {
            Some(value) => new["metadata"][key] = value.clone(),
            None => {
                if let Some(meta) = new["metadata"].as_object_mut() {
                    meta.remove(key);
                }
            }
        }
    }
}

pub fn established(crd: &Value) -> bool {
    condition(crd, "Established").is_some_and(|c| c["status"] == "True")
}

fn condition<'a>(crd: &'a Value, kind: &str) -> Option<&'a Value> {
    crd.pointer("/status/conditions").and_then(Value::as_array)?.iter().find(|c| c["type"] == kind)
}

/// Sets a condition as `SetCRDCondition` does: the transition time moves only when the status
/// does.
pub fn set_condition(crd: &mut Value, kind: &str, status: &str, reason: &str, message: &str) {
    let time = match condition(crd, kind) {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => json!(now()),
    };
    let entry =
        json!({"type": kind, "status": status, "lastTransitionTime": time, "reason": reason, "message": message});
    if !crd["status"]["conditions"].is_array() {
        crd["status"]["conditions"] = json!([]);
    }
    if let Some(conditions) = crd["status"]["conditions"].as_array_mut() {
        match conditions.iter_mut().find(|c| c["type"] == kind) {
            Some(existing) => *existing = entry,
            None => conditions.push(entry),
        }
    }
}

/// What the naming and establishing controllers write once a definition's names are known:
/// `acceptedNames` as the spec asks (this double has no name conflicts between definitions),
/// NamesAccepted and Established. `None` when the status already says so.
pub fn controllers_status(crd: &Value) -> Option<Value> {
    if crd["metadata"].get("deletionTimestamp").is_some() {
        return None;
    }
    let mut next = crd.clone();
    let mut accepted = crd["spec"]["names"].clone();
    if let Some(names) = accepted.as_object_mut() {
        names.retain(|_, v| !v.is_null());
    }
    next["status"]["acceptedNames"] = accepted;
    set_condition(&mut next, "NamesAccepted", "True", "NoConflicts", "no conflicts found");
    if !established(crd) {
        set_condition(&mut next, "Established", "True", "InitialNamesAccepted", "the initial names have been accepted");
    }
    (next != *crd).then_some(next)
}

/// What a first delete does (`REST.Delete`): the deletion time, the cleanup finalizer and the
/// Terminating condition.
pub fn mark_deleted(crd: &mut Value) {
    if crd["metadata"].get("deletionTimestamp").is_none() {
        crd["metadata"]["deletionTimestamp"] = json!(now());
    }
    if !crd["metadata"]["finalizers"].is_array() {
        crd["metadata"]["finalizers"] = json!([]);
    }
    if let Some(finalizers) = crd["metadata"]["finalizers"].as_array_mut()
        && !finalizers.iter().any(|f| f == super::CLEANUP_FINALIZER)
    {
        finalizers.push(json!(super::CLEANUP_FINALIZER));
    }
    set_condition(
        crd,
        "Terminating",
        "True",
        "InstanceDeletionPending",
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
    );
}

pub fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}
