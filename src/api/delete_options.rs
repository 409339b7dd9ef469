//! `DeleteOptions` read as kube-apiserver's delete handlers read them: from the body when there
//! is one (JSON or YAML, decoded into the Go type, whose refusals are Go's texts; any
//! `apiVersion` of kind `DeleteOptions`, and nothing else), otherwise from the query — never
//! both, so `?dryRun=All` beside a body is not a dry run, as in Kubernetes — then validated
//! (`ValidateDeleteOptions`, a 422).
//!
//! Owns reading and validating the options; `api::delete` acts on them.

use serde_json::Value;

use super::call::Call;
use super::codec::{self, json_type};
use super::negotiate::content_type_essence;
use super::strict::{self, JsonError};
use crate::core::field::{FieldError, Path};
use crate::core::gvr::GroupKind;
use crate::core::status::ApiError;
use crate::core::strconv;

/// The parts of `DeleteOptions` this server acts on.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub propagation_policy: Option<String>,
    pub dry_run: bool,
}

/// Everything of the options that is read, before validation.
#[derive(Debug, Default)]
struct Read {
    uid: Option<String>,
    resource_version: Option<String>,
    propagation_policy: Option<String>,
    orphan_dependents: Option<bool>,
    dry_run: Vec<String>,
}

/// The scheme kube-apiserver names when a body is of a kind it cannot decode options from.
const META_SCHEME: &str = "pkg/apis/meta/internalversion/scheme/register.go:27";

/// Kinds the options' scheme knows besides `DeleteOptions`: decoding one fails on converting it
/// (`CreateOptions` and `UpdateOptions` in any version, as `DeleteOptions`).
fn known_kind(group: &str, version: &str, kind: &str) -> bool {
    let any_version = ["CreateOptions", "UpdateOptions"];
    let meta_v1 = [
        "CreateOptions",
        "GetOptions",
        "ListOptions",
        "PartialObjectMetadata",
        "PartialObjectMetadataList",
        "PatchOptions",
        "Table",
        "TableOptions",
        "UpdateOptions",
        "WatchEvent",
    ];
    let meta_v1beta1 = ["PartialObjectMetadata", "PartialObjectMetadataList", "Table", "TableOptions"];
    let core_v1 = ["APIGroup", "APIGroupList", "APIResourceList", "APIVersions", "Status"];
    any_version.contains(&kind)
        || match (group, version) {
            ("meta.k8s.io", "v1") => meta_v1.contains(&kind),
            ("meta.k8s.io", "v1beta1") => meta_v1beta1.contains(&kind),
            ("", "v1") => core_v1.contains(&kind),
            _ => false,
        }
}

impl DeleteOptions {
    /// Reads the options from the body, or the query when the body is empty.
    pub fn parse(call: &Call, body: &[u8]) -> Result<DeleteOptions, ApiError> {
        let read = if body.is_empty() { from_query(call)? } else { from_body(body, call.content_type())? };
        validate(read)
    }
}

fn from_query(call: &Call) -> Result<Read, ApiError> {
    if let Some(seconds) = call.query.get("gracePeriodSeconds") {
        strconv::parse_int(seconds).map_err(ApiError::bad_request)?;
    }
    Ok(Read {
        propagation_policy: call.query.get("propagationPolicy").map(str::to_string),
        orphan_dependents: call.query.get("orphanDependents").map(strconv::query_bool),
        dry_run: call.query.all("dryRun").map(str::to_string).collect(),
        ..Read::default()
    })
}

fn from_body(body: &[u8], content_type: Option<&str>) -> Result<Read, ApiError> {
    let value = match content_type_essence(content_type).as_str() {
        "" | "application/json" => {
            let parsed = strict::from_json(body).map_err(|e| match e {
                JsonError::Syntax(text) => {
                    ApiError::bad_request(format!("couldn't get version/kind; json parse error: {text}"))
                }
            })?;
            parsed.tracked.value
        }
        "application/yaml" => {
            let text =
                std::str::from_utf8(body).map_err(|_| ApiError::bad_request("yaml: invalid leading UTF-8 octet"))?;
            super::go_yaml::first_document(text).map_err(ApiError::bad_request)?.value
        }
        _ => {
            return Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
            ));
        }
    };
    let meta = codec::read_type_meta(&value).map_err(ApiError::bad_request)?;
    // Missing parts default to meta.k8s.io/v1 DeleteOptions.
    let kind = if meta.kind.is_empty() { "DeleteOptions" } else { &meta.kind };
    let (group, version) = match (meta.group.as_str(), meta.version.as_str()) {
        ("", "") => ("meta.k8s.io", "v1"),
        ("meta.k8s.io", "") => ("meta.k8s.io", "v1"),
        (group, version) => (group, version),
    };
    if kind != "DeleteOptions" {
        let message = if known_kind(group, version, kind) {
            format!("converting (v1.{kind}) to (v1.DeleteOptions): unknown conversion")
        } else {
            let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
            format!("no kind \"{kind}\" is registered for version \"{gv}\" in scheme \"{META_SCHEME}\"")
        };
        return Err(ApiError::bad_request(message));
    }
    typed_fields(&value).map_err(ApiError::bad_request)
}

