//! The OpenAPI v3 document of one group version: paths of every resource (with the query
//! parameters and patch types Kubernetes lists) and component schemas.

use serde_json::{Map, Value, json};

use super::v3_parameters as parameters;
use super::{
    META, OBJECT_META_DESCRIPTION, SharedSchemas, add_embedded_properties, definition_name, gvk, reference, upper_camel,
};
use crate::definitions::Definition;
use crate::definitions::registry::Served;

/// A CRD schema as published in v3: int-or-string unfolded into `anyOf`.
fn publishable(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out: Map<String, Value> = map.iter().map(|(k, v)| (k.clone(), publishable_child(k, v))).collect();
            if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) && !out.contains_key("anyOf") {
                out.insert("anyOf".into(), json!([{"type": "integer"}, {"type": "string"}]));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn publishable_child(key: &str, value: &Value) -> Value {
    match (key, value) {
        ("properties" | "patternProperties" | "definitions", Value::Object(props)) => {
            Value::Object(props.iter().map(|(k, v)| (k.clone(), publishable(v))).collect())
        }
        ("items" | "additionalProperties" | "not", v @ Value::Object(_)) => publishable(v),
        ("allOf" | "anyOf" | "oneOf", Value::Array(items)) => Value::Array(items.iter().map(publishable).collect()),
        ("default" | "enum" | "example", v) => v.clone(),
        (_, v) => v.clone(),
    }
}

/// The `metadata` property of an object: a reference to ObjectMeta with its description.
fn object_meta() -> Value {
    json!({"allOf": [reference(&format!("{META}.ObjectMeta"))], "description": OBJECT_META_DESCRIPTION})
}

pub fn object_schema(definition: &Definition, served: &Served, shared: &SharedSchemas) -> Value {
    let mut schema =
        served.version.openapi_schema_value().as_ref().map(publishable).unwrap_or_else(|| json!({"type": "object"}));
    add_embedded_properties(&mut schema, false, &object_meta());
    if let Value::Object(map) = &mut schema {
        let properties = map.entry("properties").or_insert_with(|| json!({}));
        if let Value::Object(props) = properties {
            props.insert("apiVersion".into(), json!({"type": "string", "description": shared.api_version_description}));
            props.insert("kind".into(), json!({"type": "string", "description": shared.kind_description}));
            props.insert("metadata".into(), object_meta());
        }
        map.insert(
            "x-kubernetes-group-version-kind".into(),
            gvk(&definition.group, &served.version.name, &definition.kind),
        );
    }
    schema
}

pub fn list_schema(definition: &Definition, version: &str, item: &str, shared: &SharedSchemas) -> Value {
    json!({
        "description": format!("{} is a list of {}", definition.list_kind, definition.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": shared.api_version_description},
            "items": {"type": "array", "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", definition.plural), "items": reference(item)},
            "kind": {"type": "string", "description": shared.kind_description},
            "metadata": {"allOf": [reference(&format!("{META}.ListMeta"))], "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"},
        },
        "x-kubernetes-group-version-kind": gvk(&definition.group, version, &definition.list_kind),
    })
}

fn content(schema: &Value, types: &[&str]) -> Value {
    Value::Object(types.iter().map(|t| (t.to_string(), json!({"schema": schema}))).collect())
}

const JSON_AND_YAML: &[&str] = &["application/json", "application/yaml"];
const PATCH_CONTENT: &[&str] =
    &["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];

/// The responses of an operation: each code with its schema, then the 401 every operation lists.
fn responses(codes: &[(&str, &str)], schema: &Value) -> Value {
    let mut map: Map<String, Value> = codes
        .iter()
        .map(|(code, what)| (code.to_string(), json!({"description": what, "content": content(schema, JSON_AND_YAML)})))
        .collect();
    map.insert("401".into(), json!({"description": "Unauthorized"}));
    Value::Object(map)
}

/// A request body of `types`, all of `schema`.
fn request_body(schema: &Value, types: &[&str], required: bool) -> Value {
    let mut body = json!({"content": content(schema, types)});
    if required {
        crate::api::objects::put(&mut body, "required", Value::Bool(true));
    }
    body
}

/// The parameters of a patch: `fieldManager` says more there.
fn patch_parameters() -> Vec<Value> {
    let mut list = parameters::queries(&["dryRun"]);
    list.extend(parameters::query("fieldManager", parameters::FIELD_MANAGER_ON_PATCH));
    list.extend(parameters::queries(&["fieldValidation", "force"]));
    list
}

/// What every operation on one resource shares.
struct Op<'a> {
    group: &'a str,
    version: &'a str,
    kind: &'a str,
    tag: &'a str,
    /// The group version in operation IDs (`StableExampleComV1`).
    gv: &'a str,
    /// `Namespaced` for a namespaced resource's namespaced paths, else empty.
    scope: &'a str,
}

