//! The OpenAPI v3 document of one group version: paths of every resource (with the query
//! parameters and patch types Kubernetes lists) and component schemas.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

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

fn query(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": schema, "uniqueItems": true})
}

fn common_parameters() -> BTreeMap<&'static str, Value> {
    let s = json!({"type": "string"});
    let b = json!({"type": "boolean"});
    let i = json!({"type": "integer"});
    BTreeMap::from([
        (
            "allowWatchBookmarks",
            query(
                "allowWatchBookmarks",
                "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
                b.clone(),
            ),
        ),
        (
            "continue",
            query(
                "continue",
                "The continue option should be set when retrieving more results from the server.",
                s.clone(),
            ),
        ),
        (
            "dryRun",
            query(
                "dryRun",
                "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed",
                s.clone(),
            ),
        ),
        (
            "fieldManager",
            query(
                "fieldManager",
                "fieldManager is a name associated with the actor or entity that is making these changes.",
                s.clone(),
            ),
        ),
        (
            "fieldSelector",
            query(
                "fieldSelector",
                "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
                s.clone(),
            ),
        ),
        (
            "fieldValidation",
            query(
                "fieldValidation",
                "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn (default), Strict.",
                s.clone(),
            ),
        ),
        (
            "force",
            query(
                "force",
                "Force is going to \"force\" Apply requests. It must be unset for non-apply patch requests.",
                b.clone(),
            ),
        ),
        (
            "gracePeriodSeconds",
            query("gracePeriodSeconds", "The duration in seconds before the object should be deleted.", i.clone()),
        ),
        (
            "labelSelector",
            query(
                "labelSelector",
                "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
                s.clone(),
            ),
        ),
        ("limit", query("limit", "limit is a maximum number of responses to return for a list call.", i.clone())),
        ("orphanDependents", query("orphanDependents", "Deprecated: please use the PropagationPolicy.", b.clone())),
        (
            "propagationPolicy",
            query("propagationPolicy", "Whether and how garbage collection will be performed.", s.clone()),
        ),
        (
            "resourceVersion",
            query(
                "resourceVersion",
                "resourceVersion sets a constraint on what resource versions a request may be served from.",
                s.clone(),
            ),
        ),
        (
            "resourceVersionMatch",
            query(
                "resourceVersionMatch",
                "resourceVersionMatch determines how resourceVersion is applied to list calls.",
                s.clone(),
            ),
        ),
        (
            "sendInitialEvents",
            query("sendInitialEvents", "`sendInitialEvents=true` may be set together with `watch=true`.", b.clone()),
        ),
        ("timeoutSeconds", query("timeoutSeconds", "Timeout for the list/watch call.", i)),
        (
            "watch",
            query(
                "watch",
                "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
                b,
            ),
        ),
        ("pretty", query("pretty", "If 'true', then the output is pretty printed.", s)),
    ])
}

fn params(all: &BTreeMap<&'static str, Value>, names: &[&str]) -> Vec<Value> {
    names.iter().filter_map(|n| all.get(n).cloned()).collect()
}

fn content(schema: Value, types: &[&str]) -> Value {
    Value::Object(types.iter().map(|t| (t.to_string(), json!({"schema": schema}))).collect())
}

fn responses(codes: &[(&str, &str)], schema: &Value) -> Value {
    Value::Object(
        codes
            .iter()
            .map(|(code, what)| (code.to_string(), json!({"description": what, "content": content(schema.clone(), &["application/json", "application/yaml"])})))
            .collect(),
    )
}

const LIST_PARAMS: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];
const PATCH_CONTENT: &[&str] =
    &["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];

struct Op<'a> {
    group: &'a str,
    version: &'a str,
    tag: String,
    id_suffix: String,
}

impl Op<'_> {
    #[allow(clippy::too_many_arguments)] // One argument per field of an OpenAPI operation.
    fn operation(
        &self,
        action: &str,
        verb: &str,
        description: String,
        parameters: Vec<Value>,
        body: Option<Value>,
        responses: Value,
        k8s_kind: &str,
    ) -> Value {
        let mut op = json!({
            "tags": [self.tag],
            "description": description,
            "operationId": format!("{verb}{}", self.id_suffix),
            "parameters": parameters,
            "responses": responses,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": {"group": self.group, "version": self.version, "kind": k8s_kind},
        });
        if let Some(body) = body {
            crate::api::objects::put(&mut op, "requestBody", body);
        }
        op
    }
}

