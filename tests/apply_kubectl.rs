//! Server-side apply and field ownership driven with real kubectl: `apply --server-side`
//! (create, update, conflicts, `--force-conflicts`), the move from client-side to server-side
//! apply, `kubectl diff`, managedFields after every kind of write, list types, the status and
//! scale subresources.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use serde_json::Value;
use support::{CRONTAB_CRD, TestServer, stderr, stdout};

/// A definition with status and scale subresources and every list type.
const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
              args: {type: array, items: {type: string}}
              tags: {type: array, items: {type: string}, x-kubernetes-list-type: set}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
              ready: {type: boolean}
"#;

fn crontab(name: &str, spec: &str) -> String {
    format!("apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: {name}\nspec:\n{spec}")
}

/// The object as JSON, managedFields included.
fn get(server: &TestServer, resource: &str, name: &str) -> Value {
    serde_json::from_str(&server.kubectl_ok(&["get", resource, name, "-o", "json", "--show-managed-fields"])).unwrap()
}

/// `(manager, operation, subresource)` of every managedFields entry.
fn managers(object: &Value) -> Vec<(String, String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                    (s("manager"), s("operation"), s("subresource"))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn entry<'a>(object: &'a Value, manager: &str, operation: &str) -> &'a Value {
    object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
        .unwrap_or_else(|| panic!("no {manager} {operation} entry in {object}"))
}

fn m(manager: &str, operation: &str, subresource: &str) -> (String, String, String) {
    (manager.to_string(), operation.to_string(), subresource.to_string())
}

#[test]
fn apply_server_side_creates_updates_and_conflicts() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let file = server.write("ct.yaml", &crontab("nightly", "  cronSpec: '0 0 * * *'\n  image: img:1\n  replicas: 1\n"));
    let file = file.to_str().unwrap();
    assert_eq!(
        server.kubectl_ok(&["apply", "--server-side", "-f", file]).trim(),
        "crontab.stable.example.com/nightly serverside-applied"
    );

    let object = get(&server, "ct", "nightly");
    assert_eq!(managers(&object), [m("kubectl", "Apply", "")]);
    let applied = entry(&object, "kubectl", "Apply");
    assert_eq!(applied["apiVersion"], "stable.example.com/v1");
    assert_eq!(applied["fieldsType"], "FieldsV1");
    assert_eq!(applied["fieldsV1"], serde_json::json!({"f:spec": {"f:cronSpec": {}, "f:image": {}, "f:replicas": {}}}));
    assert!(applied["time"].as_str().unwrap().ends_with('Z'));

    // The YAML view shows FieldsV1 as kubectl prints it, and hides it by default.
    let yaml = server.kubectl_ok(&["get", "ct", "nightly", "-o", "yaml", "--show-managed-fields"]);
    for expected in ["managedFields:", "manager: kubectl", "operation: Apply", "f:spec:", "f:cronSpec: {}"] {
        assert!(yaml.contains(expected), "missing {expected:?} in\n{yaml}");
    }
    assert!(!server.kubectl_ok(&["get", "ct", "nightly", "-o", "yaml"]).contains("managedFields"));

    // Applying without image removes it: the applier no longer manages it and nobody else does.
    server.write("ct.yaml", &crontab("nightly", "  cronSpec: '0 0 * * *'\n  replicas: 1\n"));
    server.kubectl_ok(&["apply", "--server-side", "-f", file]);
    assert_eq!(
        server.kubectl_ok(&["get", "ct", "nightly", "-o", "jsonpath={.spec}"]),
        r#"{"cronSpec":"0 0 * * *","replicas":1}"#
    );

    // Another manager changing kubectl's field conflicts, then forces.
    let other = server.write("other.yaml", &crontab("nightly", "  replicas: 5\n"));
    let other = other.to_str().unwrap();
    let conflict = server.kubectl(&["apply", "--server-side", "--field-manager=ops", "-f", other]);
    assert!(!conflict.status.success());
    assert!(
        stderr(&conflict).contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#),
        "{}",
        stderr(&conflict)
    );
    server.kubectl_ok(&["apply", "--server-side", "--field-manager=ops", "--force-conflicts", "-f", other]);
    let object = get(&server, "ct", "nightly");
    assert_eq!(object["spec"]["replicas"], 5);
    assert_eq!(entry(&object, "ops", "Apply")["fieldsV1"], serde_json::json!({"f:spec": {"f:replicas": {}}}));
    assert_eq!(entry(&object, "kubectl", "Apply")["fieldsV1"], serde_json::json!({"f:spec": {"f:cronSpec": {}}}));

    // A field the schema does not declare: kube-apiserver 1.36's words, as a Status without a
    // reason (so no `(BadRequest)` after `Error from server`), whichever validation is asked.
    let undeclared = server.write("undeclared.yaml", &crontab("nightly", "  bogus: 1\n"));
    for validate in ["--validate=strict", "--validate=warn"] {
        let refused = server.kubectl(&["apply", "--server-side", validate, "-f", undeclared.to_str().unwrap()]);
        assert!(!refused.status.success());
        assert_eq!(
            stderr(&refused).trim(),
            "Error from server: failed to create typed patch object (default/nightly; stable.example.com/v1, Kind=CronTab): .spec.bogus: field not declared in schema"
        );
    }

    // Dry run changes nothing.
    let dry = server.write("dry.yaml", &crontab("nightly", "  cronSpec: 'dry'\n"));
    server.kubectl_ok(&["apply", "--server-side", "--dry-run=server", "-f", dry.to_str().unwrap()]);
    assert_eq!(server.kubectl_ok(&["get", "ct", "nightly", "-o", "jsonpath={.spec.cronSpec}"]), "0 0 * * *");
}

