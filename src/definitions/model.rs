//! The served form of a definition: what the API needs per resource and version, computed
//! once when the definition is loaded.

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceColumnDefinition;

use crate::core::gvr::{GroupKind, GroupResource, GroupVersion};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// The scale subresource's paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scale {
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

/// One version of a definition.
#[derive(Debug, Clone)]
pub struct Version {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    pub deprecated: bool,
    /// The warning every request to this version gets, if deprecated.
    pub deprecation_warning: Option<String>,
    /// The version's `openAPIV3Schema`, as compact JSON text (what publishing reads, rarely;
    /// text takes a fraction of a value's memory).
    pub openapi_schema: Option<Arc<str>>,
    /// The same schema compiled once for the write and read paths (pruning, defaulting,
    /// validation); shared, never recompiled per request.
    pub schema: Option<Arc<crate::schema::Schema>>,
    pub printer_columns: Vec<CustomResourceColumnDefinition>,
    pub status_subresource: bool,
    pub scale: Option<Scale>,
    /// `selectableFields` JSON paths without the leading dot (`spec.color`).
    pub selectable_fields: Vec<String>,
    // --- CEL (issue 5): the version's x-kubernetes-validations, compiled once at load.
    pub cel_rules: Option<Arc<crate::cel::Rules>>,
    // --- end CEL
    /// The type tree server-side apply merges and tracks ownership with.
    pub field_schema: Arc<crate::fieldmanager::Schema>,
}

impl Version {
    /// The version's `openAPIV3Schema` as a value.
    pub fn openapi_schema_value(&self) -> Option<serde_json::Value> {
        self.openapi_schema.as_deref().and_then(|text| serde_json::from_str(text).ok())
    }
}

/// A loaded, valid definition.
#[derive(Debug, Clone)]
pub struct Definition {
    /// `metadata.name`: `<plural>.<group>`.
    pub name: String,
    /// Where it was loaded from (file, and document index for multi-document files).
    pub source: String,
    pub group: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub scope: Scope,
    /// Versions in manifest order.
    pub versions: Vec<Arc<Version>>,
    /// The version objects are stored in (one of `versions`).
    pub storage: Arc<Version>,
    /// How objects change version.
    pub conversion: super::conversion::Conversion,
    /// Warnings Kubernetes would return when creating it (unrecognized formats, ...).
    pub warnings: Vec<String>,
    /// Served for reading only (get, list, watch): the server's own resources, which it writes
    /// itself (`builtin`).
    pub read_only: bool,
}

impl Definition {
    pub fn namespaced(&self) -> bool {
        self.scope == Scope::Namespaced
    }

    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.plural)
    }

    pub fn group_kind(&self) -> GroupKind {
        GroupKind::new(&self.group, &self.kind)
    }

    pub fn version(&self, name: &str) -> Option<&Arc<Version>> {
        self.versions.iter().find(|v| v.name == name)
    }

    pub fn group_version(&self, version: &str) -> GroupVersion {
        GroupVersion::new(&self.group, version)
    }

    pub fn served_versions(&self) -> impl Iterator<Item = &Arc<Version>> {
        self.versions.iter().filter(|v| v.served)
    }

    /// The storage version hash of discovery: base64 of the first 8 bytes of
    /// sha256("<group>/<storageVersion>/<Kind>").
    pub fn storage_version_hash(&self) -> String {
        use base64::Engine;
        let input = format!("{}/{}/{}", self.group, self.storage.name, self.kind);
        let digest = ring::digest::digest(&ring::digest::SHA256, input.as_bytes());
        let bytes = digest.as_ref().get(..8).unwrap_or_default();
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }
}
