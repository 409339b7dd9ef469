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
//! first request and kept with its group, so a change to one group leaves every other slice alone;
//! so is the v3 index (`v3_index_for`).
//! A v2 document (whole or slice) built again after a reload copies the members of the
//! resources that did not change from the previous one (`v2::Encoded`), and until it is built
//! the previous one is served, as kube-apiserver serves its last OpenAPI spec while the next
//! is built; `Documents::warm` builds, off the request path, those the previous registry had.

mod kubernetes_types;
pub mod slices;
mod v2;
pub mod v2_proto;
mod v2_shared_parameters;
mod v3;
mod v3_parameters;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::core::gvr::GroupVersion;
use crate::core::paths;
use crate::definitions::Definition;
use crate::definitions::registry::{Registry, Served, same_definitions};

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";
/// How v3 documents refer to a definition.
const V3_REFS: &str = "#/components/schemas/";

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

fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_sha512(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA512, bytes);
    digest.as_ref().iter().take(32).map(|b| format!("{b:02X}")).collect()
}

/// What `/openapi/v2` publishes of the served resources (`--openapi-v2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V2Content {
    /// Every served version, as Kubernetes publishes a definition's.
    Full,
    /// Nothing: a valid document without paths or definitions. kube-aggregator parses and keeps
    /// each APIService's v2 download for as long as it runs (about 1.3 GiB of kube-apiserver's
    /// heap for the 2,065 upjet definitions, issue 32); with this it keeps nothing of ours, and
    /// registers an APIService without parsing one (it does so in one worker, for every
    /// APIService in turn). Clients read these resources' schemas from OpenAPI v3.
    Empty,
    /// Every served version's definitions (the kind's schema and its list's, with the
    /// Kubernetes types they refer to) without the resources' paths: each group version keeps
    /// its discovery path alone, since kube-aggregator's merge takes nothing from a document
    /// without a new path. kube-aggregator keeps the definitions no path refers to
    /// (`FilterSpecByPathsWithoutSideEffects` drops only those that a dropped path used), and
    /// what reads kube-apiserver's `/openapi/v2` for a kind looks it up by its
    /// `x-kubernetes-group-version-kind` among the definitions: `kubectl explain --output
    /// plaintext-openapiv2`, kubectl's client-side validation before 1.27, client-go's typed
    /// converters, GitOps tools' diffs. The paths are 40% of a full document's text and nearly
    /// half of its nodes (issue 32).
    Definitions,
}

impl V2Content {
    /// Whether documents in this form have the resources' paths.
    fn resource_paths(self) -> bool {
        self == V2Content::Full
    }
}

/// The document `--openapi-v2=empty` serves, in JSON and in protobuf (`v2_proto`): the keys of
/// [`v2::document`], in its order, with nothing under them. Its entity tag never changes, so
/// kube-aggregator's re-downloads are 304s.
pub fn v2_empty(protobuf: bool) -> &'static Document {
    static EMPTY: OnceLock<[Document; 2]> = OnceLock::new();
    let [json_form, protobuf_form] = EMPTY.get_or_init(|| {
        let value = json!({
            "definitions": {},
            "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
            "paths": {},
            "swagger": "2.0",
        });
        let protobuf = Bytes::from(v2_proto::encode(&value));
        let protobuf_hash = hex_sha512(&protobuf);
        [encode(&value), Document { body: protobuf, hash: protobuf_hash }]
    });
    if protobuf { protobuf_form } else { json_form }
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
    /// The v3 index of this group version alone (`v3_index_for`).
    v3_index: Document,
    v3: OnceLock<Document>,
    /// This group version's slice of the v2 document (its paths and the definitions they use).
    v2: V2Lazy,
}

/// A v2 document and where its resources' members are.
struct V2Built {
    document: Document,
    encoded: v2::Encoded,
}

/// A v2 document built on first request. One that replaces a document of the previous
/// registry (a reload changed what it is built from) has that one to serve while it is built,
/// and to copy the unchanged resources' members from.
struct V2Lazy {
    built: OnceLock<Arc<V2Built>>,
    /// The previous registry's document, until this one is built.
    previous: Mutex<Option<Arc<V2Built>>>,
    /// Whether a build began (the others serve `previous` meanwhile).
    building: AtomicBool,
}

