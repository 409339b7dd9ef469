//! The checks Kubernetes makes on a version's `openAPIV3Schema` when a definition is created
//! (`validateCustomResourceDefinitionValidation`): the root with the status subresource,
//! structural rules, defaults, keywords and extensions; plus the warnings it returns
//! (unrecognized formats, sets of objects).
//!
//! Works on the schema as written (JSON), so that keywords the typed API drops are seen.

mod defaults;
mod keywords;
mod raw;
mod structural;

use serde_json::Value;

use super::compile::compile;
use super::formats;
use crate::core::field::{FieldError, Path};
use raw::Raw;

/// Keywords allowed at the root when the status subresource is enabled (Go field names, as
/// Kubernetes' message lists them, with the JSON key each stands for).
const ROOT_WITH_STATUS: [(&str, &str); 22] = [
    ("Description", "description"),
    ("Type", "type"),
    ("Format", "format"),
    ("Title", "title"),
    ("Maximum", "maximum"),
    ("ExclusiveMaximum", "exclusiveMaximum"),
    ("Minimum", "minimum"),
    ("ExclusiveMinimum", "exclusiveMinimum"),
    ("MaxLength", "maxLength"),
    ("MinLength", "minLength"),
    ("Pattern", "pattern"),
    ("MaxItems", "maxItems"),
    ("MinItems", "minItems"),
    ("UniqueItems", "uniqueItems"),
    ("MultipleOf", "multipleOf"),
    ("Required", "required"),
    ("Items", "items"),
    ("Properties", "properties"),
    ("ExternalDocs", "externalDocs"),
    ("Example", "example"),
    ("XPreserveUnknownFields", "x-kubernetes-preserve-unknown-fields"),
    ("XValidations", "x-kubernetes-validations"),
];

/// Which of Kubernetes' optional schema rules apply (`validationOptions`); definitions loaded
/// as `apiextensions.k8s.io/v1` get them all ([`Options::v1`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    pub allow_defaults: bool,
    pub require_structural_schema: bool,
    pub require_pruned_defaults: bool,
    pub require_valid_property_type: bool,
    pub require_atomic_set_type: bool,
    pub require_map_list_keys_map_set: bool,
}

impl Options {
    /// The rules for creating an `apiextensions.k8s.io/v1` definition.
    pub fn v1() -> Options {
        Options {
            allow_defaults: true,
            require_structural_schema: true,
            require_pruned_defaults: true,
            require_valid_property_type: true,
            require_atomic_set_type: true,
            require_map_list_keys_map_set: true,
        }
    }
}

/// Every problem with a version's schema. `path` is `spec.versions[i].schema`.
pub fn validate(schema: &Value, path: &Path, status_enabled: bool) -> Vec<FieldError> {
    validate_with(schema, path, status_enabled, Options::v1())
}

/// [`validate`] with a chosen set of rules.
pub fn validate_with(schema: &Value, path: &Path, status_enabled: bool, options: Options) -> Vec<FieldError> {
    let s = Raw::of(schema);
    let schema_path = path.child("openAPIV3Schema");
    let mut errs = Vec::new();
    if status_enabled {
        errs.extend(root_with_status(schema, &schema_path));
    }
    if s.flag("nullable") {
        errs.push(FieldError::forbidden(schema_path.child("nullable"), "nullable cannot be true at the root"));
    }
    let mut init_errs = Vec::new();
    if options.require_structural_schema {
        match structural::unsupported(s) {
            Some(e) => init_errs.push(FieldError::invalid(schema_path.clone(), "", e)),
            None => {
                let structural = structural::validate(s, &schema_path);
                if structural.is_empty() {
                    errs.extend(defaults::validate(&compile(schema), &schema_path, options.require_pruned_defaults));
                } else {
                    errs.extend(structural);
                }
            }
        }
    }
    errs.extend(keywords::validate(s, &schema_path, options));
    if errs.is_empty() {
        errs.extend(init_errs);
    }
    errs
}

/// The violations Kubernetes reports in a definition's `NonStructuralSchema` condition for a
/// schema at `path` (`...openAPIV3Schema`); `Err` when the schema cannot even be read as a
/// structural one.
pub fn structural_violations(schema: &Value, path: &Path) -> Result<Vec<FieldError>, String> {
    let s = Raw::of(schema);
    match structural::unsupported(s) {
        Some(e) => Err(e),
        None => Ok(structural::validate(s, path)),
    }
}

fn root_with_status(schema: &Value, path: &Path) -> Vec<FieldError> {
    let s = Raw::of(schema);
    // Go walks the fields in the order of its type; the first offender is reported.
    for key in s.keys() {
        let set = !s.is_zero(key);
        if !set {
            continue;
        }
        if key == "type" {
            if s.str("type") != "object" {
                return vec![FieldError::invalid(
                    path.child("type"),
                    s.str("type"),
                    "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                )];
            }
            continue;
        }
        if !ROOT_WITH_STATUS.iter().any(|(_, json)| *json == key) {
            let allowed: Vec<&str> = ROOT_WITH_STATUS.iter().map(|(go, _)| *go).collect();
            return vec![FieldError::invalid(
                path.clone(),
                schema.clone(),
                format!(
                    "only [{}] fields are allowed at the root of the schema if the status subresource is enabled",
                    allowed.join(" ")
                ),
            )];
        }
    }
    Vec::new()
}

/// The warnings Kubernetes returns when such a schema is created: formats it does not
/// recognize, and `set` lists of objects or lists.
pub fn warnings(schema: &Value) -> Vec<String> {
    let mut formats_found = Vec::new();
    let mut sets = std::collections::BTreeSet::new();
    collect_warnings(Raw::of(schema), &mut formats_found, &mut sets);
    formats_found
        .into_iter()
        .map(|f| format!("unrecognized format {}", crate::core::field::go_quote(&f)))
        .chain(sets)
        .collect()
}

fn collect_warnings(s: Raw<'_>, found: &mut Vec<String>, sets: &mut std::collections::BTreeSet<String>) {
    let format = s.str("format");
    if !format.is_empty() {
        let type_name = s.str("type");
        let known = match type_name {
            "" | "string" => formats::Format::by_name(format).is_some(),
            "integer" => matches!(format, "int32" | "int64"),
            "number" => matches!(format, "float" | "double"),
            _ => false,
        };
        if !known {
            found.push(format.to_string());
        }
    }
    if s.str("x-kubernetes-list-type") == "set"
        && let Some(items) = s.object("items")
        && matches!(items.str("type"), "object" | "array")
    {
        sets.insert(format!(
            "x-kubernetes-list-type: set for items of type {} is not supported by server-side apply or CEL validation rules",
            crate::core::field::go_quote(items.str("type"))
        ));
    }
    for (_, child) in s.children() {
        collect_warnings(child, found, sets);
    }
}

#[cfg(test)]
mod tests;
