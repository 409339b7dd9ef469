//! Discovery documents, computed once per registry: `/api`, `/apis` (plain and aggregated
//! v2/v2beta1), `/apis/<group>` and `/apis/<group>/<version>`.

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::definitions::registry::{Registry, Served};

/// Verbs of a custom resource, in the order Kubernetes lists them.
pub const RESOURCE_VERBS: &[&str] =
    &["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"];
/// Verbs of a read-only resource (the server's own).
pub const READ_ONLY_VERBS: &[&str] = &["get", "list", "watch"];
/// Verbs of the status and scale subresources.
pub const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// An encoded document with its entity tag.
#[derive(Debug, Clone)]
pub struct Document {
    pub body: Bytes,
    pub etag: String,
}

impl Document {
    fn new(value: &Value) -> Document {
        Document::of_bytes(serde_json::to_vec(value).unwrap_or_default())
    }

    fn of_bytes(body: Vec<u8>) -> Document {
        let body = Bytes::from(body);
        let digest = ring::digest::digest(&ring::digest::SHA256, &body);
        let hex: String = digest.as_ref().iter().take(16).map(|b| format!("{b:02X}")).collect();
        Document { body, etag: format!("\"{hex}\"") }
    }
}

/// Every discovery document of one registry.
#[derive(Debug, Clone)]
pub struct Discovery {
    pub api_versions: Document,
    pub api_aggregated_v2: Document,
    pub api_aggregated_v2beta1: Document,
    pub group_list: Document,
    pub aggregated_v2: Document,
    pub aggregated_v2beta1: Document,
    groups: HashMap<String, Document>,
    group_versions: HashMap<(String, String), Document>,
}

impl Discovery {
    pub fn build(registry: &Registry) -> Discovery {
        let mut groups = HashMap::new();
        let mut group_versions = HashMap::new();
        let mut group_list = Vec::new();
        let mut aggregated = Vec::new();
        for (group, versions) in registry.groups() {
            let group_value = api_group(group, versions);
            groups.insert(group.to_string(), Document::new(&group_value));
            if let Value::Object(mut map) = group_value {
                map.remove("kind");
                map.remove("apiVersion");
                group_list.push(Value::Object(map));
            }
            let mut aggregated_versions = Vec::new();
            for version in versions {
                let served = registry.resources(group, version);
                let list = json!({
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": format!("{group}/{version}"),
                    "resources": served.iter().flat_map(|s| api_resources(s)).collect::<Vec<_>>(),
                });
                group_versions.insert((group.to_string(), version.clone()), Document::new(&list));
                aggregated_versions.push(json!({
                    "version": version,
                    "resources": served.iter().map(|s| aggregated_resource(s)).collect::<Vec<_>>(),
                    "freshness": "Current",
                }));
            }
            // Each group is encoded once, for both aggregated documents.
            let item = json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": aggregated_versions});
            aggregated.push(serde_json::to_vec(&item).unwrap_or_default());
        }
        Discovery {
            api_versions: Document::new(&json!({
                "kind": "APIVersions",
                "versions": [],
                "serverAddressByClientCIDRs": null,
            })),
            api_aggregated_v2: aggregated_doc("v2", &[]),
            api_aggregated_v2beta1: aggregated_doc("v2beta1", &[]),
            group_list: Document::new(&json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": group_list})),
            aggregated_v2: aggregated_doc("v2", &aggregated),
            aggregated_v2beta1: aggregated_doc("v2beta1", &aggregated),
            groups,
            group_versions,
        }
    }

    pub fn group(&self, group: &str) -> Option<&Document> {
        self.groups.get(group)
    }

    pub fn group_version(&self, group: &str, version: &str) -> Option<&Document> {
        self.group_versions.get(&(group.to_string(), version.to_string()))
    }
}

/// An `APIGroupDiscoveryList` of encoded items: the bytes serde_json writes for
/// `{"kind", "apiVersion", "metadata": {}, "items"}`, members in its order.
fn aggregated_doc(version: &str, items: &[Vec<u8>]) -> Document {
    let mut body = Vec::with_capacity(items.iter().map(|i| i.len() + 1).sum::<usize>() + 128);
    body.extend_from_slice(b"{\"apiVersion\":\"apidiscovery.k8s.io/");
    body.extend_from_slice(version.as_bytes());
    body.extend_from_slice(b"\",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item);
    }
    body.extend_from_slice(b"],\"kind\":\"APIGroupDiscoveryList\",\"metadata\":{}}");
    Document::of_bytes(body)
}

fn api_group(group: &str, versions: &[String]) -> Value {
    let entries: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v})).collect();
    let preferred = entries.first().cloned().unwrap_or(Value::Null);
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries, "preferredVersion": preferred})
}

