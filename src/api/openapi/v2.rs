//! The OpenAPI v2 document: the v3 documents' paths rewritten in Swagger 2.0 form, and the
//! custom resources' schemas rewritten as Kubernetes publishes them in v2
//! (`ToStructuralOpenAPIV2`): no allOf/anyOf/oneOf/not, nullable fields untyped and not
//! required, preserve-unknown-fields nodes without properties or items, int-or-string untyped.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::v2_shared_parameters::{self, SharedParameter};
use super::{META, OBJECT_META_DESCRIPTION, SharedSchemas, V3_REFS, add_embedded_properties, definition_name, gvk, v3};
use crate::definitions::Definition;
use crate::definitions::registry::Served;

const V2_REFS: &str = "#/definitions/";

/// Rewrites a CRD schema for v2.
pub fn structural_v2(schema: &Value) -> Value {
    let Value::Object(input) = schema else { return schema.clone() };
    let mut out = input.clone();
    for key in ["allOf", "anyOf", "oneOf", "not"] {
        out.remove(key);
    }
    if out.get("nullable") == Some(&Value::Bool(true)) {
        // Untyped values break kubectl if items or properties remain.
        for key in ["type", "nullable", "items", "properties"] {
            out.remove(key);
        }
    }
    if out.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        out.remove("items");
        out.remove("properties");
        if out.get("type").and_then(Value::as_str) == Some("object") {
            out.remove("type");
        }
    }
    if out.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        out.remove("type");
    }
    if out.get("type").and_then(Value::as_str) == Some("array") && !out.contains_key("items") {
        out.remove("type");
    }
    let nullable_props: Vec<String> = input
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter().filter(|(_, v)| v.get("nullable") == Some(&Value::Bool(true))).map(|(k, _)| k.clone()).collect()
        })
        .unwrap_or_default();
    if let Some(Value::Array(required)) = out.get_mut("required") {
        required.retain(|r| !r.as_str().is_some_and(|r| nullable_props.iter().any(|p| p == r)));
    }
    if input.get("additionalProperties").and_then(|a| a.get("nullable")) == Some(&Value::Bool(true)) {
        out.remove("required");
    }
    if let Some(Value::Object(props)) = out.get_mut("properties") {
        for value in props.values_mut() {
            *value = structural_v2(value);
        }
    }
    if let Some(items) = out.get_mut("items").filter(|i| i.is_object()) {
        *items = structural_v2(items);
    }
    if let Some(additional) = out.get_mut("additionalProperties").filter(|a| a.is_object()) {
        *additional = structural_v2(additional);
    }
    Value::Object(out)
}

fn rewrite_refs(value: &Value) -> Value {
    match value {
        Value::String(s) if s.starts_with(V3_REFS) => Value::String(s.replacen(V3_REFS, V2_REFS, 1)),
        Value::Array(items) => Value::Array(items.iter().map(rewrite_refs).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), rewrite_refs(v))).collect()),
        other => other.clone(),
    }
}

/// The `metadata` property of an object: a reference to ObjectMeta with its description.
fn object_meta() -> Value {
    json!({"$ref": format!("{V2_REFS}{META}.ObjectMeta"), "description": OBJECT_META_DESCRIPTION})
}

fn object_schema(served: &Served, shared: &SharedSchemas) -> Value {
    let d = &served.definition;
    let raw = served.version.openapi_schema_value().unwrap_or_else(|| json!({"type": "object"}));
    let mut schema = if raw.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        json!({"type": "object"})
    } else {
        structural_v2(&raw)
    };
    add_embedded_properties(&mut schema, true, &object_meta());
    if let Value::Object(map) = &mut schema {
        if let Value::Object(props) = map.entry("properties").or_insert_with(|| json!({})) {
            props.insert("apiVersion".into(), json!({"type": "string", "description": shared.api_version_description}));
            props.insert("kind".into(), json!({"type": "string", "description": shared.kind_description}));
            props.insert("metadata".into(), object_meta());
        }
        map.insert("x-kubernetes-group-version-kind".into(), gvk(&d.group, &served.version.name, &d.kind));
        if !served.version.selectable_fields.is_empty() {
            let fields: Vec<Value> = served.version.selectable_fields.iter().map(|f| json!({"fieldPath": f})).collect();
            map.insert("x-kubernetes-selectable-fields".into(), Value::Array(fields));
        }
    }
    schema
}

