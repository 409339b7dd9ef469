//! The double's discovery: its own core and review resources and the registered APIServices'
//! groups (legacy `/apis` and `/apis/<g>` built from APIServices; aggregated discovery merged
//! from the backend's `/apis`, served as v2 or v2beta1 as the client asks, with an entity tag).

use serde_json::{Value, json};

use super::aggregator::{self, Backend};
use super::rbac::User;
use super::respond::{self, Response};
use super::state::{ApiService, State, lock};

pub const AGGREGATED_V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

fn resource(name: &str, singular: &str, kind: &str, namespaced: bool, verbs: &[&str], short: &[&str]) -> Value {
    json!({"name": name, "singularName": singular, "namespaced": namespaced, "kind": kind, "verbs": verbs, "shortNames": short})
}

/// The verbs kube-apiserver lists for most built-in resources.
const ALL_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
/// Services have no `deletecollection` in kube-apiserver.
const SERVICE_VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];

/// The double's own group versions and their resources, as kube-apiserver v1.33 lists them.
/// Of the kinds a Helm chart of ours renders (listed so that helm can map every kind it
/// renders), all but APIServices are stored objects (`stored_api`); APIServices live in the
/// aggregator's registry and are not served over HTTP.
fn own() -> Vec<(&'static str, Vec<Value>)> {
    vec![
        (
            "v1",
            vec![
                resource(
                    "namespaces",
                    "namespace",
                    "Namespace",
                    false,
                    &["create", "delete", "get", "list", "patch", "update", "watch"],
                    &["ns"],
                ),
                resource(
                    "configmaps",
                    "configmap",
                    "ConfigMap",
                    true,
                    &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                    &["cm"],
                ),
                resource("secrets", "secret", "Secret", true, ALL_VERBS, &[]),
                resource("serviceaccounts", "serviceaccount", "ServiceAccount", true, ALL_VERBS, &["sa"]),
                resource("services", "service", "Service", true, SERVICE_VERBS, &["svc"]),
            ],
        ),
        (
            "apiextensions.k8s.io/v1",
            vec![
                {
                    let mut crds = resource(
                        "customresourcedefinitions",
                        "customresourcedefinition",
                        "CustomResourceDefinition",
                        false,
                        &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                        &["crd", "crds"],
                    );
                    crds["categories"] = json!(["api-extensions"]);
                    crds
                },
                json!({"name": "customresourcedefinitions/status", "singularName": "", "namespaced": false, "kind": "CustomResourceDefinition", "verbs": ["get", "patch", "update"]}),
            ],
        ),
        (
            "apps/v1",
            vec![
                resource("deployments", "deployment", "Deployment", true, ALL_VERBS, &["deploy"]),
                resource("statefulsets", "statefulset", "StatefulSet", true, ALL_VERBS, &["sts"]),
            ],
        ),
        (
            "rbac.authorization.k8s.io/v1",
            vec![
                resource("clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", false, ALL_VERBS, &[]),
                resource("clusterroles", "clusterrole", "ClusterRole", false, ALL_VERBS, &[]),
                resource("rolebindings", "rolebinding", "RoleBinding", true, ALL_VERBS, &[]),
                resource("roles", "role", "Role", true, ALL_VERBS, &[]),
            ],
        ),
        (
            "policy/v1",
            vec![resource(
                "poddisruptionbudgets",
                "poddisruptionbudget",
                "PodDisruptionBudget",
                true,
                ALL_VERBS,
                &["pdb"],
            )],
        ),
        ("apiregistration.k8s.io/v1", vec![resource("apiservices", "apiservice", "APIService", false, ALL_VERBS, &[])]),
        (
            "authentication.k8s.io/v1",
            vec![resource("tokenreviews", "tokenreview", "TokenReview", false, &["create"], &[])],
        ),
        (
            "authorization.k8s.io/v1",
            vec![resource(
                "subjectaccessreviews",
                "subjectaccessreview",
                "SubjectAccessReview",
                false,
                &["create"],
                &[],
            )],
        ),
    ]
}

