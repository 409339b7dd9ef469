//! Ownership after creates, updates and applies; conflicts and force; resets; subresources;
//! the client-side to server-side apply migration.

use serde_json::{Value, json};

use super::*;

/// One version, `g/v1`, of the given schema (also used by `create_tests`).
pub(super) struct OneVersion(pub(super) Schema);

impl Versions for OneVersion {
    fn schema(&self, api_version: &str) -> Option<&Schema> {
        (api_version == "g/v1").then_some(&self.0)
    }

    fn convert(&self, _: &Value, api_version: &str) -> Result<Value, String> {
        Err(format!("no version {api_version}"))
    }
}

fn versions() -> OneVersion {
    OneVersion(Schema::custom_resource(Some(&json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "image": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
        },
    }))))
}

fn time(second: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_700_000_000 + second).unwrap()
}

struct Endpoint {
    versions: OneVersion,
    ignored: Set,
    subresource: &'static str,
}

impl Endpoint {
    fn main() -> Endpoint {
        let status = Set::of(&[vec![PathElement::field("status")]]);
        Endpoint { versions: versions(), ignored: status, subresource: "" }
    }

    fn status() -> Endpoint {
        let ignored = Set::of(&[vec![PathElement::field("metadata")], vec![PathElement::field("spec")]]);
        Endpoint { versions: versions(), ignored, subresource: "status" }
    }

    fn manager(&self) -> FieldManager<'_> {
        FieldManager {
            versions: &self.versions,
            api_version: "g/v1",
            kind: "K",
            subresource: self.subresource,
            ignored: &self.ignored,
        }
    }

    fn update(&self, live: &Value, new: Value, manager: &str, at: i64) -> Value {
        let mut new = new;
        self.manager().update(live, &mut new, manager, time(at));
        new
    }

    fn apply(&self, live: &Value, config: Value, manager: &str, force: bool, at: i64) -> Result<Value, Error> {
        self.manager().apply(live, &config, manager, force, time(at))
    }
}

fn empty() -> Value {
    json!({"apiVersion": "g/v1", "kind": "K"})
}

fn object(spec: Value) -> Value {
    json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x", "namespace": "ns", "uid": "u-1"}, "spec": spec})
}

