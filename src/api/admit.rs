//! The API layer's side of admission: builds the attributes of a write (operation, resource,
//! names, user, dry run, options) from a call and asks `admission` to mutate or validate,
//! turning its refusals into `Status` errors. What applies to a write is found once
//! ([`begin`]) for both steps; a resource no admission configuration names skips all of it
//! after one index probe.

use serde_json::{Map, Value, json};

use super::Api;
use super::call::{Call, Subresource};
use super::errors;
use crate::admission::{Operation, Request, Step, Target};
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
    if call.query.get("force").is_some_and(crate::core::strconv::query_bool) {
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

/// The admission of one write (from [`begin`]): what applies to its resource, found once
/// for both steps, and the options object webhooks are sent.
pub struct Admitting<'a> {
    step: Step<'a>,
    write: Write<'a>,
    options: Value,
}

/// Begins the admission of a write: `None` when no admission step can apply to its resource
/// (one index probe, nothing allocated).
pub fn begin<'a>(api: &'a Api, call: &Call, write: Write<'a>) -> Option<Admitting<'a>> {
    let definition = &call.served.definition;
    let step = api.admission().begin(&definition.group, &definition.plural)?;
    Some(Admitting { step, write, options: options(call, &write) })
}

impl Admitting<'_> {
    /// Mutating admission of the write; returns warnings and whether the object changed.
    pub async fn mutate(
        &self,
        call: &Call,
        object: Option<&mut Value>,
        old: Option<&Value>,
    ) -> Result<(Vec<String>, bool), ApiError> {
        let request = request(call, &self.write, &self.options);
        let mutated =
            self.step.mutate(&request, object, old).await.map_err(|e| errors::admission(e, call, self.write.name))?;
        Ok((mutated.warnings, mutated.changed))
    }

    /// Validating admission of the write; returns warnings.
    pub async fn validate(
        &self,
        call: &Call,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        let request = request(call, &self.write, &self.options);
        self.step.validate(&request, object, old).await.map_err(|e| errors::admission(e, call, self.write.name))
    }
}

/// Mutating admission of a write that may not be admitted (`None`: nothing applies).
pub async fn mutate(
    admitting: Option<&Admitting<'_>>,
    call: &Call,
    object: Option<&mut Value>,
    old: Option<&Value>,
) -> Result<(Vec<String>, bool), ApiError> {
    match admitting {
        Some(admitting) => admitting.mutate(call, object, old).await,
        None => Ok((Vec::new(), false)),
    }
}

/// Validating admission of a write that may not be admitted (`None`: nothing applies).
pub async fn validate(
    admitting: Option<&Admitting<'_>>,
    call: &Call,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    match admitting {
        Some(admitting) => admitting.validate(call, object, old).await,
        None => Ok(Vec::new()),
    }
}
