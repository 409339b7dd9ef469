//! Cases of definition checking: Kubernetes' CRD validation tables and the structural-schema
//! integration tests, run through crd-apiserver's definition checks.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

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
            if let Some(reason) = inapplicable_to_v1(case) {
                return Verdict::Skip(reason);
            }
            let errs = match definition_errors(&case["crd_v1_best_effort"]) {
                Ok(errs) => errs,
                Err(e) => return Verdict::Fail(format!("does not decode: {e}")),
            };
            let internal = &case["crd_internal"]["spec"];
            let mapped = map_to_internal(&errs, internal);
            same_errors(&mapped, &without_status(&case["expect"]["errors"]), str::to_string)
        }
        Some("update") => Verdict::Skip("definition updates"),
        Some("resolve-fieldPath") => Verdict::Skip("CEL field paths"),
        _ => Verdict::Skip("not schema rules"),
    }
}

/// Why a create case of the internal (v1beta1-shaped) layout cannot be run as a v1 definition
/// file, if it cannot: the rule it tests has no v1 form, or its input lost what it tests.
fn inapplicable_to_v1(case: &Value) -> Option<&'static str> {
    let internal = &case["crd_internal"]["spec"];
    let expected: Vec<(&str, &str)> = case["expect"]["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| (e["type"].as_str().unwrap_or_default(), e["field"].as_str().unwrap_or_default()))
        .collect();
    let versions = internal["versions"].as_array().map(Vec::as_slice).unwrap_or_default();
    if versions.is_empty() {
        return Some("v1: only v1beta1 spec.version");
    }
    if expected.iter().any(|(_, f)| *f == "spec.version") {
        return Some("v1: v1beta1 spec.version");
    }
    // v1beta1 wants one top-level field instead of identical per-version ones; v1 has none.
    let per_version = ["schema", "subresources", "additionalPrinterColumns", "selectableFields"];
    if versions.len() > 1
        && expected.contains(&("FieldValueInvalid", "spec.versions"))
        && per_version.iter().any(|f| !versions[0][f].is_null() && versions.iter().all(|v| v[f] == versions[0][f]))
    {
        return Some("v1: identical per-version fields (v1beta1 top-level rule)");
    }
    // v1beta1 defaults preserveUnknownFields to true; a v1 definition cannot have it.
    if internal["preserveUnknownFields"].is_null()
        && expected.iter().any(|(_, f)| matches!(*f, "spec.conversion.strategy" | "spec.preserveUnknownFields"))
    {
        return Some("v1: v1beta1 default preserveUnknownFields=true");
    }
    if expected.iter().any(|(_, f)| f.starts_with("status.")) && without_status(&case["expect"]["errors"]) == json!([])
    {
        return Some("v1: status is the server's");
    }
    if expected.iter().any(|(t, f)| !in_input(internal, t, f)) {
        return Some("expected field absent from the transcribed input");
    }
    // Kubernetes creates such a definition but never establishes it (never serves it); a
    // definition file has no unserved state, so it is refused with the reason.
    if !internal["conversion"]["webhookClientConfig"]["caBundle"].is_null() && expected.is_empty() {
        return Some("not Established in Kubernetes: refused here");
    }
    None
}

/// Expected errors less those on `status`, which the server sets (Kubernetes clears a new
/// definition's status before validating it).
fn without_status(errors: &Value) -> Value {
    let kept: Vec<Value> = errors
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| !e["field"].as_str().unwrap_or_default().starts_with("status."))
        .cloned()
        .collect();
    Value::Array(kept)
}

/// Whether a schema error path (`spec.validation.openAPIV3Schema.properties[foo].type`) names
/// a node of the input's schema (the last one may be missing when the error says it is
/// required).
fn in_input(spec: &Value, kind: &str, field: &str) -> bool {
    let Some(rest) = field.strip_prefix("spec.validation.openAPIV3Schema") else { return true };
    let mut node = &spec["validation"]["openAPIV3Schema"];
    let segments: Vec<&str> = rest.split('.').filter(|s| !s.is_empty()).collect();
    for (i, segment) in segments.iter().enumerate() {
        let (key, index) = match segment.split_once('[') {
            Some((key, index)) => (key, Some(index.trim_end_matches(']'))),
            None => (*segment, None),
        };
        let last = i + 1 == segments.len();
        node = &node[key];
        if let Some(index) = index {
            node = match index.parse::<usize>() {
                Ok(n) => &node[n],
                Err(_) => &node[index],
            };
        }
        if node.is_null() && !last {
            return false;
        }
        if last && node.is_null() {
            return kind == "FieldValueRequired";
        }
    }
    true
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
            ("selectableFields", "selectableFields"),
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
        let mapped = FieldError { field: Path::new(&field), ..e.clone() };
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
