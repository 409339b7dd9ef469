//! The checks Kubernetes makes on a CustomResourceDefinition at create time, with its field
//! paths and messages, and the construction of the served model from a valid definition.
//!
//! Paths use the v1 layout (`spec.versions[0]...`).

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceSubresources,
};
use serde_json::Value;

use super::model::{Definition, Scale, Scope, Version};
use super::version_order;
use crate::core::field::{FieldError, Path};
use crate::core::names;

const COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
const COLUMN_FORMATS: &[&str] = &["byte", "date", "date-time", "double", "float", "int32", "int64", "password"];
/// Most selectable fields per version.
const MAX_SELECTABLE_FIELDS: usize = 8;

/// Fills in what Kubernetes' v1 defaulting fills in: singular, listKind.
pub fn apply_defaults(crd: &mut CustomResourceDefinition) {
    let names = &mut crd.spec.names;
    if names.singular.as_deref().unwrap_or_default().is_empty() {
        names.singular = Some(names.kind.to_lowercase());
    }
    if names.list_kind.as_deref().unwrap_or_default().is_empty() && !names.kind.is_empty() {
        names.list_kind = Some(format!("{}List", names.kind));
    }
}

/// Every problem with a (defaulted) definition. `raw` is the manifest as written, used to
/// print offending values as they appeared.
pub fn check(crd: &CustomResourceDefinition, raw: &Value) -> Vec<FieldError> {
    check_and_compile(crd, raw).0
}

/// Each version's compiled CEL rules (`None`: the version has none), in version order.
pub type CompiledRules = Vec<Option<Arc<crate::cel::Rules>>>;

