//! The API layer's side of admission: builds the attributes of a write (operation, resource,
//! names, user, dry run, options) from a call and asks `admission` to mutate or validate,
//! turning its refusals into `Status` errors. A resource no admission configuration names
//! skips all of it after one index probe.

use serde_json::{Map, Value, json};

use super::Api;
use super::call::{Call, Subresource};
use super::errors;
use crate::admission::{Operation, Request, Target};
use crate::core::status::ApiError;

/// What a write is, for admission.
#[derive(Debug, Clone, Copy)]
pub struct Write<'a> {
    pub operation: Operation,
    /// The options kind sent to webhooks (`PatchOptions` for patches of an update).
    pub options_kind: &'static str,
    /// The name of the object (empty for a create with `generateName`).
    pub name: &'a str,
    pub dry_run: bool,
}

impl<'a> Write<'a> {
    pub fn new(operation: Operation, name: &'a str, dry_run: bool) -> Write<'a> {
        Write { operation, options_kind: operation.options_kind(), name, dry_run }
    }
}

fn subresource_name(call: &Call) -> &'static str {
    match call.subresource {
        Subresource::None => "",
        Subresource::Status => "status",
        Subresource::Scale => "scale",
    }
}

/// The options object of the request, as Kubernetes passes it to admission.
fn options(call: &Call, write: &Write<'_>) -> Value {
    let mut options = Map::new();
    options.insert("kind".into(), json!(write.options_kind));
    options.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
    if write.dry_run {
        options.insert("dryRun".into(), json!(["All"]));
    }
    for (query, field) in [("fieldManager", "fieldManager"), ("fieldValidation", "fieldValidation")] {
        if let Some(value) = call.query.get(query).filter(|v| !v.is_empty()) {
            options.insert(field.into(), json!(value));
        }
    }
    if call.query.get("force") == Some("true") {
        options.insert("force".into(), json!(true));
    }
    if let Some(policy) = call.query.get("propagationPolicy").filter(|v| !v.is_empty()) {
        options.insert("propagationPolicy".into(), json!(policy));
    }
    Value::Object(options)
}

fn request<'a>(call: &'a Call, write: &Write<'a>, options: &'a Value) -> Request<'a> {
    let definition = &call.served.definition;
    Request {
        operation: write.operation,
        definition,
        version: &call.served.version.name,
        target: Target {
            group: &definition.group,
            resource: &definition.plural,
            subresource: subresource_name(call),
            namespace: call.namespace.as_deref().unwrap_or_default(),
            name: write.name,
        },
        user: &call.user,
        dry_run: write.dry_run,
        options,
    }
}

fn handles(api: &Api, call: &Call) -> bool {
    let definition = &call.served.definition;
    api.admission().handles(&definition.group, &definition.plural)
}

/// Mutating admission of a write; returns warnings and whether the object changed.
pub async fn mutate(
    api: &Api,
    call: &Call,
    write: Write<'_>,
    object: Option<&mut Value>,
    old: Option<&Value>,
) -> Result<(Vec<String>, bool), ApiError> {
    if !handles(api, call) {
        return Ok((Vec::new(), false));
    }
    let options = options(call, &write);
    let request = request(call, &write, &options);
    let mutated =
        api.admission().mutate(&request, object, old).await.map_err(|e| errors::admission(e, call, write.name))?;
    Ok((mutated.warnings, mutated.changed))
}

/// Validating admission of a write; returns warnings.
pub async fn validate(
    api: &Api,
    call: &Call,
    write: Write<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    if !handles(api, call) {
        return Ok(Vec::new());
    }
    let options = options(call, &write);
    let request = request(call, &write, &options);
    api.admission().validate(&request, object, old).await.map_err(|e| errors::admission(e, call, write.name))
}
