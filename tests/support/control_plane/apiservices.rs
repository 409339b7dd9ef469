//! APIService objects (`apiregistration.k8s.io/v1`) as kube-aggregator keeps them: stored
//! objects (get, list, create, update, delete) whose `spec.service` decides the routing (set:
//! proxied to the registered backend; absent: served by the double itself), with the status
//! its availability controller writes (Local; Passed while a backend is registered, else
//! FailedDiscoveryCheck), and the autoregister controller's behaviour for the APIServices of
//! CustomResourceDefinitions: every served version of a definition the double holds gets the
//! local APIService `<version>.<group>` labelled `kube-aggregator.kubernetes.io/automanaged:
//! true`; while the label is `true` or `onstart` its spec is put back when it differs, and it
//! is deleted when no definition wants it; once the label is gone it is left alone.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use super::rbac::Attributes;
use super::respond::{self, Response};
use super::state::{ApiService, State, lock};

pub const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// How often the autoregister controller looks at definitions and APIServices.
const AUTOREGISTER_PERIOD: Duration = Duration::from_millis(100);

fn with_status(mut service: Value, backend_registered: bool) -> Value {
    let condition = if service["spec"]["service"].is_null() {
        json!({"type": "Available", "status": "True", "reason": "Local", "message": "Local APIServices are always available"})
    } else if backend_registered {
        json!({"type": "Available", "status": "True", "reason": "Passed", "message": "all checks passed"})
    } else {
        json!({"type": "Available", "status": "False", "reason": "FailedDiscoveryCheck", "message": "no endpoint is ready"})
    };
    service["status"] = json!({"conditions": [condition]});
    service
}

/// Recomputes the proxied group versions from the APIServices that name a service.
pub fn sync_services(state: &State) {
    let objects = lock(&state.objects);
    let services: Vec<ApiService> = objects
        .stored
        .iter()
        .filter(|((r, _, _), o)| *r == "apiservices" && !o["spec"]["service"].is_null())
        .map(|(_, o)| ApiService {
            group: o["spec"]["group"].as_str().unwrap_or_default().to_string(),
            version: o["spec"]["version"].as_str().unwrap_or_default().to_string(),
            group_priority: o["spec"]["groupPriorityMinimum"].as_u64().unwrap_or(1000) as u32,
            version_priority: o["spec"]["versionPriority"].as_u64().unwrap_or(15) as u32,
            server_name: format!(
                "{}.{}.svc",
                o["spec"]["service"]["name"].as_str().unwrap_or_default(),
                o["spec"]["service"]["namespace"].as_str().unwrap_or_default()
            ),
        })
        .collect();
    drop(objects);
    *lock(&state.services) = services;
}

/// An APIService that sends `group`/`version` to the project's Service.
pub fn register(state: &State, group: &str, version: &str) {
    register_via(state, group, version, "crd-apiserver");
}

/// An APIService that sends `group`/`version` to the Service `service` (in the project's
/// namespace), one of several selecting the same pods.
pub fn register_via(state: &State, group: &str, version: &str, service: &str) {
    let name = format!("{version}.{group}");
    let service = json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name},
        "spec": {"group": group, "version": version, "groupPriorityMinimum": 1000, "versionPriority": 15,
                 "service": {"namespace": "crd-apiserver", "name": service, "port": 443}},
    });
    state.put_object("apiservices", service);
    sync_services(state);
}

/// Serves `/apis/apiregistration.k8s.io/v1/apiservices...`.
pub fn serve(
    state: &Arc<State>,
    backend_registered: bool,
    attrs: &Attributes,
    query: &[(String, String)],
    body: Bytes,
) -> Response {
    match attrs.verb.as_str() {
        "get" => match state.get_object("apiservices", "", &attrs.name) {
            Some(service) => respond::json(200, &with_status(service, backend_registered)),
            None => respond::status(
                404,
                "NotFound",
                &format!("apiservices.apiregistration.k8s.io \"{}\" not found", attrs.name),
                Some(json!({"name": attrs.name, "group": "apiregistration.k8s.io", "kind": "apiservices"})),
            ),
        },
        "list" => {
            let objects = lock(&state.objects);
            let items: Vec<Value> = objects
                .stored
                .iter()
                .filter(|((r, _, _), _)| *r == "apiservices")
                .map(|(_, o)| with_status(o.clone(), backend_registered))
                .collect();
            respond::json(
                200,
                &json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIServiceList",
                        "metadata": {"resourceVersion": objects.revision.to_string()}, "items": items}),
            )
        }
        _ => {
            let response = super::stored_api::serve(state, attrs, query, body);
            sync_services(state);
            response
        }
    }
}

/// What the autoregister controller wants: `(name, group, version)` of every served version
/// of every definition the double holds.
fn desired(state: &State) -> Vec<(String, String, String)> {
    let objects = lock(&state.objects);
    let mut out = Vec::new();
    for crd in objects.crds.values() {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
            if version["served"] == true {
                let v = version["name"].as_str().unwrap_or_default();
                out.push((format!("{v}.{group}"), group.to_string(), v.to_string()));
            }
        }
    }
    out
}

/// One pass of the autoregister controller.
pub fn autoregister(state: &State) {
    let wanted = desired(state);
    let mut changed = false;
    for (name, group, version) in &wanted {
        let spec = json!({"group": group, "version": version, "groupPriorityMinimum": 1000, "versionPriority": 100});
        match state.get_object("apiservices", "", name) {
            None => {
                state.put_object(
                    "apiservices",
                    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                           "metadata": {"name": name, "labels": {AUTOMANAGED: "true"}}, "spec": spec}),
                );
                changed = true;
            }
            Some(current) => {
                let label = current["metadata"]["labels"][AUTOMANAGED].as_str().unwrap_or_default();
                if matches!(label, "true" | "onstart") && current["spec"] != spec {
                    let mut next = current.clone();
                    next["spec"] = spec;
                    state.put_object("apiservices", next);
                    changed = true;
                }
            }
        }
    }
    let stale: Vec<String> = lock(&state.objects)
        .stored
        .iter()
        .filter(|((r, _, name), o)| {
            *r == "apiservices"
                && matches!(o["metadata"]["labels"][AUTOMANAGED].as_str(), Some("true" | "onstart"))
                && !wanted.iter().any(|(n, ..)| n == name)
        })
        .map(|((_, _, name), _)| name.clone())
        .collect();
    for name in stale {
        state.delete_object("apiservices", "", &name);
        changed = true;
    }
    if changed {
        sync_services(state);
    }
}

/// Runs the autoregister controller for as long as the double's runtime.
pub fn spawn_autoregister(state: Arc<State>) {
    tokio::spawn(async move {
        loop {
            autoregister(&state);
            tokio::time::sleep(AUTOREGISTER_PERIOD).await;
        }
    });
}
