//! Analyses against a real sled store in a temporary directory: failing objects grouped with
//! ratcheting told apart, pruned and defaulted fields, CEL costs, storage migration, unreadable
//! objects, paging, cancellation, and a store left exactly as it was.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use bytes::Bytes;
use serde_json::{Value, json};

use super::*;
use crate::definitions::load::Loaded;
use crate::definitions::reload::Served;
use crate::store::sled::{SledOptions, SledStore};
use crate::store::{ListOptions, Store, key};

/// The seeds' CronTab, its `spec` schema and rules as given, in the versions given (the last
/// one the storage version).
fn crontab(spec: Value, versions: &[&str]) -> Loaded {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}});
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"name": v, "served": true, "storage": i + 1 == versions.len(), "schema": schema}))
        .collect();
    let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": versions}});
    candidate::from_value(raw, "test.yaml").unwrap()
}

fn spec(replicas: Value) -> Value {
    json!({"type": "object", "properties": {"cronSpec": {"type": "string"}, "image": {"type": "string"},
        "replicas": replicas}})
}

fn object(name: &str, version: &str, spec: Value) -> Bytes {
    let object = json!({"apiVersion": format!("stable.example.com/{version}"), "kind": "CronTab",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec});
    Bytes::from(serde_json::to_vec(&object).unwrap())
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Backend,
    runtime: tokio::runtime::Runtime,
}

impl Fixture {
    /// A store holding `objects` (name, bytes) of the CronTab.
    fn new(objects: Vec<(String, Bytes)>) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let store = Backend::Sled(SledStore::open(dir.path(), SledOptions::default()).unwrap());
        runtime.block_on(async {
            for (name, bytes) in objects {
                store
                    .create(&key::object_key("stable.example.com", "crontabs", Some("default"), &name), bytes)
                    .await
                    .unwrap();
            }
        });
        Fixture { _dir: dir, store, runtime }
    }

    fn analyze(&self, current: &Loaded, candidate: &Loaded, options: &Options) -> Report {
        let served = served(current);
        let subject =
            Subject { served: &served, candidate, file: std::path::Path::new("new.yaml"), stored_versions: &[] };
        analyze(&self.store, self.runtime.handle(), &subject, options, &AtomicBool::new(false), &mut |_| {}).unwrap()
    }

    /// Every key, revision and value of the store.
    fn contents(&self) -> Vec<(String, u64, Bytes)> {
        let page = self.runtime.block_on(self.store.list("/", ListOptions::default())).unwrap();
        page.items.into_iter().map(|kv| (kv.key, kv.revision, kv.value)).collect()
    }
}

fn served(current: &Loaded) -> HashMap<String, Served> {
    let served = Served { loaded: current.clone(), file: PathBuf::from("current.yaml") };
    HashMap::from([(current.definition.name.clone(), served)])
}

/// `count` CronTabs; those whose index `exceeds` says have 7 replicas, the others 3.
fn crontabs(count: usize, exceeds: impl Fn(usize) -> bool) -> Vec<(String, Bytes)> {
    (0..count)
        .map(|i| {
            let name = format!("ct-{i:04}");
            let replicas = if exceeds(i) { 7 } else { 3 };
            let bytes = object(&name, "v1", json!({"cronSpec": "* * * * */5", "image": "cron", "replicas": replicas}));
            (name, bytes)
        })
        .collect()
}

#[test]
fn a_tightened_maximum_finds_exactly_the_objects_above_it() {
    let fixture = Fixture::new(crontabs(200, |i| i % 27 == 5));
    let before = fixture.contents();
    let current = crontab(spec(json!({"type": "integer"})), &["v1"]);
    let candidate = crontab(spec(json!({"type": "integer", "maximum": 5})), &["v1"]);
    let options = Options { page_size: 16, ..Options::default() };
    let report = fixture.analyze(&current, &candidate, &options);
    assert_eq!(report.objects, 200);
    assert!(report.change.accepted);
    let v1 = &report.versions[0];
    // 5, 32, 59, ..., 194: 8 objects.
    assert_eq!((v1.failing, v1.newly_failing, v1.failing_unchanged), (8, 8, 0));
    assert_eq!(v1.errors.len(), 1);
    let group = &v1.errors[0];
    assert_eq!(group.field, "spec.replicas");
    assert_eq!(group.reason, "FieldValueInvalid");
    assert_eq!(group.message, "Invalid value: spec.replicas in body should be less than or equal to 5");
    assert_eq!(
        group.first_error,
        "spec.replicas: Invalid value: 7: spec.replicas in body should be less than or equal to 5"
    );
    assert_eq!((group.objects, group.tolerated_by_ratcheting), (8, 8));
    assert_eq!(
        group.examples,
        ["default/ct-0005", "default/ct-0032", "default/ct-0059", "default/ct-0086", "default/ct-0113"]
    );
    assert_eq!(report.exit_code(), 1);
    assert!(report.pruned.is_empty() && report.defaulted.is_empty(), "{report:?}");
    assert_eq!(report.storage.objects_per_version, [("v1".to_string(), 200)].into());
    assert_eq!(report.storage.to_migrate, 0);
    // Read, never written.
    assert_eq!(fixture.contents(), before);

    // The same schema again: nothing breaks.
    let same = fixture.analyze(&current, &current, &options);
    assert_eq!((same.versions[0].failing, same.exit_code()), (0, 0));
    // Objects that are invalid already are not the change's doing.
    let again = fixture.analyze(&candidate, &candidate, &options);
    assert_eq!((again.versions[0].failing, again.versions[0].newly_failing, again.exit_code()), (8, 0, 0));
}