/// An `APIResourceList` of the double's own group versions.
pub fn resource_list(group_version: &str) -> Option<Response> {
    let (gv, resources) = own().into_iter().find(|(gv, _)| *gv == group_version)?;
    Some(respond::json(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    ))
}

fn own_groups() -> Vec<Value> {
    own()
        .into_iter()
        .filter_map(|(gv, _)| gv.split_once('/').map(|(g, v)| (g.to_string(), format!("{g}/{v}"), v.to_string())))
        .map(|(g, gv, v)| json!({"name": g, "versions": [{"groupVersion": gv, "version": v}], "preferredVersion": {"groupVersion": gv, "version": v}}))
        .collect()
}

/// APIServices of a group, best version first: by versionPriority, then as kube-aggregator
/// breaks ties, by Kubernetes' version order (v1 before v1beta1 before v1alpha1).
fn group_from_services(services: &[ApiService], group: &str) -> Option<Value> {
    let mut versions: Vec<&ApiService> = services.iter().filter(|s| s.group == group).collect();
    versions.sort_by(|a, b| {
        b.version_priority
            .cmp(&a.version_priority)
            .then(crd_apiserver::definitions::version_order::by_priority(&a.version, &b.version))
    });
    let list: Vec<Value> = versions
        .iter()
        .map(|s| json!({"groupVersion": format!("{}/{}", s.group, s.version), "version": s.version}))
        .collect();
    let preferred = list.first()?.clone();
    Some(json!({"name": group, "versions": list, "preferredVersion": preferred}))
}

pub fn api_group(state: &State, group: &str) -> Option<Response> {
    let services = lock(&state.services).clone();
    let mut value =
        group_from_services(&services, group).or_else(|| own_groups().into_iter().find(|g| g["name"] == group))?;
    value["kind"] = json!("APIGroup");
    value["apiVersion"] = json!("v1");
    Some(respond::json(200, &value))
}

/// What a discovery client takes, by the first clause of its `Accept` that kube-apiserver
/// (v1.33) offers: aggregated discovery `v2` or `v2beta1`, or (`None`) the plain documents.
pub fn aggregated_version(accept: &str) -> Option<&'static str> {
    for clause in accept.split(',') {
        let mut parts = clause.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        if !matches!(media, "application/json" | "application/*" | "*/*" | "") {
            continue;
        }
        let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let param = |key: &str| params.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        match (param("as"), param("g"), param("v")) {
            (None, _, _) => return None,
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2")) => return Some("v2"),
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2beta1")) => return Some("v2beta1"),
            _ => continue,
        }
    }
    None
}

