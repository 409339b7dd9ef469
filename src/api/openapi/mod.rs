//! OpenAPI documents of the served resources: `/openapi/v3` (an index plus one document per
//! group version) and `/openapi/v2` (one document for everything). kubectl reads v3 to choose
//! between server-side and client-side validation, to pick a patch type and for
//! `kubectl explain`; the aggregator merges v2 and v3 into the cluster's documents.
//!
//! Documents are built on first request and kept for the registry's lifetime: a registry of
//! thousands of definitions must not pay for documents nobody reads. Their hashes (used in the
//! index and as entity tags) come from the definitions, so the index is cheap. A group's
//! hashes and documents are kept across registries while its definitions are the same `Arc`s.
//! `/openapi/v2` is also served by group version and by group (`slices`): each slice is built on
//! first request and kept with its group, so a change to one group leaves every other slice alone.

mod kubernetes_types;
pub mod slices;
mod v2;
pub mod v2_proto;
mod v3;
mod v3_parameters;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::core::gvr::GroupVersion;
use crate::core::paths;
use crate::definitions::Definition;
use crate::definitions::registry::{Registry, Served, same_definitions};

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

/// An encoded document and its entity tag.
#[derive(Debug, Clone)]
pub struct Document {
    pub body: Bytes,
    /// The hash the index names the document by; quoted, it is the entity tag.
    pub hash: String,
}

impl Document {
    pub fn etag(&self) -> String {
        format!("\"{}\"", self.hash)
    }
}

fn hex_sha512(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA512, bytes);
    digest.as_ref().iter().take(32).map(|b| format!("{b:02X}")).collect()
}

/// The v2 document of `(group, version, resources)`, its entity tag the hash of its body.
fn v2_document(versions: &[(&str, &str, &[Served])]) -> Document {
    let body = Bytes::from(v2::document(versions, shared()));
    let hash = hex_sha512(&body);
    Document { body, hash }
}

fn encode(value: &Value) -> Document {
    let body = Bytes::from(crate::core::json::to_vec(value).unwrap_or_default());
    let hash = hex_sha512(&body);
    Document { body, hash }
}

struct GroupVersionDocs {
    resources: Vec<Served>,
    /// Hash of what the document is built from.
    hash: String,
    v3: OnceLock<Document>,
    /// This group version's slice of the v2 document (its paths and the definitions they use).
    v2: OnceLock<Document>,
}

/// The group versions of one group, kept across registries (with the v3 documents built so far)
/// while the group's definitions are the same `Arc`s.
struct GroupDocs {
    definitions: Vec<Arc<Definition>>,
    /// By version.
    versions: BTreeMap<String, GroupVersionDocs>,
    /// The group's slice of the v2 document (its paths and the definitions they use).
    v2: OnceLock<Document>,
}

/// The OpenAPI documents of one registry.
pub struct Documents {
    /// By group.
    groups: BTreeMap<String, Arc<GroupDocs>>,
    v3_index: Document,
    v2: OnceLock<Document>,
    v2_protobuf: OnceLock<Document>,
    slice_names: slices::SliceNames,
}

/// What a group version's documents depend on, hashed.
fn source_hash(group: &str, version: &str, resources: &[Served]) -> String {
    let described: Vec<Value> = resources
        .iter()
        .map(|s| {
            let d = &s.definition;
            json!([
                d.plural,
                d.kind,
                d.list_kind,
                d.namespaced(),
                s.version.openapi_schema.as_deref(),
                s.version.status_subresource,
                s.version.scale.is_some(),
                s.version.selectable_fields
            ])
        })
        .collect();
    let text = serde_json::to_vec(&json!([env!("CARGO_PKG_VERSION"), group, version, described])).unwrap_or_default();
    hex_sha512(&text)
}

impl GroupDocs {
    fn build(registry: &Registry, group: &str, versions: &[String]) -> GroupDocs {
        let versions = versions
            .iter()
            .map(|version| {
                let resources: Vec<Served> = registry.resources(group, version).into_iter().cloned().collect();
                let hash = source_hash(group, version, &resources);
                (version.clone(), GroupVersionDocs { resources, hash, v3: OnceLock::new(), v2: OnceLock::new() })
            })
            .collect();
        GroupDocs { definitions: registry.definitions_of(group).to_vec(), versions, v2: OnceLock::new() }
    }
}

