//! MutatingAdmissionPolicy on our CEL engine, as k8s.io/apiserver's mutating policy plugin
//! runs it: every matching policy, binding and param in turn (policies in name order), match
//! conditions, variables, then the policy's mutations in order, each applied to the object as
//! the previous one left it, in the version the policy matched; policies with
//! `reinvocationPolicy: IfNeeded` are called again, once, when a later admission step changed
//! the object. Failures are decided by `failurePolicy` and read as kube-apiserver words them
//! (`policy 'p' with binding 'b' denied request: ...`).
//!
//! Owns this plugin's step of mutating admission; the patches themselves are applied by
//! `fieldmanager::apply_configuration` and `core::bounded_patch`, params and matching are the
//! validating policies' (`policy`).

pub mod compiled;

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use super::mutating::in_version;
use super::policy::compiled::Compiled;
use super::policy::compiled::ForResource;
use super::policy::{ParamSource, namespace_object, params};
use super::review::{Reviewed, request_json};
use super::{Error, NamespaceLabels, Request};
use crate::cel::policy::{Authorize, Outcome};
use compiled::{Binding, Mutation, Policy};

/// One invocation of a policy: policy, binding and param (namespace/name) names.
type Key = (String, String, String);

/// Which invocations a reinvocation round calls (`policyReinvokeContext`).
#[derive(Default)]
pub struct Reinvocation {
    previously_invoked: HashSet<Key>,
    reinvoke: HashSet<Key>,
    /// The count of changes to the object when this plugin last finished (see
    /// [`super::Step::mutate`]): a higher count later means another step changed it.
    last_output: Option<u64>,
}

impl Reinvocation {
    fn require_reinvoking_previously_invoked(&mut self) {
        self.reinvoke.extend(self.previously_invoked.drain());
    }
}

/// A failure waiting for the failure policy: policy, binding (none: the policy's own), text,
/// and whether it is an evaluation failure (reason Invalid) rather than a configuration one.
struct Failure {
    policy: String,
    /// The policy's `failurePolicy` is Fail.
    fail: bool,
    binding: Option<String>,
    message: String,
    invalid: bool,
}

impl Failure {
    /// A policy or binding that could not be configured (`failed to configure ...`).
    fn configuration(policy: &Policy, binding: Option<&Binding>, error: &str) -> Failure {
        let what = if binding.is_some() { "binding" } else { "policy" };
        Failure {
            policy: policy.name.clone(),
            fail: policy.fail,
            binding: binding.map(|b| b.name.clone()),
            message: format!("failed to configure {what}: {error}"),
            invalid: false,
        }
    }
}

/// Everything one evaluation sees.
struct Inputs<'a> {
    old: Option<&'a Value>,
    request: &'a Value,
    params: Option<&'a Value>,
    namespace: Option<&'a Value>,
    authorizer: Option<&'a Arc<dyn Authorize>>,
}

fn run(
    compiled: &Compiled,
    object: &Value,
    inputs: &Inputs<'_>,
    variables: &[(String, Outcome)],
) -> Result<Outcome, String> {
    let program = compiled.program.as_ref().map_err(Clone::clone)?;
    let values = [Some(object), inputs.old, Some(inputs.request), inputs.params, inputs.namespace];
    program
        .evaluate(&values, inputs.authorizer, Some(variables))
        .map_err(|e| format!("expression '{}' resulted in error: {e}", compiled.source))
}

