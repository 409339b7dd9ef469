//! The reload decisions: new, unchanged, changed, refused, murky files, removals and clashes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::definitions::load::loaded_from_value;
use crate::definitions::scan::ScannedFile;

fn manifest(plural: &str, kind: &str, edit: impl FnOnce(&mut Value)) -> Value {
    let mut raw = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]}
    });
    edit(&mut raw);
    raw
}

fn file(name: &str, documents: Vec<Value>) -> ScannedFile {
    let path = PathBuf::from(name);
    let documents = documents.into_iter().map(|d| loaded_from_value(d, name)).collect();
    ScannedFile { path, documents }
}

fn murky(name: &str) -> ScannedFile {
    ScannedFile {
        path: PathBuf::from(name),
        documents: vec![Err(Problem::new(name, None, vec!["cannot parse".into()]))],
    }
}

fn run(previous: &HashMap<String, Served>, files: Vec<ScannedFile>) -> Plan {
    let age = |name: &str| previous.contains_key(name).then_some(1);
    let stored = |_: &str| Vec::new();
    plan(previous, &Scan::Files(files), &Context { age: &age, stored_versions: &stored, accepted: &nothing_accepted })
}

fn messages(plan: &Plan) -> Vec<String> {
    plan.problems.iter().map(ToString::to_string).collect()
}

#[test]
fn new_changed_unchanged_and_removed() {
    let first = run(
        &HashMap::new(),
        vec![file("a.yaml", vec![manifest("as", "A", |_| {})]), file("b.yaml", vec![manifest("bs", "B", |_| {})])],
    );
    assert_eq!(first.added, ["as.example.com", "bs.example.com"]);
    let kept = first.served["as.example.com"].loaded.definition.clone();
    let second = run(
        &first.served,
        vec![
            file("a.yaml", vec![manifest("as", "A", |_| {})]),
            file("c.yaml", vec![manifest("cs", "C", |m| m["spec"]["names"]["shortNames"] = json!(["c"]))]),
        ],
    );
    assert!(second.problems.is_empty(), "{:?}", messages(&second));
    assert_eq!(second.added, ["cs.example.com"]);
    assert_eq!(second.removed, ["bs.example.com"]);
    assert!(second.changed.is_empty());
    // Same spec from a new parse: the served definition is kept as it was.
    assert!(Arc::ptr_eq(&second.served["as.example.com"].loaded.definition, &kept));
    let third = run(
        &second.served,
        vec![
            file("a.yaml", vec![manifest("as", "A", |m| m["spec"]["names"]["shortNames"] = json!(["x"]))]),
            file("c.yaml", vec![manifest("cs", "C", |m| m["spec"]["names"]["shortNames"] = json!(["c"]))]),
        ],
    );
    assert_eq!(third.changed, ["as.example.com"]);
    assert_eq!(third.served["as.example.com"].loaded.definition.short_names, ["x"]);
}

#[test]
fn a_refused_update_keeps_the_previous_definition() {
    let first = run(&HashMap::new(), vec![file("a.yaml", vec![manifest("as", "A", |_| {})])]);
    let served = first.served["as.example.com"].loaded.definition.clone();
    let refused =
        run(&first.served, vec![file("a.yaml", vec![manifest("as", "A", |m| m["spec"]["scope"] = json!("Cluster"))])]);
    assert_eq!(
        messages(&refused),
        [
            r#"a.yaml: CustomResourceDefinition "as.example.com" is invalid: spec.scope: Invalid value: "Cluster": field is immutable"#
        ]
    );
    assert_eq!(refused.problems[0].reason, reason::UPDATE_REFUSED);
    assert!(refused.is_unchanged());
    assert!(Arc::ptr_eq(&refused.served["as.example.com"].loaded.definition, &served));
    // Dropping the storage version (it has objects) is refused too.
    let dropped = run(
        &first.served,
        vec![file("a.yaml", vec![manifest("as", "A", |m| m["spec"]["versions"][0]["name"] = json!("v2"))])],
    );
    assert!(
        messages(&dropped)[0].contains("status.storedVersions[0]: Invalid value: \"v1\": missing from spec.versions"),
        "{:?}",
        messages(&dropped)
    );
    assert!(dropped.is_unchanged());
    // An invalid new form also keeps the previous one.
    let invalid = run(
        &first.served,
        vec![file("a.yaml", vec![manifest("as", "A", |m| m["spec"]["versions"][0]["served"] = json!("yes"))])],
    );
    assert_eq!(invalid.problems.len(), 1);
    assert_eq!(invalid.problems[0].reason, reason::INVALID);
    assert!(invalid.is_unchanged());
}

