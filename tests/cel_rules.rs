//! CEL validation rules end to end: a CronTab definition carrying the documentation's replica
//! rules, driven with real kubectl against the real server; a definition Kubernetes' cost
//! estimate refuses, refused by `crd-apiserver check` with Kubernetes' words.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use serde_json::json;
use support::http::Client;
use support::{TestServer, stderr, stdout};

const CRONTAB_WITH_RULES: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
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
            x-kubernetes-validations:
            - rule: "self.minReplicas <= self.replicas"
              message: "replicas should be greater than or equal to minReplicas."
            - rule: "self.replicas <= self.maxReplicas"
              message: "replicas should be smaller than or equal to maxReplicas."
            properties:
              minReplicas:
                type: integer
              replicas:
                type: integer
              maxReplicas:
                type: integer
            required: [minReplicas, replicas, maxReplicas]
"#;

const BAD_CRONTAB: &str = r#"apiVersion: "stable.example.com/v1"
kind: CronTab
metadata:
  name: my-new-cron-object
spec:
  minReplicas: 0
  replicas: 20
  maxReplicas: 10
"#;

const BAD_RULE_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
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
              replicas:
                type: integer
                x-kubernetes-validations:
                - rule: "self == true"
"#;

#[test]
fn kubectl_sees_the_docs_replica_rules() {
    let server = TestServer::start(&[CRONTAB_WITH_RULES]);
    let file = server.write("bad.yaml", BAD_CRONTAB);
    let out = server.kubectl(&["apply", "-f", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(r#"The CronTab "my-new-cron-object" is invalid: spec: Invalid value: replicas should be smaller than or equal to maxReplicas."#),
        "{err}"
    );
    let good = server.write("good.yaml", &BAD_CRONTAB.replace("replicas: 20", "replicas: 5"));
    let out = server.kubectl_ok(&["apply", "-f", good.to_str().unwrap()]);
    assert!(out.contains("created"), "{out}");
}

#[test]
fn a_rule_that_does_not_compile_refuses_its_definition() {
    let mut server = TestServer::start(&[CRONTAB_WITH_RULES, BAD_RULE_CRD]);
    // The good definition is served; the bad one is reported with Kubernetes' compile error.
    let resources = server.kubectl_ok(&["api-resources", "--no-headers"]);
    assert!(resources.contains("crontabs"), "{resources}");
    assert!(!resources.contains("widgets"), "{resources}");
    server.stop();
    let log = server.log();
    assert!(
        log.contains(
            "compilation failed: ERROR: <input>:1:6: found no matching overload for '_==_' applied to '(int, bool)'"
        ),
        "{log}"
    );
}

/// A rule on the root of the schema: its errors have no field path.
const RANGE_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ranges.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: ranges, singular: range, kind: Range}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-validations:
        - rule: "!has(self.spec) || self.spec.low <= self.spec.high"
        properties:
          spec:
            type: object
            properties:
              low: {type: integer}
              high: {type: integer, maximum: 100}
"#;

#[test]
fn root_rule_errors_have_no_path() {
    let server = TestServer::start(&[RANGE_CRD]);
    let apply = |name: &str, spec: &str| {
        let object =
            format!("apiVersion: stable.example.com/v1\nkind: Range\nmetadata: {{name: {name}}}\nspec: {spec}\n");
        let out = server.kubectl_stdin(&["apply", "-f", "-"], &object);
        assert!(!out.status.success(), "{name} was accepted");
        stderr(&out)
    };
    let err = apply("inverted", "{low: 5, high: 1}");
    assert!(
        err.contains(r#"The Range "inverted" is invalid: <nil>: Invalid value: failed rule: !has(self.spec) || self.spec.low <= self.spec.high"#),
        "{err}"
    );
    // A value out of bounds does not stop the rules...
    let err = apply("too-high", "{low: 500, high: 101}");
    assert!(
        err.contains("spec.high: Invalid value: 101: spec.high in body should be less than or equal to 100"),
        "{err}"
    );
    assert!(err.contains("<nil>: Invalid value: failed rule:"), "{err}");
    // ...a value of the wrong type does: they are not run, and that is said at the root.
    let err = apply("mistyped", "{low: five, high: 1}");
    assert!(
        err.contains(r#"spec.low: Invalid value: "string": spec.low in body must be of type integer: "string""#),
        "{err}"
    );
    assert!(
        err.contains("<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"),
        "{err}"
    );
}

/// A definition whose message is built with `string()`: Kubernetes estimates `string(int)` as
/// unbounded and refuses the definition, so `check` refuses it too.
const LIMITS_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: limits.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: limits, singular: limit, kind: Limit}
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
            x-kubernetes-validations:
            - rule: "self.limit <= self.maxLimit"
              messageExpression: "'limit ' + string(self.maxLimit)"
            properties:
              limit: {type: integer}
              maxLimit: {type: integer}
"#;

#[test]
fn a_message_kubernetes_estimates_as_unbounded_refuses_its_definition() {
    let dir = tempfile::tempdir().unwrap();
    let check = |text: &str| {
        let path = dir.path().join("limits.yaml");
        std::fs::write(&path, text).unwrap();
        let out = std::process::Command::new(support::binary()).arg("check").arg(&path).output().unwrap();
        (out.status.code(), stdout(&out))
    };
    let (code, out) = check(LIMITS_CRD);
    assert_eq!(code, Some(1), "{out}");
    let message =
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].messageExpression";
    assert!(
        out.contains(&format!("{message}: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)")),
        "{out}"
    );
    // Formatting the number instead is what Kubernetes accepts.
    let formatted = LIMITS_CRD.replace("'limit ' + string(self.maxLimit)", "'limit %d'.format([self.maxLimit])");
    let (code, out) = check(&formatted);
    assert_eq!(code, Some(0), "{out}");
}

/// Gadgets: a deprecated version, and after the definition tightens, rules whose errors on
/// unchanged values are ratcheted into warnings.
const GADGET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    deprecated: true
    deprecationWarning: "stable.example.com/v1 Gadget is going away"
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              a: {type: string}
              b: {type: string}
              c: {type: string}
"#;

/// Issue 15 item 13: the warnings of a write come in kube-apiserver's order (the version's
/// deprecation, then validation's ratcheted rule errors in the order the rules ran, then the
/// finalizer names), each text once.
#[test]
fn ratcheted_rule_errors_warn_in_kubernetes_order() {
    let mut server = TestServer::start(&[GADGET_CRD]);
    let client = Client::admin(&server);
    let collection = "/apis/stable.example.com/v1/namespaces/default/gadgets";
    let gadget = json!({"apiVersion": "stable.example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g"}, "spec": {"a": "long a", "b": "long b", "c": "x"}});
    let created = client.send_json("POST", collection, &gadget);
    assert_eq!(created.status, 201, "{}", created.text());
    // The rules arrive after the object: its values break them.
    let rules = "            properties:\n              a: {type: string}\n";
    let tightened = GADGET_CRD.replace(
        rules,
        concat!(
            "            properties:\n",
            "              a:\n",
            "                type: string\n",
            "                x-kubernetes-validations:\n",
            "                - {rule: \"self.size() <= 3\", message: \"too long\"}\n",
            "                - {rule: \"size(self) <= 3\", message: \"too long\"}\n",
        ),
    );
    let tightened = tightened.replace(
        "              b: {type: string}\n",
        "              b:\n                type: string\n                x-kubernetes-validations: [{rule: \"self.size() <= 3\", message: \"too long\"}]\n",
    );
    std::fs::write(server.definitions_dir().join("00.yaml"), &tightened).unwrap();
    server.stop();
    server.spawn(&[]);
    // The write changes spec.c only, and adds a finalizer (which warns when unqualified).
    let patch = br#"{"metadata":{"finalizers":["unqualified"]},"spec":{"c":"y"}}"#;
    let patched =
        client.send("PATCH", &format!("{collection}/g"), "application/merge-patch+json", patch.to_vec()).unwrap();
    assert_eq!(patched.status, 200, "{}", patched.text());
    let warnings: Vec<&str> = patched.headers.get_all("warning").iter().map(|v| v.to_str().unwrap()).collect();
    assert_eq!(
        warnings,
        [
            r#"299 - "stable.example.com/v1 Gadget is going away""#,
            // The two rules of spec.a fail with the same text: it is written once.
            r#"299 - "spec.a: Invalid value: \"long a\": too long""#,
            r#"299 - "spec.b: Invalid value: \"long b\": too long""#,
            r#"299 - "metadata.finalizers: \"unqualified\": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers""#,
        ]
    );
    // A changed value is an error, not a warning.
    let changed = client
        .send(
            "PATCH",
            &format!("{collection}/g"),
            "application/merge-patch+json",
            br#"{"spec":{"b":"longer b"}}"#.to_vec(),
        )
        .unwrap();
    assert_eq!(changed.status, 422, "{}", changed.text());
    assert_eq!(
        changed.json()["message"],
        r#"Gadget.stable.example.com "g" is invalid: spec.b: Invalid value: "longer b": too long"#
    );
}