impl Documents {
    pub fn build(registry: &Registry) -> Documents {
        Documents::build_from(registry, None)
    }

    /// The documents of `registry`, reusing those of `previous` (hashes and the v3 documents
    /// built so far) for every group whose definitions are the same; the index and the v2
    /// document are those of the whole registry.
    pub fn build_from(registry: &Registry, previous: Option<&Documents>) -> Documents {
        let mut groups = BTreeMap::new();
        let mut index = Map::new();
        for (group, versions) in registry.groups() {
            let kept = previous
                .and_then(|p| p.groups.get(group))
                .filter(|p| same_definitions(&p.definitions, registry.definitions_of(group)));
            let docs = match kept {
                Some(docs) => docs.clone(),
                None => Arc::new(GroupDocs::build(registry, group, versions)),
            };
            // In the order of version priority.
            for version in versions {
                let Some(entry) = docs.versions.get(version) else { continue };
                let gv = GroupVersion::new(group, version.as_str());
                index.insert(
                    paths::openapi_v3_key(&gv),
                    json!({"serverRelativeURL": paths::openapi_v3_url(&gv, &entry.hash)}),
                );
            }
            groups.insert(group.to_string(), docs);
        }
        Documents {
            groups,
            v3_index: encode(&json!({"paths": index})),
            v2: OnceLock::new(),
            v2_protobuf: OnceLock::new(),
            slice_names: slices::SliceNames::new(registry.groups()),
        }
    }

    pub fn v3_index(&self) -> &Document {
        &self.v3_index
    }

    /// The v3 document of a group version.
    pub fn v3(&self, group: &str, version: &str) -> Option<&Document> {
        let entry = self.groups.get(group)?.versions.get(version)?;
        Some(entry.v3.get_or_init(|| {
            let refs: Vec<&Served> = entry.resources.iter().collect();
            let body = Bytes::from(
                crate::core::json::to_vec(&v3::document(group, version, &refs, shared())).unwrap_or_default(),
            );
            Document { body, hash: entry.hash.clone() }
        }))
    }

    /// The v2 document of everything served.
    pub fn v2(&self) -> &Document {
        self.v2.get_or_init(|| {
            let all: Vec<(&str, &str, &[Served])> = self
                .groups
                .iter()
                .flat_map(|(g, docs)| {
                    docs.versions.iter().map(move |(v, e)| (g.as_str(), v.as_str(), e.resources.as_slice()))
                })
                .collect();
            v2_document(&all)
        })
    }

    /// The v2 document a connection that sent `server_name` in TLS is served: the slice of the
    /// group version or group the name picks (`slices`), or the whole document.
    pub fn v2_for(&self, server_name: Option<&str>) -> &Document {
        let slice = server_name.and_then(|name| self.slice_names.slice(name)).and_then(|slice| match slice {
            slices::Slice::Group(group) => self.v2_slice(group),
            slices::Slice::GroupVersion(group, version) => self.v2_version_slice(group, version),
        });
        slice.unwrap_or_else(|| self.v2())
    }

    /// The v2 document of one group's versions, with the same entity-tag rule as the whole.
    pub fn v2_slice(&self, group: &str) -> Option<&Document> {
        let docs = self.groups.get(group)?;
        Some(docs.v2.get_or_init(|| {
            let versions: Vec<(&str, &str, &[Served])> =
                docs.versions.iter().map(|(v, e)| (group, v.as_str(), e.resources.as_slice())).collect();
            v2_document(&versions)
        }))
    }

    /// The v2 document of one group version, with the same entity-tag rule as the whole.
    pub fn v2_version_slice(&self, group: &str, version: &str) -> Option<&Document> {
        let entry = self.groups.get(group)?.versions.get(version)?;
        Some(entry.v2.get_or_init(|| v2_document(&[(group, version, entry.resources.as_slice())])))
    }

    /// The v2 document in the protobuf form older kubectl releases read, transcoded from the
    /// JSON document (asked for rarely: only kubectl before 1.28 reads it).
    pub fn v2_protobuf(&self) -> &Document {
        self.v2_protobuf.get_or_init(|| {
            let value: Value = serde_json::from_slice(&self.v2().body).unwrap_or(Value::Null);
            let body = Bytes::from(v2_proto::encode(&value));
            let hash = hex_sha512(&body);
            Document { body, hash }
        })
    }
}