fn verbs_of(definition: &crate::definitions::Definition) -> &'static [&'static str] {
    if definition.read_only { READ_ONLY_VERBS } else { RESOURCE_VERBS }
}

fn api_resources(served: &Served) -> Vec<Value> {
    let d = &served.definition;
    let mut main = json!({
        "name": d.plural,
        "singularName": d.singular,
        "namespaced": d.namespaced(),
        "kind": d.kind,
        "verbs": verbs_of(d),
        "storageVersionHash": d.storage_version_hash(),
    });
    if !d.short_names.is_empty() {
        crate::api::objects::put(&mut main, "shortNames", json!(d.short_names));
    }
    if !d.categories.is_empty() {
        crate::api::objects::put(&mut main, "categories", json!(d.categories));
    }
    let mut out = vec![main];
    if served.version.status_subresource {
        out.push(json!({
            "name": format!("{}/status", d.plural),
            "singularName": "",
            "namespaced": d.namespaced(),
            "kind": d.kind,
            "verbs": SUBRESOURCE_VERBS,
        }));
    }
    if served.version.scale.is_some() {
        out.push(json!({
            "name": format!("{}/scale", d.plural),
            "singularName": "",
            "namespaced": d.namespaced(),
            "group": "autoscaling",
            "version": "v1",
            "kind": "Scale",
            "verbs": SUBRESOURCE_VERBS,
        }));
    }
    out
}

fn aggregated_resource(served: &Served) -> Value {
    let d = &served.definition;
    let kind = json!({"group": d.group, "version": served.version.name, "kind": d.kind});
    let mut resource = json!({
        "resource": d.plural,
        "responseKind": kind,
        "scope": if d.namespaced() { "Namespaced" } else { "Cluster" },
        "singularResource": d.singular,
        "verbs": verbs_of(d),
    });
    if !d.short_names.is_empty() {
        crate::api::objects::put(&mut resource, "shortNames", json!(d.short_names));
    }
    if !d.categories.is_empty() {
        crate::api::objects::put(&mut resource, "categories", json!(d.categories));
    }
    let mut subresources = Vec::new();
    if served.version.status_subresource {
        subresources.push(json!({"subresource": "status", "responseKind": kind, "verbs": SUBRESOURCE_VERBS}));
    }
    if served.version.scale.is_some() {
        subresources.push(json!({
            "subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": SUBRESOURCE_VERBS,
        }));
    }
    if !subresources.is_empty() {
        crate::api::objects::put(&mut resource, "subresources", Value::Array(subresources));
    }
    resource
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_documents_are_what_serde_json_writes() {
        let items = [json!({"metadata": {"name": "a.io", "creationTimestamp": null}, "versions": []}), json!({"x": 1})];
        let encoded: Vec<Vec<u8>> = items.iter().map(|i| serde_json::to_vec(i).unwrap()).collect();
        for (version, items, encoded) in [("v2", &items[..], &encoded[..]), ("v2beta1", &[], &[])] {
            let expected = json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"),
                "metadata": {}, "items": items});
            assert_eq!(aggregated_doc(version, encoded).body, serde_json::to_vec(&expected).unwrap());
        }
    }
}
