//! The checks of a definition's versions, as Kubernetes makes them at create time: names,
//! storage and served flags, schemas present, subresources, printer columns, selectable fields
//! (which must resolve in the version's schema) and deprecation warnings.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceSubresources,
};
use serde_json::Value;

use crate::core::field::{FieldError, Path};
use crate::core::names;

const COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
const COLUMN_FORMATS: &[&str] = &["byte", "date", "date-time", "double", "float", "int32", "int64", "password"];
/// Most selectable fields per version.
const MAX_SELECTABLE_FIELDS: usize = 8;

/// Every problem with the versions of a definition.
/// `schemas` are the versions' `openAPIV3Schema`s as values, in version order.
pub fn check_versions(
    crd: &CustomResourceDefinition,
    raw: &Value,
    schemas: &[Option<Value>],
    errs: &mut Vec<FieldError>,
) {
    let versions = &crd.spec.versions;
    let vp = Path::new("spec").child("versions");
    // Borrowed: a copy of every version's schema for each definition was a tenth of its checks
    // (issue 32); the few errors that show the list copy it then.
    let raw_versions = raw.pointer("/spec/versions").unwrap_or(&Value::Null);
    if versions.is_empty() {
        errs.push(FieldError::required(vp.clone(), "must have at least one version"));
    }
    let mut seen = std::collections::HashSet::new();
    let mut unique = true;
    // The schemas (as written) that passed the schema engine's rules, with their status flag.
    let mut passed: Vec<(&Value, bool)> = Vec::new();
    for (i, version) in versions.iter().enumerate() {
        let path = vp.index(i);
        if !seen.insert(version.name.as_str()) {
            unique = false;
        }
        let problems = names::dns1035_label(&version.name);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(path.child("name"), version.name.as_str(), problems.join(",")));
        }
        if version.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).is_none() {
            errs.push(FieldError::required(path.child("schema").child("openAPIV3Schema"), "schemas are required"));
        }
        // The schema rules of the schema engine, on the schema as written; a schema another
        // version has as well (with the same status subresource) and that passed is not checked
        // again: its errors would have been the same.
        if let Some(schema) = raw_versions.get(i).and_then(|v| v.pointer("/schema/openAPIV3Schema")) {
            let status = version.subresources.as_ref().is_some_and(|s| s.status.is_some());
            if !passed.iter().any(|&(other, with_status)| with_status == status && other == schema) {
                let found = crate::schema::check::validate(schema, &path.child("schema"), status);
                if found.is_empty() {
                    passed.push((schema, status));
                }
                errs.extend(found);
            }
        }
        if let Some(sub) = &version.subresources {
            check_subresources(sub, &path.child("subresources"), errs);
        }
        for (j, column) in version.additional_printer_columns.iter().flatten().enumerate() {
            check_column(column, &path.child("additionalPrinterColumns").index(j), errs);
        }
        check_selectable_fields(
            version.selectable_fields.iter().flatten().map(|f| f.json_path.as_str()),
            schemas.get(i).and_then(Option::as_ref),
            &path.child("selectableFields"),
            errs,
        );
        if let Some(warning) = &version.deprecation_warning {
            let wp = path.child("deprecationWarning");
            if version.deprecated != Some(true) {
                errs.push(FieldError::invalid(wp, warning.as_str(), "can only be set for deprecated versions"));
            } else if warning.is_empty() {
                errs.push(FieldError::invalid(wp, warning.as_str(), "must not be an empty string"));
            } else if warning.chars().count() > 256 {
                errs.push(FieldError::too_long(wp, 256));
            } else if let Some(index) = warning.chars().position(|c| c.is_control()) {
                errs.push(FieldError::invalid(
                    wp,
                    warning.as_str(),
                    format!(
                        "must only contain printable UTF-8 characters; non-printable character found at index {index}"
                    ),
                ));
            }
        }
    }
    if !unique {
        errs.push(FieldError::invalid(vp.clone(), raw_versions.clone(), "must contain unique version names"));
    }
    if !versions.is_empty() && versions.iter().filter(|v| v.storage).count() != 1 {
        errs.push(FieldError::invalid(
            vp.clone(),
            raw_versions.clone(),
            "must have exactly one version marked as storage version",
        ));
    }
    if !versions.is_empty() && !versions.iter().any(|v| v.served) {
        errs.push(FieldError::invalid(vp, raw_versions.clone(), "must have at least one served version"));
    }
}

