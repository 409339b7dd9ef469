//! The keyword rules of a definition's schema (`ValidateCustomResourceDefinitionOpenAPISchema`):
//! forbidden keywords, types, `uniqueItems`, `additionalProperties` with `properties`,
//! defaults where they may not be, and the consistency of the `x-kubernetes-*` list and map
//! extensions.

use serde_json::Value;

use super::Options;
use super::raw::Raw;
use crate::core::field::{FieldError, Path};

const TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];
/// Keywords of OpenAPI that Kubernetes' schema type does not have at all.
const UNKNOWN_KEYWORDS: [&str; 5] = ["deprecated", "discriminator", "readOnly", "writeOnly", "xml"];

/// Where in the schema the walk is.
#[derive(Debug, Clone)]
struct Context {
    options: Options,
    /// Why defaults are forbidden here (`None`: allowed).
    defaults_forbidden: Option<String>,
    inside_resource_meta: bool,
}

impl Context {
    fn forbid_defaults(&self, reason: &str) -> Context {
        Context { defaults_forbidden: Some(reason.to_string()), ..self.clone() }
    }

    fn inside_meta(&self) -> Context {
        Context { inside_resource_meta: true, ..self.clone() }
    }
}

/// Checks a version's schema; `path` is `spec.versions[i].schema.openAPIV3Schema`.
pub fn validate(s: Raw<'_>, path: &Path, options: Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let defaults_forbidden = (!options.allow_defaults).then(String::new);
    let ctx = Context { options, defaults_forbidden, inside_resource_meta: false };
    walk(s, path, &ctx, true, &mut errs);
    errs
}