#[test]
fn an_unreadable_file_keeps_what_it_held() {
    let first =
        run(&HashMap::new(), vec![file("a.yaml", vec![manifest("as", "A", |_| {}), manifest("bs", "B", |_| {})])]);
    let half_written = run(&first.served, vec![murky("a.yaml")]);
    assert!(half_written.is_unchanged(), "{:?}", half_written.removed);
    assert_eq!(half_written.served.len(), 2);
    let failed = plan(
        &first.served,
        &Scan::Failed(Problem::new("defs", None, vec!["cannot list".into()])),
        &Context { age: &|_| None, stored_versions: &|_| Vec::new(), accepted: &nothing_accepted },
    );
    assert!(failed.is_unchanged());
    assert_eq!(failed.registry.definitions().len(), 2);
}

#[test]
fn names_stay_with_their_holder() {
    let first = run(
        &HashMap::new(),
        vec![
            file("a.yaml", vec![manifest("as", "A", |m| m["spec"]["names"]["shortNames"] = json!(["x"]))]),
            file("b.yaml", vec![manifest("bs", "B", |_| {})]),
        ],
    );
    // b wants a's short name: b keeps its previous form.
    let clash = run(
        &first.served,
        vec![
            file("a.yaml", vec![manifest("as", "A", |m| m["spec"]["names"]["shortNames"] = json!(["x"]))]),
            file("b.yaml", vec![manifest("bs", "B", |m| m["spec"]["names"]["shortNames"] = json!(["x"]))]),
        ],
    );
    assert_eq!(
        messages(&clash),
        [r#"b.yaml: CustomResourceDefinition "bs.example.com" is invalid: names not accepted: "x" is already in use"#]
    );
    assert_eq!(clash.problems[0].reason, reason::SHORT_NAMES_CONFLICT);
    assert!(clash.is_unchanged());
    // A newcomer taking a served name is not served.
    let newcomer = run(
        &first.served,
        vec![
            file("a.yaml", vec![manifest("as", "A", |m| m["spec"]["names"]["shortNames"] = json!(["x"]))]),
            file("b.yaml", vec![manifest("bs", "B", |_| {})]),
            file("c.yaml", vec![manifest("cs", "C", |m| m["spec"]["names"]["shortNames"] = json!(["x"]))]),
        ],
    );
    assert!(newcomer.added.is_empty());
    assert_eq!(newcomer.problems.len(), 1);
    assert_eq!(newcomer.problems[0].reason, reason::SHORT_NAMES_CONFLICT);
}

#[test]
fn only_definitions_whose_spec_changed_are_checked_as_updates() {
    let first = run(
        &HashMap::new(),
        vec![file("a.yaml", vec![manifest("as", "A", |_| {})]), file("b.yaml", vec![manifest("bs", "B", |_| {})])],
    );
    // b.yaml read again as it was (other `Arc`s, the same spec), a.yaml changed, c.yaml new.
    let files = vec![
        file("a.yaml", vec![manifest("as", "A", |m| m["spec"]["versions"][0]["deprecated"] = true.into())]),
        file("b.yaml", vec![manifest("bs", "B", |_| {})]),
        file("c.yaml", vec![manifest("cs", "C", |_| {})]),
    ];
    assert_eq!(updated_names(&first.served, &Scan::Files(files.clone())), ["as.example.com"]);
    // Those are the ones whose stored versions the plan asks for.
    let asked = std::cell::RefCell::new(Vec::new());
    let age = |_: &str| Some(1);
    let stored = |name: &str| {
        asked.borrow_mut().push(name.to_string());
        Vec::new()
    };
    let second = plan(
        &first.served,
        &Scan::Files(files),
        &Context { age: &age, stored_versions: &stored, accepted: &nothing_accepted },
    );
    assert_eq!(second.changed, ["as.example.com"]);
    assert_eq!(asked.into_inner(), ["as.example.com"]);
}