/// Runs the matching policies over `object` (absent on deletes, which this plugin does not
/// handle); `changes` counts the changes admission made to the object so far. Returns
/// whether a policy changed it (so a reinvocation round is needed).
#[allow(clippy::too_many_arguments)]
pub async fn dispatch(
    entries: ForResource<'_, Policy, Binding>,
    namespaces: &dyn NamespaceLabels,
    source: Option<&dyn ParamSource>,
    request: &Request<'_>,
    object: Option<&mut Value>,
    old: Option<&Value>,
    authorizer: Option<&Arc<dyn Authorize>>,
    state: &mut Reinvocation,
    reinvoking: bool,
    changes: u64,
) -> Result<bool, Error> {
    let Some(object) = object else { return Ok(false) };
    if entries.is_empty() {
        return Ok(false);
    }
    if reinvoking && state.last_output != Some(changes) {
        // Another plugin changed the object since these policies ran.
        state.require_reinvoking_previously_invoked();
    }
    let mut failures: Vec<Failure> = Vec::new();
    let mut should_reinvoke = false;
    let mut namespace_value: Option<Option<Value>> = None;
    for (policy, bindings) in entries {
        let version = match &policy.constraints {
            Err(e) => {
                failures.push(Failure::configuration(policy, None, e));
                continue;
            }
            Ok(matcher) => match matcher.matches(request, namespaces, Some(&*object), old).await? {
                Some(version) => version,
                None => continue,
            },
        };
        for binding in bindings {
            match &binding.resources {
                Some(Err(e)) => {
                    failures.push(Failure::configuration(policy, Some(binding), e));
                    continue;
                }
                Some(Ok(matcher)) if matcher.matches(request, namespaces, Some(&*object), old).await?.is_none() => {
                    continue;
                }
                _ => {}
            }
            let found = match params(source, policy.param_kind.as_ref(), binding.param_ref.as_ref(), request).await {
                Ok(found) => found,
                Err(e) => {
                    failures.push(Failure::configuration(policy, Some(binding), &e));
                    continue;
                }
            };
            if policy.reads.namespace && namespace_value.is_none() {
                namespace_value = Some(namespace_object(namespaces, request).await?);
            }
            for param in found.iter() {
                let invocation = Invocation { policy, binding, param, version };
                let key = invocation.key();
                if reinvoking && !state.reinvoke.contains(&key) {
                    continue;
                }
                let namespace = namespace_value.as_ref().and_then(Option::as_ref);
                let changed = invocation.run(request, object, old, namespace, authorizer, &mut failures)?;
                if changed {
                    state.require_reinvoking_previously_invoked();
                    should_reinvoke = true;
                }
                if policy.reinvoke_if_needed {
                    state.previously_invoked.insert(key);
                }
            }
        }
    }
    state.last_output = Some(changes + u64::from(should_reinvoke));
    match failures.into_iter().find(|f| f.fail) {
        None => Ok(should_reinvoke),
        Some(first) => {
            let message = match &first.binding {
                Some(binding) => {
                    format!("policy '{}' with binding '{binding}' denied request: {}", first.policy, first.message)
                }
                None => format!("policy {:?} denied request: {}", first.policy, first.message),
            };
            let reason = if first.invalid { "Invalid" } else { "Forbidden" };
            Err(Error::MutationPolicy { reason: reason.to_string(), message })
        }
    }
}

/// One policy, binding and param applied to the request's object.
struct Invocation<'a> {
    policy: &'a Policy,
    binding: &'a Binding,
    param: Option<&'a Value>,
    version: &'a str,
}

