//! Cases of the schema algorithms: value validation, ratcheting, pruning, defaulting, list
//! types and ObjectMeta.

use serde_json::Value;

use crate::{Verdict, has_cel, same_errors, same_set};
use crd_apiserver::core::field::Path;
use crd_apiserver::schema::{self, Schema, compile, objectmeta};

fn schema_of(case: &Value) -> Option<Schema> {
    (!case["schema"].is_null()).then(|| compile(&case["schema"]))
}

pub fn openapi_validation(case: &Value, _: &Value) -> Verdict {
    if has_cel(&case["schema"]) {
        return Verdict::Skip("CEL");
    }
    let s = schema_of(case).unwrap_or_default();
    let got: Vec<String> =
        schema::openapi::validate(&s, &case["object"], &Path::nil()).iter().map(|e| e.to_string()).collect();
    if case["expect"]["ok"] == true {
        return if got.is_empty() { Verdict::Pass } else { Verdict::Fail(format!("unexpected {got:#?}")) };
    }
    same_set(got, &case["expect"]["errors_exact_set"])
}

pub fn ratcheting_unit(case: &Value, _: &Value) -> Verdict {
    let s = schema_of(case).unwrap_or_default();
    let errs = schema::openapi::validate_update(&s, &case["object"], &case["old_object"], &Path::nil());
    let ok = case["expect"]["ok"] == true;
    if errs.is_empty() == ok { Verdict::Pass } else { Verdict::Fail(format!("expected ok={ok}, got {errs:?}")) }
}

pub fn pruning(case: &Value, _: &Value) -> Verdict {
    let s = schema_of(case);
    let mut object = case["object"].clone();
    let paths = schema::prune::prune(&mut object, s.as_ref(), case["is_resource_root"] == true);
    if object != case["expect"]["object"] {
        return Verdict::Fail(format!("object {object}"));
    }
    same_set(paths, &case["expect"]["pruned_paths"])
}

pub fn defaulting(case: &Value, _: &Value) -> Verdict {
    let s = schema_of(case);
    let mut object = case["object"].clone();
    match case["operation"].as_str() {
        Some("Default") => schema::defaults::apply(&mut object, s.as_ref()),
        _ => schema::defaults::prune_nulls(&mut object, s.as_ref()),
    }
    if object == case["expect"]["object"] { Verdict::Pass } else { Verdict::Fail(format!("object {object}")) }
}

pub fn listtype(case: &Value, _: &Value) -> Verdict {
    let s = schema_of(case);
    let errs = schema::listtype::validate(&Path::new("root"), s.as_ref(), &case["object"]);
    same_errors(&errs, &case["expect"]["errors_exact_multiset"], str::to_string)
}

pub fn objectmeta(case: &Value, _: &Value) -> Verdict {
    let s = schema_of(case);
    let include_root = case["include_root"] == true;
    match case["test"].as_str() {
        Some("TestValidateEmbeddedResource") => {
            let errs = objectmeta::embedded::validate_resource(&Path::nil(), &case["object"]);
            same_errors(&errs, &case["expect"]["errors_exact_multiset"], str::to_string)
        }
        Some("TestValidate") => {
            let errs = objectmeta::embedded::validate(&Path::nil(), &case["object"], s.as_ref(), include_root);
            same_errors(&errs, &case["expect"]["errors_exact_multiset"], str::to_string)
        }
        _ => {
            let mut object = case["object"].clone();
            let drop = case["drop_invalid_fields"] == true;
            let result = objectmeta::embedded::coerce(&Path::nil(), &mut object, s.as_ref(), include_root, drop);
            match (result, case["expect"]["error"] == true) {
                (Err(_), true) => Verdict::Pass,
                (Err(e), false) => Verdict::Fail(format!("unexpected error {e}")),
                (Ok(_), true) => Verdict::Fail("expected an error".into()),
                (Ok(unknown), false) => {
                    if object != case["expect"]["object"] {
                        return Verdict::Fail(format!("object {object}"));
                    }
                    same_set(unknown, &case["expect"]["unknown_field_paths"])
                }
            }
        }
    }
}
