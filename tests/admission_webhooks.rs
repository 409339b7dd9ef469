//! Admission webhooks of the cluster applied to our resources, end to end: configurations
//! served by the control-plane double (list+watch), real HTTPS webhooks of our own
//! (`support::admission_webhook`), real kubectl and raw requests through the double, and
//! kube-apiserver's denial and failure texts and codes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::admission_webhook::AdmissionWebhooks;
use support::cluster::TestCluster;
use support::control_plane::ControlPlane;
use support::http::Client;
use support::{CRONTAB_CRD, stderr};

const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn configuration(kind: &str, name: &str, hooks: Vec<Value>) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": hooks})
}

fn validating(plane: &ControlPlane, name: &str, hooks: Vec<Value>) {
    plane
        .state()
        .put_object("validatingwebhookconfigurations", configuration("ValidatingWebhookConfiguration", name, hooks));
}

fn mutating(plane: &ControlPlane, name: &str, hooks: Vec<Value>) {
    plane
        .state()
        .put_object("mutatingwebhookconfigurations", configuration("MutatingWebhookConfiguration", name, hooks));
}

fn crontab(name: &str, image: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name}, "spec": {"image": image, "replicas": 1}})
}

/// Retries `attempt` until it returns `Some`, for at most a minute (configurations reach
/// the server through its watch).
fn eventually<T>(what: &str, mut attempt: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = attempt() {
            return value;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn kubectl_writes_pass_validating_and_mutating_webhooks() {
    let hooks = AdmissionWebhooks::start();
    let plane = ControlPlane::start();
    validating(&plane, "deny-images", vec![hooks.hook("deny.example.com", "/deny-bad-image", &["CREATE", "UPDATE"])]);
    mutating(&plane, "labeler", vec![hooks.hook("label.example.com", "/label", &["CREATE"])]);
    let cluster = TestCluster::start_on(plane, &[CRONTAB_CRD], &[]);
    let alice = cluster.user("alice", &["system:masters"]);

    let bad = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: bad\nspec:\n  image: bad\n";
    let out = cluster.kubectl_stdin(&alice, &["apply", "-f", "-"], bad);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): error when creating \"STDIN\": admission webhook \"deny.example.com\" denied the request: spec.image: \"bad\" is not allowed"
    );
    assert!(cluster.kubectl(&alice, &["get", "crontab", "bad"]).status.code() != Some(0));

    let good = bad.replace("name: bad", "name: good").replace("image: bad", "image: nginx");
    assert_eq!(
        cluster.kubectl_stdin_ok(&alice, &["apply", "-f", "-"], &good).trim(),
        "crontab.stable.example.com/good created"
    );
    assert_eq!(
        cluster.kubectl_ok(&alice, &["get", "crontab", "good", "-o", "jsonpath={.metadata.labels}"]),
        r#"{"mutated-by":"webhook"}"#
    );

    // What the mutating webhook was told about the create.
    let review = hooks.reviews("/label").last().cloned().unwrap();
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    let request = &review["request"];
    assert_eq!(request["kind"], json!({"group": "stable.example.com", "version": "v1", "kind": "CronTab"}));
    assert_eq!(request["resource"], json!({"group": "stable.example.com", "version": "v1", "resource": "crontabs"}));
    assert_eq!(request["requestKind"], request["kind"]);
    assert_eq!((request["operation"].as_str(), request["namespace"].as_str()), (Some("CREATE"), Some("default")));
    assert_eq!(request["name"], "good");
    assert_eq!(request["userInfo"]["username"], "alice");
    assert!(request["userInfo"]["groups"].as_array().unwrap().contains(&json!("system:masters")));
    assert_eq!(request["dryRun"], false);
    assert_eq!(request["options"]["kind"], "CreateOptions");
    assert_eq!(request["object"]["spec"]["image"], "nginx");
    assert_eq!(request["oldObject"], Value::Null);
    // The validating webhook saw the mutated object; updates reach it with the old object.
    let validated = hooks.reviews("/deny-bad-image").last().cloned().unwrap();
    assert_eq!(validated["request"]["object"]["metadata"]["labels"]["mutated-by"], "webhook");
    let out =
        cluster.kubectl(&alice, &["patch", "crontab", "good", "--type=merge", "-p", r#"{"spec":{"image":"bad"}}"#]);
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): admission webhook \"deny.example.com\" denied the request: spec.image: \"bad\" is not allowed"
    );
    let update = hooks.reviews("/deny-bad-image").last().cloned().unwrap();
    assert_eq!(update["request"]["operation"], "UPDATE");
    assert_eq!(update["request"]["oldObject"]["spec"]["image"], "nginx");
    assert_eq!(update["request"]["options"]["kind"], "PatchOptions");

    // A webhook with side effects makes a dry run fail as Kubernetes fails it.
    let mut effects = hooks.hook("effects.example.com", "/allow", &["CREATE"]);
    effects["sideEffects"] = json!("Some");
    validating(&cluster.plane, "with-effects", vec![effects]);
    let dry = good.replace("name: good", "name: dry");
    let message = eventually("the side-effect webhook applies", || {
        let out = cluster.kubectl_stdin(&alice, &["create", "--dry-run=server", "-f", "-"], &dry);
        (!out.status.success()).then(|| stderr(&out))
    });
    assert_eq!(
        message.trim(),
        "Error from server (BadRequest): error when creating \"STDIN\": admission webhook \"effects.example.com\" does not support dry run"
    );
}