/// An aggregated discovery document in `version`, with its entity tag (304 when the client
/// has it already).
fn aggregated(items: Vec<Value>, version: &str, if_none_match: Option<&str>) -> Response {
    let content_type = format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    let body = serde_json::to_vec(&json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"), "metadata": {}, "items": items})).unwrap();
    let digest = ring::digest::digest(&ring::digest::SHA256, &body);
    let etag = format!("\"{}\"", digest.as_ref().iter().map(|b| format!("{b:02X}")).collect::<String>());
    let mut response = if if_none_match == Some(etag.as_str()) {
        respond::bytes(304, &content_type, Vec::new())
    } else {
        respond::bytes(200, &content_type, body)
    };
    response.headers_mut().insert("vary", http::HeaderValue::from_static("Accept"));
    response.headers_mut().insert("etag", http::HeaderValue::from_str(&etag).unwrap());
    response
}

fn aggregated_resources(gv: &str, resources: &[Value]) -> Value {
    let (group, version) = gv.split_once('/').unwrap_or(("", gv));
    let items: Vec<Value> = resources
        .iter()
        .filter(|r| !r["name"].as_str().unwrap_or_default().contains('/'))
        .map(|r| {
            let mut item = json!({
                "resource": r["name"], "singularResource": r["singularName"],
                "responseKind": {"group": group, "version": version, "kind": r["kind"]},
                "scope": if r["namespaced"] == true { "Namespaced" } else { "Cluster" },
                "verbs": r["verbs"], "shortNames": r["shortNames"],
            });
            if let Some(categories) = r.get("categories") {
                item["categories"] = categories.clone();
            }
            let prefix = format!("{}/", r["name"].as_str().unwrap_or_default());
            let subresources: Vec<Value> = resources
                .iter()
                .filter_map(|s| {
                    let sub = s["name"].as_str()?.strip_prefix(&prefix)?;
                    Some(json!({"subresource": sub, "responseKind": {"group": group, "version": version, "kind": s["kind"]}, "verbs": s["verbs"]}))
                })
                .collect();
            if !subresources.is_empty() {
                item["subresources"] = json!(subresources);
            }
            item
        })
        .collect();
    json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": [{"version": version, "resources": items, "freshness": "Current"}]})
}

/// `GET /api`.
pub fn legacy_root(accept: &str, if_none_match: Option<&str>, port: u16) -> Response {
    if let Some(version) = aggregated_version(accept) {
        let (gv, resources) = own().into_iter().next().unwrap();
        return aggregated(vec![aggregated_resources(gv, &resources)], version, if_none_match);
    }
    respond::json(
        200,
        &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": format!("127.0.0.1:{port}")}]}),
    )
}

/// `GET /apis`: the double's groups, then the APIServices' groups (aggregated: as the
/// backend describes them).
pub async fn apis(state: &State, backend: Option<&Backend>, accept: &str, if_none_match: Option<&str>) -> Response {
    let services = lock(&state.services).clone();
    let mut groups: Vec<String> = Vec::new();
    let mut ordered = services.clone();
    ordered.sort_by(|a, b| b.group_priority.cmp(&a.group_priority).then(a.group.cmp(&b.group)));
    for s in &ordered {
        if !groups.contains(&s.group) {
            groups.push(s.group.clone());
        }
    }
    let Some(version) = aggregated_version(accept) else {
        let mut list = own_groups();
        list.extend(groups.iter().filter_map(|g| group_from_services(&services, g)));
        return respond::json(200, &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": list}));
    };
    let mut items: Vec<Value> = own().into_iter().skip(1).map(|(gv, r)| aggregated_resources(gv, &r)).collect();
    if let Some(backend) = backend {
        items.extend(backend_groups(state, backend, &services).await);
    }
    aggregated(items, version, if_none_match)
}

/// The backend's groups as aggregated discovery describes them, as kube-aggregator's discovery
/// manager gathers them: `/apis` in v2 fetched once per Service the APIServices name (through
/// that Service, so with its TLS server name; `If-None-Match` with the Service's last entity
/// tag, a 304 keeps what it gave), and each APIService's group version taken from its own
/// Service's answer; a Service whose answer is unusable is asked `/apis/<g>/<v>` per group
/// version instead.
pub async fn backend_groups(state: &State, backend: &Backend, services: &[ApiService]) -> Vec<Value> {
    let aggregator = User::new("system:kube-aggregator", &["system:masters"]);
    let mut names: Vec<&str> = Vec::new();
    for service in services {
        if !names.contains(&service.server_name.as_str()) {
            names.push(&service.server_name);
        }
    }
    let mut items: Vec<Value> = Vec::new();
    for name in names {
        let using: Vec<ApiService> = services.iter().filter(|s| s.server_name == name).cloned().collect();
        let fetched = match service_discovery(state, backend, name, &aggregator).await {
            Some(fetched) => fetched,
            None => legacy_groups(state, backend, &using, &aggregator).await,
        };
        for item in fetched {
            let group = item["metadata"]["name"].as_str().unwrap_or_default();
            let versions: Vec<Value> = item["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|v| using.iter().any(|s| s.group == group && v["version"] == s.version.as_str()))
                .cloned()
                .collect();
            if versions.is_empty() {
                continue;
            }
            match items.iter_mut().find(|i| i["metadata"]["name"] == group) {
                Some(known) => {
                    if let Some(list) = known["versions"].as_array_mut() {
                        list.extend(versions);
                    }
                }
                None => {
                    let mut item = item.clone();
                    item["versions"] = Value::Array(versions);
                    items.push(item);
                }
            }
        }
    }
    items
}

/// `/apis` (aggregated v2) of the backend through the Service whose TLS server name is
/// `server_name`: its items, or `None` when the answer is not aggregated discovery.
async fn service_discovery(state: &State, backend: &Backend, server_name: &str, user: &User) -> Option<Vec<Value>> {
    let cached = lock(&state.discovery_cache).get(server_name).cloned();
    let mut headers = vec![("accept", AGGREGATED_V2)];
    if let Some((etag, _)) = &cached {
        headers.push(("if-none-match", etag.as_str()));
    }
    match aggregator::fetch_via(state, backend, server_name, "/apis", &headers, user).await {
        Ok(f) if f.status == 304 && cached.is_some() => {
            state.discovery_not_modified.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            cached.map(|(_, items)| items)
        }
        Ok(f)
            if f.status == 200
                && f.content_type.contains("as=APIGroupDiscoveryList")
                && f.content_type.contains("v=v2") =>
        {
            let document: Value = serde_json::from_slice(&f.body).unwrap_or_default();
            let items: Vec<Value> = document["items"].as_array().cloned().unwrap_or_default();
            if let Some(etag) = f.etag {
                lock(&state.discovery_cache).insert(server_name.to_string(), (etag, items.clone()));
            }
            Some(items)
        }
        other => {
            eprintln!("control plane: backend aggregated discovery unusable ({other:?}); asking each group version");
            None
        }
    }
}

/// Aggregated items built from each registered group version's `APIResourceList`.
async fn legacy_groups(state: &State, backend: &Backend, services: &[ApiService], user: &User) -> Vec<Value> {
    let mut items: Vec<Value> = Vec::new();
    for service in services {
        let path = format!("/apis/{}/{}", service.group, service.version);
        let Ok(f) =
            aggregator::fetch_via(state, backend, &service.server_name, &path, &[("accept", "application/json")], user)
                .await
        else {
            continue;
        };
        let list: Value = serde_json::from_slice(&f.body).unwrap_or_default();
        if f.status != 200 || list["kind"] != "APIResourceList" {
            continue;
        }
        let resources: Vec<Value> = list["resources"].as_array().cloned().unwrap_or_default();
        let top: Vec<Value> =
            resources.iter().filter(|r| !r["name"].as_str().unwrap_or_default().contains('/')).cloned().collect();
        let mut version = aggregated_resources(&format!("{}/{}", service.group, service.version), &top);
        if let Some(converted) = version["versions"][0]["resources"].as_array_mut() {
            for resource in converted {
                let name = resource["resource"].as_str().unwrap_or_default().to_string();
                let subresources: Vec<Value> = resources
                    .iter()
                    .filter_map(|r| {
                        let (parent, sub) = r["name"].as_str()?.split_once('/')?;
                        (parent == name).then(|| json!({"subresource": sub, "responseKind": {"group": service.group, "version": service.version, "kind": r["kind"]}, "verbs": r["verbs"]}))
                    })
                    .collect();
                if !subresources.is_empty() {
                    resource["subresources"] = json!(subresources);
                }
            }
        }
        match items.iter_mut().find(|i| i["metadata"]["name"] == service.group.as_str()) {
            Some(group) => {
                if let (Some(versions), Some(new)) =
                    (group["versions"].as_array_mut(), version["versions"][0].as_object())
                {
                    versions.push(Value::Object(new.clone()));
                }
            }
            None => items.push(version),
        }
    }
    items
}
