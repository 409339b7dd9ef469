//! Discovery documents, computed once per registry: `/api`, `/apis` (plain and aggregated
//! v2/v2beta1), `/apis/<group>` and `/apis/<group>/<version>`.

use std::collections::HashMap;

mod types;

use bytes::Bytes;

use crate::definitions::registry::{Registry, Served};
use types::{
    ApiGroup, ApiGroupDiscovery, ApiGroupList, ApiResource, ApiResourceDiscovery, ApiResourceList,
    ApiSubresourceDiscovery, ApiVersionDiscovery, ApiVersions, GroupVersionForDiscovery, GroupVersionKind, NameOnly,
};

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
    fn new(value: &impl serde::Serialize) -> Document {
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
            let entries: Vec<GroupVersionForDiscovery> = versions
                .iter()
                .map(|v| GroupVersionForDiscovery { group_version: format!("{group}/{v}"), version: v.clone() })
                .collect();
            let preferred = entries.first().cloned().unwrap_or_default();
            let api_group = |kind, api_version| ApiGroup {
                kind,
                api_version,
                name: group,
                versions: entries.clone(),
                preferred_version: preferred.clone(),
            };
            groups.insert(group.to_string(), Document::new(&api_group("APIGroup", "v1")));
            // The group list's items carry no kind or apiVersion.
            group_list.push(api_group("", ""));
            let mut aggregated_versions = Vec::new();
            for version in versions {
                let served = registry.resources(group, version);
                let list = ApiResourceList {
                    kind: "APIResourceList",
                    api_version: "v1",
                    group_version: format!("{group}/{version}"),
                    resources: served.iter().flat_map(|s| api_resources(s)).collect(),
                };
                group_versions.insert((group.to_string(), version.clone()), Document::new(&list));
                aggregated_versions.push(ApiVersionDiscovery {
                    version,
                    resources: served.iter().map(|s| aggregated_resource(s)).collect(),
                    freshness: "Current",
                });
            }
            // Each group is encoded once, for both aggregated documents.
            let item = ApiGroupDiscovery { metadata: NameOnly { name: group }, versions: aggregated_versions };
            aggregated.push(serde_json::to_vec(&item).unwrap_or_default());
        }
        let api_versions =
            ApiVersions { kind: "APIVersions", versions: Vec::new(), server_address_by_client_cidrs: None };
        Discovery {
            api_versions: Document::new(&api_versions),
            api_aggregated_v2: aggregated_doc("v2", &[]),
            api_aggregated_v2beta1: aggregated_doc("v2beta1", &[]),
            group_list: Document::new(&ApiGroupList { kind: "APIGroupList", api_version: "v1", groups: group_list }),
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

/// An `APIGroupDiscoveryList` of encoded items, members in the Go type's order: `kind`,
/// `apiVersion`, `metadata` (an empty `ListMeta`, written as `{}`), `items`.
fn aggregated_doc(version: &str, items: &[Vec<u8>]) -> Document {
    let mut body = Vec::with_capacity(items.iter().map(|i| i.len() + 1).sum::<usize>() + 128);
    body.extend_from_slice(b"{\"kind\":\"APIGroupDiscoveryList\",\"apiVersion\":\"apidiscovery.k8s.io/");
    body.extend_from_slice(version.as_bytes());
    body.extend_from_slice(b"\",\"metadata\":{},\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item);
    }
    body.extend_from_slice(b"]}");
    Document::of_bytes(body)
}

fn verbs_of(definition: &crate::definitions::Definition) -> &'static [&'static str] {
    if definition.read_only { READ_ONLY_VERBS } else { RESOURCE_VERBS }
}

fn api_resources(served: &Served) -> Vec<ApiResource<'_>> {
    let d = &served.definition;
    let sub = |name: &str, group: &'static str, version: &'static str, kind: &'static str| ApiResource {
        name: format!("{}/{name}", d.plural),
        singular_name: "",
        namespaced: d.namespaced(),
        group,
        version,
        kind: if kind.is_empty() { &d.kind } else { kind },
        verbs: SUBRESOURCE_VERBS,
        short_names: &[],
        categories: &[],
        storage_version_hash: String::new(),
    };
    let mut out = vec![ApiResource {
        name: d.plural.clone(),
        singular_name: &d.singular,
        namespaced: d.namespaced(),
        group: "",
        version: "",
        kind: &d.kind,
        verbs: verbs_of(d),
        short_names: &d.short_names,
        categories: &d.categories,
        storage_version_hash: d.storage_version_hash(),
    }];
    if served.version.status_subresource {
        out.push(sub("status", "", "", ""));
    }
    if served.version.scale.is_some() {
        out.push(sub("scale", "autoscaling", "v1", "Scale"));
    }
    out
}

fn aggregated_resource(served: &Served) -> ApiResourceDiscovery<'_> {
    let d = &served.definition;
    let kind = GroupVersionKind { group: &d.group, version: &served.version.name, kind: &d.kind };
    let mut subresources = Vec::new();
    if served.version.status_subresource {
        subresources.push(ApiSubresourceDiscovery {
            subresource: "status",
            response_kind: kind,
            verbs: SUBRESOURCE_VERBS,
        });
    }
    if served.version.scale.is_some() {
        subresources.push(ApiSubresourceDiscovery {
            subresource: "scale",
            response_kind: GroupVersionKind { group: "autoscaling", version: "v1", kind: "Scale" },
            verbs: SUBRESOURCE_VERBS,
        });
    }
    ApiResourceDiscovery {
        resource: &d.plural,
        response_kind: kind,
        scope: if d.namespaced() { "Namespaced" } else { "Cluster" },
        singular_resource: &d.singular,
        verbs: verbs_of(d),
        short_names: &d.short_names,
        categories: &d.categories,
        subresources,
    }
}

#[cfg(test)]
mod tests;