#[test]
fn client_side_apply_then_server_side() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let v1 = crontab("daily", "  cronSpec: '0 0 * * *'\n  replicas: 1\n");
    let file = server.write("ct.yaml", &v1);
    let file = file.to_str().unwrap();
    server.kubectl_ok(&["apply", "-f", file]);
    let object = get(&server, "ct", "daily");
    assert_eq!(managers(&object), [m("kubectl-client-side-apply", "Update", "")]);
    let csa = entry(&object, "kubectl-client-side-apply", "Update");
    assert_eq!(
        csa["fieldsV1"]["f:metadata"],
        serde_json::json!({"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}})
    );

    // A different server-side manager conflicts with the client-side applier.
    let changed = server.write("changed.yaml", &crontab("daily", "  cronSpec: '0 0 * * *'\n  replicas: 2\n"));
    let changed = changed.to_str().unwrap();
    let conflict = server.kubectl(&["apply", "--server-side", "--field-manager=team", "-f", changed]);
    assert!(
        stderr(&conflict).contains(
            r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using stable.example.com/v1: .spec.replicas"#
        ),
        "{}",
        stderr(&conflict)
    );

    // kubectl itself moves to server-side apply without conflicts, and keeps the annotation.
    server.kubectl_ok(&["apply", "--server-side", "-f", changed]);
    let object = get(&server, "ct", "daily");
    assert_eq!(object["spec"]["replicas"], 2);
    let names: Vec<String> = managers(&object).into_iter().map(|(n, _, _)| n).collect();
    assert!(
        names.contains(&"kubectl".to_string()) && !names.contains(&"kubectl-client-side-apply".to_string()),
        "{names:?}"
    );
    let annotation =
        object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].as_str().unwrap();
    assert!(annotation.contains(r#""replicas":2"#), "{annotation}");
}

#[test]
fn kubectl_diff_shows_changes_then_nothing() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let file = server.write("ct.yaml", &crontab("hourly", "  cronSpec: '0 * * * *'\n  replicas: 1\n"));
    let file = file.to_str().unwrap();
    server.kubectl_ok(&["apply", "--server-side", "-f", file]);
    server.write("ct.yaml", &crontab("hourly", "  cronSpec: '0 * * * *'\n  replicas: 3\n"));
    for flags in [&["diff", "--server-side", "-f"][..], &["diff", "-f"][..]] {
        let mut args = flags.to_vec();
        args.push(file);
        let diff = server.kubectl(&args);
        assert_eq!(diff.status.code(), Some(1), "{args:?}: {}", stderr(&diff));
        let out = stdout(&diff);
        assert!(out.contains("-  replicas: 1") && out.contains("+  replicas: 3"), "{out}");
    }
    assert_eq!(server.kubectl_ok(&["get", "ct", "hourly", "-o", "jsonpath={.spec.replicas}"]), "1");
    server.kubectl_ok(&["apply", "--server-side", "-f", file]);
    let same = server.kubectl(&["diff", "--server-side", "-f", file]);
    assert_eq!(same.status.code(), Some(0), "{}{}", stdout(&same), stderr(&same));
    assert!(stdout(&same).trim().is_empty());
}

#[test]
fn every_write_records_its_manager() {
    let server = TestServer::start(&[WIDGET_CRD]);
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  replicas: 1\n  args: [a]\n";
    let created = server.kubectl_stdin(&["create", "-f", "-"], widget);
    assert!(created.status.success(), "{}", stderr(&created));
    server.kubectl_ok(&["label", "widget", "w", "tier=web"]);
    server.kubectl_ok(&["patch", "widget", "w", "--type=merge", "-p", r#"{"spec":{"args":["b"]}}"#]);
    server.kubectl_ok(&[
        "patch",
        "widget",
        "w",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"ready":true}}"#,
    ]);
    let current = server.kubectl_ok(&["get", "widget", "w", "-o", "yaml"]);
    let replaced = server.kubectl_stdin(&["replace", "-f", "-"], &current.replace("- b", "- c"));
    assert!(replaced.status.success(), "{}", stderr(&replaced));
    server.kubectl_ok(&["scale", "widget", "w", "--replicas=4"]);

    let object = get(&server, "widget", "w");
    let mut names = managers(&object);
    names.sort();
    assert_eq!(
        names,
        [
            m("kubectl", "Update", "scale"),
            m("kubectl-create", "Update", ""),
            m("kubectl-label", "Update", ""),
            m("kubectl-patch", "Update", "status"),
            m("kubectl-replace", "Update", ""),
        ]
    );
    assert_eq!(
        entry(&object, "kubectl-label", "Update")["fieldsV1"],
        serde_json::json!({"f:metadata": {"f:labels": {".": {}, "f:tier": {}}}})
    );
    assert_eq!(entry(&object, "kubectl-replace", "Update")["fieldsV1"], serde_json::json!({"f:spec": {"f:args": {}}}));
    let status =
        object["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["subresource"] == "status").unwrap();
    assert_eq!(status["fieldsV1"], serde_json::json!({"f:status": {".": {}, "f:ready": {}}}));
    let scale =
        object["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["subresource"] == "scale").unwrap();
    assert_eq!(scale["fieldsV1"], serde_json::json!({"f:spec": {"f:replicas": {}}}));

    // Applying the original now conflicts with the scaler and the replacer, grouped by manager.
    let apply = server.kubectl_stdin(&["apply", "--server-side", "-f", "-"], widget);
    assert!(
        stderr(&apply).contains(
            "Apply failed with 2 conflicts: conflicts with \"kubectl\" with subresource \"scale\" using example.com/v1:\n- .spec.replicas\nconflicts with \"kubectl-replace\" using example.com/v1:\n- .spec.args\n"
        ),
        "{}",
        stderr(&apply)
    );
}

#[test]
fn list_types_decide_how_appliers_share_lists() {
    let server = TestServer::start(&[WIDGET_CRD]);
    let apply = |manager: &str, spec: &str| {
        let text = format!("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n{spec}");
        let out =
            server.kubectl_stdin(&["apply", "--server-side", &format!("--field-manager={manager}"), "-f", "-"], &text);
        assert!(out.status.success(), "{manager}: {}", stderr(&out));
    };
    apply("a", "  tags: [x]\n  ports: [{name: http, port: 80}]\n");
    apply("b", "  tags: [z]\n  ports: [{name: https, port: 443}]\n");
    let object = get(&server, "widget", "w");
    assert_eq!(object["spec"]["tags"], serde_json::json!(["x", "z"]));
    assert_eq!(
        object["spec"]["ports"],
        serde_json::json!([{"name": "http", "port": 80}, {"name": "https", "port": 443}])
    );
    assert_eq!(
        entry(&object, "b", "Apply")["fieldsV1"],
        serde_json::json!({"f:spec": {"f:ports": {"k:{\"name\":\"https\"}": {".": {}, "f:name": {}, "f:port": {}}}, "f:tags": {"v:\"z\"": {}}}})
    );
    // An atomic list belongs to one applier: a second one conflicts.
    apply("a", "  tags: [x]\n  ports: [{name: http, port: 80}]\n  args: [one]\n");
    let text = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  args: [two]\n";
    let conflict = server.kubectl_stdin(&["apply", "--server-side", "--field-manager=b", "-f", "-"], text);
    assert!(stderr(&conflict).contains(r#"conflict with "a": .spec.args"#), "{}", stderr(&conflict));
    // Dropping its items removes only what no one else applies.
    apply("a", "  args: [one]\n");
    let object = get(&server, "widget", "w");
    assert_eq!(object["spec"]["tags"], serde_json::json!(["z"]));
    assert_eq!(object["spec"]["ports"], serde_json::json!([{"name": "https", "port": 443}]));
}