impl V2Lazy {
    fn new(previous: Option<Arc<V2Built>>) -> V2Lazy {
        V2Lazy { built: OnceLock::new(), previous: Mutex::new(previous), building: AtomicBool::new(false) }
    }

    /// The document as served now: built, or the previous one; `None` when neither is.
    fn latest(&self) -> Option<Arc<V2Built>> {
        self.built.get().cloned().or_else(|| self.previous.lock().ok().and_then(|p| p.clone()))
    }

    /// Whether a previous document waits for this one to be built.
    fn pending(&self) -> bool {
        self.built.get().is_none() && self.previous.lock().is_ok_and(|p| p.is_some())
    }

    /// The document, built now unless another caller builds it while the previous one can be
    /// served.
    fn get(&self, hold: Option<&BuildHold>, build: impl FnOnce(Option<&v2::Encoded>) -> v2::Encoded) -> Document {
        if let Some(done) = self.built.get() {
            return done.document.clone();
        }
        let previous = self.previous.lock().ok().and_then(|p| p.clone());
        if let Some(previous) = &previous
            && self.building.swap(true, Ordering::AcqRel)
        {
            return previous.document.clone();
        }
        let done = self.built.get_or_init(|| {
            if let Some(hold) = hold {
                hold();
            }
            let encoded = build(previous.as_deref().map(|p| &p.encoded));
            let document = Document { hash: encoded.hash.clone(), body: encoded.body.clone() };
            Arc::new(V2Built { document, encoded })
        });
        if let Ok(mut previous) = self.previous.lock() {
            *previous = None;
        }
        done.document.clone()
    }
}

/// Called before a v2 document is built (tests hold a build with it).
type BuildHold = Arc<dyn Fn() + Send + Sync>;

/// The group versions of one group, kept across registries (with the v3 documents built so far)
/// while the group's definitions are the same `Arc`s.
struct GroupDocs {
    definitions: Vec<Arc<Definition>>,
    /// By version.
    versions: BTreeMap<String, GroupVersionDocs>,
    /// The v3 index of this group's versions alone (`v3_index_for`).
    v3_index: Document,
    /// The group's slice of the v2 document (its paths and the definitions they use).
    v2: V2Lazy,
}

/// The OpenAPI documents of one registry.
pub struct Documents {
    /// By group.
    groups: BTreeMap<String, Arc<GroupDocs>>,
    v3_index: Document,
    v2: V2Lazy,
    v2_protobuf: OnceLock<Document>,
    slice_names: Arc<slices::SliceNames>,
    hold: Option<BuildHold>,
    /// What the v2 documents hold (`Empty` is served without them).
    v2_content: V2Content,
}

/// What a group version's documents depend on, hashed. Schemas are named by their digests
/// (`Version::schema_digest`, computed once per schema): a reload that changes one definition
/// of a group does not hash every schema of the group again.
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
                s.version.schema_digest().map(hex),
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
    /// The documents of `group`; its v2 slices built again from those of `before` (the group's
    /// documents in the previous registry), which are served until they are.
    fn build(registry: &Registry, group: &str, versions: &[String], before: Option<&GroupDocs>) -> GroupDocs {
        let mut group_index = Map::new();
        let versions = versions
            .iter()
            .map(|version| {
                let resources: Vec<Served> = registry.resources(group, version).into_iter().cloned().collect();
                let hash = source_hash(group, version, &resources);
                let previous = before.and_then(|b| b.versions.get(version)).and_then(|e| e.v2.latest());
                let v2 = V2Lazy::new(previous);
                let (key, entry) = v3_index_entry(group, version, &hash);
                group_index.insert(key.clone(), entry.clone());
                let v3_index = encode(&json!({"paths": {key: entry}}));
                (version.clone(), GroupVersionDocs { resources, hash, v3_index, v3: OnceLock::new(), v2 })
            })
            .collect();
        let v2 = V2Lazy::new(before.and_then(|b| b.v2.latest()));
        let v3_index = encode(&json!({"paths": group_index}));
        GroupDocs { definitions: registry.definitions_of(group).to_vec(), versions, v3_index, v2 }
    }
}

