//! The schema sections of the Kubernetes documentation's CustomResourceDefinition page, driven
//! with real kubectl (and raw HTTPS where kubectl hides the detail) against the real server:
//! validation, pruning and `fieldValidation`, defaulting, nullable, ratcheting, and broken
//! definitions next to good ones.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use serde_json::{Value, json};
use support::http::Client;
use support::{TestServer, stderr, stdout};

/// The documentation's CronTab with validation (pattern, minimum, maximum) and defaults.
const VALIDATED_CRONTAB: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                cronSpec:
                  type: string
                  pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'
                  default: "5 0 * * *"
                image:
                  type: string
                replicas:
                  type: integer
                  minimum: 1
                  maximum: 10
                  default: 1
                nullables:
                  type: object
                  properties:
                    foo:
                      type: string
                      nullable: false
                      default: "default"
                    bar:
                      type: string
                      nullable: true
                    baz:
                      type: string
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames:
    - ct
"#;

const COLLECTION: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn get_json(server: &TestServer, name: &str) -> Value {
    serde_json::from_str(&server.kubectl_ok(&["get", "ct", name, "-o", "json"])).unwrap()
}

#[test]
fn invalid_crontab_is_rejected_with_both_causes() {
    let server = TestServer::start(&[VALIDATED_CRONTAB]);
    let file = server.write(
        "my-crontab.yaml",
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: my-new-cron-object\nspec:\n  cronSpec: \"* * * *\"\n  image: my-awesome-cron-image\n  replicas: 15\n",
    );
    let out = server.kubectl(&["apply", "-f", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(r#"The CronTab "my-new-cron-object" is invalid"#), "{err}");
    assert!(
        err.contains(r#"spec.cronSpec: Invalid value: "* * * *": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'"#),
        "{err}"
    );
    assert!(
        err.contains("spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10"),
        "{err}"
    );

    // The same request over HTTP: one 422 listing both causes with their fields.
    let body = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "x"},
        "spec": {"cronSpec": "* * * *", "replicas": 15}});
    let response = Client::admin(&server).send_json("POST", COLLECTION, &body);
    assert_eq!(response.status, 422, "{}", response.text());
    let status = response.json();
    assert_eq!(status["reason"], "Invalid");
    let fields: Vec<&str> =
        status["details"]["causes"].as_array().unwrap().iter().map(|c| c["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["spec.cronSpec", "spec.replicas"]);
    assert_eq!(status["details"]["causes"][1]["reason"], "FieldValueInvalid");

    // A valid one is accepted.
    let good = file.to_str().unwrap();
    server.write(
        "my-crontab.yaml",
        &std::fs::read_to_string(good).unwrap().replace("\"* * * *\"", "\"* * * * */5\"").replace("15", "5"),
    );
    assert_eq!(
        server.kubectl_ok(&["apply", "-f", good]).trim(),
        "crontab.stable.example.com/my-new-cron-object created"
    );
}

#[test]
fn unknown_fields_are_pruned_or_refused() {
    let server = TestServer::start(&[VALIDATED_CRONTAB]);
    let file = server.write(
        "my-crontab.yaml",
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: my-new-cron-object\nspec:\n  cronSpec: \"* * * * */5\"\n  image: my-awesome-cron-image\n  someRandomField: 42\n",
    );
    let file = file.to_str().unwrap();
    // kubectl validates strictly by default: the server refuses the unknown field.
    let strict = server.kubectl(&["apply", "-f", file]);
    assert!(!strict.status.success());
    assert!(
        stderr(&strict).contains(r#"strict decoding error: unknown field "spec.someRandomField""#),
        "{}",
        stderr(&strict)
    );

    // Without validation the field is pruned, as the documentation shows.
    let created = stdout(&server.kubectl(&["create", "--validate=false", "-f", file, "-o", "yaml"]));
    assert!(created.contains("image: my-awesome-cron-image"), "{created}");
    assert!(!created.contains("someRandomField"), "{created}");
    assert!(!get_json(&server, "my-new-cron-object")["spec"].as_object().unwrap().contains_key("someRandomField"));

    // Under Warn (the default without a query parameter) the write succeeds with warnings,
    // also for duplicate fields.
    let client = Client::admin(&server);
    let body = br#"{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"warned","foo":1},"spec":{"replicas":2,"replicas":3,"bogus":true}}"#;
    let response = client.send("POST", COLLECTION, "application/json", body.to_vec()).unwrap();
    assert_eq!(response.status, 201, "{}", response.text());
    let warnings: Vec<&str> = response.headers.get_all("warning").iter().map(|v| v.to_str().unwrap()).collect();
    assert_eq!(
        warnings,
        [
            r#"299 - "duplicate field \"spec.replicas\"""#,
            r#"299 - "unknown field \"metadata.foo\"""#,
            r#"299 - "unknown field \"spec.bogus\"""#
        ]
    );
    assert_eq!(response.json()["spec"]["replicas"], 3);
    let strict = client
        .send("POST", &format!("{COLLECTION}?fieldValidation=Strict"), "application/json", body.to_vec())
        .unwrap();
    assert_eq!(strict.status, 400);
    assert_eq!(
        strict.json()["message"],
        r#"CronTab in version "v1" cannot be handled as a CronTab: strict decoding error: duplicate field "spec.replicas", unknown field "metadata.foo", unknown field "spec.bogus""#
    );
}

#[test]
fn defaults_and_nullable() {
    let server = TestServer::start(&[VALIDATED_CRONTAB]);
    let object = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: my-new-cron-object\nspec:\n  image: my-awesome-cron-image\n  nullables:\n    foo: null\n    bar: null\n    baz: null\n";
    server.kubectl_stdin(&["create", "-f", "-"], object);
    let spec = get_json(&server, "my-new-cron-object")["spec"].clone();
    assert_eq!(spec["cronSpec"], "5 0 * * *");
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["nullables"], json!({"foo": "default", "bar": null}));

    // A default is not a minimum: an explicit invalid value is still refused.
    let out = server.kubectl_stdin(
        &["create", "-f", "-"],
        &object.replace("my-new-cron-object", "zero").replace("  image:", "  replicas: 0\n  image:"),
    );
    assert!(
        stderr(&out)
            .contains("spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn ratcheting_keeps_unchanged_invalid_values() {
    let loose = VALIDATED_CRONTAB.replace("                  maximum: 10\n", "");
    let server = TestServer::start(&[&loose]);
    server.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: big\nspec:\n  replicas: 50\n",
    );
    // The definition tightens: 50 is now invalid, but may stay while it does not change.
    std::fs::write(server.definitions_dir().join("00.yaml"), VALIDATED_CRONTAB).unwrap();
    let mut server = server;
    server.stop();
    server.spawn(&[]);
    server.kubectl_ok(&["label", "ct", "big", "tier=batch"]);
    server.kubectl_ok(&["patch", "ct", "big", "--type=merge", "-p", r#"{"spec":{"image":"new"}}"#]);
    let changed = server.kubectl(&["patch", "ct", "big", "--type=merge", "-p", r#"{"spec":{"replicas":40}}"#]);
    assert!(
        stderr(&changed)
            .contains("spec.replicas: Invalid value: 40: spec.replicas in body should be less than or equal to 10"),
        "{}",
        stderr(&changed)
    );
}

#[test]
fn broken_definitions_are_reported_and_the_rest_served() {
    let broken = VALIDATED_CRONTAB
        .replace("crontabs.stable.example.com", "widgets.stable.example.com")
        .replace("plural: crontabs", "plural: widgets")
        .replace("singular: crontab", "singular: widget")
        .replace("kind: CronTab", "kind: Widget")
        .replace("- ct", "- wd")
        .replace("            spec:\n              type: object\n", "            spec:\n");
    let server = TestServer::start(&[VALIDATED_CRONTAB, &broken]);
    let log = server.log();
    assert!(
        log.contains("spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"),
        "{log}"
    );
    let resources = server.kubectl_ok(&["api-resources", "--no-headers"]);
    assert!(resources.contains("crontabs"));
    assert!(!resources.contains("widgets"));

    // `crd-apiserver check` reports the same, and `validate` uses the served definitions.
    let check =
        std::process::Command::new(support::binary()).arg("check").arg(server.definitions_dir()).output().unwrap();
    assert_eq!(check.status.code(), Some(1));
    assert!(
        stdout(&check).contains("properties[spec].type: Required value: must not be empty for specified object fields")
    );
}

#[test]
fn misspelled_definition_fields_are_errors_that_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let check = |file: &str, text: &str| {
        let path = dir.path().join(file);
        std::fs::write(&path, text).unwrap();
        let out = std::process::Command::new(support::binary()).arg("check").arg(&path).output().unwrap();
        (out.status.code(), stdout(&out))
    };
    let typos = VALIDATED_CRONTAB.replacen("served: true", "servd: true", 1).replacen(
        "  scope:",
        "  subresource: {}\n  scope:",
        1,
    );
    let (code, out) = check("typos.yaml", &typos);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(r#"typos.yaml: CustomResourceDefinition "crontabs.stable.example.com" is invalid: strict decoding error: unknown field "spec.subresource", unknown field "spec.versions[0].servd""#),
        "{out}"
    );
    // The same definition without the typos is fine.
    assert_eq!(check("fine.yaml", VALIDATED_CRONTAB).0, Some(0));
    // A file with no definitions is a mistake too.
    let (code, out) = check("empty.yaml", "# nothing here\n");
    assert_eq!(code, Some(1));
    assert!(out.contains("empty.yaml: no CustomResourceDefinitions found"), "{out}");
}

#[test]
fn validate_command_runs_the_write_path_offline() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("crontab.yaml");
    std::fs::write(&defs, VALIDATED_CRONTAB).unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(support::binary())
            .arg("validate")
            .arg("--definitions")
            .arg(&defs)
            .args(args)
            .output()
            .unwrap()
    };
    let good = write(
        "good.yaml",
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: a\nspec:\n  image: x\n  extra: 1\n",
    );
    let out = run(&["-o".as_ref(), "json".as_ref(), good.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stored: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(stored["spec"], json!({"cronSpec": "5 0 * * *", "image": "x", "replicas": 1}));
    assert_eq!(stored["metadata"]["namespace"], "default");
    assert!(stderr(&out).contains(r#"Warning: unknown field "spec.extra""#));

    let strict = run(&["--field-validation".as_ref(), "Strict".as_ref(), good.as_os_str()]);
    assert_eq!(strict.status.code(), Some(1));
    assert!(stdout(&strict).contains("reason: BadRequest"), "{}", stdout(&strict));

    let bad = write(
        "bad.yaml",
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: a\nspec:\n  replicas: 50\n",
    );
    let out = run(&[bad.as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("spec.replicas in body should be less than or equal to 10"), "{}", stdout(&out));
    // As an update of an object that already had 50 replicas, it ratchets.
    let out = run(&["--old".as_ref(), bad.as_os_str(), bad.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let unknown = write("unknown.yaml", "apiVersion: other.example.com/v1\nkind: Thing\nmetadata:\n  name: a\n");
    assert_eq!(run(&[unknown.as_os_str()]).status.code(), Some(2));
    assert_eq!(run(&[dir.path().join("missing.yaml").as_os_str()]).status.code(), Some(2));
}

#[test]
fn defaults_apply_on_read_without_writing_back() {
    let before = VALIDATED_CRONTAB.replace("                image:\n                  type: string\n", "");
    let mut server = TestServer::start(&[&before]);
    server.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: old\nspec:\n  replicas: 2\n",
    );
    let rv = get_json(&server, "old")["metadata"]["resourceVersion"].clone();
    // The definition gains a defaulted field; objects read afterwards show it.
    let after = VALIDATED_CRONTAB.replace(
        "                image:\n                  type: string\n",
        "                image:\n                  type: string\n                  default: busybox\n",
    );
    std::fs::write(server.definitions_dir().join("00.yaml"), after).unwrap();
    server.stop();
    server.spawn(&[]);
    let object = get_json(&server, "old");
    assert_eq!(object["spec"]["image"], "busybox");
    assert_eq!(object["metadata"]["resourceVersion"], rv, "reading wrote nothing");
}

#[test]
fn the_status_subresource_validates_status_alone() {
    let with_status = VALIDATED_CRONTAB
        .replace(
            "            spec:\n              type: object\n",
            "            status:\n              type: object\n              properties:\n                ready:\n                  type: integer\n                  minimum: 0\n            spec:\n              type: object\n",
        )
        .replace("      storage: true\n", "      storage: true\n      subresources:\n        status: {}\n");
    let server = TestServer::start(&[&with_status]);
    let client = Client::admin(&server);
    let created = client.send_json(
        "POST",
        COLLECTION,
        &json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "s"}, "spec": {"replicas": 2}, "status": {"ready": -5}}),
    );
    assert_eq!(created.status, 201, "status is dropped on create: {}", created.text());
    let mut object = created.json();
    object["status"] = json!({"ready": -1});
    let refused = client.send_json("PUT", &format!("{COLLECTION}/s/status"), &object);
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert_eq!(
        refused.json()["message"],
        r#"CronTab.stable.example.com "s" is invalid: status.ready: Invalid value: -1: ready in body should be greater than or equal to 0"#
    );
    object["status"] = json!({"ready": 3});
    let accepted = client.send_json("PUT", &format!("{COLLECTION}/s/status"), &object);
    assert_eq!(accepted.status, 200, "{}", accepted.text());
    assert_eq!(accepted.json()["status"]["ready"], 3);
}

/// Free-form data next to a typed number field.
const MEASURED_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: measures.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: measures, singular: measure, kind: Measure}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              ratio: {type: number}
              data:
                type: object
                x-kubernetes-preserve-unknown-fields: true
"#;

#[test]
fn numbers_are_written_as_kubernetes_writes_them() {
    let server = TestServer::start(&[MEASURED_CRD]);
    let client = Client::admin(&server);
    let collection = "/apis/stable.example.com/v1/namespaces/default/measures";
    let body = r#"{"apiVersion":"stable.example.com/v1","kind":"Measure","metadata":{"name":"m"},
        "spec":{"ratio":2.0,"data":{"one":1.0,"zero":-0.0,"big":1e21,"small":0.00000015,"plain":0.5,"int":7}}}"#;
    let created = client.send("POST", collection, "application/json", body.to_string()).unwrap();
    assert_eq!(created.status, 201, "{}", created.text());
    // Go's unstructured decoding keeps non-int64 numbers as float64, which encoding/json writes
    // in its shortest form: no ".0", "-0", an exponent only from 1e21 up and under 1e-6.
    let expected = r#""spec":{"data":{"big":1e+21,"int":7,"one":1,"plain":0.5,"small":1.5e-7,"zero":-0},"ratio":2}"#;
    for response in
        [created.text(), client.get(&format!("{collection}/m")).unwrap().text(), client.get(collection).unwrap().text()]
    {
        assert!(response.contains(expected), "{response}");
    }
    let listed = server.kubectl_ok(&["get", "measures", "m", "-o", "jsonpath={.spec.data.one} {.spec.ratio}"]);
    assert_eq!(listed, "1 2");
}