impl Invocation<'_> {
    fn key(&self) -> Key {
        let param = self.param.map_or(String::new(), |p| {
            let field = |name: &str| p.pointer(&format!("/metadata/{name}")).and_then(Value::as_str).unwrap_or("");
            format!("{}/{}", field("namespace"), field("name"))
        });
        (self.policy.name.clone(), self.binding.name.clone(), param)
    }

    /// Evaluates the match conditions and mutations; `object` is replaced by the result.
    /// Returns whether it changed. Failures of single mutations are collected, not returned.
    fn run(
        &self,
        request: &Request<'_>,
        object: &mut Value,
        old: Option<&Value>,
        namespace: Option<&Value>,
        authorizer: Option<&Arc<dyn Authorize>>,
        failures: &mut Vec<Failure>,
    ) -> Result<bool, Error> {
        let mut versioned = in_version(request, object, self.version)?;
        let versioned_old = old.map(|o| in_version(request, o, self.version)).transpose()?;
        let request_value = if self.policy.reads.request {
            request_json("", request, &Reviewed { version: self.version, object: None, old: None })
        } else {
            Value::Null
        };
        let inputs =
            Inputs { old: versioned_old.as_ref(), request: &request_value, params: self.param, namespace, authorizer };
        let mut fail = |message: String| {
            failures.push(Failure {
                policy: self.policy.name.clone(),
                fail: self.policy.fail,
                binding: Some(self.binding.name.clone()),
                message,
                invalid: true,
            })
        };
        for (_, condition) in &self.policy.match_conditions {
            match run(condition, &versioned, &inputs, &[]) {
                Ok(Outcome::Bool(true)) => {}
                Ok(_) => return Ok(false),
                Err(e) => {
                    fail(e);
                    return Ok(false);
                }
            }
        }
        let mut variables: Vec<(String, Outcome)> = Vec::new();
        for (name, expression) in &self.policy.variables {
            // A variable that fails is left out: only expressions that use it fail.
            if let Ok(value) = run(expression, &versioned, &inputs, &variables) {
                variables.push((name.clone(), value));
            }
        }
        let before = versioned.clone();
        let schema = request
            .definition
            .version(self.version)
            .map(|v| v.field_schema().clone())
            .ok_or_else(|| Error::Internal(format!("version {} is not served", self.version)))?;
        for mutation in &self.policy.mutations {
            let result = match mutation {
                Mutation::ApplyConfiguration(compiled) => run(compiled, &versioned, &inputs, &variables)
                    .and_then(|outcome| apply_configuration(compiled, outcome, &versioned, &schema)),
                Mutation::JsonPatch(compiled) => {
                    run(compiled, &versioned, &inputs, &variables).and_then(|outcome| json_patch(outcome, &versioned))
                }
            };
            match result {
                Ok(mutated) => versioned = mutated,
                Err(message) => fail(message),
            }
        }
        if versioned == before {
            return Ok(false);
        }
        if self.version != request.version {
            crate::conversion::convert(request.definition, &mut versioned, request.version)
                .map_err(|e| Error::Internal(format!("failed to convert object: {e}")))?;
        }
        *object = versioned;
        Ok(true)
    }
}

/// An apply configuration's result merged into the object.
fn apply_configuration(
    compiled: &Compiled,
    outcome: Outcome,
    object: &Value,
    schema: &crate::fieldmanager::Schema,
) -> Result<Value, String> {
    if let Ok(program) = &compiled.program {
        if !program.type_mismatches.is_empty() {
            return Err(format!("type mismatch: {}", program.type_mismatches.join("\n")));
        }
    }
    let Outcome::Other(Value::Object(mut configuration)) = outcome else {
        return Err("unsupported return type from ApplyConfiguration expression".to_string());
    };
    for field in ["apiVersion", "kind"] {
        if let Some(value) = object.get(field) {
            configuration.insert(field.to_string(), value.clone());
        }
    }
    crate::fieldmanager::apply_configuration::merge(schema, object, &Value::Object(configuration))
        .map_err(|e| format!("error applying patch: {e}"))
}

/// A JSON patch's result applied to the object; a failed `test` leaves it as it was.
fn json_patch(outcome: Outcome, object: &Value) -> Result<Value, String> {
    let Outcome::Other(operations) = outcome else {
        return Err("type mismatch: JSONPatchType.expression should evaluate to array".to_string());
    };
    let operations: Vec<json_patch::PatchOperation> =
        serde_json::from_value(operations).map_err(|e| format!("JSON Patch: invalid operation: {e}"))?;
    match crate::core::bounded_patch::apply(&operations, object) {
        Ok(patched) => Ok(patched),
        Err(crate::core::bounded_patch::PatchFailure::TestFailed(_)) => Ok(object.clone()),
        Err(e) => Err(format!("JSON Patch: {e}")),
    }
}
