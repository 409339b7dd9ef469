//! The checks Kubernetes makes on a CustomResourceDefinition at create time, with its field
//! paths and messages: metadata, group, scope, names, conversion, each version's schema and
//! CEL rules (the versions' other rules are in `versions`).
//!
//! Paths use the v1 layout (`spec.versions[0]...`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use crate::core::field::{FieldError, Path};
use crate::core::names;

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
    let schemas: Vec<Option<Value>> = crd.spec.versions.iter().map(version_schema).collect();
    check_with_schemas(crd, raw, &schemas)
}

/// [`check`] with each version's `openAPIV3Schema` as a value (in version order), as the
/// loader decoded them once. CEL rules are compiled to be checked, then dropped: a version
/// compiles them again on first use.
pub fn check_with_schemas(crd: &CustomResourceDefinition, raw: &Value, schemas: &[Option<Value>]) -> Vec<FieldError> {
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
    super::versions::check_versions(crd, raw, schemas, &mut errs);
    check_cel(schemas, &mut errs); // CEL (issue 5)
    if spec.preserve_unknown_fields == Some(true) {
        errs.push(FieldError::invalid(
            sp.child("preserveUnknownFields"),
            true,
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    if let Some(conversion) = &spec.conversion {
        super::conversion::check(conversion, spec.preserve_unknown_fields == Some(true), &mut errs);
    }
    errs
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

// --- CEL (issue 5): compile errors refuse the definition; the rules are built once.
/// A version's `openAPIV3Schema` as JSON.
pub fn version_schema(
    v: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion,
) -> Option<Value> {
    v.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).and_then(|s| serde_json::to_value(s).ok())
}

/// Each version's CEL rules compiled; a schema an earlier version has as well, whose rules
/// compiled, is not compiled again (issue 32: versions often share their schema).
fn check_cel(schemas: &[Option<Value>], errs: &mut Vec<FieldError>) {
    let mut compiled: Vec<&Value> = Vec::new();
    for (i, schema) in schemas.iter().enumerate() {
        if let Some(schema) = schema {
            if compiled.contains(&schema) {
                continue;
            }
            let path = Path::new("spec").child("versions").index(i).child("schema").child("openAPIV3Schema");
            let found = crate::cel::Rules::compile(schema, &path).1;
            if found.is_empty() {
                compiled.push(schema);
            }
            errs.extend(found);
        }
    }
}

// --- end CEL

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::json;

    /// The seeds' CronTab definition, with one version and an empty object schema.
    pub(in crate::definitions) fn crontab() -> Value {
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
    fn versions_sharing_a_schema_each_report_its_errors() {
        // A schema two versions share is checked once when it passes; when it fails, each
        // version's errors carry that version's path.
        let mut raw = crontab();
        let bad = json!({"type": "object", "properties": {"a": {"type": "strng"}},
            "x-kubernetes-validations": [{"rule": "self.a >"}]});
        raw["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = bad.clone();
        let second = json!({"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": bad}});
        raw["spec"]["versions"].as_array_mut().unwrap().push(second);
        let errs = errors_of(raw.clone());
        for i in 0..2 {
            let at = format!("spec.versions[{i}].schema.openAPIV3Schema");
            assert!(
                errs.iter().any(|e| e.starts_with(&format!("{at}.properties[a].type: Unsupported value"))),
                "{errs:?}"
            );
            assert!(
                errs.iter().any(|e| e.starts_with(&format!("{at}.x-kubernetes-validations[0].rule: "))),
                "{errs:?}"
            );
        }
        let good = json!({"type": "object", "properties": {"a": {"type": "string"}}, "minProperties": 1,
            "x-kubernetes-validations": [{"rule": "self.a != ''"}]});
        raw["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = good.clone();
        raw["spec"]["versions"][1]["schema"]["openAPIV3Schema"] = good;
        assert_eq!(errors_of(raw.clone()), Vec::<String>::new());
        // The same schema with a status subresource in one version only is checked again there.
        raw["spec"]["versions"][1]["subresources"] = json!({"status": {}});
        let errs = errors_of(raw);
        assert!(!errs.is_empty() && errs.iter().all(|e| e.starts_with("spec.versions[1].schema")), "{errs:?}");
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
}
