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
    Accepted::new(loaded.full_manifest(), PathBuf::from("w.yaml"), "w.yaml".into())
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
    // The accepted form round-trips: the same spec as it was accepted with, schemas and all.
    assert!(records["widgets.example.com"].same_spec(&plan.served["widgets.example.com"].loaded));
    assert!(served.storage.openapi_schema.as_deref().is_some_and(|s| s.contains("\"minimum\":1")));

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

#[test]
fn a_file_whose_schema_alone_changed_while_stopped_is_compiled_from_the_record() {
    let records = HashMap::from([("widgets.example.com".to_string(), accepted(widgets("v1beta1", "Namespaced")))]);
    let mut changed = widgets("v1beta1", "Namespaced");
    changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]["minimum"] =
        json!(2);
    let previous = accepted_forms(&scan(vec![Ok(changed)]), &records, &|_| true);
    let served = &previous["widgets.example.com"].loaded;
    assert!(records["widgets.example.com"].same_spec(served));
    assert!(served.definition.storage.schema().is_some());
}

/// A start trusts the form the store last accepted, as kube-apiserver trusts its stored
/// CustomResourceDefinitions: a definition the create checks refuse (here a name that is not
/// `<plural>.<group>`, as a stricter build might refuse what an earlier one accepted) is loaded
/// when its record says the same, and refused when the form differs in any part (metadata,
/// spec, a schema) or has a field of the wrong type.
#[test]
fn a_start_does_not_check_again_the_form_the_store_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("w.yaml");
    let misnamed = |description: &str| {
        let mut raw = widgets("v1beta1", "Namespaced");
        raw["metadata"]["name"] = json!("gadgets.example.com");
        raw["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = json!(description);
        raw
    };
    let refusal = crate::definitions::load::checked_from_value(misnamed("One."), "w.yaml").unwrap_err();
    assert!(refusal.messages().iter().any(|m| m.contains("must be spec.names.plural")), "{refusal:?}");
    // The record of that form, as an earlier build accepted it.
    let record = {
        let mut raw = misnamed("One.");
        raw["metadata"]["name"] = json!("widgets.example.com");
        let loaded = loaded_from_value(raw, "w.yaml").unwrap();
        let mut manifest = loaded.full_manifest();
        manifest.metadata.name = Some("gadgets.example.com".into());
        Accepted::new(manifest, file.clone(), "w.yaml".into())
    };
    let records = HashMap::from([("gadgets.example.com".to_string(), record)]);
    let trusted = |manifest: &_, schemas: &[_]| vouches_for(&records, manifest, schemas);
    let load = |raw: Value| {
        std::fs::write(&file, serde_json::to_vec(&raw).unwrap()).unwrap();
        match crate::definitions::scan::FileCache::default().scan_trusting(
            std::slice::from_ref(&file),
            &trusted,
            &crate::definitions::scan::recall_none,
        ) {
            Scan::Files(files) => files[0].documents[0].clone(),
            Scan::Failed(problem) => panic!("{problem}"),
        }
    };
    let loaded = load(misnamed("One.")).unwrap();
    assert_eq!(loaded.definition.name, "gadgets.example.com");
    assert!(loaded.schema_texts()[0].as_deref().is_some_and(|s| s.contains("\"One.\"")));
    // Without the records, or in any other form, the create checks apply.
    match crate::definitions::scan::FileCache::default().scan(std::slice::from_ref(&file)) {
        Scan::Files(files) => assert!(files[0].documents[0].is_err(), "checked without the records"),
        Scan::Failed(problem) => panic!("{problem}"),
    }
    assert!(load(misnamed("Two.")).is_err(), "another schema");
    let mut labelled = misnamed("One.");
    labelled["metadata"]["labels"] = json!({"team": "a"});
    assert!(load(labelled).is_err(), "other metadata");
    let mut rescoped = misnamed("One.");
    rescoped["spec"]["scope"] = json!("Cluster");
    assert!(load(rescoped).is_err(), "another spec");
    let mut misfit = misnamed("One.");
    misfit["metadata"]["labels"] = json!("not a map");
    assert!(load(misfit).is_err(), "a field of the wrong type");
}

/// `widgets` and `gadgets` as one file's two documents, the second with a format Kubernetes
/// warns about.
const TWO_DOCUMENTS: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, description: From the file.}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {plural: gadgets, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {when: {type: string, format: sometime}}}
";

fn loaded_documents(scan: &Scan) -> Vec<Loaded> {
    let Scan::Files(files) = scan else { panic!("{scan:?}") };
    files[0].documents.iter().map(|d| d.clone().unwrap()).collect()
}

/// The records a start finds for what `cache` read of `file`: each with the origin the cache
/// gives it and its schema's description replaced by `description`, so that a definition taken
/// from the records is told from one parsed from the file.
fn records_of(
    cache: &crate::definitions::scan::FileCache,
    file: &std::path::Path,
    description: &str,
) -> HashMap<String, Accepted> {
    let scan = crate::definitions::scan::FileCache::default().scan(&[file.to_path_buf()]);
    loaded_documents(&scan)
        .into_iter()
        .map(|loaded| {
            let origin = cache.origin_of(file, &loaded);
            let schemas = loaded
                .schema_texts()
                .into_iter()
                .map(|s| s.map(|s| Arc::from(s.replace("From the file.", description))))
                .collect();
            let record = Accepted {
                manifest: loaded.manifest.clone(),
                schemas,
                file: file.to_path_buf(),
                source: loaded.definition.source.clone(),
                compact: true,
                origin,
            };
            (loaded.definition.name.clone(), record)
        })
        .collect()
}

