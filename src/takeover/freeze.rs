//! Step (a) of a takeover: freezing writes to a resource in the main apiserver with a
//! ValidatingAdmissionPolicy and its binding (`admissionregistration.k8s.io/v1`) that deny
//! create, update and delete of it (and of its subresources) with a message saying why, then
//! waiting until a dry-run write shows the freeze in effect. Our own server follows the same
//! policies (issue 14's admission), so the freeze holds on both sides of the switch.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::cluster::{Answer, Cluster, object_path};
use super::{Error, json};
use crate::definitions::Definition;

const ADMISSION: &str = "admissionregistration.k8s.io";

/// The words every denial of the freeze carries, by which a dry run recognizes it.
pub const MARK: &str = "is being moved to crd-apiserver";

/// How long a policy is given to take effect when no dry run can show it.
const SETTLE: Duration = Duration::from_secs(3);

/// The name of the policy and of its binding for the definition named `name`.
pub fn policy_name(name: &str) -> String {
    format!("crd-apiserver-takeover.{name}")
}

/// What users see when they write during the freeze.
pub fn message(definition: &Definition) -> String {
    format!(
        "{}.{} {MARK} (crd-apiserver takeover): writes are refused for a few seconds; retry shortly",
        definition.plural, definition.group
    )
}

fn policy(definition: &Definition) -> Value {
    let resources = [definition.plural.clone(), format!("{}/*", definition.plural)];
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {
            "name": policy_name(&definition.name),
            "labels": {"app.kubernetes.io/managed-by": "crd-apiserver"},
        },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [{
                    "apiGroups": [definition.group],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE", "DELETE"],
                    "resources": resources,
                }],
            },
            "validations": [{"expression": "false", "message": message(definition), "reason": "Forbidden"}],
        },
    })
}

fn binding(definition: &Definition) -> Value {
    let name = policy_name(&definition.name);
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "crd-apiserver"}},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    })
}

fn policies_path(name: &str) -> String {
    object_path(ADMISSION, "v1", None, "validatingadmissionpolicies", name)
}

fn bindings_path(name: &str) -> String {
    object_path(ADMISSION, "v1", None, "validatingadmissionpolicybindings", name)
}

/// Creates the policy and its binding (or keeps those a previous run made).
pub async fn freeze(cluster: &Cluster, definition: &Definition) -> Result<(), Error> {
    cluster
        .ensure("freezing writes: creating the ValidatingAdmissionPolicy", &policies_path(""), &policy(definition))
        .await?;
    cluster
        .ensure(
            "freezing writes: creating the ValidatingAdmissionPolicyBinding",
            &bindings_path(""),
            &binding(definition),
        )
        .await
}

/// The freeze of a handback: the same policy, except for `user` (this server), which writes
/// the objects back. Policies are given a few seconds to take effect, as no dry run of this
/// server's can show them (it is let through).
pub async fn freeze_except(cluster: &Cluster, definition: &Definition, user: &str) -> Result<(), Error> {
    let mut policy = policy(definition);
    let literal = user.replace('\\', "\\\\").replace('\'', "\\'");
    json::set(
        &mut policy,
        &["spec", "matchConditions"],
        json!([{"name": "not-crd-apiserver", "expression": format!("request.userInfo.username != '{literal}'")}]),
    );
    cluster.ensure("freezing writes: creating the ValidatingAdmissionPolicy", &policies_path(""), &policy).await?;
    cluster
        .ensure(
            "freezing writes: creating the ValidatingAdmissionPolicyBinding",
            &bindings_path(""),
            &binding(definition),
        )
        .await?;
    tokio::time::sleep(SETTLE).await;
    Ok(())
}

/// Removes the binding, then the policy.
pub async fn lift(cluster: &Cluster, definition: &Definition) -> Result<(), Error> {
    let name = policy_name(&definition.name);
    cluster.delete("lifting the freeze: deleting the ValidatingAdmissionPolicyBinding", &bindings_path(&name)).await?;
    cluster.delete("lifting the freeze: deleting the ValidatingAdmissionPolicy", &policies_path(&name)).await
}

/// Whether an answer is the freeze's denial.
pub fn is_frozen_answer(answer: &Answer) -> bool {
    matches!(answer, Answer::Failed { message, .. } if message.contains(MARK))
}

/// Waits until a dry-run write to the resource through `cluster` is denied by the freeze:
/// an unchanged update of one of its objects, or, with none, the create of an empty one.
/// `collection` is the resource's collection path (all namespaces) in a served version.
pub async fn wait_in_effect(
    cluster: &Cluster,
    definition: &Definition,
    version: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let collection = object_path(&definition.group, version, None, &definition.plural, "");
    let started = Instant::now();
    loop {
        let page = cluster.list_page("listing the resource", &collection, 1, None).await?;
        let first = json::at(&page, "/items").as_array().and_then(|items| items.first()).cloned();
        let empty = first.is_none();
        let answer = match first {
            Some(mut object) => {
                let namespace = json::at(&object, "/metadata/namespace").as_str().map(str::to_string);
                let name = json::at(&object, "/metadata/name").as_str().unwrap_or_default().to_string();
                if object.get("apiVersion").is_none() {
                    json::set(&mut object, &["apiVersion"], json!(format!("{}/{version}", definition.group)));
                    json::set(&mut object, &["kind"], json!(definition.kind));
                }
                let path = object_path(&definition.group, version, namespace.as_deref(), &definition.plural, &name);
                cluster.dry_run(http::Method::PUT, &path, &object).await?
            }
            None => {
                let namespace = definition.namespaced().then_some("default");
                let probe = json!({
                    "apiVersion": format!("{}/{version}", definition.group),
                    "kind": definition.kind,
                    "metadata": {"generateName": "crd-apiserver-takeover-probe-"},
                });
                let path = object_path(&definition.group, version, namespace, &definition.plural, "");
                cluster.dry_run(http::Method::POST, &path, &probe).await?
            }
        };
        if is_frozen_answer(&answer) {
            return Ok(());
        }
        // With no object to update, an empty object may fail the schema before admission sees
        // it: nothing exists that a write could change, so policies a few seconds old do.
        if empty && matches!(answer, Answer::Failed { code: 422, .. }) && started.elapsed() >= SETTLE {
            return Ok(());
        }
        if started.elapsed() >= timeout {
            let seen = match answer {
                Answer::Ok(_) => "the write was allowed".to_string(),
                Answer::Failed { code, message, .. } => format!("{code} {message}"),
            };
            return Err(Error::Cluster(format!(
                "the freeze did not take effect within {timeout:?}: a dry-run write answered: {seen}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