/// A group version's entry in a v3 index: its key and the URL of its document, named by hash.
fn v3_index_entry(group: &str, version: &str, hash: &str) -> (String, Value) {
    let gv = GroupVersion::new(group, version);
    (paths::openapi_v3_key(&gv), json!({"serverRelativeURL": paths::openapi_v3_url(&gv, hash)}))
}

impl Documents {
    pub fn build(registry: &Registry) -> Documents {
        Documents::build_from(registry, None)
    }

    /// The same documents with `content` in their v2 form (the catalog sets it once, before any
    /// is built; the next registry's documents keep it).
    pub fn with_v2_content(mut self, content: V2Content) -> Documents {
        self.v2_content = content;
        self
    }

    /// The documents of `registry`, reusing those of `previous` (hashes and the v3 documents
    /// built so far) for every group whose definitions are the same; the index and the v2
    /// document are those of the whole registry, the v2 documents of changed groups and the
    /// whole one built again from the previous ones.
    pub fn build_from(registry: &Registry, previous: Option<&Documents>) -> Documents {
        Documents::build_named(registry, previous, Arc::new(slices::SliceNames::new(registry.groups())))
    }

    /// [`Documents::build_from`] with the registry's slice names (`Catalog` makes them once for
    /// its discovery and OpenAPI documents).
    pub fn build_named(
        registry: &Registry,
        previous: Option<&Documents>,
        slice_names: Arc<slices::SliceNames>,
    ) -> Documents {
        let mut groups = BTreeMap::new();
        let mut index = Map::new();
        for (group, versions) in registry.groups() {
            let before = previous.and_then(|p| p.groups.get(group));
            let docs = match before {
                Some(docs) if same_definitions(&docs.definitions, registry.definitions_of(group)) => docs.clone(),
                _ => Arc::new(GroupDocs::build(registry, group, versions, before.map(|b| &**b))),
            };
            // In the order of version priority.
            for version in versions {
                let Some(entry) = docs.versions.get(version) else { continue };
                let (key, value) = v3_index_entry(group, version, &entry.hash);
                index.insert(key, value);
            }
            groups.insert(group.to_string(), docs);
        }
        Documents {
            groups,
            v3_index: encode(&json!({"paths": index})),
            v2: V2Lazy::new(previous.and_then(|p| p.v2.latest())),
            v2_protobuf: OnceLock::new(),
            slice_names,
            hold: previous.and_then(|p| p.hold.clone()),
            v2_content: previous.map_or(V2Content::Full, |p| p.v2_content),
        }
    }

    /// Builds the v2 documents the previous registry had built (clients read them: the
    /// aggregator downloads them again when their entity tags change) and this one has not:
    /// until each is built its previous one is served. A reload calls it after the swap, off
    /// the request path.
    pub fn warm(&self) {
        for (group, docs) in &self.groups {
            if docs.v2.pending() {
                self.v2_slice(group);
            }
            for (version, entry) in &docs.versions {
                if entry.v2.pending() {
                    self.v2_version_slice(group, version);
                }
            }
        }
        if self.v2.pending() {
            self.v2();
        }
    }

    pub fn v3_index(&self) -> &Document {
        &self.v3_index
    }

