//! Structural schema rules (apiextensions' `NewStructural` and `ValidateStructural`): types
//! everywhere outside the junctors and nothing but validations inside them, every property a
//! junctor mentions also specified outside, metadata restricted to name and generateName.
//!
//! Works on the schema as written. Errors come sorted by their text, as Kubernetes sorts them.

use serde_json::Value;

use super::raw::Raw;
use crate::core::field::{FieldError, Path};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// Keywords `NewStructural` refuses outright; the first one found is the error.
pub fn unsupported(s: Raw<'_>) -> Option<String> {
    for (key, name) in [
        ("id", "id"),
        ("$schema", "schema"),
        ("$ref", "$ref"),
        ("patternProperties", "patternProperties"),
        ("dependencies", "dependencies"),
        ("additionalItems", "additionalItems"),
        ("definitions", "definitions"),
    ] {
        if s.present(key) {
            return Some(format!("OpenAPIV3Schema '{name}' is not supported"));
        }
    }
    if s.get("items").is_some_and(Value::is_array) {
        return Some("OpenAPIV3Schema 'items' must be a schema, but is an array".to_string());
    }
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        return Some("internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined".to_string());
    }
    s.children().into_iter().find_map(|(_, child)| unsupported(child))
}

/// `ValidateStructural`: invariants and completeness, sorted by text.
pub fn validate(s: Raw<'_>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    invariants(s, Level::Root, path, &mut errs);
    complete_value_validation(s, Some(s), path, path, &mut errs);
    errs.sort_by_key(|e| e.to_string());
    errs
}