#[test]
fn webhook_failures_patches_and_reinvocation() {
    let hooks = AdmissionWebhooks::start();
    let cluster = TestCluster::start_with(&[CRONTAB_CRD], &[]);
    cluster.plane.add_user("admin-token", support::control_plane::rbac::User::new("admin", &["system:masters"]));
    let client = Client::to_plane(&cluster.plane, "admin-token");
    let create = |name: &str| client.send_json("POST", CRONTABS, &crontab(name, "nginx"));

    // A webhook past its timeout, under failurePolicy Fail: a 500 naming it.
    let mut slow = hooks.hook("slow.example.com", "/hang", &["CREATE"]);
    slow["timeoutSeconds"] = json!(1);
    validating(&cluster.plane, "slow", vec![slow.clone()]);
    let response = eventually("the slow webhook applies", || Some(create("slow")).filter(|r| r.status != 201));
    let port = hooks.base.rsplit(':').next().unwrap();
    let text = format!(
        "failed calling webhook \"slow.example.com\": failed to call webhook: Post \"https://127.0.0.1:{port}/hang?timeout=1s\": context deadline exceeded"
    );
    assert_eq!(
        response.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("Internal error occurred: {text}"), "reason": "InternalError",
            "details": {"causes": [{"message": text}]}, "code": 500})
    );
    // Under Ignore, the request goes through.
    slow["failurePolicy"] = json!("Ignore");
    validating(&cluster.plane, "slow", vec![slow]);
    eventually("the slow webhook is ignored", || Some(()).filter(|_| create("slow-ignored").status == 201));
    cluster.plane.state().delete_object("validatingwebhookconfigurations", "", "slow");

    // Garbage answers fail; HTTP/1.0 answers without Content-Length are read to the end.
    validating(&cluster.plane, "garbage", vec![hooks.hook("garbage.example.com", "/garbage", &["CREATE"])]);
    let response = eventually("the garbage webhook applies", || Some(create("garbage")).filter(|r| r.status != 201));
    assert_eq!(response.status, 500);
    assert!(
        response.json()["message"].as_str().unwrap().starts_with(
            "Internal error occurred: failed calling webhook \"garbage.example.com\": failed to call webhook: couldn't get version/kind; json parse error: "
        ),
        "{}",
        response.text()
    );
    let mut old_server = hooks.hook("http10.example.com", "/unused", &["CREATE"]);
    old_server["clientConfig"]["url"] = json!(hooks.http10_url);
    validating(&cluster.plane, "garbage", vec![old_server]);
    eventually("the HTTP/1.0 webhook allows", || Some(()).filter(|_| create("http10").status == 201));
    assert!(!hooks.reviews("/http10").is_empty());
    cluster.plane.state().delete_object("validatingwebhookconfigurations", "", "garbage");

    // A patch that breaks the schema: the result is validated again (422).
    mutating(&cluster.plane, "breaker", vec![hooks.hook("break.example.com", "/break", &["CREATE"])]);
    let response = eventually("the breaking webhook applies", || Some(create("broken")).filter(|r| r.status != 201));
    assert_eq!(response.status, 422, "{}", response.text());
    assert_eq!(
        response.json()["message"],
        "CronTab.stable.example.com \"broken\" is invalid: spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
    );
    cluster.plane.state().delete_object("mutatingwebhookconfigurations", "", "breaker");

    // Two webhooks that flip a field back and forth, both IfNeeded: one reinvocation round,
    // then it stops (four calls); the field, unknown to the schema, is pruned afterwards.
    let mut first = hooks.hook("flip-1.example.com", "/flip", &["CREATE"]);
    first["reinvocationPolicy"] = json!("IfNeeded");
    let mut second = hooks.hook("flip-2.example.com", "/flip", &["CREATE"]);
    second["reinvocationPolicy"] = json!("IfNeeded");
    mutating(&cluster.plane, "flippers", vec![first, second]);
    let mut probes = 0;
    eventually("the flipping webhooks apply", || {
        probes += 1;
        assert_eq!(create(&format!("probe-{probes}")).status, 201);
        Some(()).filter(|_| !hooks.reviews("/flip").is_empty())
    });
    let before = hooks.reviews("/flip").len();
    let response = create("flipped");
    assert_eq!(response.status, 201, "{}", response.text());
    assert_eq!(hooks.reviews("/flip").len() - before, 4);
    assert_eq!(response.json()["spec"]["flip"], Value::Null, "the schema prunes the unknown field");
}