/// Schemas of Kubernetes' own types that CRD documents refer to, generated from k8s-openapi.
pub struct SharedSchemas {
    /// Definitions keyed by their Kubernetes names, with `#/components/schemas/` references.
    definitions: Map<String, Value>,
    /// The same in v2's form (still with v3's references).
    definitions_v2: Map<String, Value>,
    api_version_description: String,
    kind_description: String,
}

/// The shared schemas, generated once per process (they never change).
fn shared() -> &'static SharedSchemas {
    static SHARED: OnceLock<SharedSchemas> = OnceLock::new();
    SHARED.get_or_init(SharedSchemas::generate)
}

impl SharedSchemas {
    fn generate() -> SharedSchemas {
        use k8s_openapi::api::autoscaling::v1::Scale;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ListMeta, ObjectMeta, Patch, Status};
        let mut generator = SchemaSettings::openapi3().into_generator();
        generator.subschema_for::<ObjectMeta>();
        generator.subschema_for::<ListMeta>();
        generator.subschema_for::<DeleteOptions>();
        generator.subschema_for::<Patch>();
        generator.subschema_for::<Status>();
        generator.subschema_for::<Scale>();
        // Any type with TypeMeta: its apiVersion and kind descriptions are the ones to publish.
        generator.subschema_for::<k8s_openapi::api::core::v1::ConfigMap>();
        let mut definitions = generator.take_definitions(true);
        let describe = |field: &str| {
            definitions
                .get("io.k8s.api.core.v1.ConfigMap")
                .and_then(|d| d.pointer(&format!("/properties/{field}/description")))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let api_version_description = describe("apiVersion");
        let kind_description = describe("kind");
        definitions.remove("io.k8s.api.core.v1.ConfigMap");
        kubernetes_types::amend_v3(&mut definitions);
        let definitions_v2 =
            definitions.iter().map(|(name, schema)| (name.clone(), kubernetes_types::v2_form(schema))).collect();
        SharedSchemas { definitions, definitions_v2, api_version_description, kind_description }
    }
}

/// What kube-apiserver says of an embedded resource's `apiVersion` and `kind`.
const EMBEDDED_API_VERSION: &str = "apiVersion defines the versioned schema of this representation of an object. \
                                    More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const EMBEDDED_KIND: &str = "kind is a string value representing the type of this object. In CamelCase. More info: \
                             https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const OBJECT_META_DESCRIPTION: &str = "Standard object's metadata. More info: \
                                       https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// Publishes `apiVersion`, `kind` and `metadata` on every `x-kubernetes-embedded-resource`
/// node below `schema` (and requires `kind` and `apiVersion`), as kube-apiserver's CRD OpenAPI
/// builder does, so that `kubectl explain` shows an embedded object's fields. v2 leaves out
/// nodes that keep unknown fields (kubectl would refuse their unknown fields otherwise).
/// `metadata` is the ObjectMeta reference in the document's form.
fn add_embedded_properties(schema: &mut Value, v2: bool, metadata: &Value) {
    let Value::Object(node) = schema else { return };
    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        for child in properties.values_mut() {
            add_embedded_properties(child, v2, metadata);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = node.get_mut(key).filter(|c| c.is_object()) {
            add_embedded_properties(child, v2, metadata);
        }
    }
    let flag = |node: &Map<String, Value>, name: &str| node.get(name) == Some(&Value::Bool(true));
    if (v2 && flag(node, "x-kubernetes-preserve-unknown-fields")) || !flag(node, "x-kubernetes-embedded-resource") {
        return;
    }
    if let Value::Object(properties) = node.entry("properties").or_insert_with(|| json!({})) {
        properties.insert("apiVersion".into(), json!({"type": "string", "description": EMBEDDED_API_VERSION}));
        properties.insert("kind".into(), json!({"type": "string", "description": EMBEDDED_KIND}));
        properties.insert("metadata".into(), metadata.clone());
    }
    if let Value::Array(required) = node.entry("required").or_insert_with(|| json!([])) {
        for name in ["kind", "apiVersion"] {
            if !required.iter().any(|r| r == name) {
                required.push(json!(name));
            }
        }
    }
}

