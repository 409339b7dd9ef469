//! Validating admission webhooks (`ValidatingAdmissionWebhook`): every matching webhook is
//! called at once with the final object; the first refusal in webhook order wins, as
//! kube-apiserver reports the first error it collects.
//!
//! Owns the validating fan-out; never changes the object.

use std::sync::Arc;

use futures_util::future::join_all;
use serde_json::Value;

use super::hooks::Hook;
use super::review::{self, CallError, Reviewed};
use super::{Error, NamespaceLabels, Request};

/// Runs the validating webhooks; returns their warnings.
pub async fn dispatch(
    hooks: &[Arc<Hook>],
    namespaces: &dyn NamespaceLabels,
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
    authorizer: Option<&Arc<dyn crate::cel::policy::Authorize>>,
) -> Result<Vec<String>, Error> {
    if hooks.is_empty() {
        return Ok(Vec::new());
    }
    let mut calls = Vec::new();
    for hook in hooks {
        if let Some(version) = hook.should_call(request, namespaces, object, old, authorizer).await? {
            calls.push((hook, version));
        }
    }
    let outcomes = join_all(calls.iter().map(|(hook, version)| async move {
        let convert = |o: &Value| -> Result<Value, Error> {
            let mut copy = o.clone();
            if version != request.version {
                crate::conversion::convert(request.definition, &mut copy, version)
                    .map_err(|e| Error::Internal(e.to_string()))?;
            }
            Ok(copy)
        };
        let versioned = object.map(convert).transpose()?;
        let versioned_old = old.map(convert).transpose()?;
        let reviewed = Reviewed { version, object: versioned.as_ref(), old: versioned_old.as_ref() };
        match review::call(hook, false, request, &reviewed).await {
            Ok(answer) if answer.allowed => Ok(answer.warnings),
            Ok(answer) => Err(review::denial(&hook.name, answer.result)),
            Err(CallError::Calling(message)) if hook.fail_open => {
                tracing::warn!(webhook = %hook.name, error = %message, "failed calling webhook, failing open");
                Ok(Vec::new())
            }
            Err(CallError::Calling(message)) => Err(Error::Internal(message)),
            Err(CallError::Rejected(error)) => Err(error),
        }
    }))
    .await;
    let mut warnings = Vec::new();
    for outcome in outcomes {
        warnings.extend(outcome?);
    }
    Ok(warnings)
}