#[test]
fn a_new_cel_rule_is_costed_and_its_errors_grouped() {
    let fixture = Fixture::new(crontabs(50, |i| i < 3));
    let current = crontab(spec(json!({"type": "integer"})), &["v1"]);
    let mut ruled = spec(json!({"type": "integer"}));
    ruled["x-kubernetes-validations"] = json!([{"rule": "self.replicas <= 5", "message": "at most 5 replicas"}]);
    let candidate = crontab(ruled, &["v1"]);
    let report = fixture.analyze(&current, &candidate, &Options::default());
    let v1 = &report.versions[0];
    assert_eq!((v1.failing, v1.newly_failing), (3, 3));
    assert_eq!(v1.errors[0].first_error, "spec: Invalid value: at most 5 replicas");
    // An update that leaves the object as it is ratchets the rule's error away.
    assert_eq!((v1.errors[0].tolerated_by_ratcheting, v1.failing_unchanged), (3, 0));
    let cost = v1.cel_cost.unwrap();
    assert!(cost.max > 0 && cost.p99 <= cost.max, "{cost:?}");
    assert_eq!(v1.current_cel_cost, None);
    assert_eq!(report.rules.len(), 1);
    let rule = &report.rules[0];
    assert_eq!(rule.location, "v1: openAPIV3Schema.properties[spec].x-kubernetes-validations[0]");
    assert_eq!(rule.rule.as_deref(), Some("self.replicas <= 5"));
    assert!(rule.estimated_cost.is_some() && rule.current_estimated_cost.is_none() && !rule.over_limit);
}

#[test]
fn a_transition_rule_fails_objects_even_on_an_unchanged_update() {
    let fixture = Fixture::new(crontabs(10, |i| i == 4));
    let current = crontab(spec(json!({"type": "integer"})), &["v1"]);
    let mut ruled = spec(json!({"type": "integer"}));
    ruled["x-kubernetes-validations"] =
        json!([{"rule": "self.replicas < 5 || self.replicas != oldSelf.replicas", "message": "bad"}]);
    let report = fixture.analyze(&current, &crontab(ruled, &["v1"]), &Options::default());
    let v1 = &report.versions[0];
    // A create does not run a transition rule; an unchanged update does, and refuses.
    assert_eq!((v1.failing, v1.failing_unchanged), (1, 1));
    assert_eq!((v1.errors[0].objects, v1.errors[0].tolerated_by_ratcheting), (1, 0));
}

#[test]
fn pruned_and_defaulted_fields_are_counted_by_path() {
    let mut objects = crontabs(6, |_| false);
    objects.push(("bare".into(), object("bare", "v1", json!({"cronSpec": "x"}))));
    let fixture = Fixture::new(objects);
    let current = crontab(spec(json!({"type": "integer"})), &["v1"]);
    // `image` goes from the schema; `replicas` gets a default.
    let candidate = crontab(
        json!({"type": "object", "properties": {"cronSpec": {"type": "string"},
            "replicas": {"type": "integer", "default": 1}}}),
        &["v1"],
    );
    let report = fixture.analyze(&current, &candidate, &Options::default());
    assert_eq!(report.pruned, [tally::PathCount { path: "spec.image".into(), objects: 6 }]);
    assert_eq!(report.defaulted, [tally::PathCount { path: "spec.replicas".into(), objects: 1 }]);
    assert_eq!(report.exit_code(), 0, "pruning and defaults break nothing: {}", report.render_table(true));
}