/// `com.example.stable` for `stable.example.com`.
pub fn reversed_group(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

/// The definition name of a kind: `com.example.stable.v1.CronTab`.
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    format!("{}.{version}.{kind}", reversed_group(group))
}

/// `StableExampleCom` for `stable.example.com`.
fn upper_camel(text: &str) -> String {
    text.split(['.', '-'])
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_uppercase().chain(chars).collect::<String>()).unwrap_or_default()
        })
        .collect()
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_resources_get_type_and_object_meta() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                         "x-kubernetes-preserve-unknown-fields": true},
            "pods": {"type": "array", "items": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "required": ["kind"], "properties": {"spec": {"type": "object"}}}}}}}});
        let meta = json!({"$ref": "meta"});
        let mut v3 = schema.clone();
        add_embedded_properties(&mut v3, false, &meta);
        let template = &v3["properties"]["spec"]["properties"]["template"];
        assert_eq!(
            template["properties"]["apiVersion"],
            json!({"type": "string", "description": EMBEDDED_API_VERSION})
        );
        assert_eq!(template["properties"]["kind"]["description"], EMBEDDED_KIND);
        assert_eq!(template["properties"]["metadata"], meta);
        assert_eq!(template["required"], json!(["kind", "apiVersion"]));
        let pods = &v3["properties"]["spec"]["properties"]["pods"]["items"];
        assert_eq!(pods["required"], json!(["kind", "apiVersion"]), "kind was already required");
        assert!(pods["properties"]["spec"].is_object() && pods["properties"]["metadata"].is_object());
        // v2 leaves nodes that keep unknown fields alone.
        let mut v2 = schema.clone();
        add_embedded_properties(&mut v2, true, &meta);
        assert_eq!(
            v2["properties"]["spec"]["properties"]["template"],
            schema["properties"]["spec"]["properties"]["template"]
        );
        assert_eq!(v2["properties"]["spec"]["properties"]["pods"]["items"]["required"], json!(["kind", "apiVersion"]));
    }

    #[test]
    fn names_follow_kubernetes() {
        assert_eq!(definition_name("stable.example.com", "v1", "CronTab"), "com.example.stable.v1.CronTab");
        assert_eq!(upper_camel("stable.example.com"), "StableExampleCom");
    }

    #[test]
    fn a_rebuild_keeps_the_documents_of_unchanged_groups_and_equals_a_full_build() {
        use crate::definitions::load::definition_from_value;
        let definition = |plural: &str, group: &str, version: &str| {
            let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.{group}")},
                "spec": {"group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": "Thing"},
                    "versions": [{"name": version, "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
            Arc::new(definition_from_value(raw, "test").unwrap())
        };
        let foos = definition("foos", "a.example.com", "v1");
        let (before, _) = Registry::build_shared(vec![foos.clone(), definition("bars", "b.example.com", "v1")]);
        let previous = Documents::build(&before);
        let kept = previous.v3("a.example.com", "v1").unwrap().body.as_ptr();
        let kept_slice = previous.v2_slice("a.example.com").unwrap().clone();
        let changed_slice = previous.v2_slice("b.example.com").unwrap().clone();
        let (after, _) = Registry::build_shared(vec![foos, definition("bars", "b.example.com", "v1beta1")]);
        let rebuilt = Documents::build_from(&after, Some(&previous));
        let full = Documents::build(&after);
        assert_eq!(rebuilt.v3_index().body, full.v3_index().body);
        assert_eq!(rebuilt.v2().body, full.v2().body);
        assert_eq!(rebuilt.v3("a.example.com", "v1").unwrap().body.as_ptr(), kept, "built once, kept");
        assert_eq!(
            rebuilt.v3("b.example.com", "v1beta1").unwrap().body,
            full.v3("b.example.com", "v1beta1").unwrap().body
        );
        assert!(rebuilt.v3("b.example.com", "v1").is_none());
        // Only the changed group's v2 slice is built again; the other is the same document.
        let slice = rebuilt.v2_slice("a.example.com").unwrap();
        assert_eq!(slice.body.as_ptr(), kept_slice.body.as_ptr(), "built once, kept");
        assert_eq!(slice.etag(), kept_slice.etag());
        let changed = rebuilt.v2_slice("b.example.com").unwrap();
        assert_ne!(changed.etag(), changed_slice.etag());
        assert_eq!(changed.body, full.v2_slice("b.example.com").unwrap().body);
    }

    #[test]
    fn a_groups_slice_has_its_paths_only_and_other_names_get_the_whole_document() {
        use crate::definitions::load::definition_from_value;
        let definition = |plural: &str, group: &str| {
            let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.{group}")},
                "spec": {"group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": "Thing"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
            Arc::new(definition_from_value(raw, "test").unwrap())
        };
        let (registry, _) =
            Registry::build_shared(vec![definition("foos", "a.example.com"), definition("bars", "b.example.com")]);
        let docs = Documents::build(&registry);
        let sni = format!("crd-apiserver-{}.crd-apiserver.svc", slices::suffix("a.example.com"));
        let slice: Value = serde_json::from_slice(&docs.v2_for(Some(&sni)).body).unwrap();
        let paths: Vec<&String> = slice["paths"].as_object().unwrap().keys().collect();
        assert!(!paths.is_empty() && paths.iter().all(|p| p.starts_with("/apis/a.example.com/v1/")), "{paths:?}");
        assert!(slice["definitions"]["com.example.a.v1.Thing"].is_object());
        assert!(slice["definitions"].get("com.example.b.v1.Thing").is_none());
        assert!(slice["definitions"][format!("{META}.ObjectMeta")].is_object());
        assert_eq!(docs.v2_for(Some(&sni)).etag(), docs.v2_slice("a.example.com").unwrap().etag());
        for whole in [None, Some("crd-apiserver.crd-apiserver.svc"), Some("localhost")] {
            assert_eq!(docs.v2_for(whole).body, docs.v2().body, "{whole:?}");
        }
        assert_ne!(docs.v2().etag(), docs.v2_slice("a.example.com").unwrap().etag());
    }

    #[test]
    fn a_group_versions_slice_has_that_versions_paths_only() {
        use crate::definitions::load::definition_from_value;
        let version = |name: &str, storage: bool| json!({"name": name, "served": true, "storage": storage, "schema": {"openAPIV3Schema": {"type": "object"}}});
        let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "foos.a.example.com"},
            "spec": {"group": "a.example.com", "scope": "Namespaced", "names": {"plural": "foos", "kind": "Thing"},
                "versions": [version("v1", true), version("v2", false)]}});
        let (registry, _) = Registry::build_shared(vec![Arc::new(definition_from_value(raw, "test").unwrap())]);
        let docs = Documents::build(&registry);
        let sni = |suffix: String| format!("crd-apiserver-{suffix}.crd-apiserver.svc");
        let v2 = docs.v2_for(Some(&sni(slices::version_suffix("a.example.com", "v2"))));
        let value: Value = serde_json::from_slice(&v2.body).unwrap();
        let paths: Vec<&String> = value["paths"].as_object().unwrap().keys().collect();
        assert!(!paths.is_empty() && paths.iter().all(|p| p.starts_with("/apis/a.example.com/v2/")), "{paths:?}");
        assert!(value["definitions"]["com.example.a.v2.Thing"].is_object());
        assert!(value["definitions"].get("com.example.a.v1.Thing").is_none());
        assert_eq!(v2.etag(), docs.v2_version_slice("a.example.com", "v2").unwrap().etag());
        let v1 = docs.v2_for(Some(&sni(slices::version_suffix("a.example.com", "v1"))));
        assert_ne!(v1.etag(), v2.etag());
        // The group's own name still gets both versions.
        let group: Value =
            serde_json::from_slice(&docs.v2_for(Some(&sni(slices::suffix("a.example.com")))).body).unwrap();
        assert!(group["definitions"]["com.example.a.v1.Thing"].is_object());
        assert!(group["definitions"]["com.example.a.v2.Thing"].is_object());
        assert!(docs.v2_version_slice("a.example.com", "v3").is_none());
    }

    #[test]
    fn shared_schemas_include_object_meta() {
        let shared = shared();
        assert!(shared.definitions.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(shared.api_version_description.starts_with("APIVersion defines"));
    }
}