#[test]
fn writes_fail_closed_until_the_configurations_are_read() {
    // Without read access to the configurations, nothing is written: kube-apiserver's
    // admission is not ready either until its informers synced.
    let plane = ControlPlane::start();
    plane.remove_binding("crd-apiserver:admission");
    let cluster = TestCluster::start_live_on(plane, &[CRONTAB_CRD], &[]);
    cluster.plane.add_user("admin-token", support::control_plane::rbac::User::new("admin", &["system:masters"]));
    let client = Client::to_plane(&cluster.plane, "admin-token");
    let response = client.send_json("POST", CRONTABS, &crontab("early", "nginx"));
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(
        response.json()["message"],
        "crontabs.stable.example.com \"early\" is forbidden: not yet ready to handle request"
    );
    // Not ready either: informer-sync fails, and the log names the followers without a list.
    let probe = Client::new(&cluster.server, None);
    let readyz = probe.get("/readyz").unwrap();
    assert_eq!(readyz.status, 500);
    assert!(readyz.text().contains("[-]informer-sync failed: reason withheld\n"), "{}", readyz.text());
    eventually("the log names the configurations not read", || {
        let log = cluster.server.log();
        Some(())
            .filter(|_| log.contains("*v1.ValidatingWebhookConfiguration") && log.contains("informers not started yet"))
    });
    for rule in
        support::control_plane::rbac::default_rules().into_iter().filter(|r| r.binding == "crd-apiserver:admission")
    {
        cluster.plane.add_rule(rule);
    }
    eventually("writes are admitted once the configurations are read", || {
        Some(()).filter(|_| client.send_json("POST", CRONTABS, &crontab("later", "nginx")).status == 201)
    });
    eventually("ready once the configurations are read", || {
        Some(()).filter(|_| probe.get("/readyz").unwrap().status == 200)
    });
}

