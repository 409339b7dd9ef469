//! The served form of a definition: what the API needs per resource and version, computed
//! once when the definition is loaded.

use std::sync::{Arc, OnceLock};

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
    /// The version's `openAPIV3Schema`, as compact JSON text: what publishing reads, and what
    /// the compiled forms are built from on first use (text takes a fraction of a value's
    /// memory, and versions with the same schema share it).
    pub openapi_schema: Option<Arc<str>>,
    pub printer_columns: Vec<CustomResourceColumnDefinition>,
    pub status_subresource: bool,
    pub scale: Option<Scale>,
    /// `selectableFields` JSON paths without the leading dot (`spec.color`).
    pub selectable_fields: Vec<String>,
    /// The compiled forms of `openapi_schema`, each built when first needed and then kept
    /// (shared by the clones of this version): a definition nobody uses costs its text only.
    compiled: Arc<Compiled>,
}

/// What a version's schema compiles to, built on first use. The definition's checks compiled
/// the schema and its CEL rules once already (and refused it on any error), so building them
/// again from the same text gives what the checks saw.
#[derive(Debug, Default)]
struct Compiled {
    schema: OnceLock<Option<Arc<crate::schema::Schema>>>,
    cel_rules: OnceLock<Option<Arc<crate::cel::Rules>>>,
    field_schema: OnceLock<Arc<crate::fieldmanager::Schema>>,
    /// SHA-256 of the schema's text.
    digest: OnceLock<[u8; 32]>,
}

/// A version's fields but the compiled forms, for [`Version::new`].
#[derive(Debug, Default)]
pub struct VersionFields {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    pub deprecated: bool,
    pub deprecation_warning: Option<String>,
    pub openapi_schema: Option<Arc<str>>,
    pub printer_columns: Vec<CustomResourceColumnDefinition>,
    pub status_subresource: bool,
    pub scale: Option<Scale>,
    pub selectable_fields: Vec<String>,
}

impl Version {
    pub fn new(fields: VersionFields) -> Version {
        let VersionFields {
            name,
            served,
            storage,
            deprecated,
            deprecation_warning,
            openapi_schema,
            printer_columns,
            status_subresource,
            scale,
            selectable_fields,
        } = fields;
        Version {
            name,
            served,
            storage,
            deprecated,
            deprecation_warning,
            openapi_schema,
            printer_columns,
            status_subresource,
            scale,
            selectable_fields,
            compiled: Arc::default(),
        }
    }

    /// The version's `openAPIV3Schema` as a value. Read as request bodies are (`core::nesting`):
    /// serde_json's own limit of 128 levels would make a deeper schema, which Kubernetes
    /// serves, read as none (no validation, pruning, defaulting or OpenAPI for the version).
    pub fn openapi_schema_value(&self) -> Option<serde_json::Value> {
        self.openapi_schema.as_deref().and_then(|text| crate::core::nesting::from_str(text).ok())
    }

    /// The schema compiled for the write and read paths (pruning, defaulting, validation):
    /// built on first use, then shared; never recompiled per request.
    pub fn schema(&self) -> Option<&Arc<crate::schema::Schema>> {
        self.compiled
            .schema
            .get_or_init(|| self.openapi_schema_value().map(|raw| Arc::new(crate::schema::compile(&raw))))
            .as_ref()
    }

    /// The version's `x-kubernetes-validations`, compiled on first use (`None`: it has none).
    pub fn cel_rules(&self) -> Option<&Arc<crate::cel::Rules>> {
        self.compiled
            .cel_rules
            .get_or_init(|| {
                let raw = self.openapi_schema_value()?;
                // One thread with the compile stack for all the version's rules; located from
                // the schema's root (versions with the same schema share them).
                let root = crate::core::field::Path::new("openAPIV3Schema");
                let (rules, _) = crate::cel::on_compile_stack(|| crate::cel::Rules::compile(&raw, &root))?;
                (!rules.is_empty()).then(|| Arc::new(rules))
            })
            .as_ref()
    }

    /// The type tree server-side apply merges and tracks ownership with, built on first use.
    pub fn field_schema(&self) -> &Arc<crate::fieldmanager::Schema> {
        self.compiled.field_schema.get_or_init(|| {
            Arc::new(crate::fieldmanager::Schema::custom_resource(self.openapi_schema_value().as_ref()))
        })
    }

    /// SHA-256 of the version's `openAPIV3Schema` text (`None`: it has none), computed once
    /// and kept with the compiled forms: documents built from many schemas (OpenAPI hashes)
    /// tell them apart by it without reading their texts again at every reload.
    pub fn schema_digest(&self) -> Option<&[u8; 32]> {
        let text = self.openapi_schema.as_deref()?;
        Some(self.compiled.digest.get_or_init(|| {
            let mut out = [0; 32];
            out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, text.as_bytes()).as_ref());
            out
        }))
    }

    /// Whether `other` has this version's schema (the same text): then their compiled forms
    /// behave alike.
    pub fn same_schema(&self, other: &Version) -> bool {
        Arc::ptr_eq(&self.compiled, &other.compiled)
            || (self.openapi_schema.is_some() && self.openapi_schema == other.openapi_schema)
    }

    /// This version sharing `other`'s compiled forms, for versions of one definition whose
    /// schemas are the same text: each form is built once for both.
    pub fn sharing_compiled_with(mut self, other: &Version) -> Version {
        if self.openapi_schema.is_some() && self.openapi_schema == other.openapi_schema {
            self.openapi_schema = other.openapi_schema.clone();
            self.compiled = other.compiled.clone();
        }
        self
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
