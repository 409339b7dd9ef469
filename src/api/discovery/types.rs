//! Discovery documents as typed values whose fields serialize in the order of Kubernetes' Go
//! types (`metav1.APIGroup`, `APIResourceList`, `APIVersions` and the items of
//! `apidiscovery.k8s.io`'s `APIGroupDiscoveryList`), with their `omitempty` rules, so that the
//! bytes match kube-apiserver's (the lists around the items are written by `discovery`). A `serde_json::Value` map would sort the keys instead.
//!
//! Only types: building them from the registry is `discovery`'s job.

use serde::Serialize;

fn is_empty<T>(items: &[T]) -> bool {
    items.is_empty()
}

/// `metav1.APIVersions` (`/api`).
#[derive(Debug, Serialize)]
pub struct ApiVersions {
    pub kind: &'static str,
    pub versions: Vec<String>,
    /// Not `omitempty` in Kubernetes: an empty list is written as `null`.
    #[serde(rename = "serverAddressByClientCIDRs")]
    pub server_address_by_client_cidrs: Option<Vec<String>>,
}

/// `metav1.APIGroup` (`/apis/<group>`, and the items of the group list, `metav1.APIGroupList`,
/// without `kind` and `apiVersion`; `discovery` writes the list around them).
#[derive(Debug, Serialize)]
pub struct ApiGroup<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    pub kind: &'static str,
    #[serde(rename = "apiVersion", skip_serializing_if = "str::is_empty")]
    pub api_version: &'static str,
    pub name: &'a str,
    pub versions: Vec<GroupVersionForDiscovery>,
    #[serde(rename = "preferredVersion")]
    pub preferred_version: GroupVersionForDiscovery,
}

/// `metav1.GroupVersionForDiscovery`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GroupVersionForDiscovery {
    #[serde(rename = "groupVersion")]
    pub group_version: String,
    pub version: String,
}

/// `metav1.APIResourceList` (`/apis/<group>/<version>`).
#[derive(Debug, Serialize)]
pub struct ApiResourceList<'a> {
    pub kind: &'static str,
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    #[serde(rename = "groupVersion")]
    pub group_version: String,
    pub resources: Vec<ApiResource<'a>>,
}

/// `metav1.APIResource`.
#[derive(Debug, Serialize)]
pub struct ApiResource<'a> {
    pub name: String,
    /// Not `omitempty`: subresources carry an empty one.
    #[serde(rename = "singularName")]
    pub singular_name: &'a str,
    pub namespaced: bool,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub group: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub version: &'a str,
    pub kind: &'a str,
    pub verbs: &'static [&'static str],
    #[serde(rename = "shortNames", skip_serializing_if = "is_empty")]
    pub short_names: &'a [String],
    #[serde(skip_serializing_if = "is_empty")]
    pub categories: &'a [String],
    #[serde(rename = "storageVersionHash", skip_serializing_if = "String::is_empty")]
    pub storage_version_hash: String,
}

/// `apidiscovery.k8s.io` `APIGroupDiscovery`: an item of the aggregated document. Its
/// `metadata` is an `ObjectMeta` holding the name only (a zero `creationTimestamp` is omitted
/// since Kubernetes 1.34).
#[derive(Debug, Serialize)]
pub struct ApiGroupDiscovery<'a> {
    pub metadata: NameOnly<'a>,
    #[serde(skip_serializing_if = "is_empty")]
    pub versions: Vec<ApiVersionDiscovery<'a>>,
}

#[derive(Debug, Serialize)]
pub struct NameOnly<'a> {
    pub name: &'a str,
}

/// `APIVersionDiscovery`.
#[derive(Debug, Clone, Serialize)]
pub struct ApiVersionDiscovery<'a> {
    pub version: &'a str,
    #[serde(skip_serializing_if = "is_empty")]
    pub resources: Vec<ApiResourceDiscovery<'a>>,
    pub freshness: &'static str,
}

/// `APIResourceDiscovery`.
#[derive(Debug, Clone, Serialize)]
pub struct ApiResourceDiscovery<'a> {
    pub resource: &'a str,
    #[serde(rename = "responseKind")]
    pub response_kind: GroupVersionKind<'a>,
    pub scope: &'static str,
    #[serde(rename = "singularResource")]
    pub singular_resource: &'a str,
    pub verbs: &'static [&'static str],
    #[serde(rename = "shortNames", skip_serializing_if = "is_empty")]
    pub short_names: &'a [String],
    #[serde(skip_serializing_if = "is_empty")]
    pub categories: &'a [String],
    #[serde(skip_serializing_if = "is_empty")]
    pub subresources: Vec<ApiSubresourceDiscovery<'a>>,
}

/// `APISubresourceDiscovery`.
#[derive(Debug, Clone, Serialize)]
pub struct ApiSubresourceDiscovery<'a> {
    pub subresource: &'static str,
    #[serde(rename = "responseKind")]
    pub response_kind: GroupVersionKind<'a>,
    pub verbs: &'static [&'static str],
}

/// `metav1.GroupVersionKind`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct GroupVersionKind<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
}
