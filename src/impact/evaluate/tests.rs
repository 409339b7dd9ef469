//! The write-path differences the next write would make, field by field.

use serde_json::json;

use super::*;

fn changed(before: serde_json::Value, after: serde_json::Value) -> Changes {
    let mut out = Changes::default();
    changes(&before, &after, &Path::nil(), true, &mut out);
    out
}

#[test]
fn removed_and_added_fields_are_told_by_path() {
    let before = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x", "junk": 1},
        "spec": {"image": "i", "old": {"deep": 1}, "ports": [{"port": 1, "gone": true}, {"port": 2}]}});
    let after = json!({"apiVersion": "a/v2", "kind": "K", "metadata": {"name": "x", "generation": 1},
        "spec": {"image": "i", "replicas": 1, "ports": [{"port": 1}, {"port": 2, "protocol": "TCP"}]}, "status": {}});
    assert_eq!(
        changed(before, after),
        Changes {
            removed: vec!["spec.old".into(), "spec.ports[0].gone".into()],
            added: vec!["spec.ports[1].protocol".into(), "spec.replicas".into(), "status".into()],
        }
    );
}

#[test]
fn the_servers_own_fields_are_not_the_schemas() {
    let before = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}});
    let after = json!({"apiVersion": "a/v2", "metadata": {"name": "x", "resourceVersion": "3"}});
    assert_eq!(changed(before, after), Changes::default());
}

/// The CronTab with `replicas`' schema as given.
fn crontab(replicas: serde_json::Value) -> Arc<Definition> {
    let spec = json!({"type": "object", "properties": {"image": {"type": "string"}, "replicas": replicas}});
    let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]}});
    crate::impact::candidate::from_value(raw, "test.yaml").unwrap().definition
}

#[test]
fn validations_alone_read_every_object_alike() {
    let current = crontab(json!({"type": "integer"}));
    let tightened = crontab(json!({"type": "integer", "maximum": 5, "minimum": 0, "description": "how many",
        "x-kubernetes-validations": [{"rule": "self <= 5"}]}));
    assert!(!reads_differently(&current, &tightened, "v1"));
    assert!(!reads_differently(&current, &current, "v1"));
    // What reading does: defaults, nulls, pruning, embedded resources.
    for reading in [
        json!({"type": "integer", "default": 1}),
        json!({"type": "integer", "nullable": true}),
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        json!({"type": "object", "properties": {"maximum": {"type": "integer"}}}),
        json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}),
    ] {
        assert!(reads_differently(&current, &crontab(reading.clone()), "v1"), "{reading}");
    }
    // A version neither serves, and one only the candidate serves.
    assert!(!reads_differently(&current, &tightened, "v9"));
}
