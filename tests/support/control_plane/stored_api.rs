//! Objects the double stores as kube-apiserver does, with resourceVersions from the double's
//! global counter and watch events: the admission configurations of
//! `admissionregistration.k8s.io/v1` (webhook configurations, Validating and Mutating
//! AdmissionPolicies and their bindings, as Kubernetes 1.36 serves them; v1beta1 is not served), the kinds our Helm chart renders (Secrets, which helm's `lookup` reads, ServiceAccounts,
//! Services, Deployments, StatefulSets, RBAC objects, PodDisruptionBudgets: stored and
//! nothing more; the double's authorizer takes its rules from the test, not from stored RBAC
//! objects) and core/v1 ResourceQuotas (with the `status` subresource, whose updates
//! are compare-and-swap on `metadata.resourceVersion`). Get, list, watch, create, update,
//! delete.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use serde_json::{Value, json};

use super::core_api;
use super::rbac::Attributes;
use super::respond::{self, Response};
use super::state::State;

/// The resources served here: (plural, list kind, apiVersion, namespaced).
pub const RESOURCES: &[(&str, &str, &str, bool)] = &[
    ("mutatingwebhookconfigurations", "MutatingWebhookConfigurationList", "admissionregistration.k8s.io/v1", false),
    ("validatingwebhookconfigurations", "ValidatingWebhookConfigurationList", "admissionregistration.k8s.io/v1", false),
    ("validatingadmissionpolicies", "ValidatingAdmissionPolicyList", "admissionregistration.k8s.io/v1", false),
    (
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBindingList",
        "admissionregistration.k8s.io/v1",
        false,
    ),
    ("mutatingadmissionpolicies", "MutatingAdmissionPolicyList", "admissionregistration.k8s.io/v1", false),
    ("mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBindingList", "admissionregistration.k8s.io/v1", false),
    ("apiservices", "APIServiceList", "apiregistration.k8s.io/v1", false),
    ("resourcequotas", "ResourceQuotaList", "v1", true),
    ("configmaps", "ConfigMapList", "v1", true),
    ("secrets", "SecretList", "v1", true),
    ("serviceaccounts", "ServiceAccountList", "v1", true),
    ("services", "ServiceList", "v1", true),
    ("deployments", "DeploymentList", "apps/v1", true),
    ("statefulsets", "StatefulSetList", "apps/v1", true),
    ("clusterroles", "ClusterRoleList", "rbac.authorization.k8s.io/v1", false),
    ("clusterrolebindings", "ClusterRoleBindingList", "rbac.authorization.k8s.io/v1", false),
    ("roles", "RoleList", "rbac.authorization.k8s.io/v1", true),
    ("rolebindings", "RoleBindingList", "rbac.authorization.k8s.io/v1", true),
    ("poddisruptionbudgets", "PodDisruptionBudgetList", "policy/v1", true),
];

/// A list of stored objects in a namespace picked by an equality label selector
/// (`a=b,c=d`), as kube-apiserver lists them.
pub fn list_selected(state: &State, resource: &str, namespace: &str, selector: &str) -> Response {
    let terms: Vec<(String, String)> = selector
        .split(',')
        .filter(|t| !t.is_empty())
        .filter_map(|t| t.split_once('=').map(|(k, v)| (k.trim_end_matches('=').to_string(), v.to_string())))
        .collect();
    let namespace = namespace.to_string();
    core_api::list(state, resource, move |o| {
        (namespace.is_empty() || o["metadata"]["namespace"] == namespace.as_str())
            && terms.iter().all(|(k, v)| o["metadata"]["labels"][k] == v.as_str())
    })
}

fn known(resource: &str) -> Option<&'static str> {
    RESOURCES.iter().find(|(r, ..)| *r == resource).map(|(r, ..)| *r)
}

/// The list kind and apiVersion of a stored resource.
pub fn list_kind(resource: &str) -> (&'static str, &'static str) {
    RESOURCES.iter().find(|(r, ..)| *r == resource).map(|(_, k, v, _)| (*k, *v)).unwrap_or(("List", "v1"))
}

fn qualified(attrs: &Attributes) -> String {
    if attrs.group.is_empty() { attrs.resource.clone() } else { format!("{}.{}", attrs.resource, attrs.group) }
}

