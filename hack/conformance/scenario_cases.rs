//! Scenario cases: ratcheting across schema changes (Kubernetes' integration test, replayed
//! through the write path) and the validation cases of the HTTP integration tests.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::{Verdict, has_cel};
use crd_apiserver::api::objects::{self, Placement};
use crd_apiserver::api::strict::Tracked;
use crd_apiserver::api::write::{self, FieldValidation};
use crd_apiserver::cli::validate::{Outcome, validate_one};
use crd_apiserver::definitions::load::definition_from_value;
use crd_apiserver::definitions::registry::Served;

fn served(crd: &Value, version: &str) -> Result<Served, String> {
    let definition = definition_from_value(crd.clone(), "case").map_err(|p| p.to_string())?;
    let definition = Arc::new(definition);
    let version = definition.version(version).cloned().ok_or("no such version")?;
    Ok(Served::new(definition, version))
}

pub fn integration_http(case: &Value, _: &Value) -> Verdict {
    if case["source_file"] != "test/integration/validation_test.go" {
        return Verdict::Skip("not schema validation");
    }
    let path = case["request"]["path"].as_str().unwrap_or_default();
    let version = path.split('/').nth(3).unwrap_or_default();
    // Some cases name Kubernetes' test fixture instead of spelling it out.
    let crd = if case["crd"].is_string() { noxu_fixture() } else { case["crd"].clone() };
    let served = match served(&crd, version) {
        Ok(s) => s,
        Err(e) => return Verdict::Fail(e),
    };
    let body = Tracked { value: case["request"]["body"].clone(), duplicates: Vec::new() };
    let expect = &case["expect"];
    let Outcome::Refused(error, _) = validate_one(&served, body, None, FieldValidation::Warn) else {
        return Verdict::Fail("accepted".into());
    };
    if expect["http_status"].as_u64() != Some(u64::from(error.code)) {
        return Verdict::Fail(format!("code {} {}", error.code, error.message));
    }
    if let Some(reason) = expect["reason"].as_str()
        && reason != error.reason
    {
        return Verdict::Fail(format!("reason {}", error.reason));
    }
    let missing: Vec<&str> = expect["error_message_contains"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|s| !error.message.contains(s))
        .collect();
    if missing.is_empty() { Verdict::Pass } else { Verdict::Fail(format!("missing {missing:?} in {}", error.message)) }
}

/// `fixtures.NewNoxuV1CustomResourceDefinition(Namespaced)`: a schema that allows all.
fn noxu_fixture() -> Value {
    let version = |name: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "noxus.mygroup.example.com"},
        "spec": {"group": "mygroup.example.com", "scope": "Namespaced",
            "names": {"plural": "noxus", "singular": "nonenglishnoxu", "kind": "WishIHadChosenNoxu",
                "shortNames": ["foo", "bar", "abc", "def"], "listKind": "NoxuItemList", "categories": ["all"]},
            "versions": [version("v1beta1", true), version("v1", false)]}})
}

/// A replay of one scenario, on the main resource or through the status subresource.
struct Replay {
    crd: Value,
    status: bool,
    current: Option<Value>,
}

impl Replay {
    fn schema_mut(&mut self) -> &mut Value {
        let root = &mut self.crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        if self.status { &mut root["properties"]["status"] } else { root }
    }

    fn set_schema(&mut self, schema: &Value) {
        if self.status {
            self.crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {}});
        }
        *self.schema_mut() = schema.clone();
    }

    /// Server-side apply by a single manager: the object becomes the applied fields.
    fn apply(&mut self, op: &Value) -> Result<(), String> {
        let served = served(&self.crd, "v1beta1")?;
        let name = op["name"].as_str().unwrap_or("x");
        let mut object = json!({"apiVersion": "mygroup.example.com/v1beta1", "kind": "MyCoolCRD",
            "metadata": {"name": name, "namespace": "default"}});
        let fields = op["object_fields"].as_object().cloned().unwrap_or_default();
        if self.status {
            object["status"] = Value::Object(fields);
        } else {
            object.as_object_mut().unwrap().extend(fields);
        }
        let placement =
            Placement { namespace: Some("default"), status_subresource: !self.status, status_write: self.status };
        let old = match &self.current {
            Some(old) => old.clone(),
            None => {
                let mut created = object.clone();
                if self.status {
                    created.as_object_mut().unwrap().remove("status");
                }
                write::coerce(&served, &mut created).map_err(|e| e.message)?;
                let errors =
                    objects::prepare_create(&mut created, &Placement { status_subresource: true, ..placement })
                        .map_err(|e| e.message)?;
                write::validate(&served, false, &created, None, errors).map_err(|e| e.message)?;
                if !self.status {
                    self.current = Some(created);
                    return Ok(());
                }
                created
            }
        };
        write::coerce(&served, &mut object).map_err(|e| e.message)?;
        if self.status {
            let mut merged = old.clone();
            merged["status"] = object["status"].clone();
            object = merged;
        }
        let errors = objects::prepare_update(&mut object, &old, &placement).map_err(|e| e.message)?;
        write::validate(&served, self.status, &object, Some(&old), errors).map_err(|e| e.message)?;
        self.current = Some(object);
        Ok(())
    }

    fn run(&mut self, op: &Value) -> Result<(), String> {
        match op["op"].as_str() {
            Some("set_schema") => {
                self.set_schema(&op["schema"]);
                served(&self.crd, "v1beta1").map(|_| ())
            }
            Some("merge_patch_schema") => {
                json_patch::merge(self.schema_mut(), &op["patch"]);
                served(&self.crd, "v1beta1").map(|_| ())
            }
            Some("apply") => self.apply(op),
            Some("expect_error") => match self.run(&op["inner"]) {
                Ok(()) => Err(format!("expected an error: {}", op["inner"]["description"])),
                Err(_) => Ok(()),
            },
            other => Err(format!("unknown operation {other:?}")),
        }
    }
}

pub fn ratcheting_scenario(case: &Value, file: &Value) -> Verdict {
    if has_cel(case) {
        return Verdict::Skip("CEL");
    }
    if case["disabled"] == true || case["operations"].as_array().is_none_or(|o| o.is_empty()) {
        return Verdict::Skip("disabled upstream");
    }
    let variants: &[bool] = if case["also_run_against_status_subresource"] == true { &[false, true] } else { &[false] };
    for &status in variants {
        let mut replay = Replay { crd: file["initial_crd"].clone(), status, current: None };
        for op in case["operations"].as_array().into_iter().flatten() {
            if let Err(e) = replay.run(op) {
                let which = if status { "status" } else { "main" };
                return Verdict::Fail(format!(
                    "{which}: {}: {e}",
                    op["description"].as_str().unwrap_or(op["op"].as_str().unwrap_or("?"))
                ));
            }
        }
    }
    Verdict::Pass
}
