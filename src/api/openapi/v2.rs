//! The OpenAPI v2 document: the v3 documents' paths rewritten in Swagger 2.0 form, and the
//! custom resources' schemas rewritten as Kubernetes publishes them in v2
//! (`ToStructuralOpenAPIV2`): no allOf/anyOf/oneOf/not, nullable fields untyped and not
//! required, preserve-unknown-fields nodes without properties or items, int-or-string untyped.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{META, OBJECT_META_DESCRIPTION, SharedSchemas, add_embedded_properties, definition_name, gvk, v3};
use crate::definitions::registry::Served;

const V3_REFS: &str = "#/components/schemas/";
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

/// The v2 document of every served group version, encoded. Paths and definitions are encoded
/// group version by group version and written in key order, as serde_json writes the whole
/// document: the value of the whole (many times the size of its text) never exists at once.
/// Parameters that kube-openapi shares are written once, under `parameters` (`shared_parameter`).
pub fn document(group_versions: &[(&str, &str, &[Served])], shared: &SharedSchemas) -> Vec<u8> {
    let mut paths: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut definitions: BTreeMap<String, Vec<u8>> =
        shared.definitions_v2.iter().map(|(k, v)| (k.clone(), encoded(&rewrite_refs(v)))).collect();
    let mut parameters: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    // Group versions are encoded on every core, then merged in their order.
    for part in crate::core::parallel::map(group_versions, |gv| group_version(gv, shared)) {
        paths.extend(part.paths);
        definitions.extend(part.definitions);
        parameters.extend(part.parameters);
    }
    let size =
        paths.iter().chain(&definitions).chain(&parameters).map(|(k, v)| k.len() + v.len() + 4).sum::<usize>() + 256;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(b"{\"definitions\":");
    write_members(&mut out, &definitions);
    out.extend_from_slice(b",\"info\":");
    out.extend_from_slice(&encoded(&json!({"title": "Kubernetes CRD Swagger", "version": "v0.1.0"})));
    if !parameters.is_empty() {
        out.extend_from_slice(b",\"parameters\":");
        write_members(&mut out, &parameters);
    }
    out.extend_from_slice(b",\"paths\":");
    write_members(&mut out, &paths);
    out.extend_from_slice(b",\"swagger\":\"2.0\"}");
    out
}

/// The members of `spec.Parameter` in the order Go's encoding/json writes them (its
/// CommonValidations, SimpleSchema, ParamProps): the order the name's hash is taken over.
const GO_PARAMETER_ORDER: &[&str] = &[
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "type",
    "nullable",
    "format",
    "items",
    "collectionFormat",
    "default",
    "example",
    "description",
    "name",
    "in",
    "required",
    "schema",
    "allowEmptyValue",
];

/// kube-openapi's shared parameters (builder/parameters.go, `deduplicateParameters`): a
/// parameter kube-apiserver's own documents write once under `parameters` and refer to as
/// `#/parameters/<name>-<hash>`, the hash being the first six bytes of the FNV-1 64 of its Go
/// JSON, URL-safe base64. Not shared, as there: `name` in path or query, `fieldValidation` and
/// `dryRun` in query (kubectl reads them inline), a body whose schema is the kind's own. Its
/// name and its encoding, or `None`.
fn shared_parameter(parameter: &Map<String, Value>) -> Option<(String, Vec<u8>)> {
    let name = parameter.get("name").and_then(Value::as_str).unwrap_or_default();
    let place = parameter.get("in").and_then(Value::as_str).unwrap_or_default();
    let generic_body = parameter
        .get("schema")
        .and_then(|s| s.get("$ref"))
        .and_then(Value::as_str)
        .is_some_and(|r| r.starts_with("#/definitions/io.k8s.apimachinery"));
    let kept_inline = ((place == "query" || place == "path") && name == "name")
        || (place == "query" && (name == "fieldValidation" || name == "dryRun"))
        || (place == "body" && name == "body" && !generic_body);
    if kept_inline || parameter.keys().any(|k| !GO_PARAMETER_ORDER.contains(&k.as_str())) {
        return None;
    }
    let mut text = vec![b'{'];
    for key in GO_PARAMETER_ORDER.iter().filter(|k| parameter.contains_key(**k)) {
        if text.len() > 1 {
            text.push(b',');
        }
        text.extend_from_slice(&encoded(&Value::String((*key).to_string())));
        text.push(b':');
        text.extend_from_slice(&encoded(&parameter[*key]));
    }
    text.push(b'}');
    let hash = fnv1_64(&go_html_escaped(text)).to_be_bytes();
    use base64::Engine;
    let label = if name.is_empty() { "param" } else { name };
    let encoding = encoded(&Value::Object(parameter.clone()));
    Some((format!("{label}-{}", base64::engine::general_purpose::URL_SAFE.encode(&hash[..6])), encoding))
}