/// (manager, operation, owned paths) of every entry, in managedFields order.
fn owners(object: &Value) -> Vec<(String, String, Vec<String>)> {
    let entries = object["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    entries
        .iter()
        .map(|e| {
            let set = decode_fields(&e["fieldsV1"]).unwrap();
            (
                e["manager"].as_str().unwrap().to_string(),
                e["operation"].as_str().unwrap().to_string(),
                set.paths().iter().map(|p| path_string(p)).collect(),
            )
        })
        .collect()
}

fn owner(manager: &str, operation: &str, paths: &[&str]) -> (String, String, Vec<String>) {
    (manager.to_string(), operation.to_string(), paths.iter().map(|p| p.to_string()).collect())
}

#[test]
fn create_records_the_creator_with_its_fields() {
    let e = Endpoint::main();
    let mut new = object(json!({"replicas": 1, "image": "a"}));
    new["metadata"]["labels"] = json!({"app": "web"});
    new["metadata"]["uid"] = json!("");
    let created = e.update(&empty(), new, "kubectl-create", 5);
    let entry = &created["metadata"]["managedFields"][0];
    assert_eq!(entry["manager"], "kubectl-create");
    assert_eq!(entry["operation"], "Update");
    assert_eq!(entry["apiVersion"], "g/v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert_eq!(entry["time"], "2023-11-14T22:13:25Z");
    assert_eq!(
        entry["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {".": {}, "f:image": {}, "f:replicas": {}}})
    );
    assert!(entry.get("subresource").is_none());
}

#[test]
fn updates_move_ownership_of_what_they_change() {
    let e = Endpoint::main();
    let live = e.update(&empty(), object(json!({"replicas": 1, "image": "a"})), "creator", 1);
    let mut changed = live.clone();
    changed["spec"]["replicas"] = json!(3);
    let updated = e.update(&live, changed, "scaler", 2);
    assert_eq!(
        owners(&updated),
        [owner("creator", "Update", &[".spec", ".spec.image"]), owner("scaler", "Update", &[".spec.replicas"])]
    );
    // Writing the same values changes nothing, not even times.
    let again = e.update(&updated, updated.clone(), "someone", 3);
    assert_eq!(again["metadata"]["managedFields"], updated["metadata"]["managedFields"]);
}

#[test]
fn apply_creates_owns_and_removes_what_it_stops_applying() {
    let e = Endpoint::main();
    let config = object(json!({"replicas": 1, "image": "a", "tags": ["x", "y"]}));
    let created = e.apply(&empty(), config, "app", false, 1).unwrap();
    assert_eq!(created["spec"], json!({"replicas": 1, "image": "a", "tags": ["x", "y"]}));
    assert_eq!(
        owners(&created),
        [owner("app", "Apply", &[".spec.image", ".spec.replicas", ".spec.tags[=\"x\"]", ".spec.tags[=\"y\"]"])]
    );
    // Another applier also applies tag y; the first then stops applying image and both tags:
    // image and x go, y stays (it is still applied by the other).
    let live = e.apply(&created, object(json!({"tags": ["y"]})), "other", false, 2).unwrap();
    let reapplied = e.apply(&live, object(json!({"replicas": 1})), "app", false, 3).unwrap();
    assert_eq!(reapplied["spec"], json!({"replicas": 1, "tags": ["y"]}));
    assert_eq!(
        owners(&reapplied),
        [owner("other", "Apply", &[".spec.tags[=\"y\"]"]), owner("app", "Apply", &[".spec.replicas"])]
    );
}

#[test]
fn apply_conflicts_with_other_owners_unless_forced() {
    let e = Endpoint::main();
    let live = e.update(&empty(), object(json!({"replicas": 1, "image": "a"})), "kubectl-client-side-apply", 1);
    let err = e.apply(&live, object(json!({"replicas": 2})), "app", false, 2).unwrap_err();
    let Error::Conflicts(conflicts) = &err else { panic!("{err:?}") };
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using g/v1: .spec.replicas"
    );
    assert_eq!(conflicts.0[0].cause_message(), "conflict with \"kubectl-client-side-apply\" using g/v1");
    assert_eq!(conflicts.0[0].field(), ".spec.replicas");
    // The same value is shared ownership, not a conflict.
    let shared = e.apply(&live, object(json!({"replicas": 1})), "app", false, 2).unwrap();
    assert_eq!(owners(&shared).len(), 2);
    // Forced, the applier takes the field.
    let forced = e.apply(&live, object(json!({"replicas": 2, "image": "b"})), "app", true, 2).unwrap();
    assert_eq!(forced["spec"]["replicas"], 2);
    assert_eq!(
        owners(&forced),
        [
            owner("app", "Apply", &[".spec.image", ".spec.replicas"]),
            owner("kubectl-client-side-apply", "Update", &[".spec"])
        ]
    );
}

#[test]
fn several_conflicts_are_listed_by_manager() {
    let e = Endpoint::main();
    let live = e.apply(&empty(), object(json!({"replicas": 1})), "a", false, 1).unwrap();
    let mut changed = live.clone();
    changed["spec"]["image"] = json!("x");
    let live = e.update(&live, changed, "b", 2);
    let err = e.apply(&live, object(json!({"replicas": 5, "image": "y"})), "c", false, 3).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"a\":\n- .spec.replicas\nconflicts with \"b\" using g/v1:\n- .spec.image"
    );
}

#[test]
fn apply_refuses_wrong_types_and_managed_fields() {
    let e = Endpoint::main();
    let other_kind = json!({"apiVersion": "g/v2", "kind": "K", "metadata": {"name": "x"}});
    assert_eq!(
        e.apply(&empty(), other_kind, "m", false, 1).unwrap_err().to_string(),
        "invalid object type: g/v2, Kind=K"
    );
    let mut with_managed = object(json!({}));
    with_managed["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        e.apply(&empty(), with_managed, "m", false, 1).unwrap_err(),
        Error::BadRequest("metadata.managedFields must be nil".into())
    );
    let unknown = object(json!({"nope": 1}));
    assert_eq!(
        e.apply(&empty(), unknown, "m", false, 1).unwrap_err(),
        Error::Internal(
            "failed to create typed patch object (ns/x; g/v1, Kind=K): .spec.nope: field not declared in schema".into()
        )
    );
}

#[test]
fn clients_reset_managed_fields_and_invalid_ones_are_ignored() {
    let e = Endpoint::main();
    let live = e.update(&empty(), object(json!({"replicas": 1})), "creator", 1);
    // An empty list clears them, and an object without them is not tracked by updates.
    let mut reset = live.clone();
    reset["metadata"]["managedFields"] = json!([]);
    let cleared = e.update(&live, reset, "m", 2);
    assert!(cleared["metadata"].get("managedFields").is_none());
    let mut changed = cleared.clone();
    changed["spec"]["replicas"] = json!(2);
    assert!(e.update(&cleared, changed, "m", 3)["metadata"].get("managedFields").is_none());
    // The first apply to it records the existing fields as before-first-apply.
    let applied = e.apply(&cleared, object(json!({"image": "a"})), "app", false, 4).unwrap();
    assert_eq!(
        owners(&applied),
        [owner("app", "Apply", &[".spec.image"]), owner("before-first-apply", "Update", &[".spec", ".spec.replicas"])]
    );
    // Invalid managedFields in a request are replaced by the live ones.
    let mut invalid = live.clone();
    invalid["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Bogus"}]);
    assert_eq!(e.update(&live, invalid, "m", 5)["metadata"]["managedFields"], live["metadata"]["managedFields"]);
}