/// `validateSimpleJSONPath`
fn simple_json_path(s: &str, path: &Path) -> Option<FieldError> {
    if s.is_empty() {
        Some(FieldError::invalid(path.clone(), s, "must not be empty"))
    } else if !s.starts_with('.') {
        Some(FieldError::invalid(path.clone(), s, "must be a simple json path starting with ."))
    } else {
        None
    }
}

fn check_subresources(sub: &CustomResourceSubresources, path: &Path, errs: &mut Vec<FieldError>) {
    let Some(scale) = &sub.scale else { return };
    for (field, value, prefix, what) in [
        ("scale.specReplicasPath", &scale.spec_replicas_path, ".spec.", "should be a json path under .spec"),
        ("scale.statusReplicasPath", &scale.status_replicas_path, ".status.", "should be a json path under .status"),
    ] {
        let p = path.child(field);
        if value.is_empty() {
            errs.push(FieldError::required(p, ""));
        } else if let Some(e) = simple_json_path(value, &p) {
            errs.push(e);
        } else if !value.starts_with(prefix) {
            errs.push(FieldError::invalid(p, value.as_str(), what));
        }
    }
    if let Some(selector) = scale.label_selector_path.as_deref().filter(|s| !s.is_empty()) {
        let p = path.child("scale.labelSelectorPath");
        if let Some(e) = simple_json_path(selector, &p) {
            errs.push(e);
        } else if !selector.starts_with(".spec.") && !selector.starts_with(".status.") {
            errs.push(FieldError::invalid(p, selector, "should be a json path under either .spec or .status"));
        }
    }
}

fn check_column(column: &CustomResourceColumnDefinition, path: &Path, errs: &mut Vec<FieldError>) {
    if column.name.is_empty() {
        errs.push(FieldError::required(path.child("name"), ""));
    }
    let types = format!("must be one of {}", COLUMN_TYPES.join(","));
    if column.type_.is_empty() {
        errs.push(FieldError::required(path.child("type"), types));
    } else if !COLUMN_TYPES.contains(&column.type_.as_str()) {
        errs.push(FieldError::invalid(path.child("type"), column.type_.as_str(), types));
    }
    if let Some(format) = column.format.as_deref().filter(|f| !f.is_empty())
        && !COLUMN_FORMATS.contains(&format)
    {
        errs.push(FieldError::invalid(
            path.child("format"),
            format,
            format!("must be one of {}", COLUMN_FORMATS.join(",")),
        ));
    }
    let jp = path.child("JSONPath");
    if column.json_path.is_empty() {
        errs.push(FieldError::required(jp, ""));
    } else if let Some(e) = simple_json_path(&column.json_path, &jp) {
        errs.push(e);
    }
}

/// Resolves a selectable field's JSON path in a version's schema (`ValidFieldPath` without
/// array notation): the field path it names and the schema node it reaches.
fn resolve_selectable<'s>(json_path: &str, schema: &'s Value) -> Result<(Vec<String>, &'s Value), String> {
    let mut node = schema;
    let mut names = Vec::new();
    let mut rest = json_path;
    while !rest.is_empty() {
        if rest.starts_with('[') {
            return Err("array notation is not allowed".into());
        }
        let Some(after_dot) = rest.strip_prefix('.') else {
            let token: String = rest.chars().take_while(|c| !matches!(c, '.' | '[' | ']')).collect();
            let token = if token.is_empty() { rest.chars().take(1).collect() } else { token };
            return Err(format!("expected [ or . but got: {token}"));
        };
        let end = after_dot.find(['.', '[', ']']).unwrap_or(after_dot.len());
        let (name, tail) = after_dot.split_at(end);
        if name.is_empty() {
            return Err(if tail.is_empty() {
                "unexpected end of JSON path".into()
            } else {
                "does not refer to a valid field".into()
            });
        }
        if let Some(properties) = node.get("properties").and_then(Value::as_object) {
            node = properties.get(name).ok_or("does not refer to a valid field")?;
        } else if let Some(additional) = node.get("additionalProperties").filter(|a| a.is_object()) {
            node = additional;
        } else {
            return Err("does not refer to a valid field".into());
        }
        names.push(name.to_string());
        rest = tail;
    }
    Ok((names, node))
}