    /// The v3 index a connection that sent `server_name` in TLS is served: the group version
    /// or group the name picks alone (`slices`), or every group version. kube-aggregator
    /// downloads the index once per APIService and keeps each whole; it sends a client's
    /// request for a group version's document to the APIService whose index names it.
    pub fn v3_index_for(&self, server_name: Option<&str>) -> &Document {
        let slice = server_name.and_then(|name| self.slice_names.slice(name)).and_then(|slice| match slice {
            slices::Slice::Group(group) => self.groups.get(group).map(|g| &g.v3_index),
            slices::Slice::GroupVersion(group, version) => {
                self.groups.get(group)?.versions.get(version).map(|e| &e.v3_index)
            }
        });
        slice.unwrap_or(&self.v3_index)
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
    pub fn v2(&self) -> Document {
        self.v2.get(self.hold.as_ref(), |previous| {
            let all: Vec<(&str, &str, &[Served])> = self
                .groups
                .iter()
                .flat_map(|(g, docs)| {
                    docs.versions.iter().map(move |(v, e)| (g.as_str(), v.as_str(), e.resources.as_slice()))
                })
                .collect();
            v2::document(&all, shared(), previous, self.v2_content.resource_paths())
        })
    }

    /// The v2 document a connection that sent `server_name` in TLS is served: the slice of the
    /// group version or group the name picks (`slices`), or the whole document.
    pub fn v2_for(&self, server_name: Option<&str>) -> Document {
        let slice = server_name.and_then(|name| self.slice_names.slice(name)).and_then(|slice| match slice {
            slices::Slice::Group(group) => self.v2_slice(group),
            slices::Slice::GroupVersion(group, version) => self.v2_version_slice(group, version),
        });
        slice.unwrap_or_else(|| self.v2())
    }

    /// The v2 document of one group's versions, with the same entity-tag rule as the whole.
    pub fn v2_slice(&self, group: &str) -> Option<Document> {
        let docs = self.groups.get(group)?;
        Some(docs.v2.get(self.hold.as_ref(), |previous| {
            let versions: Vec<(&str, &str, &[Served])> =
                docs.versions.iter().map(|(v, e)| (group, v.as_str(), e.resources.as_slice())).collect();
            v2::document(&versions, shared(), previous, self.v2_content.resource_paths())
        }))
    }

    /// The v2 document of one group version, with the same entity-tag rule as the whole.
    pub fn v2_version_slice(&self, group: &str, version: &str) -> Option<Document> {
        let entry = self.groups.get(group)?.versions.get(version)?;
        Some(entry.v2.get(self.hold.as_ref(), |previous| {
            v2::document(
                &[(group, version, entry.resources.as_slice())],
                shared(),
                previous,
                self.v2_content.resource_paths(),
            )
        }))
    }

    /// The v2 document in the protobuf form older kubectl releases read, transcoded from the
    /// JSON document (asked for rarely: only kubectl before 1.28 reads it).
    pub fn v2_protobuf(&self) -> &Document {
        self.v2_protobuf.get_or_init(|| {
            let value: Value = crate::core::nesting::from_slice(&self.v2().body).unwrap_or(Value::Null);
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
    /// The same in v2's form, as members of a v2 document, encoded once.
    v2_members: Vec<v2::Member<'static>>,
    /// The names of those the kinds' and lists' schemas refer to (ObjectMeta, ListMeta and
    /// theirs): the shared types of a v2 document without resource paths.
    referred_by_kinds: std::collections::BTreeSet<String>,
    /// APIResourceList and APIResource in v2's form, as members: what the discovery path of
    /// each group version in such a document refers to (`v2::discovery_path`).
    v2_discovery_members: Vec<v2::Member<'static>>,
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
        let v2_members = v2::shared_members(&definitions);
        let roots = [format!("{META}.ObjectMeta"), format!("{META}.ListMeta")];
        let referred_by_kinds = referred(&definitions, &roots);
        let mut generator = SchemaSettings::openapi3().into_generator();
        generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList>();
        let mut discovery = generator.take_definitions(true);
        kubernetes_types::amend_discovery(&mut discovery);
        let v2_discovery_members = v2::shared_members(&discovery);
        SharedSchemas {
            definitions,
            v2_members,
            referred_by_kinds,
            v2_discovery_members,
            api_version_description,
            kind_description,
        }
    }
}

/// `roots` and every definition they refer to, directly or not.
fn referred(definitions: &Map<String, Value>, roots: &[String]) -> std::collections::BTreeSet<String> {
    fn references(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(target) = map.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(V3_REFS)) {
                    found.push(target.to_string());
                }
                map.values().for_each(|v| references(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| references(v, found)),
            _ => {}
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut pending = roots.to_vec();
    while let Some(name) = pending.pop() {
        if let Some(schema) = definitions.get(&name)
            && seen.insert(name)
        {
            references(schema, &mut pending);
        }
    }
    seen
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
    json!({"$ref": format!("{V3_REFS}{name}")})
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
        // The whole v2 document built: the next one copies the unchanged resources from it.
        let whole_before = previous.v2();
        let kept = previous.v3("a.example.com", "v1").unwrap().body.as_ptr();
        let kept_slice = previous.v2_slice("a.example.com").unwrap().clone();
        let changed_slice = previous.v2_slice("b.example.com").unwrap().clone();
        let (after, _) = Registry::build_shared(vec![foos, definition("bars", "b.example.com", "v1beta1")]);
        let rebuilt = Documents::build_from(&after, Some(&previous));
        let full = Documents::build(&after);
        assert_eq!(rebuilt.v3_index().body, full.v3_index().body);
        assert_eq!(rebuilt.v2().body, full.v2().body, "copied from the previous document, byte for byte the same");
        assert_eq!(rebuilt.v2().etag(), full.v2().etag(), "the same entity tag as built whole (after a restart)");
        assert_ne!(rebuilt.v2().etag(), whole_before.etag());
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
        assert_eq!(changed.etag(), full.v2_slice("b.example.com").unwrap().etag());
    }

    #[test]
    fn any_change_to_a_schema_changes_its_documents_entity_tags_and_only_theirs() {
        use crate::definitions::load::definition_from_value;
        let definition = |plural: &str, group: &str, schema: Value| {
            let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.{group}")},
                "spec": {"group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": plural.to_uppercase()},
                    "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]}});
            Arc::new(definition_from_value(raw, "test").unwrap())
        };
        let object = |spec: Value| json!({"type": "object", "properties": {"spec": spec}});
        let first = object(json!({"type": "object", "properties": {"size": {"type": "integer", "description": "a"}}}));
        // Each differs from the first in one place only, down to one character.
        let changes = [
            object(json!({"type": "object", "properties": {"size": {"type": "integer", "description": "b"}}})),
            object(
                json!({"type": "object", "properties": {"size": {"type": "integer", "description": "a", "minimum": 1}}}),
            ),
            object(json!({"type": "object", "properties": {"size": {"type": "string", "description": "a"}}})),
            object(json!({"type": "object", "properties": {"sizes": {"type": "integer", "description": "a"}}})),
        ];
        let others = [
            definition("foos", "a.example.com", object(json!({"type": "object"}))),
            definition("quxes", "b.example.com", object(json!({"type": "string"}))),
        ];
        let registry = |schema: &Value| {
            let mut definitions = others.to_vec();
            definitions.insert(1, definition("bars", "b.example.com", schema.clone()));
            Registry::build_shared(definitions).0
        };
        let tags = |docs: &Documents| {
            let (a, b) = (docs.v2_slice("a.example.com").unwrap(), docs.v2_slice("b.example.com").unwrap());
            let v3 = docs.groups["b.example.com"].versions["v1"].hash.clone();
            (a.etag(), b.etag(), docs.v2_version_slice("b.example.com", "v1").unwrap().etag(), docs.v2().etag(), v3)
        };
        let before = Documents::build(&registry(&first));
        let original = tags(&before);
        let mut seen = vec![original.clone()];
        for schema in &changes {
            let after = Documents::build_from(&registry(schema), Some(&before));
            let now = tags(&after);
            assert_eq!(now.0, original.0, "another group's slice keeps its entity tag");
            assert_ne!(now.1, original.1, "the group's slice: {schema}");
            assert_ne!(now.2, original.2, "the group version's slice: {schema}");
            assert_ne!(now.3, original.3, "the whole document: {schema}");
            assert_ne!(now.4, original.4, "the group version's v3 document: {schema}");
            assert!(!seen[1..].iter().any(|s| s.1 == now.1 || s.3 == now.3), "each change its own tags");
            // The same definitions give the same tags however the documents were built.
            assert_eq!(now, tags(&Documents::build(&registry(schema))), "{schema}");
            seen.push(now);
        }
        // Back to the first schema: the first tags (clients' cached copies are current again).
        let back = Documents::build_from(&registry(&first), Some(&before));
        assert_eq!(tags(&back), original);
    }

    #[test]
    fn a_document_built_again_is_served_as_before_until_it_is_built() {
        use crate::definitions::load::definition_from_value;
        use std::sync::mpsc;
        let definition = |plural: &str, version: &str| {
            let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.b.example.com")},
                "spec": {"group": "b.example.com", "scope": "Namespaced", "names": {"plural": plural, "kind": plural.to_uppercase()},
                    "versions": [{"name": version, "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
            Arc::new(definition_from_value(raw, "test").unwrap())
        };
        let foos = definition("foos", "v1");
        let (before, _) = Registry::build_shared(vec![foos.clone(), definition("bars", "v1")]);
        let (after, _) = Registry::build_shared(vec![foos, definition("bars", "v2")]);
        let previous = Documents::build(&before);
        let (old_slice, old_whole) = (previous.v2_slice("b.example.com").unwrap(), previous.v2());
        let mut next = Documents::build_from(&after, Some(&previous));
        drop(previous);
        // Every build waits, once it began, until the test lets it go on.
        let (began, building) = mpsc::channel::<()>();
        let (go_on, release) = mpsc::channel::<()>();
        let release = Mutex::new(release);
        next.hold = Some(Arc::new(move || {
            began.send(()).unwrap();
            release.lock().unwrap().recv().unwrap();
        }));
        let full = Arc::new(Documents::build(&after));
        let next = Arc::new(next);
        let sni = format!("crd-apiserver-{}.crd-apiserver.svc", slices::suffix("b.example.com"));
        // What `ask` gets, asked on a thread of its own: a request that waited for the build (held
        // until the test lets it go on) would never answer (the 60 s bound only guards a hang).
        let served_at_once = |ask: Box<dyn FnOnce(&Documents) -> Document + Send>| {
            let (answer, answered) = mpsc::channel();
            let documents = next.clone();
            std::thread::spawn(move || answer.send(ask(&documents)));
            answered.recv_timeout(std::time::Duration::from_secs(60)).expect("served while the new one is built")
        };
        let same = |served: Document, expected: &Document| {
            assert_eq!((served.etag(), &served.body), (expected.etag(), &expected.body));
        };
        // The reload's warm-up builds the group's slice, then the whole document.
        let warming = {
            let next = next.clone();
            std::thread::spawn(move || next.warm())
        };
        building.recv().unwrap();
        // While the slice is built, the previous one is served.
        same(served_at_once(Box::new(|d| d.v2_slice("b.example.com").unwrap())), &old_slice);
        let name = sni.clone();
        same(served_at_once(Box::new(move |d| d.v2_for(Some(&name)))), &old_slice);
        go_on.send(()).unwrap();
        building.recv().unwrap();
        // The slice is built; while the whole document is, the previous one is served.
        same(next.v2_for(Some(&sni)), &full.v2_slice("b.example.com").unwrap());
        same(served_at_once(Box::new(|d| d.v2())), &old_whole);
        same(served_at_once(Box::new(|d| d.v2_for(None))), &old_whole);
        go_on.send(()).unwrap();
        warming.join().unwrap();
        let (slice, whole) = (next.v2_slice("b.example.com").unwrap(), next.v2());
        assert_ne!(slice.etag(), old_slice.etag());
        assert_ne!(whole.etag(), old_whole.etag());
        assert_eq!(slice.body, full.v2_slice("b.example.com").unwrap().body);
        assert_eq!(whole.body, full.v2().body);
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
        // The v3 index too: the group version's entry alone, the group's versions, or all.
        let index = |name: Option<&str>| -> Value { serde_json::from_slice(&docs.v3_index_for(name).body).unwrap() };
        let whole = index(None);
        assert_eq!(docs.v3_index_for(Some("localhost")).body, docs.v3_index().body);
        let v2_alone = index(Some(&sni(slices::version_suffix("a.example.com", "v2"))));
        assert_eq!(v2_alone, json!({"paths": {"apis/a.example.com/v2": whole["paths"]["apis/a.example.com/v2"]}}));
        assert!(whole["paths"]["apis/a.example.com/v2"]["serverRelativeURL"].is_string(), "{whole}");
        assert_eq!(index(Some(&sni(slices::suffix("a.example.com")))), whole, "the group is everything here");
    }

    /// Every `#/parameters/` reference of a v2 document names one of its `parameters`.
    fn parameter_references_resolve(document: &[u8]) {
        let text = String::from_utf8_lossy(document);
        let value: Value = serde_json::from_slice(document).unwrap();
        for reference in text.split("\"#/parameters/").skip(1) {
            let name = reference.split('"').next().unwrap();
            assert!(value["parameters"][name].is_object(), "{name}");
        }
    }

    #[test]
    fn v2_shares_parameters_under_kube_apiservers_names() {
        use crate::definitions::load::definition_from_value;
        let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "foos.a.example.com"},
            "spec": {"group": "a.example.com", "scope": "Namespaced", "names": {"plural": "foos", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
        let (registry, _) = Registry::build_shared(vec![Arc::new(definition_from_value(raw, "test").unwrap())]);
        let docs = Documents::build(&registry);
        let whole: Value = serde_json::from_slice(&docs.v2().body).unwrap();
        let item = &whole["paths"]["/apis/a.example.com/v1/namespaces/{namespace}/foos/{name}"];
        let refs: Vec<&str> =
            item["parameters"].as_array().unwrap().iter().filter_map(|p| p["$ref"].as_str()).collect();
        // The names kube-apiserver v1.36.2's own /openapi/v2 gives these two parameters.
        assert_eq!(refs, ["#/parameters/namespace-vgWSWtn3", "#/parameters/pretty-tJGM1-ng"], "{item}");
        assert_eq!(
            whole["parameters"]["pretty-tJGM1-ng"],
            json!({"uniqueItems": true, "type": "string", "name": "pretty", "in": "query",
                "description": "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget)."})
        );
        // The object's name, dryRun, fieldValidation and the kind's own body stay inline.
        let name = item["parameters"].as_array().unwrap().iter().find(|p| p["name"] == "name");
        assert_eq!(name.map(|p| p["in"].clone()), Some(json!("path")), "{item}");
        for parameter in item["put"]["parameters"].as_array().unwrap() {
            let inline =
                ["body", "dryRun", "fieldValidation"].contains(&parameter["name"].as_str().unwrap_or_default());
            assert_eq!(inline, parameter.get("$ref").is_none(), "{parameter}");
        }
        // Every reference of every document resolves, slices included.
        let group_version = format!("crd-apiserver-{}.x.svc", slices::version_suffix("a.example.com", "v1"));
        let group = format!("crd-apiserver-{}.x.svc", slices::suffix("a.example.com"));
        for document in [docs.v2(), docs.v2_for(Some(&group_version)), docs.v2_for(Some(&group))] {
            parameter_references_resolve(&document.body);
        }
    }

    #[test]
    fn a_rebuild_copies_the_shared_parameters_of_the_resources_it_keeps() {
        use crate::definitions::load::definition_from_value;
        let definition = |plural: &str, namespaced: bool| {
            let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.a.example.com")},
                "spec": {"group": "a.example.com", "scope": if namespaced { "Namespaced" } else { "Cluster" },
                    "names": {"plural": plural, "kind": plural.to_uppercase()},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
            Arc::new(definition_from_value(raw, "test").unwrap())
        };
        // Only the namespaced resource refers to `namespace`; the rebuild keeps it and drops
        // the other, so what it writes of `namespace` was copied from the previous document.
        let foos = definition("foos", true);
        let (before, _) = Registry::build_shared(vec![foos.clone(), definition("bars", false)]);
        let previous = Documents::build(&before);
        previous.v2();
        previous.v2_slice("a.example.com");
        let (after, _) = Registry::build_shared(vec![foos, definition("bazs", false)]);
        let rebuilt = Documents::build_from(&after, Some(&previous));
        let full = Documents::build(&after);
        let whole: Value = serde_json::from_slice(&rebuilt.v2().body).unwrap();
        assert!(whole["parameters"]["namespace-vgWSWtn3"].is_object(), "{}", whole["parameters"]);
        parameter_references_resolve(&rebuilt.v2().body);
        assert!(rebuilt.v2().body == full.v2().body, "the rebuilt document is a full build's");
        let slice = rebuilt.v2_slice("a.example.com").unwrap();
        assert!(slice.body == full.v2_slice("a.example.com").unwrap().body, "the rebuilt slice is a full build's");
    }

    #[test]
    fn shared_schemas_include_object_meta() {
        let shared = shared();
        assert!(shared.definitions.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(shared.api_version_description.starts_with("APIVersion defines"));
    }
}