pub fn document(group: &str, version: &str, resources: &[&Served], shared: &SharedSchemas) -> Value {
    let all = common_parameters();
    let mut paths = Map::new();
    let mut schemas: Map<String, Value> = shared.definitions.clone();
    let tag = format!(
        "{}_{}",
        upper_camel(group)
            .chars()
            .enumerate()
            .map(|(i, c)| if i == 0 { c.to_ascii_lowercase() } else { c })
            .collect::<String>(),
        version
    );
    for served in resources {
        let d = &served.definition;
        let item = definition_name(group, version, &d.kind);
        let list = definition_name(group, version, &d.list_kind);
        schemas.insert(item.clone(), object_schema(d, served, shared));
        schemas.insert(list.clone(), list_schema(d, version, &item, shared));
        let namespaced = if d.namespaced() { "Namespaced" } else { "" };
        let gv = format!("{}{}", upper_camel(group), upper_camel(version));
        let op = |suffix: &str| Op {
            group,
            version,
            tag: tag.clone(),
            id_suffix: format!("{gv}{namespaced}{}{suffix}", d.kind),
        };
        let collection = crate::core::paths::openapi_collection_template(
            &crate::core::gvr::GroupVersion::new(group, version),
            d.namespaced(),
            &d.plural,
        );
        let item_path = format!("{collection}/{{name}}");
        let object = reference(&item);
        let status = reference(&format!("{META}.Status"));
        let write_params = params(&all, &["dryRun", "fieldManager", "fieldValidation"]);
        let path_params = |name: bool| {
            let mut p = Vec::new();
            if name {
                p.push(json!({"name": "name", "in": "path", "description": format!("name of the {}", d.kind), "required": true, "schema": {"type": "string", "uniqueItems": true}}));
            }
            if d.namespaced() {
                p.push(json!({"name": "namespace", "in": "path", "description": "object name and auth scope, such as for teams and projects", "required": true, "schema": {"type": "string", "uniqueItems": true}}));
            }
            p.extend(all.get("pretty").cloned());
            p
        };
        let o = op("");
        let mut coll = json!({
            "get": o.operation("list", "list", format!("list objects of kind {}", d.kind), params(&all, LIST_PARAMS), None, responses(&[("200", "OK")], &reference(&list)), &d.kind),
            "post": o.operation("post", "create", format!("create a {}", d.kind), write_params.clone(), Some(json!({"content": content(object.clone(), &["application/json", "application/yaml"])})), responses(&[("200", "OK"), ("201", "Created"), ("202", "Accepted")], &object), &d.kind),
            "delete": o.operation("deletecollection", "deletecollection", format!("delete collection of {}", d.kind), params(&all, &["continue", "dryRun", "fieldSelector", "gracePeriodSeconds", "labelSelector", "limit", "orphanDependents", "propagationPolicy", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds"]), None, responses(&[("200", "OK")], &status), &d.kind),
        });
        crate::api::objects::put(&mut coll, "parameters", json!(path_params(false)));
        paths.insert(collection.clone(), coll);
        let patch_body = json!({"content": content(reference(&format!("{META}.Patch")), PATCH_CONTENT)});
        let mut single = json!({
            "get": o.operation("get", "read", format!("read the specified {}", d.kind), vec![], None, responses(&[("200", "OK")], &object), &d.kind),
            "put": o.operation("put", "replace", format!("replace the specified {}", d.kind), write_params.clone(), Some(json!({"content": content(object.clone(), &["application/json", "application/yaml"])})), responses(&[("200", "OK"), ("201", "Created")], &object), &d.kind),
            "patch": o.operation("patch", "patch", format!("partially update the specified {}", d.kind), params(&all, &["dryRun", "fieldManager", "fieldValidation", "force"]), Some(patch_body.clone()), responses(&[("200", "OK"), ("201", "Created")], &object), &d.kind),
            "delete": o.operation("delete", "delete", format!("delete a {}", d.kind), params(&all, &["dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy"]), Some(json!({"content": content(reference(&format!("{META}.DeleteOptions")), &["application/json", "application/yaml"])})), responses(&[("200", "OK"), ("202", "Accepted")], &status), &d.kind),
        });
        crate::api::objects::put(&mut single, "parameters", json!(path_params(true)));
        paths.insert(item_path.clone(), single);
        if d.namespaced() {
            let all_ns = Op { group, version, tag: tag.clone(), id_suffix: format!("{gv}{}ForAllNamespaces", d.kind) };
            let path = crate::core::paths::openapi_collection_template(
                &crate::core::gvr::GroupVersion::new(group, version),
                false,
                &d.plural,
            );
            let mut entry = json!({"get": all_ns.operation("list", "list", format!("list objects of kind {}", d.kind), params(&all, LIST_PARAMS), None, responses(&[("200", "OK")], &reference(&list)), &d.kind)});
            crate::api::objects::put(
                &mut entry,
                "parameters",
                json!(all.get("pretty").cloned().into_iter().collect::<Vec<_>>()),
            );
            paths.insert(path, entry);
        }
        for (sub, schema, kind_name) in [
            ("status", served.version.status_subresource.then(|| object.clone()), d.kind.clone()),
            (
                "scale",
                served.version.scale.as_ref().map(|_| reference("io.k8s.api.autoscaling.v1.Scale")),
                "Scale".to_string(),
            ),
        ] {
            let Some(schema) = schema else { continue };
            let so = op(&upper_camel(sub));
            let mut entry = json!({
                "get": so.operation("get", "read", format!("read {sub} of the specified {}", d.kind), vec![], None, responses(&[("200", "OK")], &schema), &kind_name),
                "put": so.operation("put", "replace", format!("replace {sub} of the specified {}", d.kind), write_params.clone(), Some(json!({"content": content(schema.clone(), &["application/json", "application/yaml"])})), responses(&[("200", "OK"), ("201", "Created")], &schema), &kind_name),
                "patch": so.operation("patch", "patch", format!("partially update {sub} of the specified {}", d.kind), params(&all, &["dryRun", "fieldManager", "fieldValidation", "force"]), Some(patch_body.clone()), responses(&[("200", "OK"), ("201", "Created")], &schema), &kind_name),
            });
            if sub == "scale" {
                for action in ["get", "put", "patch"] {
                    if let Some(op) = entry.get_mut(action) {
                        crate::api::objects::put(
                            op,
                            "x-kubernetes-group-version-kind",
                            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
                        );
                    }
                }
            }
            crate::api::objects::put(&mut entry, "parameters", json!(path_params(true)));
            paths.insert(format!("{item_path}/{sub}"), entry);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_or_string_unfolds() {
        let s = publishable(&json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true}}}));
        assert_eq!(s["properties"]["p"]["anyOf"], json!([{"type": "integer"}, {"type": "string"}]));
    }
}
