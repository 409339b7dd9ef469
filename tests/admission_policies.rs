//! ValidatingAdmissionPolicies of the cluster (served by the control-plane double with
//! list+watch) applied to our resources on our CEL engine: denials with kube-apiserver's text,
//! code and reason, messageExpression, params from ConfigMaps (by name and by selector,
//! `parameterNotFoundAction`), validationActions Warn, matchConditions, variables, and policies
//! that do not compile under each failure policy.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::control_plane::ControlPlane;
use support::control_plane::rbac::{Rule, Subject, User};
use support::http::{Client, Response};
use support::{CRONTAB_CRD, stderr};

const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn policy(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["matchConstraints"] = json!({"resourceRules": [{"apiGroups": ["stable.example.com"], "apiVersions": ["*"],
        "operations": ["CREATE", "UPDATE"], "resources": ["crontabs"]}]});
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, policy: &str, extra: Value) -> Value {
    let mut spec = json!({"policyName": policy, "validationActions": ["Deny"]});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": spec})
}

fn install(plane: &ControlPlane, policy: Value, binding: Value) {
    plane.state().put_object("validatingadmissionpolicies", policy);
    plane.state().put_object("validatingadmissionpolicybindings", binding);
}

fn remove(plane: &ControlPlane, policy: &str, binding: &str) {
    plane.state().delete_object("validatingadmissionpolicybindings", "", binding);
    plane.state().delete_object("validatingadmissionpolicies", "", policy);
}

fn crontab(name: &str, image: &str, replicas: i64) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name, "labels": {"team": "a"}},
        "spec": {"image": image, "replicas": replicas}})
}

/// Creates until the answer differs from 201 (policies reach the server through its watch);
/// the answer, and the name it was for.
fn refused(client: &Client, object: &Value) -> (Response, String) {
    support::create_until(client, CRONTABS, object, |r| r.status != 201)
}

fn start() -> (TestCluster, Client) {
    let plane = ControlPlane::start();
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    // Params are ConfigMaps: the server reads them as kube-apiserver's policy plugin would.
    plane.add_rule(Rule::resources(
        "params-reader",
        vec![Subject::User(support::control_plane::rbac::SERVICE_ACCOUNT.into())],
        &["get", "list", "watch"],
        &[""],
        &["configmaps"],
    ));
    let cluster = TestCluster::start_on(plane, &[CRONTAB_CRD], &[]);
    let client = Client::to_plane(&cluster.plane, "admin-token");
    (cluster, client)
}