/// A v3 operation in Swagger 2.0 form.
fn operation(op: &Value) -> Value {
    let Value::Object(op) = op else { return op.clone() };
    let mut out = Map::new();
    let mut parameters: Vec<Value> = Vec::new();
    for (key, value) in op {
        match key.as_str() {
            "parameters" => parameters.extend(value.as_array().into_iter().flatten().map(parameter)),
            "requestBody" => {
                let content = value.get("content").and_then(Value::as_object);
                let consumes: Vec<&String> = content.map(|c| c.keys().collect()).unwrap_or_default();
                let schema = content
                    .and_then(|c| c.values().next())
                    .and_then(|m| m.get("schema"))
                    .cloned()
                    .unwrap_or(Value::Null);
                parameters
                    .push(json!({"name": "body", "in": "body", "required": true, "schema": rewrite_refs(&schema)}));
                out.insert("consumes".into(), json!(consumes));
            }
            "responses" => {
                let mut responses = Map::new();
                let mut produces: Vec<String> = Vec::new();
                for (code, response) in value.as_object().into_iter().flatten() {
                    let content = response.get("content").and_then(Value::as_object);
                    for media in content.map(|c| c.keys()).into_iter().flatten() {
                        if !produces.contains(media) {
                            produces.push(media.clone());
                        }
                    }
                    let schema =
                        content.and_then(|c| c.values().next()).and_then(|m| m.get("schema")).map(rewrite_refs);
                    let mut entry =
                        json!({"description": response.get("description").cloned().unwrap_or_else(|| json!(""))});
                    if let Some(schema) = schema {
                        crate::api::objects::put(&mut entry, "schema", schema);
                    }
                    responses.insert(code.clone(), entry);
                }
                out.insert("responses".into(), Value::Object(responses));
                out.insert("produces".into(), json!(produces));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out.entry("consumes").or_insert_with(|| json!(["*/*"]));
    out.insert("schemes".into(), json!(["https"]));
    out.insert("parameters".into(), Value::Array(parameters));
    Value::Object(out)
}

/// A v3 parameter in Swagger 2.0 form: the schema's type moves onto the parameter.
fn parameter(p: &Value) -> Value {
    let Value::Object(p) = p else { return p.clone() };
    let mut out: Map<String, Value> =
        p.iter().filter(|(k, _)| *k != "schema").map(|(k, v)| (k.clone(), v.clone())).collect();
    if let Some(Value::Object(schema)) = p.get("schema") {
        for (k, v) in schema {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// An encoded v2 document and where each resource's members are in it, so that the next
/// document of the same resources (after a reload changed some of them) copies the unchanged
/// resources' members instead of building and encoding them again.
pub struct Encoded {
    pub body: Bytes,
    /// What the document is told apart by (its entity tag): the hash of the body with each
    /// member's value replaced by the digest of that value (`Writer`). The body changes only if
    /// a key, a value or the text around them does, so the hash changes whenever the body does;
    /// and a document copied mostly from the previous one hashes only its new members' values.
    pub hash: String,
    /// By definition name: the resources (one per served version) it contributed.
    layout: HashMap<String, Vec<Placed>>,
    /// Where each shared parameter's value is in the body, and its digest, by its key (written
    /// once, whatever the number of resources that refer to it).
    parameters: HashMap<String, (Range<usize>, Digest)>,
}

/// SHA-256 of a member's encoded value.
type Digest = [u8; 32];

fn digest(bytes: &[u8]) -> Digest {
    let mut out = [0; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref());
    out
}

/// A document object's members by key: the resource each came from (none for the shared
/// types and parameters), its encoded value and the value's digest.
type Members<'a> = BTreeMap<String, (Option<usize>, Cow<'a, [u8]>, Digest)>;

/// One resource's members in an encoded document.
struct Placed {
    version: String,
    /// What they were built from: while a registry holds the same `Arc`, they hold for it.
    definition: Arc<Definition>,
    /// Each member's key, where its value is in the body and the value's digest, by the
    /// object it belongs to.
    paths: Vec<(String, Range<usize>, Digest)>,
    definitions: Vec<(String, Range<usize>, Digest)>,
    /// The keys of the shared parameters its paths refer to.
    parameters: Vec<String>,
}

/// A member of the document's `paths`, `definitions` or `parameters`: its key, its encoded
/// value and the value's digest.
pub(super) struct Member<'a> {
    key: String,
    value: Cow<'a, [u8]>,
    digest: Digest,
}

impl<'a> Member<'a> {
    fn new(key: String, value: Vec<u8>) -> Member<'a> {
        let digest = digest(&value);
        Member { key, value: Cow::Owned(value), digest }
    }

    /// The member's key.
    #[cfg(test)]
    pub(super) fn key(&self) -> &str {
        &self.key
    }

    /// The member's encoded value.
    #[cfg(test)]
    pub(super) fn value(&self) -> &[u8] {
        &self.value
    }
}

/// The shared Kubernetes types (`definitions`, in v3's form) as members of a v2 document.
pub(super) fn shared_members(definitions: &Map<String, Value>) -> Vec<Member<'static>> {
    let v2_form = |schema| rewrite_refs(&super::kubernetes_types::v2_form(schema));
    definitions.iter().map(|(k, v)| Member::new(k.clone(), encoded(&v2_form(v)))).collect()
}

impl Encoded {
    /// The members `previous` holds for `served` in `version`, if built from the same definition.
    fn reusable(&self, version: &str, served: &Served) -> Option<Part<'_>> {
        let placed = self.layout.get(&served.definition.name)?.iter().find(|p| p.version == version)?;
        if !Arc::ptr_eq(&placed.definition, &served.definition) {
            return None;
        }
        let member = |key: &String, range: &Range<usize>, digest: &Digest| {
            Some(Member { key: key.clone(), value: Cow::Borrowed(self.body.get(range.clone())?), digest: *digest })
        };
        let members = |list: &[(String, Range<usize>, Digest)]| -> Option<Vec<Member<'_>>> {
            list.iter().map(|(key, range, digest)| member(key, range, digest)).collect()
        };
        let parameters = placed
            .parameters
            .iter()
            .map(|key| {
                let (range, digest) = self.parameters.get(key)?;
                member(key, range, digest)
            })
            .collect::<Option<_>>()?;
        Some(Part { paths: members(&placed.paths)?, definitions: members(&placed.definitions)?, parameters })
    }
}