/// Scans `file` at a start whose records are `records`: the documents and the counts.
fn start_scan(
    file: &std::path::Path,
    records: &HashMap<String, Accepted>,
) -> (Vec<Loaded>, crate::definitions::scan::ScanCounts) {
    let recollection = Recollection::of(records);
    let mut cache = crate::definitions::scan::FileCache::default();
    let trusted = |manifest: &_, schemas: &[_]| vouches_for(records, manifest, schemas);
    let scan = cache.scan_trusting(&[file.to_path_buf()], &trusted, &|f, sha256| recollection.documents(f, sha256));
    (loaded_documents(&scan), cache.last_counts())
}

#[test]
fn a_file_whose_bytes_gave_the_records_is_not_parsed_at_a_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("both.yaml");
    std::fs::write(&file, TWO_DOCUMENTS).unwrap();
    let mut cache = crate::definitions::scan::FileCache::default();
    let parsed = loaded_documents(&cache.scan(std::slice::from_ref(&file)));
    // What the file gave, where, with the warning its schema drew.
    let origins: Vec<_> = parsed.iter().map(|l| cache.origin_of(&file, l).unwrap()).collect();
    assert_eq!(origins.iter().map(|o| (o.document, o.documents)).collect::<Vec<_>>(), [(0, 2), (1, 2)]);
    let sha256 = ring::digest::digest(&ring::digest::SHA256, TWO_DOCUMENTS.as_bytes());
    let hex: String = sha256.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!((origins[0].sha256.as_str(), origins[1].sha256.as_str()), (hex.as_str(), hex.as_str()));
    assert_eq!(origins[1].warnings, ["unrecognized format \"sometime\""]);
    assert_eq!(origins[1].warnings, parsed[1].definition.warnings);

    // The same bytes: both documents are the records', nothing parsed.
    let records = records_of(&cache, &file, "From the records.");
    let (recalled, counts) = start_scan(&file, &records);
    assert_eq!(counts, crate::definitions::scan::ScanCounts { parsed: 0, recalled: 1 });
    for (recalled, parsed) in recalled.iter().zip(&parsed) {
        assert_eq!(recalled.manifest, parsed.manifest);
        assert_eq!(recalled.definition.source, parsed.definition.source);
        assert_eq!(recalled.definition.warnings, parsed.definition.warnings);
        let text = recalled.schema_texts()[0].as_deref().map(|s| s.replace("From the records.", "From the file."));
        assert_eq!(text.as_deref(), parsed.schema_texts()[0].as_deref());
    }
    assert_eq!(recalled[0].definition.source, format!("{} (document 1)", file.display()));
    assert!(recalled[0].schema_texts()[0].as_deref().unwrap().contains("From the records."));

    // Any other bytes, a record missing, or another loader's: the file is parsed.
    let parsed_again = |records: &HashMap<String, Accepted>| {
        let (documents, counts) = start_scan(&file, records);
        assert_eq!(counts, crate::definitions::scan::ScanCounts { parsed: 1, recalled: 0 });
        assert!(documents[0].schema_texts()[0].as_deref().unwrap().contains("From the file."));
    };
    let mut one_missing = records.clone();
    one_missing.remove("gadgets.example.com");
    parsed_again(&one_missing);
    let mut other_form = records.clone();
    for record in other_form.values_mut() {
        record.origin.as_mut().unwrap().form = "0.0.0/0".into();
    }
    parsed_again(&other_form);
    let mut twice = records.clone();
    let mut clash = twice["widgets.example.com"].clone();
    clash.origin.as_mut().unwrap().document = 1;
    twice.insert("widgets.example.com".into(), clash);
    parsed_again(&twice);
    std::fs::write(&file, format!("{TWO_DOCUMENTS}# one more line\n")).unwrap();
    parsed_again(&records);
}

#[test]
fn only_a_file_that_loaded_whole_and_without_status_names_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("both.yaml");
    let mut cache = crate::definitions::scan::FileCache::default();
    // A document refused: the file's other documents cannot be taken from records.
    std::fs::write(&file, TWO_DOCUMENTS.replace("name: gadgets.example.com", "name: wrong.example.com")).unwrap();
    let scan = cache.scan(std::slice::from_ref(&file));
    let Scan::Files(files) = &scan else { panic!() };
    let first = files[0].documents[0].as_ref().unwrap();
    assert!(files[0].documents[1].is_err());
    assert_eq!(cache.origin_of(&file, first), None);
    // A status in the file (a record keeps none).
    std::fs::write(&file, format!("{TWO_DOCUMENTS}status: {{storedVersions: [v1]}}\n")).unwrap();
    let loaded = loaded_documents(&cache.scan(std::slice::from_ref(&file)));
    assert!(cache.origin_of(&file, &loaded[0]).is_some());
    assert_eq!(cache.origin_of(&file, &loaded[1]), None);
    // A form the file does not give.
    let other = loaded_from_value(widgets("v1", "Namespaced"), "w.yaml").unwrap();
    assert_eq!(cache.origin_of(&file, &other), None);
    assert_eq!(cache.origin_of(&dir.path().join("gone.yaml"), &loaded[0]), None);
}
