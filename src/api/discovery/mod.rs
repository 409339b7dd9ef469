//! Discovery documents, computed once per registry: `/api`, `/apis` (plain and aggregated
//! v2/v2beta1), `/apis/<group>` and `/apis/<group>/<version>`. A group's documents (and its
//! encoded items of the documents of every group) are kept across registries for as long as the
//! group's definitions are the same `Arc`s.
//!
//! Aggregated `/apis` is also served by group version and by group, as `/openapi/v2` is
//! (`openapi::slices`): kube-aggregator fetches it once per Service its APIServices name and
//! keeps the whole answer for each, so with one Service per group version a connection whose
//! TLS server name picks a group version gets the aggregated document of it alone (its group's
//! item with that version only).

use std::collections::HashMap;
use std::sync::Arc;

mod types;

use bytes::Bytes;

use crate::definitions::registry::{Registry, Served, same_definitions};
use crate::definitions::{Definition, builtin};
use types::{
    ApiGroup, ApiGroupDiscovery, ApiResource, ApiResourceDiscovery, ApiResourceList, ApiSubresourceDiscovery,
    ApiVersionDiscovery, ApiVersions, GroupVersionForDiscovery, GroupVersionKind, NameOnly,
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
    groups: HashMap<String, Arc<GroupDocuments>>,
    slice_names: Arc<crate::api::openapi::slices::SliceNames>,
}

/// The documents of one group and its parts of the documents of every group, built from the
/// group's definitions: kept, as they are, while the group's definitions stay the same `Arc`s.
#[derive(Debug)]
struct GroupDocuments {
    definitions: Vec<Arc<Definition>>,
    /// `/apis/<group>`.
    group: Document,
    /// `/apis/<group>/<version>`, by version.
    versions: HashMap<String, Document>,
    /// Its item of the group list (no `kind`, no `apiVersion`), encoded.
    list_item: Vec<u8>,
    /// Its item of the aggregated documents, encoded.
    aggregated_item: Vec<u8>,
    /// The aggregated documents (v2, v2beta1) of this group alone.
    aggregated_alone: [Document; 2],
    /// The aggregated documents (v2, v2beta1) of each version of this group alone, by version.
    aggregated_by_version: HashMap<String, [Document; 2]>,
}

impl GroupDocuments {
    fn build(registry: &Registry, group: &str, versions: &[String]) -> GroupDocuments {
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
        let mut documents = HashMap::new();
        let mut aggregated_versions = Vec::new();
        let mut aggregated_by_version = HashMap::new();
        for version in versions {
            let served = registry.resources(group, version);
            let list = ApiResourceList {
                kind: "APIResourceList",
                api_version: "v1",
                group_version: format!("{group}/{version}"),
                resources: served.iter().flat_map(|s| api_resources(s)).collect(),
            };
            documents.insert(version.clone(), Document::new(&list));
            let entry = ApiVersionDiscovery {
                version,
                resources: served.iter().map(|s| aggregated_resource(s)).collect(),
                freshness: "Current",
            };
            if versions.len() > 1 {
                let alone = ApiGroupDiscovery { metadata: NameOnly { name: group }, versions: vec![entry.clone()] };
                let item = serde_json::to_vec(&alone).unwrap_or_default();
                aggregated_by_version.insert(
                    version.clone(),
                    [aggregated_doc("v2", &[item.as_slice()]), aggregated_doc("v2beta1", &[item.as_slice()])],
                );
            }
            aggregated_versions.push(entry);
        }
        // Each group is encoded once, for both aggregated documents.
        let item = ApiGroupDiscovery { metadata: NameOnly { name: group }, versions: aggregated_versions };
        let aggregated_item = serde_json::to_vec(&item).unwrap_or_default();
        let aggregated_alone = [
            aggregated_doc("v2", &[aggregated_item.as_slice()]),
            aggregated_doc("v2beta1", &[aggregated_item.as_slice()]),
        ];
        // A group of one version: that version alone is the group alone (the bytes are shared).
        if let [version] = versions {
            aggregated_by_version.insert(version.clone(), aggregated_alone.clone());
        }
        GroupDocuments {
            definitions: registry.definitions_of(group).to_vec(),
            group: Document::new(&api_group("APIGroup", "v1")),
            versions: documents,
            // The group list's items carry no kind or apiVersion.
            list_item: serde_json::to_vec(&api_group("", "")).unwrap_or_default(),
            aggregated_alone,
            aggregated_by_version,
            aggregated_item,
        }
    }
}

impl Discovery {
    pub fn build(registry: &Registry) -> Discovery {
        Discovery::build_from(registry, None)
    }