fn node_rules(s: Raw<'_>, path: &Path, ctx: &Context, errs: &mut Vec<FieldError>) {
    let type_name = s.str("type");
    if ctx.options.require_valid_property_type && !type_name.is_empty() && !TYPES.contains(&type_name) {
        errs.push(FieldError::not_supported(path.child("type"), type_name, &TYPES));
    }
    if s.present("default")
        && let Some(reason) = &ctx.defaults_forbidden
    {
        let detail =
            if reason.is_empty() { "must not be set".to_string() } else { format!("must not be set {reason}") };
        errs.push(FieldError::forbidden(path.child("default"), detail));
    }
    if !s.str("id").is_empty() {
        errs.push(FieldError::forbidden(path.child("id"), "id is not supported"));
    }
    let forbidden_when_present = [
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ];
    for (key, detail) in forbidden_when_present {
        let set = match s.get(key) {
            Some(Value::Object(m)) if key == "patternProperties" || key == "definitions" => !m.is_empty(),
            Some(v) => !v.is_null(),
            None => false,
        };
        if set {
            errs.push(FieldError::forbidden(path.child(key), detail));
        }
    }
    for key in UNKNOWN_KEYWORDS {
        if s.get(key).is_some() {
            errs.push(FieldError::forbidden(path.child(key), format!("{key} is not supported")));
        }
    }
    if type_name == "null" {
        errs.push(FieldError::forbidden(
            path.child("type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if s.get("items").is_some_and(Value::is_array) {
        errs.push(FieldError::forbidden(path.child("items"), "items must be a schema object and not an array"));
    }
    if ctx.inside_resource_meta && s.flag("x-kubernetes-embedded-resource") {
        errs.push(FieldError::forbidden(
            path.child("x-kubernetes-embedded-resource"),
            "must not be used inside of resource meta",
        ));
    }
}

fn walk(s: Raw<'_>, path: &Path, ctx: &Context, is_root: bool, errs: &mut Vec<FieldError>) {
    node_rules(s, path, ctx, errs);
    if s.flag("uniqueItems") {
        errs.push(FieldError::forbidden(
            path.child("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    let properties = s.properties();
    if let Some(extra) = s.get("additionalProperties").filter(|v| !v.is_null()) {
        if !properties.is_empty() && extra != &Value::Bool(true) {
            errs.push(FieldError::forbidden(
                path.child("additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        let sub = if ctx.inside_resource_meta {
            ctx.forbid_defaults("inside additionalProperties applying to object metadata")
        } else {
            ctx.clone()
        };
        if let Some(extra) = s.object("additionalProperties") {
            walk(extra, &path.child("additionalProperties"), &sub, false, errs);
        }
    }
    let embedded = s.flag("x-kubernetes-embedded-resource");
    for (name, property) in &properties {
        let mut sub = ctx.clone();
        if (is_root || embedded) && META_FIELDS.contains(name) {
            sub = sub.inside_meta();
            if is_root {
                sub = sub.forbid_defaults(&format!("in top-level {name}"));
            }
        }
        walk(*property, &path.child("properties").key(name), &sub, false, errs);
    }
    if let Some(not) = s.object("not") {
        walk(not, &path.child("not"), ctx, false, errs);
    }
    for junctor in ["allOf", "oneOf", "anyOf"] {
        for (i, branch) in s.list(junctor).into_iter().enumerate() {
            walk(branch, &path.child(junctor).index(i), ctx, false, errs);
        }
    }
    match s.get("items") {
        Some(Value::Object(_)) => {
            if let Some(items) = s.object("items") {
                walk(items, &path.child("items"), ctx, false, errs);
            }
        }
        Some(Value::Array(list)) => {
            for (i, item) in list.iter().enumerate() {
                walk(Raw::of(item), &path.child("items").index(i), ctx, false, errs);
            }
        }
        _ => {}
    }
    extensions(s, path, ctx.options, errs);
}

fn extensions(s: Raw<'_>, path: &Path, options: Options, errs: &mut Vec<FieldError>) {
    let type_name = s.str("type");
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-preserve-unknown-fields"),
            false,
            "must be true or undefined",
        ));
    }
    let type_error = |detail: &str| {
        if type_name.is_empty() {
            FieldError::required(path.child("type"), detail)
        } else {
            FieldError::invalid(path.child("type"), type_name, detail)
        }
    };
    let map_type = s.get("x-kubernetes-map-type").and_then(Value::as_str);
    if let Some(map_type) = map_type {
        if type_name != "object" {
            errs.push(type_error("must be object if x-kubernetes-map-type is specified"));
        }
        if map_type != "atomic" && map_type != "granular" {
            errs.push(FieldError::not_supported(
                path.child("x-kubernetes-map-type"),
                map_type,
                &["atomic", "granular"],
            ));
        }
    }
    let list_type = s.get("x-kubernetes-list-type").and_then(Value::as_str);
    let items = s.object("items");
    if list_type.is_some() && type_name != "array" {
        errs.push(type_error("must be array if x-kubernetes-list-type is specified"));
    } else if let (true, Some("set"), Some(item)) = (options.require_atomic_set_type, list_type, items) {
        let item_list_type = item.get("x-kubernetes-list-type").cloned().unwrap_or(Value::Null);
        let detail = "must be atomic as item of a list with x-kubernetes-list-type=set";
        match item.str("type") {
            "array" if item.get("x-kubernetes-list-type").is_some_and(|t| t.as_str() != Some("atomic")) => {
                errs.push(FieldError::invalid(
                    path.child("items").child("x-kubernetes-list-type"),
                    item_list_type,
                    detail,
                ));
            }
            "object" if item.str("x-kubernetes-map-type") != "atomic" => {
                errs.push(FieldError::invalid(
                    path.child("items").child("x-kubernetes-map-type"),
                    item_list_type,
                    detail,
                ));
            }
            _ => {}
        }
    }
    if let Some(lt) = list_type
        && !matches!(lt, "atomic" | "set" | "map")
    {
        errs.push(FieldError::not_supported(path.child("x-kubernetes-list-type"), lt, &["atomic", "set", "map"]));
    }
    let keys: Vec<&str> = s
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let keys_value = s.get("x-kubernetes-list-map-keys").cloned().unwrap_or(Value::Null);
    if !keys.is_empty() {
        let detail = "must be map if x-kubernetes-list-map-keys is non-empty";
        match list_type {
            None => errs.push(FieldError::required(path.child("x-kubernetes-list-type"), detail)),
            Some(lt) if lt != "map" => errs.push(FieldError::invalid(path.child("x-kubernetes-list-type"), lt, detail)),
            _ => {}
        }
    }
    if list_type == Some("map") {
        map_list(s, path, &keys, &keys_value, errs);
    }
    if let (true, Some(lt @ ("set" | "map")), Some(item)) = (options.require_map_list_keys_map_set, list_type, items) {
        if item.flag("nullable") {
            errs.push(FieldError::forbidden(
                path.child("items").child("nullable"),
                format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
            ));
        }
        if lt == "map" {
            let required: Vec<&str> = item
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for key in &keys {
                let Some((_, property)) = item.properties().into_iter().find(|(k, _)| k == key) else { continue };
                let at = path.child("items").child("properties").key(key);
                if !required.contains(key) && !property.present("default") {
                    errs.push(FieldError::required(
                        at.child("default"),
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                    ));
                }
                if property.flag("nullable") {
                    errs.push(FieldError::forbidden(
                        at.child("nullable"),
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                    ));
                }
            }
        }
    }
}

fn map_list(s: Raw<'_>, path: &Path, keys: &[&str], keys_value: &Value, errs: &mut Vec<FieldError>) {
    if keys.is_empty() {
        errs.push(FieldError::required(
            path.child("x-kubernetes-list-map-keys"),
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    match s.get("items") {
        None | Some(Value::Null) => {
            errs.push(FieldError::required(path.child("items"), "must have a schema if x-kubernetes-list-type is map"));
        }
        Some(items @ Value::Array(_)) => {
            errs.push(FieldError::invalid(
                path.child("items"),
                items.clone(),
                "must only have a single schema if x-kubernetes-list-type is map",
            ));
        }
        Some(item) => {
            let item = Raw::of(item);
            let item_type = item.str("type");
            if item_type != "object" {
                errs.push(FieldError::invalid(
                    path.child("items").child("type"),
                    item_type,
                    "must be object if parent array's x-kubernetes-list-type is map",
                ));
                return;
            }
            let properties = item.properties();
            let mut seen: Vec<&str> = Vec::new();
            for key in keys {
                match properties.iter().find(|(k, _)| k == key) {
                    Some((_, p)) if matches!(p.str("type"), "array" | "object") => errs.push(FieldError::invalid(
                        path.child("items").child("properties").key(key).child("type"),
                        item_type,
                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                    )),
                    Some(_) => {}
                    None => errs.push(FieldError::invalid(
                        path.child("x-kubernetes-list-map-keys"),
                        keys_value.clone(),
                        "entries must all be names of item properties",
                    )),
                }
                if seen.contains(key) {
                    errs.push(FieldError::invalid(
                        path.child("x-kubernetes-list-map-keys"),
                        keys_value.clone(),
                        "must not contain duplicate entries",
                    ));
                }
                seen.push(key);
            }
        }
    }
}