#[test]
fn match_conditions_choose_the_requests_a_webhook_sees() {
    let hooks = AdmissionWebhooks::start();
    let plane = ControlPlane::start();
    let mut conditional = hooks.hook("deny.example.com", "/deny-bad-image", &["CREATE"]);
    conditional["matchConditions"] = json!([{"name": "not-exempt",
        "expression": "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"}]);
    validating(&plane, "conditional", vec![conditional]);
    plane.add_user("admin-token", support::control_plane::rbac::User::new("admin", &["system:masters"]));
    let cluster = TestCluster::start_on(plane, &[CRONTAB_CRD], &[]);
    let client = Client::to_plane(&cluster.plane, "admin-token");
    let response = client.send_json("POST", CRONTABS, &crontab("denied", "bad"));
    assert_eq!(response.status, 403, "{}", response.text());
    let mut exempt = crontab("exempt", "bad");
    exempt["metadata"]["labels"] = json!({"exempt": "yes"});
    let response = client.send_json("POST", CRONTABS, &exempt);
    assert_eq!(response.status, 201, "{}", response.text());
    assert_eq!(hooks.reviews("/deny-bad-image").len(), 1, "the exempt object never reached the webhook");

    // A condition that fails to evaluate refuses under failurePolicy Fail.
    let mut failing = hooks.hook("deny.example.com", "/deny-bad-image", &["CREATE"]);
    failing["matchConditions"] = json!([{"name": "broken", "expression": "object.spec.missing == 1"}]);
    validating(&cluster.plane, "conditional", vec![failing]);
    let mut attempt = 0;
    let response = eventually("the failing condition applies", || {
        attempt += 1;
        Some(client.send_json("POST", CRONTABS, &crontab(&format!("failing-{attempt}"), "nginx")))
            .filter(|r| r.status != 201)
    });
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(
        response.json()["message"],
        format!(
            "crontabs.stable.example.com \"failing-{attempt}\" is forbidden: expression 'object.spec.missing == 1' resulted in error: no such key: missing"
        )
    );
}

#[test]
fn admission_plugins_are_chosen_by_kube_apiserver_flags() {
    // Unknown names stop the server with kube-apiserver's words.
    let plane = ControlPlane::start();
    let mut server = support::TestServer::prepare(&[CRONTAB_CRD], Some(plane.server_kubeconfig()));
    server.launch(&[
        "--enable-admission-plugins=PodSecurity",
        "--disable-admission-plugins=ResourceQuota,ResourceQuota2",
    ]);
    assert!(!server.wait_exit(Duration::from_secs(30)), "the server must fail");
    let log = server.log();
    assert!(
        // Quoted in the log line as klog quotes an error (`err="..."`).
        log.contains(r#"[enable-admission-plugins plugin \"PodSecurity\" is unknown, disable-admission-plugins plugin \"ResourceQuota2\" is unknown]"#),
        "{log}"
    );

    // A disabled plugin does not run: the denying webhook is not called.
    let hooks = AdmissionWebhooks::start();
    let plane = ControlPlane::start();
    validating(&plane, "deny-images", vec![hooks.hook("deny.example.com", "/deny-bad-image", &["CREATE"])]);
    plane.add_user("admin-token", support::control_plane::rbac::User::new("admin", &["system:masters"]));
    let cluster = TestCluster::start_on(
        plane,
        &[CRONTAB_CRD],
        &["--disable-admission-plugins=ValidatingAdmissionWebhook,NamespaceLifecycle"],
    );
    let client = Client::to_plane(&cluster.plane, "admin-token");
    let response = client.send_json("POST", CRONTABS, &crontab("bad", "bad"));
    assert_eq!(response.status, 201, "{}", response.text());
    assert!(hooks.reviews("/deny-bad-image").is_empty());
    // Without NamespaceLifecycle, objects may be created in namespaces that do not exist.
    let elsewhere = "/apis/stable.example.com/v1/namespaces/nowhere/crontabs";
    assert_eq!(client.send_json("POST", elsewhere, &crontab("lost", "nginx")).status, 201);
    // The server says which plugins run.
    let log = cluster.server.log();
    assert!(log.contains("MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ResourceQuota"), "{log}");
}

#[test]
fn selectors_review_versions_and_warnings() {
    let hooks = AdmissionWebhooks::start();
    let plane = ControlPlane::start();
    plane.state().create_namespace("team-a").unwrap();
    // Only namespaces labelled team=a, only objects not labelled skip; answers in v1beta1.
    let mut selective = hooks.hook("selective.example.com", "/v1beta1", &["CREATE"]);
    selective["admissionReviewVersions"] = json!(["v1beta1"]);
    selective["namespaceSelector"] = json!({"matchLabels": {"kubernetes.io/metadata.name": "team-a"}});
    selective["objectSelector"] = json!({"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]});
    let warning = hooks.hook("warn.example.com", "/warn", &["CREATE"]);
    validating(&plane, "selective", vec![selective, warning]);
    plane.add_user("admin-token", support::control_plane::rbac::User::new("admin", &["system:masters"]));
    let cluster = TestCluster::start_on(plane, &[CRONTAB_CRD], &[]);
    let client = Client::to_plane(&cluster.plane, "admin-token");

    let team_a = "/apis/stable.example.com/v1/namespaces/team-a/crontabs";
    let response = client.send_json("POST", team_a, &crontab("seen", "nginx"));
    assert_eq!(response.status, 201, "{}", response.text());
    assert_eq!(response.headers.get("warning").unwrap().to_str().unwrap(), "299 - \"the webhook has seen this\"");
    let reviews = hooks.reviews("/v1beta1");
    assert_eq!(reviews.len(), 1);
    assert_eq!(reviews[0]["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(reviews[0]["request"]["namespace"], "team-a");
    let mut skipped = crontab("skipped", "nginx");
    skipped["metadata"]["labels"] = json!({"skip": "yes"});
    assert_eq!(client.send_json("POST", team_a, &skipped).status, 201);
    assert_eq!(client.send_json("POST", CRONTABS, &crontab("other-namespace", "nginx")).status, 201);
    assert_eq!(hooks.reviews("/v1beta1").len(), 1, "neither the labelled object nor another namespace reached it");
    assert_eq!(hooks.reviews("/warn").len(), 3);
}

const WIDGETS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.tests.example.com
spec:
  group: tests.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {size: {type: string}}}}}}
  - name: v1beta1
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {size: {type: string}}}}}}
"#;

