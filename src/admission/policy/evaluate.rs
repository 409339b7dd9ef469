//! One ValidatingAdmissionPolicy evaluated for one binding and one param object, as
//! k8s.io/apiserver's policy validator does: match conditions, variables (each seeing the ones
//! before), validations with `message`, `messageExpression` and `reason`, errors decided by the
//! failure policy; the result is a list of decisions.
//!
//! Owns one evaluation; which policies, bindings and params apply is `policy`'s.

use serde_json::Value;

use super::compiled::{Compiled, Policy};
use crate::cel::policy::Outcome;

/// The most bytes a message from `messageExpression` may have (Kubernetes' limit).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// What one validation decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub message: String,
    /// Empty: Invalid.
    pub reason: String,
}

/// The values an evaluation sees.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    pub object: Option<&'a Value>,
    pub old: Option<&'a Value>,
    pub request: &'a Value,
    pub params: Option<&'a Value>,
    pub namespace: Option<&'a Value>,
    pub authorizer: Option<&'a std::sync::Arc<dyn crate::cel::policy::Authorize>>,
}

fn run(compiled: &Compiled, inputs: &Inputs<'_>, variables: &[(String, Outcome)]) -> Result<Outcome, String> {
    let program = compiled.program.as_ref().map_err(Clone::clone)?;
    let values = [inputs.object, inputs.old, Some(inputs.request), inputs.params, inputs.namespace];
    program
        .evaluate(&values, inputs.authorizer, Some(variables))
        .map_err(|e| format!("expression '{}' resulted in error: {e}", compiled.source))
}

/// The denials of a policy for these inputs (empty: admitted). An error under
/// `failurePolicy: Ignore` admits.
pub fn evaluate(policy: &Policy, inputs: &Inputs<'_>) -> Vec<Decision> {
    let failed = |message: String| {
        if policy.fail { vec![Decision { message, reason: String::new() }] } else { Vec::new() }
    };
    for (_, condition) in &policy.match_conditions {
        match run(condition, inputs, &[]) {
            Ok(Outcome::Bool(true)) => {}
            Ok(_) => return Vec::new(),
            Err(e) => return failed(e),
        }
    }
    let mut variables: Vec<(String, Outcome)> = Vec::new();
    for (name, expression) in &policy.variables {
        // A variable that fails is left out: only expressions that use it fail.
        if let Ok(value) = run(expression, inputs, &variables) {
            variables.push((name.clone(), value));
        }
    }
    let mut decisions = Vec::new();
    for validation in &policy.validations {
        match run(&validation.expression, inputs, &variables) {
            Ok(Outcome::Bool(true)) => {}
            Ok(_) => {
                let from_expression = validation
                    .message_expression
                    .as_ref()
                    .and_then(|m| match run(m, inputs, &variables) {
                        Ok(Outcome::String(s)) => Some(s.trim().to_string()),
                        _ => None,
                    })
                    .filter(|m| !m.is_empty() && m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n'));
                let message = from_expression
                    .or_else(|| {
                        validation.message.as_deref().map(str::trim).filter(|m| !m.is_empty()).map(str::to_string)
                    })
                    .unwrap_or_else(|| format!("failed expression: {}", validation.expression.source.trim()));
                decisions.push(Decision { message, reason: validation.reason.clone().unwrap_or_default() });
            }
            Err(e) => decisions.extend(failed(e)),
        }
    }
    decisions
}