fn check_selectable_fields<'a>(
    fields: impl Iterator<Item = &'a str>,
    schema: Option<&Value>,
    path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let mut seen = std::collections::HashSet::new();
    let mut has_fields = false;
    for (i, json_path) in fields.enumerate() {
        has_fields = true;
        let p = path.index(i).child("jsonPath");
        if json_path.is_empty() {
            errs.push(FieldError::required(p, ""));
            continue;
        }
        let Some(schema) = schema else { continue };
        let (names, node) = match resolve_selectable(json_path, schema) {
            Ok(found) => found,
            Err(why) => {
                errs.push(FieldError::invalid(p, json_path, format!("is an invalid path: {why}")));
                continue;
            }
        };
        if names.first().is_some_and(|n| n == "metadata") {
            errs.push(FieldError::invalid(p.clone(), json_path, "must not point to fields in metadata"));
        }
        let type_name = node.get("type").and_then(Value::as_str).unwrap_or_default();
        if !matches!(type_name, "string" | "boolean" | "integer") {
            errs.push(FieldError::invalid(
                p.clone(),
                json_path,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if !seen.insert(names.join(".")) {
            errs.push(FieldError::duplicate(p, json_path));
        }
    }
    if has_fields && schema.is_none() {
        errs.push(FieldError::invalid(
            path.clone(),
            "",
            "may only be set when `version.schema.openAPIV3Schema` is not included",
        ));
    }
    if seen.len() > MAX_SELECTABLE_FIELDS {
        errs.push(FieldError::too_many(path.clone(), Some(seen.len() as i64), MAX_SELECTABLE_FIELDS as i64));
    }
}

#[cfg(test)]
mod selectable_tests {
    use super::*;
    use serde_json::json;

    fn errors(paths: &[&str]) -> Vec<String> {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "color": {"type": "string", "enum": ["blue"]}, "size": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}}}});
        let mut errs = Vec::new();
        check_selectable_fields(paths.iter().copied(), Some(&schema), &Path::new("selectableFields"), &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn paths_must_resolve_to_scalars_outside_metadata() {
        assert!(errors(&[".spec.color", ".spec.size", ".spec.labels.team"]).is_empty());
        assert_eq!(
            errors(&[".spec.missing"]),
            [
                r#"selectableFields[0].jsonPath: Invalid value: ".spec.missing": is an invalid path: does not refer to a valid field"#
            ]
        );
        assert_eq!(
            errors(&[".spec.tags"]),
            [
                r#"selectableFields[0].jsonPath: Invalid value: ".spec.tags": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."#
            ]
        );
        assert_eq!(
            errors(&[".spec['color']"]),
            [
                r#"selectableFields[0].jsonPath: Invalid value: ".spec['color']": is an invalid path: array notation is not allowed"#
            ]
        );
        assert_eq!(
            errors(&[".metadata.name"]),
            [r#"selectableFields[0].jsonPath: Invalid value: ".metadata.name": must not point to fields in metadata"#]
        );
        assert_eq!(
            errors(&[".spec.color", ".spec.color"]),
            [r#"selectableFields[1].jsonPath: Duplicate value: ".spec.color""#]
        );
        assert_eq!(
            errors(&["spec.color"]),
            [
                r#"selectableFields[0].jsonPath: Invalid value: "spec.color": is an invalid path: expected [ or . but got: spec"#
            ]
        );
    }
}