/// The v2 document of every served group version, encoded. Paths and definitions are encoded
/// resource by resource and written in key order, as serde_json writes the whole document: the
/// value of the whole (many times the size of its text) never exists at once. Parameters that
/// kube-openapi shares are written once, under `parameters` (`v2_shared_parameters`). The
/// members of a resource `previous` was built from are copied from it. Without `with_paths`
/// the document has the definitions (the kinds', their lists' and the Kubernetes types those
/// refer to) and each group version's discovery path alone (`--openapi-v2=definitions`).
pub fn document(
    group_versions: &[(&str, &str, &[Served])],
    shared: &SharedSchemas,
    previous: Option<&Encoded>,
    with_paths: bool,
) -> Encoded {
    let resources: Vec<(&str, &str, &Served)> = group_versions
        .iter()
        .flat_map(|&(group, version, served)| served.iter().map(move |s| (group, version, s)))
        .collect();
    // Resources are encoded on every core (only those `previous` does not hold), then merged
    // in their order; a value remembers its resource, for the layout.
    let parts = crate::core::parallel::map(&resources, |&(group, version, served)| {
        previous
            .and_then(|p| p.reusable(version, served))
            .unwrap_or_else(|| resource_part(group, version, served, shared, with_paths))
    });
    let mut paths: Members<'_> = BTreeMap::new();
    let mut definitions: Members<'_> = shared
        .v2_members
        .iter()
        .filter(|m| with_paths || shared.referred_by_kinds.contains(&m.key))
        .chain(shared.v2_discovery_members.iter().filter(|_| !with_paths))
        .map(|m| (m.key.clone(), (None, Cow::Borrowed(&*m.value), m.digest)))
        .collect();
    if !with_paths {
        // kube-aggregator merges nothing of a document that brings no new path: each group
        // version keeps its discovery path.
        for &(group, version, _) in group_versions {
            let (path, item) = discovery_path(group, version);
            let member = Member::new(path, encoded(&item));
            paths.insert(member.key, (None, member.value, member.digest));
        }
    }
    // Resources share parameters: each is written once (the same key, the same value).
    let mut parameters: Members<'_> = BTreeMap::new();
    let mut placed: Vec<Placed> = Vec::with_capacity(resources.len());
    for (index, (part, &(_, version, served))) in parts.into_iter().zip(&resources).enumerate() {
        paths.extend(part.paths.into_iter().map(|m| (m.key, (Some(index), m.value, m.digest))));
        definitions.extend(part.definitions.into_iter().map(|m| (m.key, (Some(index), m.value, m.digest))));
        let mut keys = Vec::with_capacity(part.parameters.len());
        for m in part.parameters {
            keys.push(m.key.clone());
            parameters.entry(m.key).or_insert((None, m.value, m.digest));
        }
        placed.push(Placed {
            version: version.to_string(),
            definition: served.definition.clone(),
            paths: Vec::new(),
            definitions: Vec::new(),
            parameters: keys,
        });
    }
    let size =
        paths.iter().chain(&definitions).chain(&parameters).map(|(k, (_, v, _))| k.len() + v.len() + 4).sum::<usize>()
            + 256;
    let mut out = Writer { body: Vec::with_capacity(size), hash: ring::digest::Context::new(&ring::digest::SHA512) };
    out.text(b"{\"definitions\":");
    for (index, key, range, digest) in out.members(&definitions) {
        if let Some(p) = index.and_then(|i| placed.get_mut(i)) {
            p.definitions.push((key.to_string(), range, digest));
        }
    }
    out.text(b",\"info\":");
    out.text(&encoded(&json!({"title": "Kubernetes CRD Swagger", "version": "v0.1.0"})));
    let mut parameter_ranges = HashMap::new();
    if !parameters.is_empty() {
        out.text(b",\"parameters\":");
        for (_, key, range, digest) in out.members(&parameters) {
            parameter_ranges.insert(key.to_string(), (range, digest));
        }
    }
    out.text(b",\"paths\":");
    for (index, key, range, digest) in out.members(&paths) {
        if let Some(p) = index.and_then(|i| placed.get_mut(i)) {
            p.paths.push((key.to_string(), range, digest));
        }
    }
    out.text(b",\"swagger\":\"2.0\"}");
    let mut layout: HashMap<String, Vec<Placed>> = HashMap::new();
    for p in placed {
        layout.entry(p.definition.name.clone()).or_default().push(p);
    }
    let hash = out.hash.finish();
    let hash = hash.as_ref().iter().take(32).map(|b| format!("{b:02X}")).collect();
    Encoded { body: Bytes::from(out.body), hash, layout, parameters: parameter_ranges }
}

