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