#[test]
fn policies_deny_with_kube_apiserver_words() {
    let (cluster, client) = start();
    let plane = &cluster.plane;
    install(
        plane,
        policy(
            "no-bad-image",
            json!({"validations": [{"expression": "object.spec.image != 'bad'", "message": "image bad is not allowed"}]}),
        ),
        binding("no-bad-image-binding", "no-bad-image", json!({})),
    );
    let (response, name) = refused(&client, &crontab("bad", "bad", 1));
    let why = "ValidatingAdmissionPolicy 'no-bad-image' with binding 'no-bad-image-binding' denied request: image bad is not allowed";
    assert_eq!(
        response.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("crontabs.stable.example.com \"{name}\" is forbidden: {why}"),
            "reason": "Invalid", "details": {"name": name, "group": "stable.example.com", "kind": "crontabs", "causes": [{"message": why}]},
            "code": 422})
    );
    // kubectl renders that Status (reason Invalid, one cause without a field) as it renders
    // kube-apiserver's.
    let alice = cluster.user("alice", &["system:masters"]);
    let out = cluster.kubectl_stdin(
        &alice,
        &["create", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: via-kubectl\nspec:\n  image: bad\n",
    );
    assert_eq!(stderr(&out).trim(), format!("The crontabs \"via-kubectl\" is invalid: : {why}"));
    assert_eq!(client.send_json("POST", CRONTABS, &crontab("good", "nginx", 1)).status, 201);
    remove(plane, "no-bad-image", "no-bad-image-binding");

    // messageExpression and reason, with params from a ConfigMap named by the binding, a
    // variable and a match condition.
    plane.state().put_object(
        "configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "namespace": "default", "labels": {"policy": "replicas"}}, "data": {"max": "3"}}),
    );
    let limited = json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConditions": [{"name": "team-a", "expression": "has(object.metadata.labels) && object.metadata.labels.team == 'a'"}],
        "variables": [{"name": "max", "expression": "int(params.data.max)"}],
        "validations": [{"expression": "object.spec.replicas <= variables.max", "reason": "Forbidden",
            "messageExpression": "'replicas ' + string(object.spec.replicas) + ' exceed ' + string(variables.max)"}],
    });
    install(
        plane,
        policy("max-replicas", limited.clone()),
        binding(
            "max-replicas-binding",
            "max-replicas",
            json!({"paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}),
        ),
    );
    let (response, name) = refused(&client, &crontab("many", "nginx", 5));
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(response.json()["reason"], "Forbidden");
    assert_eq!(
        response.json()["message"],
        format!(
            "crontabs.stable.example.com \"{name}\" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: replicas 5 exceed 3"
        )
    );
    assert_eq!(client.send_json("POST", CRONTABS, &crontab("few", "nginx", 2)).status, 201);
    let mut other_team = crontab("other-team", "nginx", 5);
    other_team["metadata"]["labels"]["team"] = json!("b");
    assert_eq!(client.send_json("POST", CRONTABS, &other_team).status, 201, "the match condition excludes it");

    // A missing param under parameterNotFoundAction: Deny.
    install(
        plane,
        policy("max-replicas", limited.clone()),
        binding(
            "max-replicas-binding",
            "max-replicas",
            json!({"paramRef": {"name": "absent", "parameterNotFoundAction": "Deny"}}),
        ),
    );
    let (response, name) = refused(&client, &crontab("absent", "nginx", 1));
    assert_eq!(response.status, 422, "{}", response.text());
    assert_eq!(
        response.json()["message"],
        format!(
            "crontabs.stable.example.com \"{name}\" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        )
    );
    // Params picked by a selector; Warn only: the write goes through with a warning.
    install(
        plane,
        policy("max-replicas", limited),
        binding(
            "max-replicas-binding",
            "max-replicas",
            json!({"validationActions": ["Warn"], "paramRef": {"selector": {"matchLabels": {"policy": "replicas"}}, "parameterNotFoundAction": "Deny"}}),
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut attempt = 0;
    let warning = loop {
        attempt += 1;
        let response = client.send_json("POST", CRONTABS, &crontab(&format!("warned-{attempt}"), "nginx", 4));
        if response.status == 201 {
            if let Some(w) = response.headers.get("warning") {
                break w.to_str().unwrap().to_string();
            }
        }
        assert!(Instant::now() < deadline, "no warning: {}", response.text());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        warning,
        "299 - \"Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding': replicas 4 exceed 3\""
    );
}

#[test]
fn policies_that_fail_follow_their_failure_policy() {
    let (cluster, client) = start();
    let plane = &cluster.plane;
    let broken = json!({"validations": [{"expression": "object.spec.image.startsWith("}]});
    install(plane, policy("broken", broken.clone()), binding("broken-binding", "broken", json!({})));
    let (response, name) = refused(&client, &crontab("x", "nginx", 1));
    assert_eq!(response.status, 422, "{}", response.text());
    let message = response.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with(&format!("crontabs.stable.example.com \"{name}\" is forbidden: ValidatingAdmissionPolicy 'broken' with binding 'broken-binding' denied request: compilation failed: ")),
        "{message}"
    );
    let mut ignored = broken;
    ignored["failurePolicy"] = json!("Ignore");
    install(plane, policy("broken", ignored), binding("broken-binding", "broken", json!({})));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut attempt = 0;
    while client
        .send_json(
            "POST",
            CRONTABS,
            &crontab(
                &format!("y-{}", {
                    attempt += 1;
                    attempt
                }),
                "nginx",
                1,
            ),
        )
        .status
        != 201
    {
        assert!(Instant::now() < deadline, "the ignored policy still refuses");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A runtime error under Fail: kube-apiserver's wording of the expression's error.
    install(
        plane,
        policy("runtime", json!({"validations": [{"expression": "object.spec.missing == 1"}]})),
        binding("runtime-binding", "runtime", json!({})),
    );
    let (response, name) = refused(&client, &crontab("z", "nginx", 1));
    assert_eq!(
        response.json()["message"],
        format!(
            "crontabs.stable.example.com \"{name}\" is forbidden: ValidatingAdmissionPolicy 'runtime' with binding 'runtime-binding' denied request: expression 'object.spec.missing == 1' resulted in error: no such key: missing"
        )
    );
}

#[test]
fn a_main_apiserver_without_policies_admits_without_them() {
    // kube-apiserver before 1.30 does not serve admissionregistration.k8s.io/v1 policies: there
    // are none to apply, and writes are not held back waiting for them.
    let plane = ControlPlane::start();
    for resource in ["validatingadmissionpolicies", "validatingadmissionpolicybindings"] {
        plane.state().unserved.lock().unwrap().push(resource);
    }
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    let cluster = TestCluster::start_on(plane, &[CRONTAB_CRD], &[]);
    let client = Client::to_plane(&cluster.plane, "admin-token");
    let started = Instant::now();
    let response = client.send_json("POST", CRONTABS, &crontab("admitted", "nginx", 1));
    assert_eq!(response.status, 201, "{}", response.text());
    assert!(started.elapsed() < Duration::from_secs(5), "the write waited for policies that are not served");
}

#[test]
fn policies_ask_the_authorizer() {
    let (cluster, _) = start();
    let plane = &cluster.plane;
    // Only users who may delete CronTabs may create replicas above 3: a SubjectAccessReview
    // for the request's user, through the server's authorizer.
    let rule = json!({"validations": [{
        "expression": "object.spec.replicas <= 3 || authorizer.requestResource.check('delete').allowed()",
        "message": "more than 3 replicas need the right to delete this crontab"}, {
        "expression": "object.spec.replicas <= 3 || authorizer.group('stable.example.com').resource('crontabs').namespace(request.namespace).check('delete').allowed()",
        "message": "more than 3 replicas need the right to delete crontabs"}]});
    install(
        plane,
        policy("big-needs-delete", rule),
        binding("big-needs-delete-binding", "big-needs-delete", json!({})),
    );
    for (user, verbs) in [("carol", &["create"][..]), ("dave", &["create", "delete"][..])] {
        plane.add_user(&format!("{user}-token"), User::new(user, &[]));
        plane.add_rule(Rule::resources(
            &format!("{user}-binding"),
            vec![Subject::User(user.into())],
            verbs,
            &["stable.example.com"],
            &["crontabs"],
        ));
    }
    let carol = Client::to_plane(plane, "carol-token");
    let dave = Client::to_plane(plane, "dave-token");
    let (response, name) = refused(&carol, &crontab("carol-big", "nginx", 5));
    assert_eq!(response.status, 422, "{}", response.text());
    assert_eq!(
        response.json()["message"],
        format!(
            "crontabs.stable.example.com \"{name}\" is forbidden: ValidatingAdmissionPolicy 'big-needs-delete' with binding 'big-needs-delete-binding' denied request: more than 3 replicas need the right to delete this crontab"
        )
    );
    assert_eq!(carol.send_json("POST", CRONTABS, &crontab("carol-small", "nginx", 2)).status, 201);
    let response = dave.send_json("POST", CRONTABS, &crontab("dave-big", "nginx", 5));
    assert_eq!(response.status, 201, "{}", response.text());
    // The check reached the main apiserver as a SubjectAccessReview for dave.
    assert!(
        cluster.plane.sar_log().iter().any(|sar| sar["user"] == "dave"
            && sar["resourceAttributes"]["verb"] == "delete"
            && sar["resourceAttributes"]["resource"] == "crontabs"),
        "{:?}",
        cluster.plane.sar_log()
    );
}