    /// The documents of `registry`, reusing those of `previous` for every group whose
    /// definitions are the same (a reload changes one definition among many: only its group's
    /// documents and the documents of every group are encoded again).
    pub fn build_from(registry: &Registry, previous: Option<&Discovery>) -> Discovery {
        let names = crate::api::openapi::slices::SliceNames::new(registry.groups());
        Discovery::build_named(registry, previous, Arc::new(names))
    }

    /// [`Discovery::build_from`] with the registry's slice names (`Catalog` makes them once for
    /// its discovery and OpenAPI documents).
    pub fn build_named(
        registry: &Registry,
        previous: Option<&Discovery>,
        slice_names: Arc<crate::api::openapi::slices::SliceNames>,
    ) -> Discovery {
        let mut groups = HashMap::new();
        let mut list_items = Vec::new();
        let mut aggregated = Vec::new();
        for (group, versions) in registry.groups() {
            let kept = previous
                .and_then(|p| p.groups.get(group))
                .filter(|p| same_definitions(&p.definitions, registry.definitions_of(group)));
            let documents = match kept {
                Some(documents) => documents.clone(),
                None => Arc::new(GroupDocuments::build(registry, group, versions)),
            };
            groups.insert(group.to_string(), documents);
        }
        for (group, _) in registry.groups() {
            if let Some(documents) = groups.get(group) {
                list_items.push(documents.list_item.as_slice());
                aggregated.push(documents.aggregated_item.as_slice());
            }
        }
        let api_versions =
            ApiVersions { kind: "APIVersions", versions: Vec::new(), server_address_by_client_cidrs: None };
        Discovery {
            api_versions: Document::new(&api_versions),
            api_aggregated_v2: aggregated_doc("v2", &[]),
            api_aggregated_v2beta1: aggregated_doc("v2beta1", &[]),
            group_list: list_doc(&list_items),
            aggregated_v2: aggregated_doc("v2", &aggregated),
            aggregated_v2beta1: aggregated_doc("v2beta1", &aggregated),
            groups,
            slice_names,
        }
    }

    /// The aggregated document (`version`: v2 or v2beta1) a connection that sent `server_name`
    /// in TLS is served: the group version or group the name picks alone, or every group.
    pub fn aggregated_for(&self, version: &str, server_name: Option<&str>) -> &Document {
        use crate::api::openapi::slices::Slice;
        let alone = server_name.and_then(|name| self.slice_names.slice(name)).and_then(|slice| {
            let documents = self.groups.get(slice.group())?;
            match slice {
                Slice::Group(_) => Some(&documents.aggregated_alone),
                Slice::GroupVersion(_, v) => documents.aggregated_by_version.get(v),
            }
        });
        match (version, alone) {
            ("v2", Some([v2, _])) => v2,
            (_, Some([_, v2beta1])) => v2beta1,
            ("v2", None) => &self.aggregated_v2,
            (_, None) => &self.aggregated_v2beta1,
        }
    }

    pub fn group(&self, group: &str) -> Option<&Document> {
        self.groups.get(group).map(|g| &g.group)
    }

    pub fn group_version(&self, group: &str, version: &str) -> Option<&Document> {
        self.groups.get(group)?.versions.get(version)
    }
}

/// Encoded items, comma-separated, between `head` and `tail`.
fn joined(head: &[u8], items: &[&[u8]], tail: &[u8]) -> Document {
    let mut body = Vec::with_capacity(head.len() + items.iter().map(|i| i.len() + 1).sum::<usize>() + tail.len());
    body.extend_from_slice(head);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item);
    }
    body.extend_from_slice(tail);
    Document::of_bytes(body)
}

/// The `metav1.APIGroupList` of encoded items (`kind`, `apiVersion`, `groups`).
fn list_doc(items: &[&[u8]]) -> Document {
    joined(br#"{"kind":"APIGroupList","apiVersion":"v1","groups":["#, items, b"]}")
}

/// An `APIGroupDiscoveryList` of encoded items, members in the Go type's order: `kind`,
/// `apiVersion`, `metadata` (an empty `ListMeta`, written as `{}`), `items`.
fn aggregated_doc(version: &str, items: &[&[u8]]) -> Document {
    let head = format!(
        r#"{{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/{version}","metadata":{{}},"items":["#
    );
    joined(head.as_bytes(), items, b"]}")
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
    for action in builtin::action_subresources(d) {
        out.push(ApiResource { verbs: builtin::action_verbs(action), ..sub(action, "", "v1", "Status") });
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
    for action in builtin::action_subresources(d) {
        subresources.push(ApiSubresourceDiscovery {
            subresource: action,
            response_kind: GroupVersionKind { group: "", version: "v1", kind: "Status" },
            verbs: builtin::action_verbs(action),
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
