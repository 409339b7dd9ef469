//! MutatingAdmissionPolicies of the cluster (`admissionregistration.k8s.io/v1`, served by the
//! control-plane double with list+watch as Kubernetes 1.36 serves them) applied to our
//! resources on our CEL engine: apply configurations merged by list type, JSON patches,
//! params, the failure policy and kube-apiserver's texts for failed mutations, the schema
//! checked again after mutation, and reinvocation together with a real mutating webhook.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::admission_webhook::AdmissionWebhooks;
use support::cluster::TestCluster;
use support::control_plane::ControlPlane;
use support::control_plane::rbac::{Rule, Subject, User};
use support::http::Client;
use support::{CRONTAB_CRD, create_until};

const GADGETS: &str = "/apis/stable.example.com/v1/namespaces/default/gadgets";
const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

/// Tags are an atomic list (no list type), ports a map-list keyed by name.
const GADGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
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
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                replicas: {type: integer}
                tags: {type: array, items: {type: string}}
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
"#;

fn policy(name: &str, resource: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["matchConstraints"] = json!({"resourceRules": [{"apiGroups": ["stable.example.com"], "apiVersions": ["*"],
        "operations": ["CREATE"], "resources": [resource]}]});
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, policy: &str, extra: Value) -> Value {
    let mut spec = json!({"policyName": policy});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": spec})
}

fn install(plane: &ControlPlane, policy: Value) {
    let name = policy["metadata"]["name"].as_str().unwrap().to_string();
    plane.state().put_object("mutatingadmissionpolicybindings", binding(&format!("{name}-binding"), &name, json!({})));
    plane.state().put_object("mutatingadmissionpolicies", policy);
}

fn remove(plane: &ControlPlane, name: &str) {
    plane.state().delete_object("mutatingadmissionpolicybindings", "", &format!("{name}-binding"));
    plane.state().delete_object("mutatingadmissionpolicies", "", name);
}

fn gadget(name: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "Gadget", "metadata": {"name": name},
        "spec": {"replicas": 2, "tags": ["a"], "ports": [{"name": "http", "port": 80}]}})
}

fn start() -> (TestCluster, Client) {
    let plane = ControlPlane::start();
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    plane.add_rule(Rule::resources(
        "params-reader",
        vec![Subject::User(support::control_plane::rbac::SERVICE_ACCOUNT.into())],
        &["get", "list", "watch"],
        &[""],
        &["configmaps"],
    ));
    let cluster = TestCluster::start_on(plane, &[GADGET_CRD, CRONTAB_CRD], &[]);
    let client = Client::to_plane(&cluster.plane, "admin-token");
    (cluster, client)
}

