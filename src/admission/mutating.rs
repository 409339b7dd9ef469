//! Mutating admission webhooks (`MutatingAdmissionWebhook`): the matching webhooks are called
//! one after another with the object as the previous one left it; JSON patches are applied in
//! the version the webhook matched; webhooks with `reinvocationPolicy: IfNeeded` are called a
//! second time, once, when a later webhook changed the object (k8s.io/apiserver's reinvocation
//! context).
//!
//! Owns the mutating order and the patch step; the object's schema steps (pruning, defaulting,
//! validation of the result) are the API layer's, after this.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use super::hooks::Hook;
use super::review::{self, CallError, Reviewed};
use super::{Error, Mutated, NamespaceLabels, Request};

/// Which webhooks a second round calls (`webhookReinvokeContext`).
#[derive(Default)]
pub struct Reinvocation {
    previously_invoked: HashSet<String>,
    reinvoke: HashSet<String>,
    /// The count of changes to the object when the webhooks last finished.
    last_output: Option<u64>,
}

impl Reinvocation {
    fn require_reinvoking_previously_invoked(&mut self) {
        self.reinvoke.extend(self.previously_invoked.drain());
    }
}

/// Runs the mutating webhooks over `object` (absent on deletes): every matching one in the
/// first round; in the reinvocation round only those that asked for it (`changes` counts
/// the changes admission made to the object so far). Returns whether a
/// webhook changed the object (so a reinvocation round is needed).
#[allow(clippy::too_many_arguments)]
pub async fn dispatch(
    hooks: &[Arc<Hook>],
    namespaces: &dyn NamespaceLabels,
    request: &Request<'_>,
    mut object: Option<&mut Value>,
    old: Option<&Value>,
    authorizer: Option<&Arc<dyn crate::cel::policy::Authorize>>,
    state: &mut Reinvocation,
    reinvoking: bool,
    changes: u64,
    mutated: &mut Mutated,
) -> Result<bool, Error> {
    if hooks.is_empty() {
        return Ok(false);
    }
    if reinvoking && state.last_output != Some(changes) {
        // Another plugin changed the object since the webhooks ran.
        state.require_reinvoking_previously_invoked();
    }
    let mut should_reinvoke = false;
    for hook in hooks {
        let current = object.as_deref();
        let Some(version) = hook.should_call(request, namespaces, current, old, authorizer).await? else {
            continue;
        };
        if reinvoking && !state.reinvoke.contains(&hook.uid) {
            continue;
        }
        let changed = call_one(hook, request, &version, object.as_deref_mut(), old, mutated).await?;
        if changed {
            mutated.changed = true;
            state.require_reinvoking_previously_invoked();
            should_reinvoke = true;
        }
        if hook.reinvoke_if_needed {
            state.previously_invoked.insert(hook.uid.clone());
        }
    }
    state.last_output = Some(changes + u64::from(should_reinvoke));
    Ok(should_reinvoke)
}

/// The object in another version of its definition (for a webhook matched through an
/// equivalent version).
pub(crate) fn in_version(request: &Request<'_>, object: &Value, version: &str) -> Result<Value, Error> {
    let mut copy = object.clone();
    if version != request.version {
        crate::conversion::convert(request.definition, &mut copy, version)
            .map_err(|e| Error::Internal(e.to_string()))?;
    }
    Ok(copy)
}

/// Calls one webhook; applies its patch. Returns whether the object changed.
async fn call_one(
    hook: &Hook,
    request: &Request<'_>,
    version: &str,
    object: Option<&mut Value>,
    old: Option<&Value>,
    mutated: &mut Mutated,
) -> Result<bool, Error> {
    let versioned = object.as_deref().map(|o| in_version(request, o, version)).transpose()?;
    let versioned_old = old.map(|o| in_version(request, o, version)).transpose()?;
    let reviewed = Reviewed { version, object: versioned.as_ref(), old: versioned_old.as_ref() };
    let answer = match review::call(hook, true, request, &reviewed).await {
        Ok(answer) => answer,
        Err(CallError::Calling(message)) if hook.fail_open => {
            tracing::warn!(webhook = %hook.name, error = %message, "failed calling webhook, failing open");
            return Ok(false);
        }
        Err(CallError::Calling(message)) => return Err(Error::Internal(message)),
        Err(CallError::Rejected(error)) => return Err(error),
    };
    mutated.warnings.extend(answer.warnings);
    if !answer.allowed {
        return Err(review::denial(&hook.name, answer.result));
    }
    let Some(patch) = answer.patch.filter(|p| !p.0.is_empty()) else { return Ok(false) };
    let (Some(object), Some(patched)) = (object, versioned) else {
        return Err(Error::Internal(format!(
            "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
            hook.name
        )));
    };
    let before = patched;
    let mut patched = crate::core::bounded_patch::apply(&patch, &before).map_err(|e| Error::Internal(e.to_string()))?;
    if patched == before {
        return Ok(false);
    }
    if version != request.version {
        crate::conversion::convert(request.definition, &mut patched, request.version)
            .map_err(|e| Error::Internal(e.to_string()))?;
    }
    *object = patched;
    Ok(true)
}