/// [`check`], also returning the CEL rules it compiled, for [`build_compiled`]: compiling
/// them is most of the cost of loading a definition, and is done once.
pub fn check_and_compile(crd: &CustomResourceDefinition, raw: &Value) -> (Vec<FieldError>, CompiledRules) {
    let mut errs = Vec::new();
    check_metadata(crd, &mut errs);
    let spec = &crd.spec;
    let sp = Path::new("spec");
    if spec.group.is_empty() {
        errs.push(FieldError::required(sp.child("group"), ""));
    } else {
        let problems = names::dns1123_subdomain(&spec.group);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(sp.child("group"), spec.group.as_str(), problems.join(",")));
        } else if spec.group.split('.').count() < 2 {
            errs.push(FieldError::invalid(
                sp.child("group"),
                spec.group.as_str(),
                "should be a domain with at least one dot",
            ));
        }
    }
    match spec.scope.as_str() {
        "Cluster" | "Namespaced" => {}
        "" => errs.push(FieldError::required(sp.child("scope"), "")),
        other => errs.push(FieldError::not_supported(sp.child("scope"), other, &["Cluster", "Namespaced"])),
    }
    check_names(crd, &mut errs);
    check_versions(crd, raw, &mut errs);
    let rules = check_cel(crd, &mut errs); // CEL (issue 5)
    if spec.preserve_unknown_fields == Some(true) {
        errs.push(FieldError::invalid(
            sp.child("preserveUnknownFields"),
            true,
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    if let Some(conversion) = &spec.conversion {
        match conversion.strategy.as_str() {
            "None" | "Webhook" => {}
            "" => errs.push(FieldError::required(sp.child("conversion").child("strategy"), "")),
            other => errs.push(FieldError::not_supported(
                sp.child("conversion").child("strategy"),
                other,
                &["None", "Webhook"],
            )),
        }
        if conversion.strategy == "Webhook" {
            // Serving a Webhook definition with None semantics would silently corrupt objects.
            errs.push(FieldError::forbidden(
                sp.child("conversion").child("strategy"),
                "conversion webhooks are not supported by this server; use strategy None",
            ));
        }
        if conversion.strategy == "None" && conversion.webhook.is_some() {
            errs.push(FieldError::forbidden(
                sp.child("conversion").child("webhookClientConfig"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
    (errs, rules)
}

fn check_metadata(crd: &CustomResourceDefinition, errs: &mut Vec<FieldError>) {
    let name = crd.metadata.name.as_deref().unwrap_or_default();
    let path = Path::new("metadata").child("name");
    if name.is_empty() {
        errs.push(FieldError::required(path, "name or generateName is required"));
        return;
    }
    for problem in names::dns1123_subdomain(name) {
        errs.push(FieldError::invalid(path.clone(), name, problem));
    }
    if name != format!("{}.{}", crd.spec.names.plural, crd.spec.group) {
        errs.push(FieldError::invalid(path, name, "must be spec.names.plural+\".\"+spec.group"));
    }
    let group = crd.spec.group.as_str();
    let protected = ["k8s.io", "kubernetes.io"].iter().any(|d| group == *d || group.ends_with(&format!(".{d}")));
    if protected {
        let key = "api-approved.kubernetes.io";
        let annotation = crd.metadata.annotations.as_ref().and_then(|a| a.get(key));
        let path = Path::new("metadata").child("annotations").key(key);
        match annotation {
            None => errs.push(FieldError::required(
                path,
                format!("protected groups must have approval annotation \"{key}\", see https://github.com/kubernetes/enhancements/pull/1111"),
            )),
            Some(v) if !(v.starts_with("unapproved") || v.starts_with("https://") || v.starts_with("http://")) => {
                errs.push(FieldError::invalid(
                    path,
                    v.as_str(),
                    format!("protected groups must have approval annotation \"{key}\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"),
                ))
            }
            Some(_) => {}
        }
    }
}

fn check_names(crd: &CustomResourceDefinition, errs: &mut Vec<FieldError>) {
    let names = &crd.spec.names;
    let np = Path::new("spec").child("names");
    let singular = names.singular.as_deref().unwrap_or_default();
    let list_kind = names.list_kind.as_deref().unwrap_or_default();
    let label = |path: Path, value: &str, errs: &mut Vec<FieldError>| {
        let problems = names::dns1035_label(value);
        if !value.is_empty() && !problems.is_empty() {
            errs.push(FieldError::invalid(path, value, problems.join(",")));
        }
    };
    label(np.child("plural"), &names.plural, errs);
    label(np.child("singular"), singular, errs);
    for (field, value) in [("kind", names.kind.as_str()), ("listKind", list_kind)] {
        let problems = names::dns1035_label(&value.to_lowercase());
        if !value.is_empty() && !problems.is_empty() {
            errs.push(FieldError::invalid(
                np.child(field),
                value,
                format!("may have mixed case, but should otherwise match: {}", problems.join(",")),
            ));
        }
    }
    for (i, short) in names.short_names.iter().flatten().enumerate() {
        label(np.child("shortNames").index(i), short, errs);
    }
    if !names.kind.is_empty() && names.kind == list_kind {
        errs.push(FieldError::invalid(np.child("listKind"), list_kind, "kind and listKind may not be the same"));
    }
    for (i, category) in names.categories.iter().flatten().enumerate() {
        label(np.child("categories").index(i), category, errs);
    }
    for (field, value) in [
        ("plural", names.plural.as_str()),
        ("singular", singular),
        ("kind", names.kind.as_str()),
        ("listKind", list_kind),
    ] {
        if value.is_empty() {
            errs.push(FieldError::required(np.child(field), ""));
        }
    }
}

fn check_versions(crd: &CustomResourceDefinition, raw: &Value, errs: &mut Vec<FieldError>) {
    let versions = &crd.spec.versions;
    let vp = Path::new("spec").child("versions");
    let raw_versions = raw.pointer("/spec/versions").cloned().unwrap_or(Value::Null);
    if versions.is_empty() {
        errs.push(FieldError::required(vp.clone(), "must have at least one version"));
    }
    let mut seen = std::collections::HashSet::new();
    let mut unique = true;
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
        // The schema rules of the schema engine, on the schema as written.
        if let Some(schema) = raw_versions.get(i).and_then(|v| v.pointer("/schema/openAPIV3Schema")) {
            let status = version.subresources.as_ref().is_some_and(|s| s.status.is_some());
            errs.extend(crate::schema::check::validate(schema, &path.child("schema"), status));
        }
        if let Some(sub) = &version.subresources {
            check_subresources(sub, &path.child("subresources"), errs);
        }
        for (j, column) in version.additional_printer_columns.iter().flatten().enumerate() {
            check_column(column, &path.child("additionalPrinterColumns").index(j), errs);
        }
        check_selectable_fields(
            version.selectable_fields.iter().flatten().map(|f| f.json_path.as_str()),
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
        errs.push(FieldError::invalid(vp, raw_versions, "must have at least one served version"));
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

fn check_selectable_fields<'a>(fields: impl Iterator<Item = &'a str>, path: &Path, errs: &mut Vec<FieldError>) {
    let mut seen = std::collections::HashSet::new();
    let mut count = 0;
    for (i, json_path) in fields.enumerate() {
        count += 1;
        let p = path.index(i).child("jsonPath");
        if json_path.is_empty() {
            errs.push(FieldError::required(p, ""));
            continue;
        }
        if let Some(e) = simple_json_path(json_path, &p) {
            errs.push(e);
            continue;
        }
        if json_path.starts_with(".metadata") {
            errs.push(FieldError::invalid(p.clone(), json_path, "must not point to fields in metadata"));
        }
        if !seen.insert(json_path) {
            errs.push(FieldError::duplicate(p, json_path));
        }
    }
    if count > MAX_SELECTABLE_FIELDS {
        errs.push(FieldError::too_many(path.clone(), Some(count as i64), MAX_SELECTABLE_FIELDS as i64));
    }
}

/// The served model of a definition that passed [`check`].
// --- CEL (issue 5): compile errors refuse the definition; the rules are built once.
fn version_schema(
    v: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion,
) -> Option<Value> {
    v.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).and_then(|s| serde_json::to_value(s).ok())
}

fn check_cel(crd: &CustomResourceDefinition, errs: &mut Vec<FieldError>) -> CompiledRules {
    let mut compiled = Vec::new();
    for (i, v) in crd.spec.versions.iter().enumerate() {
        let rules = version_schema(v).and_then(|schema| {
            let path = Path::new("spec").child("versions").index(i).child("schema").child("openAPIV3Schema");
            let (rules, problems) = crate::cel::Rules::compile(&schema, &path);
            errs.extend(problems);
            (!rules.is_empty()).then(|| Arc::new(rules))
        });
        compiled.push(rules);
    }
    compiled
}

fn compiled_rules(
    v: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion,
) -> Option<Arc<crate::cel::Rules>> {
    let (rules, _) = crate::cel::Rules::compile(&version_schema(v)?, &Path::nil());
    (!rules.is_empty()).then(|| Arc::new(rules))
}
// --- end CEL

pub fn build(crd: CustomResourceDefinition, source: String) -> Definition {
    let rules = crd.spec.versions.iter().map(compiled_rules).collect();
    build_compiled(crd, source, rules)
}

/// [`build`] with the CEL rules [`check_and_compile`] compiled.
pub fn build_compiled(crd: CustomResourceDefinition, source: String, mut rules: CompiledRules) -> Definition {
    let spec = &crd.spec;
    let kind = spec.names.kind.clone();
    rules.resize(spec.versions.len(), None);
    let mut versions: Vec<Arc<Version>> = spec
        .versions
        .iter()
        .zip(rules)
        .map(|(v, cel_rules)| {
            let subresources = v.subresources.as_ref();
            let openapi_schema = v
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .and_then(|s| serde_json::to_value(s).ok());
            let schema = openapi_schema.as_ref().map(|raw| Arc::new(crate::schema::compile(raw)));
            let openapi_schema = openapi_schema.and_then(|raw| serde_json::to_string(&raw).ok()).map(Arc::from);
            Arc::new(Version {
                name: v.name.clone(),
                served: v.served,
                storage: v.storage,
                deprecated: v.deprecated.unwrap_or(false),
                deprecation_warning: None,
                openapi_schema,
                schema,
                printer_columns: v.additional_printer_columns.clone().unwrap_or_default(),
                status_subresource: subresources.is_some_and(|s| s.status.is_some()),
                scale: subresources.and_then(|s| s.scale.as_ref()).map(|s| Scale {
                    spec_replicas_path: s.spec_replicas_path.clone(),
                    status_replicas_path: s.status_replicas_path.clone(),
                    label_selector_path: s.label_selector_path.clone().filter(|p| !p.is_empty()),
                }),
                selectable_fields: v
                    .selectable_fields
                    .iter()
                    .flatten()
                    .map(|f| f.json_path.trim_start_matches('.').to_string())
                    .collect(),
                // --- CEL (issue 5)
                cel_rules,
                // --- end CEL
                field_schema: crate::fieldmanager::Schema::of_version(v),
            })
        })
        .collect();
    // Deprecation warnings name the newest non-deprecated served version, if any is newer.
    let warnings: Vec<Option<String>> = spec
        .versions
        .iter()
        .map(|v| {
            if v.deprecated != Some(true) {
                return None;
            }
            if let Some(custom) = &v.deprecation_warning {
                return Some(custom.clone());
            }
            let mut text = format!("{}/{} {} is deprecated", spec.group, v.name, kind);
            let replacement = spec
                .versions
                .iter()
                .filter(|o| o.served && o.deprecated != Some(true))
                .filter(|o| version_order::by_priority(&o.name, &v.name).is_lt())
                .min_by(|a, b| version_order::by_priority(&a.name, &b.name));
            if let Some(r) = replacement {
                text.push_str(&format!("; use {}/{} {}", spec.group, r.name, kind));
            }
            Some(text)
        })
        .collect();
    for (version, warning) in versions.iter_mut().zip(warnings) {
        if warning.is_some() {
            Arc::make_mut(version).deprecation_warning = warning;
        }
    }
    let storage = versions.iter().find(|v| v.storage).or(versions.first()).cloned().unwrap_or_else(|| {
        Arc::new(Version {
            name: String::new(),
            served: false,
            storage: true,
            deprecated: false,
            deprecation_warning: None,
            openapi_schema: None,
            schema: None,
            printer_columns: Vec::new(),
            status_subresource: false,
            scale: None,
            selectable_fields: Vec::new(),
            cel_rules: None, // CEL (issue 5)
            field_schema: Default::default(),
        })
    });
    Definition {
        name: crd.metadata.name.clone().unwrap_or_default(),
        source,
        group: spec.group.clone(),
        plural: spec.names.plural.clone(),
        singular: spec.names.singular.clone().unwrap_or_default(),
        kind,
        list_kind: spec.names.list_kind.clone().unwrap_or_default(),
        short_names: spec.names.short_names.clone().unwrap_or_default(),
        categories: spec.names.categories.clone().unwrap_or_default(),
        scope: if spec.scope == "Cluster" { Scope::Cluster } else { Scope::Namespaced },
        versions,
        storage,
        warnings: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crontab() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {
                "group": "stable.example.com",
                "scope": "Namespaced",
                "names": {"plural": "crontabs", "kind": "CronTab", "shortNames": ["ct"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]
            }
        })
    }

    fn errors_of(raw: Value) -> Vec<String> {
        let mut crd: CustomResourceDefinition = serde_json::from_value(raw.clone()).unwrap();
        apply_defaults(&mut crd);
        check(&crd, &raw).iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn the_seed_definition_is_valid() {
        assert_eq!(errors_of(crontab()), Vec::<String>::new());
    }

    #[test]
    fn name_must_be_plural_dot_group() {
        let mut raw = crontab();
        raw["metadata"]["name"] = json!("crontab.stable.example.com");
        assert_eq!(
            errors_of(raw),
            vec![
                r#"metadata.name: Invalid value: "crontab.stable.example.com": must be spec.names.plural+"."+spec.group"#
            ]
        );
    }

    #[test]
    fn scope_and_storage_rules() {
        let mut raw = crontab();
        raw["spec"]["scope"] = json!("Global");
        raw["spec"]["versions"][0]["storage"] = json!(false);
        let errs = errors_of(raw);
        assert!(
            errs.contains(
                &r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#.to_string()
            ),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.starts_with("spec.versions: Invalid value: [")
                && e.ends_with("must have exactly one version marked as storage version")),
            "{errs:?}"
        );
    }

    #[test]
    fn names_are_labels() {
        let mut raw = crontab();
        raw["spec"]["names"]["shortNames"] = json!(["C_T"]);
        raw["spec"]["names"]["kind"] = json!("Cron_Tab");
        raw["metadata"]["name"] = json!("crontabs.stable.example.com");
        let errs = errors_of(raw);
        assert!(
            errs.iter().any(|e| e.starts_with(r#"spec.names.shortNames[0]: Invalid value: "C_T": a DNS-1035 label"#)),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.starts_with(r#"spec.names.kind: Invalid value: "Cron_Tab": may have mixed case, but should otherwise match: a DNS-1035 label"#)), "{errs:?}");
    }

    #[test]
    fn unserved_everywhere_and_missing_schema() {
        let mut raw = crontab();
        raw["spec"]["versions"][0]["served"] = json!(false);
        raw["spec"]["versions"][0].as_object_mut().unwrap().remove("schema");
        let errs = errors_of(raw);
        assert!(
            errs.contains(&"spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required".to_string()),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.ends_with("must have at least one served version")), "{errs:?}");
    }

    #[test]
    fn scale_paths_and_columns() {
        let mut raw = crontab();
        raw["spec"]["versions"][0]["subresources"] =
            json!({"scale": {"specReplicasPath": ".status.x", "statusReplicasPath": "status.y"}});
        raw["spec"]["versions"][0]["additionalPrinterColumns"] =
            json!([{"name": "X", "type": "map", "jsonPath": ".spec.x"}]);
        let errs = errors_of(raw);
        assert!(errs.contains(&r#"spec.versions[0].subresources.scale.specReplicasPath: Invalid value: ".status.x": should be a json path under .spec"#.to_string()), "{errs:?}");
        assert!(errs.contains(&r#"spec.versions[0].subresources.scale.statusReplicasPath: Invalid value: "status.y": must be a simple json path starting with ."#.to_string()), "{errs:?}");
        assert!(errs.contains(&r#"spec.versions[0].additionalPrinterColumns[0].type: Invalid value: "map": must be one of boolean,date,integer,number,string"#.to_string()), "{errs:?}");
    }

    #[test]
    fn deprecation_warnings_name_the_newer_version() {
        let mut raw = crontab();
        raw["spec"]["versions"] = json!([
            {"name": "v1alpha1", "served": true, "storage": false, "deprecated": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v1beta2", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v1beta3", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
        ]);
        let mut crd: CustomResourceDefinition = serde_json::from_value(raw).unwrap();
        apply_defaults(&mut crd);
        let def = build(crd, "test".into());
        assert_eq!(
            def.version("v1alpha1").unwrap().deprecation_warning.as_deref(),
            Some("stable.example.com/v1alpha1 CronTab is deprecated; use stable.example.com/v1beta3 CronTab")
        );
        assert_eq!(def.storage.name, "v1beta2");
        assert_eq!(def.list_kind, "CronTabList");
        assert_eq!(def.singular, "crontab");
    }
}