/// JSON text with `<`, `>`, `&`, U+2028 and U+2029 escaped as Go's encoding/json writes them
/// (they only occur inside strings, so the text stays the same JSON).
fn go_html_escaped(text: Vec<u8>) -> Vec<u8> {
    let Ok(text) = String::from_utf8(text) else { return Vec::new() };
    text.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
        .into_bytes()
}

/// Go's hash/fnv `New64` (FNV-1, 64 bits).
fn fnv1_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash: u64, b| hash.wrapping_mul(0x0000_0100_0000_01b3) ^ u64::from(*b))
}

/// `parameters` (a path item's or an operation's) with each shared one replaced by its
/// reference, recorded in `shared`.
fn share_parameters(parameters: &mut Value, shared: &mut Vec<(String, Vec<u8>)>) {
    for parameter in parameters.as_array_mut().into_iter().flatten() {
        let Some((name, text)) = parameter.as_object().and_then(shared_parameter) else { continue };
        *parameter = json!({"$ref": format!("#/parameters/{name}")});
        shared.push((name, text));
    }
}

/// The encoded paths and definitions one group version contributes.
struct Part {
    paths: Vec<(String, Vec<u8>)>,
    definitions: Vec<(String, Vec<u8>)>,
    /// The shared parameters its paths refer to.
    parameters: Vec<(String, Vec<u8>)>,
}

fn group_version(&(group, version, resources): &(&str, &str, &[Served]), shared: &SharedSchemas) -> Part {
    let mut part = Part { paths: Vec::new(), definitions: Vec::new(), parameters: Vec::new() };
    let refs: Vec<&Served> = resources.iter().collect();
    let v3_doc = v3::document(group, version, &refs, shared);
    for (path, item) in v3_doc.get("paths").and_then(Value::as_object).into_iter().flatten() {
        let Value::Object(item) = item else { continue };
        let mut converted: Map<String, Value> = item
            .iter()
            .map(|(k, v)| match k.as_str() {
                "parameters" => (k.clone(), Value::Array(v.as_array().into_iter().flatten().map(parameter).collect())),
                _ => (k.clone(), operation(v)),
            })
            .collect();
        for (key, value) in converted.iter_mut() {
            match key.as_str() {
                "parameters" => share_parameters(value, &mut part.parameters),
                _ => {
                    if let Some(parameters) = value.get_mut("parameters") {
                        share_parameters(parameters, &mut part.parameters);
                    }
                }
            }
        }
        part.paths.push((path.clone(), encoded(&Value::Object(converted))));
    }
    for served in resources {
        let d = &served.definition;
        let item = definition_name(group, version, &d.kind);
        part.definitions.push((item.clone(), encoded(&object_schema(served, shared))));
        let list = v3::list_schema(d, version, &item, shared);
        let list = super::kubernetes_types::v2_form(&list);
        part.definitions.push((definition_name(group, version, &d.list_kind), encoded(&rewrite_refs(&list))));
    }
    part
}

fn encoded(value: &Value) -> Vec<u8> {
    // Numbers as Go writes them: `"maximum":10`, not `10.0`.
    crate::core::json::to_vec(value).unwrap_or_default()
}

/// An object of already encoded members.
fn write_members(out: &mut Vec<u8>, members: &BTreeMap<String, Vec<u8>>) {
    out.push(b'{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&encoded(&Value::String(key.clone())));
        out.push(b':');
        out.extend_from_slice(value);
    }
    out.push(b'}');
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
        let bytes = document(&all, super::super::shared());
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
    fn parameters_carry_their_type() {
        let p = parameter(&json!({"name": "limit", "in": "query", "schema": {"type": "integer", "uniqueItems": true}}));
        assert_eq!(p, json!({"name": "limit", "in": "query", "type": "integer", "uniqueItems": true}));
    }
}