/// The fields of `metav1.DeleteOptions`, each checked against its Go type (a refusal in Go's
/// words); fields it does not have are ignored.
fn typed_fields(value: &Value) -> Result<Read, String> {
    let mut read = Read::default();
    let Some(fields) = value.as_object() else { return Ok(read) };
    let refuse = |found: &Value, field: &str, go_type: &str| {
        format!("json: cannot unmarshal {} into Go struct field {field} of type {go_type}", json_type(found))
    };
    let present = |name: &str| fields.get(name).filter(|v| !v.is_null());
    match present("gracePeriodSeconds") {
        None => {}
        Some(seconds) if seconds.as_i64().is_some() => {}
        // Go names the literal of a number that does not fit.
        Some(Value::Number(n)) => {
            return Err(format!(
                "json: cannot unmarshal number {n} into Go struct field DeleteOptions.gracePeriodSeconds of type int64"
            ));
        }
        Some(other) => return Err(refuse(other, "DeleteOptions.gracePeriodSeconds", "int64")),
    }
    if let Some(preconditions) = present("preconditions") {
        let Some(preconditions) = preconditions.as_object() else {
            return Err(refuse(preconditions, "DeleteOptions.preconditions", "v1.Preconditions"));
        };
        for (name, go_type) in [("uid", "types.UID"), ("resourceVersion", "string")] {
            match preconditions.get(name) {
                None | Some(Value::Null) => {}
                Some(Value::String(text)) if name == "uid" => read.uid = Some(text.clone()),
                Some(Value::String(text)) => read.resource_version = Some(text.clone()),
                Some(other) => return Err(refuse(other, &format!("Preconditions.preconditions.{name}"), go_type)),
            }
        }
    }
    match present("orphanDependents") {
        None => {}
        Some(Value::Bool(orphan)) => read.orphan_dependents = Some(*orphan),
        Some(other) => return Err(refuse(other, "DeleteOptions.orphanDependents", "bool")),
    }
    match present("propagationPolicy") {
        None => {}
        Some(Value::String(policy)) => read.propagation_policy = Some(policy.clone()),
        Some(other) => return Err(refuse(other, "DeleteOptions.propagationPolicy", "v1.DeletionPropagation")),
    }
    match present("dryRun") {
        None => {}
        Some(Value::Array(items)) => {
            for item in items {
                match item {
                    Value::String(text) => read.dry_run.push(text.clone()),
                    // A null element is Go's empty string.
                    Value::Null => read.dry_run.push(String::new()),
                    other => return Err(refuse(other, "DeleteOptions.dryRun", "string")),
                }
            }
        }
        Some(other) => return Err(refuse(other, "DeleteOptions.dryRun", "[]string")),
    }
    if let Some(flag) = present("ignoreStoreReadErrorWithClusterBreakingPotential")
        && !flag.is_boolean()
    {
        return Err(refuse(flag, "DeleteOptions.ignoreStoreReadErrorWithClusterBreakingPotential", "bool"));
    }
    Ok(read)
}

/// `ValidateDeleteOptions`, then what the options mean here: `orphanDependents` is the
/// `Orphan` policy when no policy is given.
fn validate(read: Read) -> Result<DeleteOptions, ApiError> {
    let mut errors = Vec::new();
    if read.orphan_dependents.is_some()
        && let Some(policy) = &read.propagation_policy
    {
        errors.push(FieldError::invalid(
            Path::new("propagationPolicy"),
            policy.as_str(),
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    if let Some(policy) = read.propagation_policy.as_deref()
        && !matches!(policy, "Foreground" | "Background" | "Orphan")
    {
        errors.push(FieldError::not_supported(
            Path::new("propagationPolicy"),
            policy,
            &["Foreground", "Background", "Orphan", "nil"],
        ));
    }
    let dry_run: Vec<&str> = read.dry_run.iter().map(String::as_str).collect();
    errors.extend(super::ownership::dry_run_error(&dry_run));
    if !errors.is_empty() {
        return Err(ApiError::invalid(&GroupKind::new("meta.k8s.io", "DeleteOptions"), "", &errors));
    }
    let propagation_policy = match (read.propagation_policy, read.orphan_dependents) {
        (Some(policy), _) => Some(policy),
        (None, Some(true)) => Some("Orphan".to_string()),
        (None, _) => None,
    };
    Ok(DeleteOptions {
        uid: read.uid,
        resource_version: read.resource_version,
        propagation_policy,
        dry_run: !read.dry_run.is_empty(),
    })
}

#[cfg(test)]
mod tests;
