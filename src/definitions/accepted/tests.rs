//! What a start plans from: the accepted forms it compiles, and the plan they give.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::definitions::load::{Problem, loaded_from_value};
use crate::definitions::reload::{self, Context};
use crate::definitions::scan::ScannedFile;

fn widgets(version: &str, scope: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": scope, "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": version, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"size": {"type": "integer", "minimum": 1, "default": 3}}}}}}}]}})
}

fn accepted(raw: Value) -> Accepted {
    let loaded = loaded_from_value(raw, "w.yaml").unwrap();
    Accepted { manifest: loaded.manifest, file: PathBuf::from("w.yaml"), source: "w.yaml".into() }
}

fn scan(documents: Vec<Result<Value, Problem>>) -> Scan {
    let documents = documents.into_iter().map(|d| d.and_then(|raw| loaded_from_value(raw, "w.yaml"))).collect();
    Scan::Files(vec![ScannedFile { path: PathBuf::from("w.yaml"), documents }])
}

/// Plans a start as `cli::live_definitions` does.
fn start(scan: &Scan, records: &HashMap<String, Accepted>, served_before: bool) -> reload::Plan {
    let previous = accepted_forms(scan, records, &|_| served_before);
    let age = |name: &str| (served_before && records.contains_key(name)).then_some(1);
    let stored = |name: &str| records.get(name).map(|_| vec!["v1beta1".to_string()]).unwrap_or_default();
    let accepted = |name: &str| records.get(name).map(|a| a.manifest.clone());
    reload::plan(&previous, scan, &Context { age: &age, stored_versions: &stored, accepted: &accepted })
}

#[test]
fn an_unchanged_file_is_served_from_the_files_without_compiling_the_record() {
    let records = HashMap::from([("widgets.example.com".to_string(), accepted(widgets("v1beta1", "Namespaced")))]);
    let files = scan(vec![Ok(widgets("v1beta1", "Namespaced"))]);
    assert!(accepted_forms(&files, &records, &|_| true).is_empty());
    let plan = start(&files, &records, true);
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    let Scan::Files(files) = &files else { unreachable!() };
    let from_file = files[0].documents[0].as_ref().unwrap();
    assert!(Arc::ptr_eq(&plan.served["widgets.example.com"].loaded.definition, &from_file.definition));
}

#[test]
fn a_file_changed_while_stopped_is_checked_as_an_update_of_the_accepted_form() {
    let records = HashMap::from([("widgets.example.com".to_string(), accepted(widgets("v1beta1", "Namespaced")))]);
    // A stored version dropped: refused, the accepted form goes on being served.
    let plan = start(&scan(vec![Ok(widgets("v1", "Namespaced"))]), &records, true);
    let messages: Vec<String> = plan.problems.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(
        messages[0].starts_with(
            "w.yaml: CustomResourceDefinition \"widgets.example.com\" is invalid: status.storedVersions[0]: Invalid value: \"v1beta1\": missing from spec.versions"
        ),
        "{messages:?}"
    );
    let served = &plan.served["widgets.example.com"].loaded.definition;
    assert_eq!(served.storage.name, "v1beta1");
    assert_eq!(served.source, "w.yaml");
    // The accepted form round-trips: the same spec as it was accepted with.
    assert_eq!(plan.served["widgets.example.com"].loaded.manifest.spec, records["widgets.example.com"].manifest.spec);

    // A scope changed and a version dropped: both refused.
    let plan = start(&scan(vec![Ok(widgets("v1", "Cluster"))]), &records, true);
    let errors = &plan.problems[0].errors;
    assert_eq!(errors[0], "spec.scope: Invalid value: \"Cluster\": field is immutable", "{errors:?}");
    assert!(errors[1].starts_with("status.storedVersions[0]"), "{errors:?}");

    // An acceptable change (a version added) is served as the file says.
    let mut both = widgets("v1", "Namespaced");
    let old = widgets("v1beta1", "Namespaced")["spec"]["versions"][0].clone();
    both["spec"]["versions"].as_array_mut().unwrap().insert(0, json!(old));
    both["spec"]["versions"][0]["storage"] = json!(false);
    let plan = start(&scan(vec![Ok(both)]), &records, true);
    assert!(plan.problems.is_empty(), "{:?}", plan.problems);
    assert_eq!(plan.served["widgets.example.com"].loaded.definition.storage.name, "v1");
}

#[test]
fn a_file_that_cannot_be_read_through_keeps_the_accepted_form_served() {
    let records = HashMap::from([("widgets.example.com".to_string(), accepted(widgets("v1beta1", "Namespaced")))]);
    let broken = Problem::new("w.yaml", None, vec!["cannot parse: oops".into()]);
    let plan = start(&scan(vec![Err(broken)]), &records, true);
    assert_eq!(plan.served["widgets.example.com"].loaded.definition.storage.name, "v1beta1");
    assert_eq!(plan.problems.len(), 1);
}

#[test]
fn a_definition_not_served_at_the_stop_is_refused_but_not_served() {
    // Removed from the files before the stop (its objects stayed), added back incompatible.
    let records = HashMap::from([("widgets.example.com".to_string(), accepted(widgets("v1beta1", "Namespaced")))]);
    let plan = start(&scan(vec![Ok(widgets("v1", "Namespaced"))]), &records, false);
    assert!(plan.served.is_empty());
    assert!(plan.problems[0].errors[0].starts_with("status.storedVersions[0]"), "{:?}", plan.problems);
    // Added back as it was: served.
    let plan = start(&scan(vec![Ok(widgets("v1beta1", "Namespaced"))]), &records, false);
    assert_eq!(plan.added, ["widgets.example.com"]);
}
