//! Server-side apply and managedFields over raw HTTPS: the Status bodies of option errors and
//! conflicts, apply creating objects, which client-sent managedFields are kept, reset or
//! ignored, manager names from the User-Agent, the status subresource, dry runs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use serde_json::{Value, json};
use support::TestServer;
use support::http::{Client, Response};

const APPLY: &str = "application/apply-patch+yaml";
const COLLECTION: &str = "/apis/example.com/v1/namespaces/default/gadgets";

const GADGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
          status:
            type: object
            properties:
              phase: {type: string}
"#;

fn object(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec})
}

fn url(name: &str, query: &str) -> String {
    format!("{COLLECTION}/{name}{query}")
}

fn apply(client: &Client, name: &str, query: &str, body: &Value) -> Response {
    client.send("PATCH", &url(name, query), APPLY, serde_json::to_vec(body).unwrap()).unwrap()
}

fn status_of(response: &Response, code: u16) -> Value {
    let body = response.json();
    assert_eq!(response.status, code, "{body}");
    assert_eq!(body["kind"], "Status");
    body
}

fn managers(object: &Value) -> Vec<String> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|e| e.iter().map(|e| e["manager"].as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn apply_options_and_conflicts_as_kubernetes_reports_them() {
    let server = TestServer::start(&[GADGET_CRD]);
    let client = Client::admin(&server);

    // fieldManager is required for apply.
    let body = status_of(&apply(&client, "g", "", &object("g", json!({"size": 1}))), 422);
    assert_eq!(
        body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    assert_eq!(
        body["details"],
        json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [
            {"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]})
    );
    let long = format!("?fieldManager={}", "m".repeat(129));
    let body = status_of(&apply(&client, "g", &long, &object("g", json!({}))), 422);
    assert_eq!(
        body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes"
    );

    // Apply creates the object: 201.
    let created = apply(&client, "g", "?fieldManager=alice", &object("g", json!({"size": 1, "color": "red"})));
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(managers(&created.json()), ["alice"]);

    // force only goes with apply.
    let merge = client.send("PATCH", &url("g", "?force=true"), "application/merge-patch+json", "{}").unwrap();
    let body = status_of(&merge, 422);
    assert_eq!(
        body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );

    // There is no JSON flavour of apply.
    let json_apply = client.send("PATCH", &url("g", "?fieldManager=x"), "application/apply-patch+json", "{}").unwrap();
    assert_eq!(status_of(&json_apply, 415)["reason"], "UnsupportedMediaType");

    // A conflict is a 409 with one FieldManagerConflict cause per field.
    let conflict = apply(&client, "g", "?fieldManager=bob", &object("g", json!({"size": 2, "color": "blue"})));
    let body = status_of(&conflict, 409);
    assert_eq!(body["reason"], "Conflict");
    assert_eq!(
        body["message"],
        "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .spec.color\n- .spec.size"
    );
    assert_eq!(
        body["details"],
        json!({"causes": [
            {"reason": "FieldManagerConflict", "message": "conflict with \"alice\"", "field": ".spec.color"},
            {"reason": "FieldManagerConflict", "message": "conflict with \"alice\"", "field": ".spec.size"}]})
    );
    let forced = apply(&client, "g", "?fieldManager=bob&force=true", &object("g", json!({"size": 2})));
    assert_eq!(forced.status, 200, "{}", forced.text());
    assert_eq!(forced.json()["spec"], json!({"size": 2, "color": "red"}));

    // A resourceVersion in the configuration is a precondition.
    let mut stale = object("g", json!({"size": 3}));
    stale["metadata"]["resourceVersion"] = json!("1");
    let body = status_of(&apply(&client, "g", "?fieldManager=bob", &stale), 409);
    assert_eq!(
        body["message"],
        "Operation cannot be fulfilled on gadgets.example.com \"g\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // The configuration must be of the endpoint's kind and fit its schema.
    let mut other_version = object("g", json!({}));
    other_version["apiVersion"] = json!("example.com/v2");
    let body = status_of(&apply(&client, "g", "?fieldManager=bob", &other_version), 400);
    assert_eq!(body["message"], "invalid object type: example.com/v2, Kind=Gadget");
    // An undeclared field: the field manager's plain error, which kube-apiserver 1.36 answers
    // as a 500 without a reason (kubectl: `Error from server: failed to create typed patch
    // object ...`), whatever fieldValidation says.
    for validation in ["", "&fieldValidation=Strict", "&fieldValidation=Warn"] {
        let undeclared = object("g", json!({"shape": "round"}));
        let body = status_of(&apply(&client, "g", &format!("?fieldManager=bob{validation}"), &undeclared), 500);
        assert_eq!(
            body,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 500,
                   "message": "failed to create typed patch object (/g; example.com/v1, Kind=Gadget): .spec.shape: field not declared in schema"})
        );
    }
    let mut with_managed = object("g", json!({}));
    with_managed["metadata"]["managedFields"] = json!([]);
    let body = status_of(&apply(&client, "g", "?fieldManager=bob", &with_managed), 400);
    assert_eq!(body["message"], "metadata.managedFields must be nil");
    // A configuration that is not an object, or not YAML: kube-apiserver's words
    // (sigs.k8s.io/yaml's, after the patch handler's prefix).
    let body = status_of(&client.send("PATCH", &url("g", "?fieldManager=bob"), APPLY, "- a\n- b\n").unwrap(), 400);
    assert_eq!(
        body["message"],
        "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}"
    );
    let body = status_of(&client.send("PATCH", &url("g", "?fieldManager=bob"), APPLY, "a: 1\n b: 2\n").unwrap(), 400);
    assert_eq!(
        body["message"],
        "error decoding YAML: error converting YAML to JSON: yaml: line 2: mapping values are not allowed in this context"
    );
    let body = status_of(&client.send("PATCH", &url("g", "?fieldManager=bob"), APPLY, r#"{"a":"#).unwrap(), 400);
    assert_eq!(
        body["message"],
        "error decoding YAML: error converting YAML to JSON: yaml: line 1: did not find expected node content"
    );
}

#[test]
fn managed_fields_sent_by_clients() {
    let server = TestServer::start(&[GADGET_CRD]);
    let client = Client::admin(&server).header("user-agent", "gadget-controller/v1.2.3 (linux/amd64)");
    let created = client.send_json("POST", COLLECTION, &object("g", json!({"size": 1})));
    assert_eq!(created.status, 201, "{}", created.text());
    let live = created.json();
    // Without fieldManager, the User-Agent up to its first slash names the manager.
    assert_eq!(managers(&live), ["gadget-controller"]);
    assert_eq!(live["metadata"]["managedFields"][0]["operation"], "Update");

    // Invalid managedFields in an update are ignored: the live ones are kept.
    let mut invalid = live.clone();
    invalid["metadata"]["managedFields"] =
        json!([{"manager": "x", "operation": "Sideways", "apiVersion": "example.com/v1"}]);
    let kept = client.send_json("PUT", &url("g", ""), &invalid);
    assert_eq!(kept.status, 200, "{}", kept.text());
    assert_eq!(kept.json()["metadata"]["managedFields"], live["metadata"]["managedFields"]);

    // One empty entry resets them (the documented way: an empty list is dropped as an empty
    // ObjectMeta field before it reaches the field manager); updates then track nothing until
    // the next apply.
    let mut reset = kept.json();
    reset["metadata"]["managedFields"] = json!([{}]);
    let cleared = client.send_json("PUT", &url("g", ""), &reset).json();
    assert!(cleared["metadata"].get("managedFields").is_none(), "{cleared}");
    let patched = client
        .send("PATCH", &url("g", "?fieldManager=p"), "application/merge-patch+json", r#"{"spec":{"size":2}}"#)
        .unwrap();
    assert!(patched.json()["metadata"].get("managedFields").is_none());
    let applied = apply(&client, "g", "?fieldManager=a", &object("g", json!({"color": "red"}))).json();
    assert_eq!(managers(&applied), ["a", "before-first-apply"]);
    assert_eq!(applied["metadata"]["managedFields"][1]["fieldsV1"], json!({"f:spec": {".": {}, "f:size": {}}}));
}

#[test]
fn status_subresource_and_dry_run() {
    let server = TestServer::start(&[GADGET_CRD]);
    let client = Client::admin(&server);
    // A dry-run apply of a missing object answers as a create and stores nothing.
    let dry = apply(&client, "g", "?fieldManager=a&dryRun=All", &object("g", json!({"size": 1})));
    assert_eq!(dry.status, 201, "{}", dry.text());
    assert_eq!(client.get(&url("g", "")).unwrap().status, 404);
    // Applying the status of a missing object does not create it.
    let missing = client
        .send("PATCH", &url("g", "/status?fieldManager=a"), APPLY, serde_json::to_vec(&object("g", json!({}))).unwrap())
        .unwrap();
    assert_eq!(status_of(&missing, 404)["reason"], "NotFound");

    assert_eq!(apply(&client, "g", "?fieldManager=a", &object("g", json!({"size": 1}))).status, 201);
    let mut status = object("g", json!({"size": 99}));
    status["status"] = json!({"phase": "Ready"});
    let written = client
        .send("PATCH", &url("g", "/status?fieldManager=ctl"), APPLY, serde_json::to_vec(&status).unwrap())
        .unwrap();
    assert_eq!(written.status, 200, "{}", written.text());
    let object = written.json();
    assert_eq!(object["spec"]["size"], 1, "status writes leave spec alone");
    assert_eq!(object["status"]["phase"], "Ready");
    let entry =
        object["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["manager"] == "ctl").unwrap().clone();
    assert_eq!(entry["subresource"], "status");
    assert_eq!(entry["operation"], "Apply");
    assert_eq!(entry["fieldsV1"], json!({"f:status": {"f:phase": {}}}));
    // Applying again with the same configuration changes nothing, not even a time stamp, in
    // the next second of the clock.
    let second = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let written_in = second(std::time::SystemTime::now());
    while second(std::time::SystemTime::now()) == written_in {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let again = client
        .send("PATCH", &url("g", "/status?fieldManager=ctl"), APPLY, serde_json::to_vec(&status).unwrap())
        .unwrap();
    assert_eq!(again.json()["metadata"]["resourceVersion"], object["metadata"]["resourceVersion"]);
}