impl Op<'_> {
    /// One operation: `verb` and `id` make its operation ID (`verb`, the group version, `id`
    /// with `{scope}` standing for the scope word, as in `Collection{scope}`), `body` its
    /// request body, `parameters` its own query parameters (left out when there are none).
    fn operation(
        &self,
        (action, verb, id): (&str, &str, &str),
        description: String,
        parameters: Vec<Value>,
        body: Option<Value>,
        responses: Value,
    ) -> Value {
        let mut op = json!({
            "tags": [self.tag],
            "description": description,
            "operationId": format!("{verb}{}{}", self.gv, id.replace("{scope}", self.scope)),
            "responses": responses,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": {"group": self.group, "version": self.version, "kind": self.kind},
        });
        if !parameters.is_empty() {
            crate::api::objects::put(&mut op, "parameters", Value::Array(parameters));
        }
        if let Some(body) = body {
            crate::api::objects::put(&mut op, "requestBody", body);
        }
        op
    }
}

/// The path parameters of a path (`name` where it names an object, `namespace` where it is
/// namespaced), then the query parameters `more` in order.
fn path_parameters(kind: &str, name: bool, namespaced: bool, more: &[&str]) -> Value {
    let path = |param: &str, description: String| json!({"name": param, "in": "path", "description": description, "required": true, "schema": {"type": "string", "uniqueItems": true}});
    let mut list = Vec::new();
    if name {
        list.push(path("name", format!("name of the {kind}")));
    }
    if namespaced {
        list.push(path("namespace", "object name and auth scope, such as for teams and projects".to_string()));
    }
    list.extend(parameters::queries(more));
    Value::Array(list)
}