/// The encoded paths, definitions and shared parameters one resource contributes.
struct Part<'a> {
    paths: Vec<Member<'a>>,
    definitions: Vec<Member<'a>>,
    /// The shared parameters its paths refer to, each once.
    parameters: Vec<Member<'a>>,
}

fn resource_part<'a>(
    group: &str,
    version: &str,
    served: &Served,
    shared: &SharedSchemas,
    with_paths: bool,
) -> Part<'a> {
    let mut part = Part { paths: Vec::new(), definitions: Vec::new(), parameters: Vec::new() };
    let mut shared_parameters: Vec<SharedParameter> = Vec::new();
    let paths = if with_paths { v3::resource_paths(group, version, served) } else { Map::new() };
    for (path, item) in paths {
        let Value::Object(item) = item else { continue };
        let mut converted: Map<String, Value> = item
            .iter()
            .map(|(k, v)| match k.as_str() {
                "parameters" => (k.clone(), Value::Array(v.as_array().into_iter().flatten().map(parameter).collect())),
                _ => (k.clone(), operation(v)),
            })
            .collect();
        for (key, value) in converted.iter_mut() {
            let list = if key == "parameters" { Some(value) } else { value.get_mut("parameters") };
            if let Some(list) = list {
                v2_shared_parameters::share(list, &mut shared_parameters);
            }
        }
        part.paths.push(Member::new(path, encoded(&Value::Object(converted))));
    }
    part.parameters = shared_parameters.into_iter().map(|p| Member::new(p.key, p.encoded)).collect();
    let d = &served.definition;
    let item = definition_name(group, version, &d.kind);
    part.definitions.push(Member::new(item.clone(), encoded(&object_schema(served, shared))));
    let list = v3::list_schema(d, version, &item, shared);
    let list = super::kubernetes_types::v2_form(&list);
    part.definitions.push(Member::new(definition_name(group, version, &d.list_kind), encoded(&rewrite_refs(&list))));
    part
}