#[test]
fn a_new_storage_version_is_a_migration_of_every_object_in_the_old_one() {
    let fixture = Fixture::new(crontabs(12, |_| false));
    let current = crontab(spec(json!({"type": "integer"})), &["v1"]);
    let candidate = crontab(spec(json!({"type": "integer", "minimum": 4})), &["v1", "v2"]);
    let report = fixture.analyze(&current, &candidate, &Options::default());
    assert_eq!(report.storage.current_version.as_deref(), Some("v1"));
    assert_eq!((report.storage.version.as_str(), report.storage.to_migrate), ("v2", 12));
    let names: Vec<&str> = report.versions.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["v1", "v2"]);
    // Every object has 3 replicas: below the minimum in both versions; v2 is new, so its
    // failures are the change's, and v1's too (the current v1 has no minimum).
    assert_eq!((report.versions[0].failing, report.versions[0].newly_failing), (12, 12));
    assert_eq!((report.versions[1].failing, report.versions[1].newly_failing), (12, 12));
}

#[test]
fn a_refused_change_is_reported_with_the_objects_all_the_same() {
    let fixture = Fixture::new(crontabs(3, |_| true));
    let current = crontab(spec(json!({"type": "integer"})), &["v1"]);
    // v1 dropped: it is the stored version.
    let candidate = crontab(spec(json!({"type": "integer", "maximum": 5})), &["v2"]);
    let report = fixture.analyze(&current, &candidate, &Options::default());
    assert!(!report.change.accepted);
    assert!(
        report.change.errors[0]
            .starts_with("status.storedVersions[0]: Invalid value: \"v1\": missing from spec.versions")
    );
    assert_eq!(report.versions[0].failing, 3);
    assert_eq!(report.exit_code(), 2);
}

#[test]
fn objects_that_are_not_json_are_reported_not_skipped() {
    let mut objects = crontabs(2, |_| false);
    objects.push(("broken".into(), Bytes::from_static(b"not json")));
    let fixture = Fixture::new(objects);
    let current = crontab(spec(json!({"type": "integer"})), &["v1"]);
    let report = fixture.analyze(&current, &current, &Options::default());
    assert_eq!(report.objects, 3);
    assert_eq!(report.unreadable[0].objects, 1);
    assert_eq!(report.unreadable[0].examples, ["default/broken"]);
    assert_eq!(report.exit_code(), 1);
}

#[test]
fn a_scan_goes_page_by_page_and_stops_when_cancelled() {
    let fixture = Fixture::new(crontabs(10, |_| false));
    let current = crontab(spec(json!({"type": "integer"})), &["v1"]);
    let served = served(&current);
    let subject =
        Subject { served: &served, candidate: &current, file: std::path::Path::new("x.yaml"), stored_versions: &[] };
    let options = Options { page_size: 3, ..Options::default() };
    let mut seen = Vec::new();
    let cancel = AtomicBool::new(false);
    analyze(&fixture.store, fixture.runtime.handle(), &subject, &options, &cancel, &mut |n| seen.push(n)).unwrap();
    assert_eq!(seen, [3, 6, 9, 10]);
    let mut pages = 0;
    let stopped = analyze(&fixture.store, fixture.runtime.handle(), &subject, &options, &cancel, &mut |_| {
        pages += 1;
        cancel.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(stopped.unwrap_err(), Stop::Cancelled);
    assert_eq!(pages, 1);
}

#[test]
fn objects_nested_deeper_than_serde_jsons_limit_are_read_as_the_api_reads_them() {
    // 1,000 levels below `spec` (serde_json's readers stop at 128), on a thread with the stack
    // the server gives every thread that walks objects.
    let deep = std::thread::Builder::new().stack_size(crate::core::nesting::THREAD_STACK_BYTES).spawn(|| {
        let mut nested = json!("leaf");
        for _ in 0..1_000 {
            nested = json!({"a": nested});
        }
        let mut objects = crontabs(2, |_| false);
        objects.push(("deep".into(), object("deep", "v1", json!({"replicas": 7, "extra": nested}))));
        let fixture = Fixture::new(objects);
        let open = |replicas: Value| {
            let mut spec = spec(replicas);
            spec["x-kubernetes-preserve-unknown-fields"] = json!(true);
            crontab(spec, &["v1"])
        };
        let report = fixture.analyze(
            &open(json!({"type": "integer"})),
            &open(json!({"type": "integer", "maximum": 5})),
            &Options::default(),
        );
        (report.objects, report.unreadable.len(), report.versions[0].errors[0].examples.clone())
    });
    let (objects, unreadable, examples) = deep.unwrap().join().unwrap();
    assert_eq!((objects, unreadable), (3, 0));
    assert_eq!(examples, ["default/deep"]);
}