pub fn document(group: &str, version: &str, resources: &[&Served], shared: &SharedSchemas) -> Value {
    let mut paths = Map::new();
    let mut schemas: Map<String, Value> = shared.definitions.clone();
    for served in resources {
        let d = &served.definition;
        let item = definition_name(group, version, &d.kind);
        let list = definition_name(group, version, &d.list_kind);
        schemas.insert(item.clone(), object_schema(d, served, shared));
        schemas.insert(list, list_schema(d, version, &item, shared));
        paths.extend(resource_paths(group, version, served));
    }
    // Kubernetes' builder publishes the schemas its routes refer to: the Scale types only when
    // a resource of the document has the scale subresource.
    if !resources.iter().any(|s| s.version.scale.is_some()) {
        for scale in ["Scale", "ScaleSpec", "ScaleStatus"] {
            schemas.remove(&format!("io.k8s.api.autoscaling.v1.{scale}"));
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// The tag of a group version's operations: `stableExampleCom_v1`.
pub(super) fn tag(group: &str, version: &str) -> String {
    let camel: String =
        upper_camel(group).chars().enumerate().map(|(i, c)| if i == 0 { c.to_ascii_lowercase() } else { c }).collect();
    format!("{camel}_{version}")
}

/// A group version in its operations' ids: `StableExampleComV1`.
pub(super) fn operation_group_version(group: &str, version: &str) -> String {
    format!("{}{}", upper_camel(group), upper_camel(version))
}

/// The paths of one resource of a group version: they depend on nothing else the document
/// holds (the v2 document is assembled resource by resource from them).
pub fn resource_paths(group: &str, version: &str, served: &Served) -> Map<String, Value> {
    let mut paths = Map::new();
    let tag = tag(group, version);
    let gv = operation_group_version(group, version);
    let status = reference(&format!("{META}.Status"));
    let patch_body = request_body(&reference(&format!("{META}.Patch")), PATCH_CONTENT, true);
    let delete_body = request_body(&reference(&format!("{META}.DeleteOptions")), JSON_AND_YAML, false);
    {
        let d = &served.definition;
        let kind = d.kind.as_str();
        let item = definition_name(group, version, kind);
        let list = definition_name(group, version, &d.list_kind);
        let namespaced = d.namespaced();
        let o = Op { group, version, kind, tag: &tag, gv: &gv, scope: if namespaced { "Namespaced" } else { "" } };
        let gv_name = crate::core::gvr::GroupVersion::new(group, version);
        let collection = crate::core::paths::openapi_collection_template(&gv_name, namespaced, &d.plural);
        let item_path = format!("{collection}/{{name}}");
        let object = reference(&item);
        let write = || parameters::queries(&["dryRun", "fieldManager", "fieldValidation"]);
        let object_body = request_body(&object, JSON_AND_YAML, true);
        let list_op = o.operation(
            ("list", "list", &format!("{{scope}}{kind}")),
            format!("list objects of kind {kind}"),
            parameters::queries(parameters::LIST),
            None,
            responses(&[("200", "OK")], &reference(&list)),
        );
        paths.insert(
            collection.clone(),
            json!({
                "get": list_op,
                "post": o.operation(("post", "create", &format!("{{scope}}{kind}")), format!("create a {kind}"), write(), Some(object_body.clone()), responses(&[("200", "OK"), ("201", "Created"), ("202", "Accepted")], &object)),
                "delete": o.operation(("deletecollection", "delete", &format!("Collection{{scope}}{kind}")), format!("delete collection of {kind}"), parameters::queries(parameters::LIST), None, responses(&[("200", "OK")], &status)),
                "parameters": path_parameters(kind, false, namespaced, &["pretty"]),
            }),
        );
        paths.insert(
            item_path.clone(),
            json!({
                "get": o.operation(("get", "read", &format!("{{scope}}{kind}")), format!("read the specified {kind}"), parameters::queries(&["resourceVersion"]), None, responses(&[("200", "OK")], &object)),
                "put": o.operation(("put", "replace", &format!("{{scope}}{kind}")), format!("replace the specified {kind}"), write(), Some(object_body.clone()), responses(&[("200", "OK"), ("201", "Created")], &object)),
                "patch": o.operation(("patch", "patch", &format!("{{scope}}{kind}")), format!("partially update the specified {kind}"), patch_parameters(), Some(patch_body.clone()), responses(&[("200", "OK")], &object)),
                "delete": o.operation(("delete", "delete", &format!("{{scope}}{kind}")), format!("delete a {kind}"), parameters::queries(&["dryRun", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential", "orphanDependents", "propagationPolicy"]), Some(delete_body.clone()), responses(&[("200", "OK"), ("202", "Accepted")], &status)),
                "parameters": path_parameters(kind, true, namespaced, &["pretty"]),
            }),
        );
        if namespaced {
            // The list across namespaces takes its query parameters on the path, `pretty`
            // among them in name order.
            let mut on_path: Vec<&str> = parameters::LIST.to_vec();
            on_path.push("pretty");
            on_path.sort_unstable();
            let path = crate::core::paths::openapi_collection_template(&gv_name, false, &d.plural);
            let get = o.operation(
                ("list", "list", &format!("{kind}ForAllNamespaces")),
                format!("list objects of kind {kind}"),
                Vec::new(),
                None,
                responses(&[("200", "OK")], &reference(&list)),
            );
            paths.insert(path, json!({"get": get, "parameters": path_parameters(kind, false, false, &on_path)}));
        }
        for (sub, schema) in [
            ("status", served.version.status_subresource.then(|| object.clone())),
            ("scale", served.version.scale.as_ref().map(|_| reference("io.k8s.api.autoscaling.v1.Scale"))),
        ] {
            let Some(schema) = schema else { continue };
            let id = format!("{{scope}}{kind}{}", upper_camel(sub));
            let entry = json!({
                "get": o.operation(("get", "read", &id), format!("read {sub} of the specified {kind}"), parameters::queries(&["resourceVersion"]), None, responses(&[("200", "OK")], &schema)),
                "put": o.operation(("put", "replace", &id), format!("replace {sub} of the specified {kind}"), write(), Some(request_body(&schema, JSON_AND_YAML, true)), responses(&[("200", "OK"), ("201", "Created")], &schema)),
                "patch": o.operation(("patch", "patch", &id), format!("partially update {sub} of the specified {kind}"), patch_parameters(), Some(patch_body.clone()), responses(&[("200", "OK")], &schema)),
                "parameters": path_parameters(kind, true, namespaced, &["pretty"]),
            });
            paths.insert(format!("{item_path}/{sub}"), entry);
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_or_string_unfolds() {
        let s = publishable(&json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true}}}));
        assert_eq!(s["properties"]["p"]["anyOf"], json!([{"type": "integer"}, {"type": "string"}]));
    }
}
