//! Embedded resources (`x-kubernetes-embedded-resource`): their `apiVersion`, `kind` and
//! `metadata` are implied by the schema; on decode the metadata goes through the ObjectMeta
//! type (unknown fields reported with their path), and on validation they are checked like a
//! resource's own (names as path segments, a namespace only when given).

use serde_json::Value;

use super::rules::{self, NameRule};
use super::typed;
use crate::core::field::{FieldError, Path};
use crate::schema::node::Schema;

/// Coerces the embedded resources of an object found at `path`; with `resource_root`, the
/// object itself counts as one. Returns the unknown metadata fields; an ill-typed
/// `apiVersion`, `kind` or `metadata` is an error unless `drop_invalid`, which removes it.
pub fn coerce(
    path: &Path,
    object: &mut Value,
    s: Option<&Schema>,
    resource_root: bool,
    drop_invalid: bool,
) -> Result<Vec<String>, FieldError> {
    let mut unknown = Vec::new();
    let empty = Schema::default();
    let s = if resource_root { Some(s.unwrap_or(&empty)) } else { s };
    walk_coerce(path, object, s, resource_root, drop_invalid, &mut unknown)?;
    unknown.sort();
    Ok(unknown)
}

fn walk_coerce(
    path: &Path,
    x: &mut Value,
    s: Option<&Schema>,
    resource_root: bool,
    drop_invalid: bool,
    unknown: &mut Vec<String>,
) -> Result<(), FieldError> {
    let Some(s) = s.filter(|s| s.has_embedded || resource_root) else { return Ok(()) };
    match x {
        Value::Object(map) => {
            if s.embedded_resource || resource_root {
                for field in ["apiVersion", "kind"] {
                    match map.get(field) {
                        Some(v) if !v.is_string() && drop_invalid => {
                            map.remove(field);
                        }
                        Some(v) if !v.is_string() => {
                            return Err(FieldError::invalid(path.child(field), v.clone(), "must be a string"));
                        }
                        _ => {}
                    }
                }
                if let Some(meta) = map.get_mut("metadata") {
                    let prefix = path.child("metadata").to_string();
                    match typed::coerce(meta, &prefix, drop_invalid) {
                        Ok(coerced) => {
                            unknown.extend(coerced.unknown);
                            *meta = Value::Object(coerced.meta);
                        }
                        Err(e) if !drop_invalid => {
                            return Err(FieldError::invalid(path.child("metadata"), meta.clone(), e));
                        }
                        Err(_) => {}
                    }
                }
            }
            for (key, value) in map.iter_mut() {
                if let Some(property) = s.properties.get(key) {
                    walk_coerce(&path.child(key), value, Some(property), false, drop_invalid, unknown)?;
                } else if s.additional_properties.is_some() {
                    walk_coerce(&path.key(key), value, s.additional_schema(), false, drop_invalid, unknown)?;
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                walk_coerce(&path.index(i), item, s.items(), false, drop_invalid, unknown)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Validates the embedded resources of an object (`objectmeta.Validate`); with
/// `resource_root`, the object itself counts as one.
pub fn validate(path: &Path, object: &Value, s: Option<&Schema>, resource_root: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = Schema::default();
    let s = if resource_root { Some(s.unwrap_or(&empty)) } else { s };
    walk_validate(path, object, s, resource_root, &mut errs);
    errs
}

fn walk_validate(path: &Path, x: &Value, s: Option<&Schema>, resource_root: bool, errs: &mut Vec<FieldError>) {
    let Some(s) = s.filter(|s| s.has_embedded || resource_root) else { return };
    match x {
        Value::Object(map) => {
            if s.embedded_resource || resource_root {
                errs.extend(validate_resource(path, x));
            }
            for (key, value) in map {
                if let Some(property) = s.properties.get(key) {
                    walk_validate(&path.child(key), value, Some(property), false, errs);
                } else if s.additional_properties.is_some() {
                    walk_validate(&path.key(key), value, s.additional_schema(), false, errs);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk_validate(&path.index(i), item, s.items(), false, errs);
            }
        }
        _ => {}
    }
}

/// One embedded resource: `apiVersion` and `kind` present and well formed, metadata valid.
pub fn validate_resource(path: &Path, x: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Value::Object(map) = x else { return errs };
    for field in ["apiVersion", "kind"] {
        if !map.contains_key(field) {
            errs.push(FieldError::required(path.child(field), ""));
        }
    }
    for (key, value) in map {
        let at = path.child(key);
        match key.as_str() {
            "apiVersion" => match value.as_str() {
                None => errs.push(FieldError::invalid(at, value.clone(), "must be a string")),
                Some("") => errs.push(FieldError::invalid(at, "", "must not be empty")),
                Some(v) if v.matches('/').count() > 1 => {
                    errs.push(FieldError::invalid(at, v, format!("unexpected GroupVersion string: {v}")))
                }
                Some(_) => {}
            },
            "kind" => match value.as_str() {
                None => errs.push(FieldError::invalid(at, value.clone(), "must be a string")),
                Some("") => errs.push(FieldError::invalid(at, "", "must not be empty")),
                Some(kind) => {
                    let problems = crate::core::names::dns1035_label(&kind.to_lowercase());
                    if !problems.is_empty() {
                        let detail = format!("may have mixed case, but should otherwise match: {}", problems.join(","));
                        errs.push(FieldError::invalid(at, kind, detail));
                    }
                }
            },
            "metadata" => match typed::coerce(value, &at.to_string(), false) {
                Err(e) => errs.push(FieldError::invalid(at, value.clone(), e)),
                Ok(coerced) => {
                    let mut meta = coerced.meta;
                    meta.entry("name").or_insert_with(|| Value::String("fakename".into()));
                    let namespaced = meta.get("namespace").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
                    errs.extend(rules::validate_create(&meta, NameRule::PathSegment, namespaced, &at));
                }
            },
            _ => {}
        }
    }
    errs
}