fn conflict(attrs: &Attributes, name: &str) -> Response {
    respond::status(
        409,
        "Conflict",
        &format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            qualified(attrs)
        ),
        Some(json!({"name": name, "group": attrs.group, "kind": attrs.resource})),
    )
}

fn not_found(attrs: &Attributes, name: &str) -> Response {
    respond::status(
        404,
        "NotFound",
        &format!("{} \"{name}\" not found", qualified(attrs)),
        Some(json!({"name": name, "group": attrs.group, "kind": attrs.resource})),
    )
}

/// Serves a request to a stored resource whose attributes were authorized.
pub fn serve(state: &Arc<State>, attrs: &Attributes, query: &[(String, String)], body: Bytes) -> Response {
    let Some(resource) = known(&attrs.resource) else { return respond::path_not_found() };
    if super::state::lock(&state.unserved).contains(&resource) {
        return respond::path_not_found();
    }
    let get = |k: &str| query.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let namespace = attrs.namespace.clone();
    let in_namespace = move |o: &Value| namespace.is_empty() || o["metadata"]["namespace"] == namespace.as_str();
    match attrs.verb.as_str() {
        "get" => match state.get_object(resource, &attrs.namespace, &attrs.name) {
            Some(object) => respond::json(200, &object),
            None => not_found(attrs, &attrs.name),
        },
        "list" => core_api::list(state, resource, in_namespace),
        "watch" => core_api::watch(state, resource, in_namespace, get("resourceVersion"), get("timeoutSeconds")),
        "create" => {
            let Ok(mut object) = serde_json::from_slice::<Value>(&body) else {
                return respond::status(400, "BadRequest", "the body is not a JSON object", None);
            };
            let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
            if !attrs.namespace.is_empty() {
                object["metadata"]["namespace"] = json!(attrs.namespace);
            }
            if state.get_object(resource, &attrs.namespace, &name).is_some() {
                return respond::status(
                    409,
                    "AlreadyExists",
                    &format!("{} \"{name}\" already exists", qualified(attrs)),
                    Some(json!({"name": name, "group": attrs.group, "kind": attrs.resource})),
                );
            }
            respond::json(201, &state.put_object(resource, object))
        }
        "update" => update(state, resource, attrs, body),
        "delete" => match state.delete_object(resource, &attrs.namespace, &attrs.name) {
            Some(object) => respond::json(200, &object),
            None => not_found(attrs, &attrs.name),
        },
        _ => respond::status(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            Some(json!({})),
        ),
    }
}

/// PUT of an object or of its status: compare-and-swap on the resourceVersion the body
/// carries (none: unconditional); the status subresource changes only `status`, the main
/// resource everything but `status`.
fn update(state: &Arc<State>, resource: &'static str, attrs: &Attributes, body: Bytes) -> Response {
    let Ok(sent) = serde_json::from_slice::<Value>(&body) else {
        return respond::status(400, "BadRequest", "the body is not a JSON object", None);
    };
    let Some(current) = state.get_object(resource, &attrs.namespace, &attrs.name) else {
        return not_found(attrs, &attrs.name);
    };
    if attrs.subresource == "status" {
        state.status_updates.fetch_add(1, Ordering::SeqCst);
        // A writer the test injects: the object changed just before this update arrived.
        if state.status_races.load(Ordering::SeqCst) > 0 {
            state.status_races.fetch_sub(1, Ordering::SeqCst);
            state.put_object(resource, current.clone());
            return conflict(attrs, &attrs.name);
        }
    }
    let expected = sent["metadata"]["resourceVersion"].as_str().unwrap_or_default();
    if !expected.is_empty() && expected != current["metadata"]["resourceVersion"] {
        return conflict(attrs, &attrs.name);
    }
    let mut next = if attrs.subresource == "status" { current.clone() } else { sent.clone() };
    if attrs.subresource == "status" {
        next["status"] = sent["status"].clone();
    } else if let Some(status) = current.get("status") {
        next["status"] = status.clone();
    }
    next["metadata"]["namespace"] = current["metadata"]["namespace"].clone();
    next["metadata"]["name"] = current["metadata"]["name"].clone();
    match state.replace_object_if(resource, expected, next) {
        Some(stored) => respond::json(200, &stored),
        None => conflict(attrs, &attrs.name),
    }
}