#[test]
fn status_writes_own_only_status() {
    let main = Endpoint::main();
    let live = main.update(&empty(), object(json!({"replicas": 1})), "creator", 1);
    let mut status = live.clone();
    status["status"] = json!({"ready": true});
    status["spec"]["replicas"] = json!(9);
    let written = Endpoint::status().update(&live, status, "controller", 2);
    let entries = written["metadata"]["managedFields"].as_array().unwrap();
    let controller = entries.iter().find(|e| e["manager"] == "controller").unwrap();
    assert_eq!(controller["subresource"], "status");
    assert_eq!(controller["fieldsV1"], json!({"f:status": {".": {}, "f:ready": {}}}));
    // The main resource never hands out status.
    let mut main_write = written.clone();
    main_write["status"] = json!({"ready": false});
    let after = main.update(&written, main_write, "editor", 3);
    assert!(owners(&after).iter().all(|(m, _, _)| m != "editor"));
}

#[test]
fn more_than_ten_update_managers_merge_into_ancient_changes() {
    let e = Endpoint::main();
    let mut live = e.update(&empty(), object(json!({"replicas": 0})), "m00", 0);
    for i in 1..=11 {
        let mut next = live.clone();
        let mut labels = live["metadata"]["labels"].as_object().cloned().unwrap_or_default();
        labels.insert(format!("l{i}"), json!("x"));
        next["metadata"]["labels"] = Value::Object(labels);
        live = e.update(&live, next, &format!("m{i:02}"), i);
    }
    let names: Vec<String> = owners(&live).into_iter().map(|(m, _, _)| m).collect();
    assert_eq!(names.len(), 10);
    assert_eq!(names[0], "ancient-changes");
    assert!(!names.contains(&"m00".to_string()) && !names.contains(&"m02".to_string()));
}

#[test]
fn kubectl_takes_over_its_client_side_applied_fields() {
    let e = Endpoint::main();
    let last = object(json!({"replicas": 1, "image": "a"}));
    let mut first = last.clone();
    first["metadata"]["annotations"] = json!({"kubectl.kubernetes.io/last-applied-configuration": last.to_string()});
    first["metadata"]["uid"] = json!("");
    let live = e.update(&empty(), first, "kubectl-client-side-apply", 1);
    // Another client changes the image: that field is no longer kubectl's to take.
    let mut changed = live.clone();
    changed["spec"]["image"] = json!("edited");
    let live = e.update(&live, changed, "editor", 2);
    let config = object(json!({"replicas": 2, "image": "b"}));
    let err = e.apply(&live, config.clone(), "kubectl", false, 3).unwrap_err();
    assert_eq!(err.to_string(), "Apply failed with 1 conflict: conflict with \"editor\" using g/v1: .spec.image");
    // Without that change, kubectl server-side apply takes over and refreshes the annotation.
    let live = e.update(
        &empty(),
        {
            let mut o = last.clone();
            o["metadata"]["annotations"] =
                json!({"kubectl.kubernetes.io/last-applied-configuration": last.to_string()});
            o
        },
        "kubectl-client-side-apply",
        1,
    );
    let applied = e.apply(&live, config, "kubectl", false, 3).unwrap();
    assert_eq!(applied["spec"], json!({"replicas": 2, "image": "b"}));
    let annotation =
        applied["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].as_str().unwrap();
    assert!(annotation.contains("\"replicas\":2") && annotation.ends_with('\n'));
    // Another applier gets the conflict.
    assert!(e.apply(&live, object(json!({"replicas": 2})), "other", false, 3).is_err());
}

#[test]
fn a_noop_apply_changes_nothing() {
    let e = Endpoint::main();
    let created = e.apply(&empty(), object(json!({"replicas": 1})), "app", false, 1).unwrap();
    let again = e.apply(&created, object(json!({"replicas": 1})), "app", false, 9).unwrap();
    assert_eq!(again, created);
}

/// Two versions of one schema; conversion changes apiVersion only.
struct TwoVersions(Schema);

impl Versions for TwoVersions {
    fn schema(&self, api_version: &str) -> Option<&Schema> {
        matches!(api_version, "g/v1" | "g/v2").then_some(&self.0)
    }

    fn convert(&self, object: &Value, api_version: &str) -> Result<Value, String> {
        let mut out = object.clone();
        out["apiVersion"] = json!(api_version);
        Ok(out)
    }
}

#[test]
fn managers_of_other_versions_are_compared_at_their_version() {
    let versions = TwoVersions(versions().0);
    let ignored = Set::new();
    let at = |api_version: &'static str| FieldManager {
        versions: &versions,
        api_version,
        kind: "K",
        subresource: "",
        ignored: &ignored,
    };
    let mut created = object(json!({"replicas": 1}));
    at("g/v1").update(&empty(), &mut created, "old-client", time(1));
    let mut config = object(json!({"replicas": 2}));
    config["apiVersion"] = json!("g/v2");
    let mut live = created.clone();
    live["apiVersion"] = json!("g/v2");
    let err = at("g/v2").apply(&live, &config, "new-client", false, time(2)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"old-client\" using g/v1: .spec.replicas"
    );
    // A manager whose version is gone is dropped.
    let mut stale = created.clone();
    stale["metadata"]["managedFields"][0]["apiVersion"] = json!("g/v0");
    stale["apiVersion"] = json!("g/v2");
    let applied = at("g/v2").apply(&stale, &config, "new-client", false, time(2)).unwrap();
    assert_eq!(owners(&applied), [owner("new-client", "Apply", &[".spec.replicas"])]);
}