#[test]
fn match_policy_equivalent_reaches_other_versions() {
    let hooks = AdmissionWebhooks::start();
    let plane = ControlPlane::start();
    let rule = |policy: &str, path: &str, name: &str| {
        let mut hook = hooks.hook(name, path, &["CREATE"]);
        hook["rules"] = json!([{"operations": ["CREATE"], "apiGroups": ["tests.example.com"], "apiVersions": ["v1"], "resources": ["widgets"]}]);
        hook["matchPolicy"] = json!(policy);
        hook
    };
    mutating(&plane, "widgets", vec![rule("Equivalent", "/label", "equivalent.example.com")]);
    validating(&plane, "widgets-exact", vec![rule("Exact", "/allow", "exact.example.com")]);
    plane.add_user("admin-token", support::control_plane::rbac::User::new("admin", &["system:masters"]));
    let cluster = TestCluster::start_on(plane, &[WIDGETS], &[]);
    let client = Client::to_plane(&cluster.plane, "admin-token");
    let widget = json!({"apiVersion": "tests.example.com/v1beta1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": "L"}});
    let response = client.send_json("POST", "/apis/tests.example.com/v1beta1/namespaces/default/widgets", &widget);
    assert_eq!(response.status, 201, "{}", response.text());
    // The mutating webhook saw the object in v1 and its patch came back in v1beta1.
    assert_eq!(response.json()["apiVersion"], "tests.example.com/v1beta1");
    assert_eq!(response.json()["metadata"]["labels"]["mutated-by"], "webhook");
    let review = hooks.reviews("/label").pop().unwrap();
    let request = &review["request"];
    assert_eq!(request["kind"], json!({"group": "tests.example.com", "version": "v1", "kind": "Widget"}));
    assert_eq!(request["requestKind"], json!({"group": "tests.example.com", "version": "v1beta1", "kind": "Widget"}));
    assert_eq!(request["resource"]["version"], "v1");
    assert_eq!(request["requestResource"]["version"], "v1beta1");
    assert_eq!(request["object"]["apiVersion"], "tests.example.com/v1");
    // Exact: a request in v1beta1 does not reach a webhook of v1.
    assert!(hooks.reviews("/allow").is_empty());
}