#[test]
fn apply_configurations_and_json_patches_mutate_creates() {
    let (cluster, client) = start();
    let plane = &cluster.plane;
    plane.state().put_object(
        "configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tiers", "namespace": "default"}, "data": {"tier": "gold"}}),
    );
    let mut defaults = policy(
        "defaults",
        "gadgets",
        json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "variables": [{"name": "doubled", "expression": "object.spec.replicas * 2"}],
            "mutations": [
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                    "Object{metadata: Object.metadata{labels: {'tier': params.data.tier}}, spec: Object.spec{ports: [Object.spec.ports{name: 'metrics', port: 9090}]}}"}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'replace', path: '/spec/replicas', value: variables.doubled}, JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}, JSONPatch{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey('example.com/mutated'), value: 'yes'}]"}}
            ]
        }),
    );
    defaults["spec"]["failurePolicy"] = json!("Fail");
    plane.state().put_object(
        "mutatingadmissionpolicybindings",
        binding(
            "defaults-binding",
            "defaults",
            json!({"paramRef": {"name": "tiers", "parameterNotFoundAction": "Deny"}}),
        ),
    );
    plane.state().put_object("mutatingadmissionpolicies", defaults);
    let (response, name) = create_until(&client, GADGETS, &gadget("g"), |r| {
        r.status != 201 || r.json()["metadata"]["labels"] != Value::Null
    });
    assert_eq!(response.status, 201, "{}", response.text());
    let created = response.json();
    assert_eq!(created["metadata"]["labels"], json!({"tier": "gold"}));
    assert_eq!(created["metadata"]["annotations"], json!({"example.com/mutated": "yes"}));
    // The map-list keeps the client's item and gains the policy's; the atomic list is kept.
    assert_eq!(created["spec"]["ports"], json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}]));
    assert_eq!(created["spec"]["tags"], json!(["a"]));
    assert_eq!(created["spec"]["replicas"], 4);
    // What was stored is the mutated object.
    let stored = client.get(&format!("{GADGETS}/{name}")).unwrap();
    assert_eq!(stored.json()["spec"], created["spec"]);

    // A binding whose params are gone denies under parameterNotFoundAction Deny.
    plane.state().delete_object("configmaps", "default", "tiers");
    let (response, _) = create_until(&client, GADGETS, &gadget("noparams"), |r| r.status != 201);
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(
        response.json()["message"],
        "policy 'defaults' with binding 'defaults-binding' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
    assert_eq!(response.json()["reason"], "Forbidden");
    remove(plane, "defaults");

    // A failed `test` operation leaves the object as it was, without error.
    install(
        plane,
        policy(
            "guarded",
            "gadgets",
            json!({"mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                "[JSONPatch{op: 'test', path: '/spec/replicas', value: 99}, JSONPatch{op: 'replace', path: '/spec/replicas', value: 0}]"}}]}),
        ),
    );
    // Wait until the policy is in effect: a gadget with 99 replicas is changed.
    let mut ninety_nine = gadget("ninety-nine");
    ninety_nine["spec"]["replicas"] = json!(99);
    let (response, _) = create_until(&client, GADGETS, &ninety_nine, |r| r.json()["spec"]["replicas"] == 0);
    assert_eq!(response.status, 201);
    let response = client.send_json("POST", GADGETS, &gadget("untouched"));
    assert_eq!(response.status, 201, "{}", response.text());
    assert_eq!(response.json()["spec"]["replicas"], 2);
    remove(plane, "guarded");
}

#[test]
fn failed_mutations_read_as_kube_apiserver_words_them() {
    let (cluster, client) = start();
    let plane = &cluster.plane;
    let atomic = "Object{spec: Object.spec{tags: ['b']}}";
    install(
        plane,
        policy(
            "atomic",
            "gadgets",
            json!({"mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": atomic}}]}),
        ),
    );
    let (response, name) = create_until(&client, GADGETS, &gadget("atomic"), |r| r.status != 201);
    let why = "policy 'atomic' with binding 'atomic-binding' denied request: error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.tags";
    assert_eq!(
        response.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": why,
            "reason": "Invalid", "details": {"name": name, "group": "stable.example.com", "kind": "gadgets", "causes": [{"message": why}]},
            "code": 403})
    );
    // kubectl shows it as it shows kube-apiserver's (a Status of reason Invalid, one cause
    // without a field).
    let alice = cluster.user("alice", &["system:masters"]);
    let out = cluster.kubectl_stdin(
        &alice,
        &["create", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: Gadget\nmetadata:\n  name: via-kubectl\nspec:\n  tags: [a]\n",
    );
    assert_eq!(support::stderr(&out).trim(), format!("The gadgets \"via-kubectl\" is invalid: : {why}"));

    // Under failurePolicy Ignore the failed mutation is skipped and the object created as sent.
    let mut ignored = policy(
        "atomic",
        "gadgets",
        json!({"mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": atomic}}]}),
    );
    ignored["spec"]["failurePolicy"] = json!("Ignore");
    plane.state().put_object("mutatingadmissionpolicies", ignored);
    let (response, _) = create_until(&client, GADGETS, &gadget("ignored"), |r| r.status == 201);
    assert_eq!(response.json()["spec"]["tags"], json!(["a"]));
    remove(plane, "atomic");

    // Evaluation errors, compile errors and type-name mismatches name the expression.
    for (name, expression, patch_type, text) in [
        (
            "runtime",
            "Object{spec: Object.spec{replicas: object.spec.missing}}",
            "ApplyConfiguration",
            "expression 'Object{spec: Object.spec{replicas: object.spec.missing}}' resulted in error: no such key: missing",
        ),
        ("wrong-type", "object.spec", "ApplyConfiguration", "must evaluate to Object but got dyn"),
        (
            "mismatch",
            "Object{spec: Object.spec{replicas: 1, tags: Object.metadata{}}}",
            "ApplyConfiguration",
            "type mismatch: unexpected type name \"Object.metadata\", expected \"Object.spec.tags\", which matches field name path from root Object type",
        ),
    ] {
        let field = if patch_type == "JSONPatch" { "jsonPatch" } else { "applyConfiguration" };
        install(
            plane,
            policy(
                name,
                "gadgets",
                json!({"mutations": [{"patchType": patch_type, field: {"expression": expression}}]}),
            ),
        );
        let (response, _) = create_until(&client, GADGETS, &gadget(name), |r| r.status != 201);
        assert_eq!(
            response.json()["message"],
            format!("policy '{name}' with binding '{name}-binding' denied request: {text}"),
            "{name}"
        );
        remove(plane, name);
    }

    // A JSON patch that breaks the schema: the result is validated again (422, as for a webhook).
    install(
        plane,
        policy(
            "breaker",
            "gadgets",
            json!({"mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                "[JSONPatch{op: 'replace', path: '/spec/replicas', value: 'many'}]"}}]}),
        ),
    );
    let (response, name) = create_until(&client, GADGETS, &gadget("broken"), |r| r.status != 201);
    assert_eq!(response.status, 422, "{}", response.text());
    assert_eq!(
        response.json()["message"],
        format!(
            "Gadget.stable.example.com \"{name}\" is invalid: spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
        )
    );
    remove(plane, "breaker");
}

#[test]
fn policies_are_reinvoked_after_a_webhook_changed_the_object() {
    let hooks = AdmissionWebhooks::start();
    let (cluster, client) = start();
    let plane = &cluster.plane;
    // The webhook (after the policies, as kube-apiserver orders them) adds a label; policies
    // asking IfNeeded see it in the reinvocation round, the others never do.
    let saw = |label: &str| {
        format!(
            "Object{{metadata: Object.metadata{{labels: {{'{label}': has(object.metadata.labels) && 'mutated-by' in object.metadata.labels ? 'webhook' : 'nothing'}}}}}}"
        )
    };
    let mut again = policy(
        "again",
        "crontabs",
        json!({"mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": saw("again-saw")}}]}),
    );
    again["spec"]["reinvocationPolicy"] = json!("IfNeeded");
    install(plane, again);
    install(
        plane,
        policy(
            "once",
            "crontabs",
            json!({"mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": saw("once-saw")}}]}),
        ),
    );
    plane.state().put_object(
        "mutatingwebhookconfigurations",
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "labeler"}, "webhooks": [hooks.hook("label.example.com", "/label", &["CREATE"])]}),
    );
    let crontab = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "c"}, "spec": {"image": "nginx"}});
    let (response, _) = create_until(&client, CRONTABS, &crontab, |r| {
        r.status != 201
            || r.json()["metadata"]["labels"]["mutated-by"] == "webhook"
                && r.json()["metadata"]["labels"]["once-saw"] != Value::Null
    });
    assert_eq!(response.status, 201, "{}", response.text());
    assert_eq!(
        response.json()["metadata"]["labels"],
        json!({"again-saw": "webhook", "once-saw": "nothing", "mutated-by": "webhook"})
    );
    // The webhook, which did not ask for reinvocation, was called once for that object.
    let name = response.json()["metadata"]["name"].as_str().unwrap().to_string();
    let calls = hooks.reviews("/label").iter().filter(|r| r["request"]["name"] == name.as_str()).count();
    assert_eq!(calls, 1);
}

#[test]
fn a_main_apiserver_without_mutating_policies_admits_without_them() {
    // kube-apiserver before 1.34 serves no MutatingAdmissionPolicy API at all.
    let plane = ControlPlane::start();
    for resource in ["mutatingadmissionpolicies", "mutatingadmissionpolicybindings"] {
        plane.state().unserved.lock().unwrap().push(resource);
    }
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    let cluster = TestCluster::start_on(plane, &[GADGET_CRD], &[]);
    let client = Client::to_plane(&cluster.plane, "admin-token");
    let started = Instant::now();
    let response = client.send_json("POST", GADGETS, &gadget("admitted"));
    assert_eq!(response.status, 201, "{}", response.text());
    assert!(started.elapsed() < Duration::from_secs(5), "the write waited for policies that are not served");
}