/// A group version's discovery path (`/apis/<group>/<version>/`, its APIResourceList), as
/// kube-apiserver publishes one for each of its own group versions.
fn discovery_path(group: &str, version: &str) -> (String, Value) {
    let media = ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"];
    let get = json!({
        "consumes": media,
        "description": "get available resources",
        "operationId": format!("get{}APIResources", v3::operation_group_version(group, version)),
        "produces": media,
        "responses": {
            "200": {"description": "OK", "schema": {"$ref": format!("{V2_REFS}{META}.APIResourceList")}},
            "401": {"description": "Unauthorized"},
        },
        "schemes": ["https"],
        "tags": [v3::tag(group, version)],
    });
    (format!("/apis/{group}/{version}/"), json!({"get": get}))
}

pub(super) fn encoded(value: &Value) -> Vec<u8> {
    // Numbers as Go writes them: `"maximum":10`, not `10.0`.
    crate::core::json::to_vec(value).unwrap_or_default()
}

/// The body being written and its hash: every byte of the body but the members' values, and
/// in place of each value its digest (32 bytes, so the hashed text reads back one way only).
struct Writer {
    body: Vec<u8>,
    hash: ring::digest::Context,
}

impl Writer {
    /// Text around the members: written and hashed.
    fn text(&mut self, bytes: &[u8]) {
        self.body.extend_from_slice(bytes);
        self.hash.update(bytes);
    }