fn invariants(s: Raw<'_>, level: Level, path: &Path, errs: &mut Vec<FieldError>) {
    let type_name = s.str("type");
    if type_name == "array" && s.object("items").is_none() {
        errs.push(FieldError::required(path.child("items"), "must be specified"));
    }
    if let Some(items) = s.object("items") {
        invariants(items, Level::Item, &path.child("items"), errs);
    }
    for (name, property) in s.properties() {
        invariants(property, Level::Field, &path.child("properties").key(name), errs);
    }
    if s.present("additionalProperties") {
        if level == Level::Root {
            errs.push(FieldError::forbidden(path.child("additionalProperties"), "must not be used at the root"));
        }
        if let Some(extra) = s.object("additionalProperties") {
            invariants(extra, Level::Field, &path.child("additionalProperties"), errs);
        }
    }
    let int_or_string = s.flag("x-kubernetes-int-or-string");
    let preserve = s.flag("x-kubernetes-preserve-unknown-fields");
    let embedded = s.flag("x-kubernetes-embedded-resource");
    if int_or_string && preserve {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-preserve-unknown-fields"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-embedded-resource"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = int_or_string_any_of(s);
    let skip_first_all_of = s.list("allOf").first().is_some_and(|first| int_or_string_any_of(*first));
    value_validation(s, skip_any_of, skip_first_all_of, path, errs);

    let check_metadata = level == Level::Root || embedded;
    if embedded && type_name != "object" {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        errs.push(if type_name.is_empty() {
            FieldError::required(path.child("type"), detail)
        } else {
            FieldError::invalid(path.child("type"), type_name, detail)
        });
    } else if type_name.is_empty() && !int_or_string && !preserve {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(path.child("type"), detail));
    }
    if embedded && s.present("additionalProperties") {
        errs.push(FieldError::forbidden(
            path.child("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if level == Level::Root && !type_name.is_empty() && type_name != "object" {
        errs.push(FieldError::invalid(path.child("type"), type_name, "must be object at the root"));
    }
    let properties = s.properties();
    if check_metadata {
        for field in ["kind", "apiVersion"] {
            if let Some((_, p)) = properties.iter().find(|(k, _)| *k == field)
                && p.str("type") != "string"
            {
                errs.push(FieldError::invalid(
                    path.child("properties").key(field).child("type"),
                    p.str("type"),
                    "must be string",
                ));
            }
        }
    }
    if let Some((_, metadata)) = properties.iter().find(|(k, _)| *k == "metadata") {
        metadata_invariants(*metadata, check_metadata, level, &path.child("properties").key("metadata"), errs);
    }
    if embedded && !preserve && properties.is_empty() {
        errs.push(FieldError::required(
            path.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// Root metadata may only restrict `name` and `generateName`.
fn metadata_invariants(s: Raw<'_>, check_metadata: bool, level: Level, path: &Path, errs: &mut Vec<FieldError>) {
    if check_metadata && s.str("type") != "object" {
        errs.push(FieldError::invalid(path.child("type"), s.str("type"), "must be object"));
    }
    if level != Level::Root {
        return;
    }
    let names: Vec<&str> = s.properties().iter().map(|(k, _)| *k).collect();
    let only_names = names.iter().all(|n| *n == "name" || *n == "generateName");
    let anything_else = s.keys().into_iter().any(|key| match key {
        "type" | "default" => false,
        "properties" => !only_names,
        "allOf" | "anyOf" | "oneOf" => !s.list(key).is_empty(),
        other => !s.is_zero(other),
    });
    if anything_else {
        errs.push(FieldError::forbidden(
            path.clone(),
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

/// `anyOf: [{type: integer}, {type: string}]` exactly.
fn int_or_string_any_of(s: Raw<'_>) -> bool {
    let branches = s.list("anyOf");
    let only_type = |b: &Raw<'_>, t: &str| b.keys() == ["type"] && b.str("type") == t;
    matches!(branches.as_slice(), [a, b] if only_type(a, "integer") && only_type(b, "string"))
}

fn value_validation(s: Raw<'_>, skip_any_of: bool, skip_first_all_of: bool, path: &Path, errs: &mut Vec<FieldError>) {
    if !skip_any_of {
        for (i, branch) in s.list("anyOf").into_iter().enumerate() {
            nested(branch, false, &path.child("anyOf").index(i), errs);
        }
    }
    for (i, branch) in s.list("allOf").into_iter().enumerate() {
        nested(branch, skip_first_all_of && i == 0, &path.child("allOf").index(i), errs);
    }
    for (i, branch) in s.list("oneOf").into_iter().enumerate() {
        nested(branch, false, &path.child("oneOf").index(i), errs);
    }
    if let Some(not) = s.object("not") {
        nested(not, false, &path.child("not"), errs);
    }
    let pattern = s.str("pattern");
    if !pattern.is_empty()
        && let Err(e) = crate::schema::pattern::compile(pattern)
    {
        errs.push(FieldError::invalid(
            path.child("pattern"),
            pattern,
            format!("must be a valid regular expression, but isn't: {e}"),
        ));
    }
}

/// A node inside a junctor: validations only.
fn nested(v: Raw<'_>, skip_any_of: bool, path: &Path, errs: &mut Vec<FieldError>) {
    value_validation(v, skip_any_of, false, path, errs);
    if let Some(items) = v.object("items") {
        nested(items, false, &path.child("items"), errs);
    }
    for (name, property) in v.properties() {
        nested(property, false, &path.child("properties").key(name), errs);
    }
    let forbidden = |key: &str, detail: &str| FieldError::forbidden(path.child(key), detail);
    if !v.str("type").is_empty() {
        errs.push(forbidden("type", "must be empty to be structural"));
    }
    if v.object("additionalProperties").is_some() || v.get("additionalProperties") == Some(&Value::Bool(true)) {
        errs.push(forbidden("additionalProperties", "must be undefined to be structural"));
    }
    for (key, detail) in [
        ("default", "must be undefined to be structural"),
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        ("nullable", "must be false to be structural"),
        ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
        ("x-kubernetes-embedded-resource", "must be false to be structural"),
        ("x-kubernetes-int-or-string", "must be false to be structural"),
        ("x-kubernetes-list-map-keys", "must be empty to be structural"),
        ("x-kubernetes-list-type", "must be undefined to be structural"),
        ("x-kubernetes-map-type", "must be undefined to be structural"),
        ("x-kubernetes-validations", "must be empty to be structural"),
    ] {
        let set = match key {
            "x-kubernetes-list-map-keys" | "x-kubernetes-validations" => !v.list(key).is_empty(),
            "x-kubernetes-list-type" | "x-kubernetes-map-type" => v.get(key).is_some_and(|x| !x.is_null()),
            _ => !v.is_zero(key),
        };
        if set {
            errs.push(forbidden(key, detail));
        }
    }
    if v.properties().iter().any(|(k, _)| *k == "metadata") {
        errs.push(FieldError::forbidden(
            path.child("properties").key("metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// Every property and items a junctor of the root mentions must exist in the structural
/// part (`validateStructuralCompleteness`).
fn complete_value_validation(v: Raw<'_>, s: Option<Raw<'_>>, s_path: &Path, v_path: &Path, errs: &mut Vec<FieldError>) {
    let Some(s) = s else {
        errs.push(FieldError::required(s_path.clone(), format!("because it is defined in {v_path}")));
        return;
    };
    if let Some(not) = v.object("not") {
        complete_nested(not, Some(s), s_path, &v_path.child("not"), errs);
    }
    for junctor in ["allOf", "anyOf", "oneOf"] {
        for (i, branch) in v.list(junctor).into_iter().enumerate() {
            complete_nested(branch, Some(s), s_path, &v_path.child(junctor).index(i), errs);
        }
    }
}

fn complete_nested(v: Raw<'_>, s: Option<Raw<'_>>, s_path: &Path, v_path: &Path, errs: &mut Vec<FieldError>) {
    let Some(s) = s else {
        errs.push(FieldError::required(s_path.clone(), format!("because it is defined in {v_path}")));
        return;
    };
    complete_value_validation(v, Some(s), s_path, v_path, errs);
    if let Some(items) = v.object("items") {
        complete_nested(items, s.object("items"), &s_path.child("items"), &v_path.child("items"), errs);
    }
    let structural = s.properties();
    for (name, property) in v.properties() {
        let s_child = s_path.child("properties").key(name);
        let v_child = v_path.child("properties").key(name);
        match structural.iter().find(|(k, _)| *k == name) {
            Some((_, counterpart)) => complete_nested(property, Some(*counterpart), &s_child, &v_child, errs),
            None => errs.push(FieldError::required(s_child, format!("because it is defined in {v_child}"))),
        }
    }
}
