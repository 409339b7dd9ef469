//! Cases of definition checking: Kubernetes' CRD validation tables and the structural-schema
//! integration tests, run through crd-apiserver's definition checks.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use crate::{Verdict, has_cel, same_errors};
use crd_apiserver::core::field::{FieldError, Path};
use crd_apiserver::definitions::validate;
use crd_apiserver::schema::check::{self, Options};

/// Our errors for a v1 definition.
fn definition_errors(raw: &Value) -> Result<Vec<FieldError>, String> {
    let mut crd: CustomResourceDefinition = serde_json::from_value(raw.clone()).map_err(|e| e.to_string())?;
    validate::apply_defaults(&mut crd);
    Ok(validate::check(&crd, raw))
}

pub fn structural_schema(case: &Value, _: &Value) -> Verdict {
    if has_cel(&case["crd"]) {
        return Verdict::Skip("CEL");
    }
    let expect = &case["expect"];
    if case["test"].as_str().is_some_and(|t| t.ends_with("MigratedData")) {
        return migrated(case);
    }
    let errs: Vec<String> = match definition_errors(&case["crd"]) {
        Ok(errs) => errs.iter().map(|e| e.to_string()).collect(),
        Err(e) => vec![e],
    };
    if expect["create_ok"] == true {
        return if errs.is_empty() { Verdict::Pass } else { Verdict::Fail(format!("unexpected {errs:#?}")) };
    }
    let suffix = |s: &str| s.find("openAPIV3Schema").map_or(s.to_string(), |i| s[i..].to_string());
    let missing: Vec<String> = strings(&expect["errors"])
        .into_iter()
        .map(|s| suffix(&s))
        .filter(|s| !errs.iter().any(|e| e.contains(s)))
        .collect();
    let present: Vec<String> = strings(&expect["errors_absent"])
        .into_iter()
        .map(|s| suffix(&s))
        .filter(|s| errs.iter().any(|e| e.contains(s)))
        .collect();
    if errs.is_empty() {
        return Verdict::Fail("created, expected a refusal".into());
    }
    if missing.is_empty() && present.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail(format!("missing {missing:#?}\nshould be absent {present:#?}\ngot {errs:#?}"))
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_string)).collect()
}

/// The `NonStructuralSchema` condition of a definition stored without validation.
fn migrated(case: &Value) -> Verdict {
    let spec = &case["crd"]["spec"];
    let mut errs: Vec<String> = Vec::new();
    if spec["preserveUnknownFields"] != false {
        errs.push("spec.preserveUnknownFields: Invalid value: true: must be false".into());
    }
    for (i, version) in spec["versions"].as_array().into_iter().flatten().enumerate() {
        let schema = &version["schema"]["openAPIV3Schema"];
        if schema.is_null() {
            continue;
        }
        let path = Path::new("spec").child("versions").index(i).child("schema").child("openAPIV3Schema");
        match check::structural_violations(schema, &path) {
            Ok(v) => errs.extend(v.iter().map(|e| e.to_string())),
            Err(e) => return Verdict::Fail(format!("StructuralError: {e}")),
        }
    }
    let expect = &case["expect"];
    if (expect["nonstructural_condition"] == true) == errs.is_empty() {
        return Verdict::Fail(format!("condition mismatch: {errs:#?}"));
    }
    let missing: Vec<String> = strings(&expect["condition_message_contains"])
        .into_iter()
        .filter(|s| !errs.iter().any(|e| e.contains(s.as_str())))
        .collect();
    if missing.is_empty() { Verdict::Pass } else { Verdict::Fail(format!("missing {missing:#?}\ngot {errs:#?}")) }
}

fn options(raw: &Value) -> Options {
    let flag = |k: &str| raw[k] == true;
    Options {
        allow_defaults: flag("allowDefaults"),
        require_structural_schema: flag("requireStructuralSchema"),
        require_pruned_defaults: flag("requirePrunedDefaults"),
        require_valid_property_type: flag("requireValidPropertyType"),
        require_atomic_set_type: flag("requireAtomicSetType"),
        require_map_list_keys_map_set: flag("requireMapListKeysMapSetValidation"),
    }
}

pub fn crd_validation(case: &Value, _: &Value) -> Verdict {
    if has_cel(case) {
        return Verdict::Skip("CEL");
    }
    match case["operation"].as_str() {
        Some("validate-schema") => {
            let schema = &case["validation"]["openAPIV3Schema"];
            let errs = if schema.is_null() {
                Vec::new()
            } else {
                let prefix = Path::new(case["error_path_prefix"].as_str().unwrap_or("spec.validation"));
                check::validate_with(
                    schema,
                    &prefix,
                    case["status_subresource_enabled"] == true,
                    options(&case["options"]),
                )
            };
            same_errors(&errs, &case["expect"]["errors"], str::to_string)
        }
        Some("create") => {
            let errs = match definition_errors(&case["crd_v1_best_effort"]) {
                Ok(errs) => errs,
                Err(e) => return Verdict::Fail(format!("does not decode: {e}")),
            };
            let internal = &case["crd_internal"]["spec"];
            let mapped = map_to_internal(&errs, internal);
            same_errors(&mapped, &case["expect"]["errors"], str::to_string)
        }
        Some("update") => Verdict::Skip("definition updates"),
        Some("resolve-fieldPath") => Verdict::Skip("CEL field paths"),
        _ => Verdict::Skip("not schema rules"),
    }
}

/// Our v1 paths in the internal layout Kubernetes reports (a schema shared by every version
/// is `spec.validation`), each error once.
fn map_to_internal(errs: &[FieldError], internal: &Value) -> Vec<FieldError> {
    let mut out: Vec<FieldError> = Vec::new();
    for e in errs {
        let mut field = e.field.as_str().to_string();
        for (part, top) in [
            ("schema", "validation"),
            ("subresources", "subresources"),
            ("additionalPrinterColumns", "additionalPrinterColumns"),
        ] {
            if internal.get(top).is_some_and(|v| !v.is_null())
                && let Some(rest) = strip_version(&field, part)
            {
                field = format!("spec.{top}{rest}");
            }
        }
        field = field
            .replace("spec.conversion.webhook.clientConfig", "spec.conversion.webhookClientConfig")
            .replace("spec.conversion.webhook.conversionReviewVersions", "spec.conversion.conversionReviewVersions");
        let mapped = FieldError::new(e.kind, Path::new(&field), e.bad_value.clone(), e.detail.clone());
        if !out.iter().any(|o| o.to_string() == mapped.to_string()) {
            out.push(mapped);
        }
    }
    out
}

/// `spec.versions[N].<part>...` without its prefix up to `<part>`.
fn strip_version<'a>(field: &'a str, part: &str) -> Option<&'a str> {
    let rest = field.strip_prefix("spec.versions[")?;
    let close = rest.find(']')?;
    rest[close + 1..].strip_prefix('.')?.strip_prefix(part)
}
