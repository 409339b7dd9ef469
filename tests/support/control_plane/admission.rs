//! The effect of ValidatingAdmissionPolicies on the double's own custom resources, for the
//! shape a takeover creates: a binding with `validationActions: [Deny]` naming a policy whose
//! `matchConstraints.resourceRules` match the group, resource and operation (subresources by
//! `<plural>/*`), whose `matchConditions` are `request.userInfo.username != '<user>'` (or
//! `true`), and whose validations are the constant `false` (or `true`). kube-apiserver's
//! denial: `ValidatingAdmissionPolicy '<p>' with binding '<b>' denied request: <message>`,
//! code by the validation's reason. Dry-run writes are checked as any other. An expression
//! outside this shape is refused with a 500 naming it (the double cannot judge it).

use serde_json::Value;

use super::rbac::User;
use super::respond::{self, Response};
use super::state::Objects;

fn listed(list: &Value, item: &str) -> bool {
    list.as_array().is_some_and(|l| l.iter().any(|v| v == item || v == "*"))
}

fn rule_matches(rule: &Value, group: &str, plural: &str, operation: &str) -> bool {
    listed(&rule["apiGroups"], group)
        && listed(&rule["operations"], operation)
        && rule["resources"].as_array().is_some_and(|r| r.iter().any(|r| r == plural || r == "*"))
}

/// What a condition or validation expression says for `user`.
fn evaluate(expression: &str, user: &User) -> Result<bool, String> {
    let expression = expression.trim();
    match expression {
        "true" => return Ok(true),
        "false" => return Ok(false),
        _ => {}
    }
    if let Some(rest) = expression.strip_prefix("request.userInfo.username != ") {
        let literal = rest.trim().trim_matches('\'').trim_matches('"');
        return Ok(user.name != literal);
    }
    Err(format!("the control-plane double cannot evaluate {expression:?}"))
}

fn stored<'a>(objects: &'a Objects, resource: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    objects.stored.iter().filter(move |((r, _, _), _)| *r == resource).map(|(_, o)| o)
}

/// Whether the policies deny `operation` on `group`/`plural` by `user`.
pub fn check(objects: &Objects, group: &str, plural: &str, operation: &str, user: &User) -> Result<(), Response> {
    for binding in stored(objects, "validatingadmissionpolicybindings") {
        if !listed(&binding["spec"]["validationActions"], "Deny") {
            continue;
        }
        let policy_name = binding["spec"]["policyName"].as_str().unwrap_or_default();
        let Some(policy) =
            stored(objects, "validatingadmissionpolicies").find(|p| p["metadata"]["name"] == policy_name)
        else {
            continue;
        };
        let spec = &policy["spec"];
        let rules = spec["matchConstraints"]["resourceRules"].as_array().cloned().unwrap_or_default();
        if !rules.iter().any(|r| rule_matches(r, group, plural, operation)) {
            continue;
        }
        let mut applies = true;
        for condition in spec["matchConditions"].as_array().into_iter().flatten() {
            match evaluate(condition["expression"].as_str().unwrap_or_default(), user) {
                Ok(holds) => applies &= holds,
                Err(e) => return Err(respond::status(500, "InternalError", &e, None)),
            }
        }
        if !applies {
            continue;
        }
        for validation in spec["validations"].as_array().into_iter().flatten() {
            match evaluate(validation["expression"].as_str().unwrap_or_default(), user) {
                Ok(true) => {}
                Ok(false) => {
                    let reason = validation["reason"].as_str().unwrap_or("Invalid");
                    let code = match reason {
                        "Forbidden" => 403,
                        "Unauthorized" => 401,
                        "RequestEntityTooLarge" => 413,
                        _ => 422,
                    };
                    let message = format!(
                        "ValidatingAdmissionPolicy '{policy_name}' with binding '{}' denied request: {}",
                        binding["metadata"]["name"].as_str().unwrap_or_default(),
                        validation["message"].as_str().unwrap_or("failed expression: false")
                    );
                    return Err(respond::status(code, reason, &message, None));
                }
                Err(e) => return Err(respond::status(500, "InternalError", &e, None)),
            }
        }
    }
    Ok(())
}