    /// An object of already encoded members; gives back, for each member, the index of the
    /// resource it came from (if one did), the key, where its value was written and its digest.
    fn members<'k>(&mut self, members: &'k Members<'_>) -> Vec<(Option<usize>, &'k str, Range<usize>, Digest)> {
        let mut placed = Vec::with_capacity(members.len());
        self.text(b"{");
        for (i, (key, (resource, value, digest))) in members.iter().enumerate() {
            if i > 0 {
                self.text(b",");
            }
            self.text(&encoded(&Value::String(key.clone())));
            self.text(b":");
            let start = self.body.len();
            self.body.extend_from_slice(value);
            self.hash.update(digest);
            placed.push((*resource, key.as_str(), start..self.body.len(), *digest));
        }
        self.text(b"}");
        placed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: Value, expected: Value) {
        assert_eq!(structural_v2(&input), expected, "{input}");
    }

    #[test]
    fn junctors_are_dropped() {
        check(
            json!({"allOf": [{"type": "boolean"}], "anyOf": [{"type": "string"}], "description": "d"}),
            json!({"description": "d"}),
        );
        check(json!({"not": {"type": "boolean"}, "oneOf": [{}]}), json!({}));
    }

    #[test]
    fn nullable_fields_are_untyped_and_not_required() {
        check(
            json!({"type": "object", "required": ["a", "c"], "properties": {"a": {"nullable": true, "type": "string"}, "c": {"type": "string"}}}),
            json!({"type": "object", "required": ["c"], "properties": {"a": {}, "c": {"type": "string"}}}),
        );
        check(
            json!({"type": "object", "required": ["x"], "additionalProperties": {"type": "string", "nullable": true}}),
            json!({"type": "object", "additionalProperties": {}}),
        );
    }

    #[test]
    fn unknown_fields_int_or_string_and_bare_arrays() {
        check(
            json!({"x-kubernetes-preserve-unknown-fields": true, "type": "object", "properties": {"foo": {"type": "string"}}}),
            json!({"x-kubernetes-preserve-unknown-fields": true}),
        );
        check(
            json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
            json!({"x-kubernetes-int-or-string": true}),
        );
        check(
            json!({"type": "array", "x-kubernetes-preserve-unknown-fields": true, "items": {"type": "string"}}),
            json!({"x-kubernetes-preserve-unknown-fields": true}),
        );
        check(
            json!({"type": "string", "format": "date", "maxLength": 4}),
            json!({"type": "string", "format": "date", "maxLength": 4}),
        );
    }

    #[test]
    fn the_encoded_document_is_what_serde_json_writes_for_it() {
        let report = crate::definitions::load_paths(&[std::path::PathBuf::from("manifests/examples")]);
        let (registry, _) = crate::definitions::Registry::build(report.definitions);
        let groups: Vec<(String, String, Vec<Served>)> = registry
            .groups()
            .flat_map(|(g, vs)| vs.iter().map(move |v| (g.to_string(), v.clone())))
            .map(|(g, v)| {
                let resources = registry.resources(&g, &v).into_iter().cloned().collect();
                (g, v, resources)
            })
            .collect();
        let all: Vec<(&str, &str, &[Served])> =
            groups.iter().map(|(g, v, r)| (g.as_str(), v.as_str(), r.as_slice())).collect();
        let bytes = document(&all, super::super::shared(), None, true).body;
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(serde_json::to_vec(&value).unwrap(), bytes);
        assert_eq!(value["swagger"], "2.0");
        assert!(value["definitions"]["com.example.stable.v1.CronTabList"].is_object());
        assert!(value["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
        assert!(
            value["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]["get"].is_object()
        );
    }

    #[test]
    fn without_paths_the_document_has_the_kinds_and_what_they_refer_to() {
        let report = crate::definitions::load_paths(&[std::path::PathBuf::from("manifests/examples")]);
        let (registry, _) = crate::definitions::Registry::build(report.definitions);
        let resources: Vec<Served> = registry.resources("stable.example.com", "v1").into_iter().cloned().collect();
        let shared = super::super::shared();
        let bytes = document(&[("stable.example.com", "v1", &resources)], shared, None, false).body;
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(serde_json::to_vec(&value).unwrap(), bytes);
        // The group version's discovery path alone: kube-aggregator merges nothing of a
        // document that brings no new path.
        let paths: Vec<&str> = value["paths"].as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!((paths, value.get("parameters")), (vec!["/apis/stable.example.com/v1/"], None));
        let get = &value["paths"]["/apis/stable.example.com/v1/"]["get"];
        assert_eq!(get["operationId"], "getStableExampleComV1APIResources");
        assert_eq!(get["tags"], json!(["stableExampleCom_v1"]));
        let names: Vec<&str> = value["definitions"].as_object().unwrap().keys().map(String::as_str).collect();
        let mut expected: Vec<&str> = shared.referred_by_kinds.iter().map(String::as_str).collect();
        expected.extend(shared.v2_discovery_members.iter().map(|m| m.key.as_str()));
        let kinds = ["CronTab", "CronTabList", "Shirt", "ShirtList"].map(|k| format!("com.example.stable.v1.{k}"));
        expected.extend(kinds.iter().map(String::as_str));
        expected.sort();
        assert_eq!(names, expected);
        // Every reference in it has its definition.
        let text = value.to_string();
        for reference in text.split("\"#/definitions/").skip(1) {
            let name = reference.split('"').next().unwrap();
            assert!(names.contains(&name), "{name}");
        }
        assert!(names.contains(&"io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry"), "{names:?}");
        assert!(!names.contains(&"io.k8s.apimachinery.pkg.apis.meta.v1.Status"), "{names:?}");
    }

    #[test]
    fn parameters_carry_their_type() {
        let p = parameter(&json!({"name": "limit", "in": "query", "schema": {"type": "integer", "uniqueItems": true}}));
        assert_eq!(p, json!({"name": "limit", "in": "query", "type": "integer", "uniqueItems": true}));
    }
}
