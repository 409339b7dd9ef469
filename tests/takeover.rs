//! `crd-apiserver takeover` and `handback` through the control-plane double: a definition the
//! double serves itself (with objects carrying finalizers, owner references and status) is
//! moved to the server, kubectl reaches the objects through the aggregator afterwards with
//! the same uids, resourceVersions from the main apiserver answer 410, writes during the freeze
//! are refused with its message, a failure before the switch leaves the cluster as it was, an
//! APIService pointed elsewhere is refused, a missing permission is named, a handback brings
//! everything back, and `--takeover-cluster-definitions` takes selected definitions over once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::TestServer;
use support::control_plane::ControlPlane;
use support::control_plane::rbac::User;
use support::http::Client;

const GROUP: &str = "takeover.example.com";
const NAME: &str = "widgets.takeover.example.com";
const WIDGETS: &str = "/apis/takeover.example.com/v1/namespaces/default/widgets";
/// The copy's requests for the pages after the first, as the main apiserver receives them.
const SECOND_PAGE: &str = "/apis/takeover.example.com/v1/widgets?limit=500&continue=";

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.takeover.example.com
spec:
  group: takeover.example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
  versions:
    - name: v1
      served: true
      storage: true
      subresources:
        status: {}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
"#;

/// What the server's service account needs for a takeover (the chart's `takeover.rbac`).
struct Env {
    plane: ControlPlane,
    server: TestServer,
    admin: Client,
    admin_kubeconfig: PathBuf,
    cert: (PathBuf, PathBuf),
}

fn widget(name: &str) -> Value {
    json!({"apiVersion": "takeover.example.com/v1", "kind": "Widget",
           "metadata": {"name": name, "namespace": "default", "labels": {"app": "demo"}}, "spec": {"size": 1}})
}

/// The double serving widgets itself with three objects (finalizers; an owner reference;
/// status), and the server serving the same definition, not yet registered for it.
fn start(objects: usize, extra: &[&str]) -> Env {
    start_serving(&[WIDGET_CRD], objects, extra)
}

/// `start`, the server serving the definitions of `files` (none: from the cluster's flags).
fn start_serving(files: &[&str], objects: usize, extra: &[&str]) -> Env {
    let plane = ControlPlane::start();
    let crd: Value = serde_saphyr::from_str(WIDGET_CRD).unwrap();
    plane.create_crd(crd).unwrap();
    plane.autoregister();
    plane.grant_takeover(GROUP, "widgets");
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    let mut first = widget("first");
    first["metadata"]["finalizers"] = json!(["example.com/keep"]);
    first["metadata"]["annotations"] = json!({"note": "kept"});
    plane.seed_custom(GROUP, "widgets", first);
    let mut second = widget("second");
    second["metadata"]["ownerReferences"] = json!([{"apiVersion": "takeover.example.com/v1", "kind": "Widget",
        "name": "first", "uid": "0f0f0f0f-0000-0000-0000-000000000001", "controller": true}]);
    plane.seed_custom(GROUP, "widgets", second);
    let mut third = widget("third");
    third["status"] = json!({"phase": "Ready"});
    third["metadata"]["generation"] = json!(7);
    plane.seed_custom(GROUP, "widgets", third);
    for i in 3..objects {
        plane.seed_custom(GROUP, "widgets", widget(&format!("w{i:06}")));
    }
    let mut server = TestServer::prepare(files, Some(plane.server_kubeconfig()));
    let ca = server.pki.serving_ca();
    let mut flags = vec!["--takeover-ca-file", ca.to_str().unwrap()];
    flags.extend_from_slice(extra);
    server.spawn(&flags);
    plane.register_backend(server.port, &server.pki.serving_ca());
    plane.register("crd-apiserver.io", "v1alpha1");
    let cert = plane.write_admin_certificate(server.dir.path(), "admin-cluster");
    let admin = Client::to_plane(&plane, "admin-token");
    let admin_kubeconfig = plane.token_kubeconfig("admin-token");
    Env { plane, server, admin, admin_kubeconfig, cert }
}

impl Env {
    fn command(&self, verb: &str, extra: &[&str]) -> Command {
        let mut command = Command::new(support::binary());
        command
            .arg(verb)
            .arg(NAME)
            .args(["--server", &format!("https://127.0.0.1:{}", self.server.port)])
            .args(["--certificate-authority", self.server.pki.serving_ca().to_str().unwrap()])
            .args(["--client-certificate", self.cert.0.to_str().unwrap()])
            .args(["--client-key", self.cert.1.to_str().unwrap()])
            .args(extra);
        command
    }

    fn run(&self, verb: &str, extra: &[&str]) -> Output {
        self.command(verb, extra).output().unwrap()
    }

    fn kubectl(&self, args: &[&str]) -> String {
        let out = support::kubectl_with(&self.admin_kubeconfig, self.server.dir.path(), args, None);
        assert!(out.status.success(), "kubectl {args:?}: {}\n{}", support::stderr(&out), self.server.log());
        support::stdout(&out)
    }

    /// A client of our server directly, as a cluster admin.
    fn direct(&self) -> Client {
        Client::new(&self.server, Some((&self.cert.0, &self.cert.1)))
    }

    /// Starts `takeover` in the background and waits (up to 20 s) until it has frozen writes.
    fn takeover_until_frozen(&self) -> std::process::Child {
        let takeover = self
            .command("takeover", &[])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !(self.policy_exists() && self.binding_exists()) {
            assert!(Instant::now() < deadline, "no freeze: {}", self.server.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        takeover
    }

    /// Whether the freeze's binding exists (the policy denies nothing without it).
    fn binding_exists(&self) -> bool {
        self.plane
            .state()
            .get_object("validatingadmissionpolicybindings", "", &format!("crd-apiserver-takeover.{NAME}"))
            .is_some()
    }

    fn policy_exists(&self) -> bool {
        self.plane
            .state()
            .get_object("validatingadmissionpolicies", "", &format!("crd-apiserver-takeover.{NAME}"))
            .is_some()
    }
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn by_name(items: &[Value]) -> std::collections::BTreeMap<String, Value> {
    items.iter().map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), o.clone())).collect()
}

#[test]
fn takeover_moves_objects_with_their_metadata_and_kubectl_reaches_them() {
    let env = start(3, &[]);
    let before = by_name(&env.plane.custom_objects(GROUP, "widgets"));
    let main_revision: u64 =
        env.admin.get(WIDGETS).unwrap().json()["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();

    let token = env.admin.get(&format!("{WIDGETS}?limit=1")).unwrap().json()["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_string();
    let dry = env.run("takeover", &["--dry-run"]);
    assert!(dry.status.success(), "{}", text(&dry));
    assert!(text(&dry).contains("would move 3 objects"), "{}", text(&dry));
    assert!(!env.policy_exists());
    assert!(env.plane.api_service("v1.takeover.example.com").unwrap()["spec"]["service"].is_null());

    let out = env.run("takeover", &[]);
    assert!(out.status.success(), "{}\n{}", text(&out), env.server.log());
    assert!(text(&out).contains("moved 3 objects"), "{}", text(&out));
    assert!(text(&out).contains("/registry/takeover.example.com/widgets/"), "{}", text(&out));

    // The APIService is ours, unlabelled, and stays so: autoregister leaves it alone.
    env.plane.autoregister();
    let service = env.plane.api_service("v1.takeover.example.com").unwrap();
    assert_eq!(service["spec"]["service"]["name"], "crd-apiserver", "{service}");
    assert!(service["metadata"]["labels"].get("kube-aggregator.kubernetes.io/automanaged").is_none(), "{service}");
    assert!(!env.policy_exists(), "the freeze is lifted");

    // kubectl through the aggregator reaches our copies: same uids and metadata.
    let listed: Value = serde_json::from_str(&env.kubectl(&["get", "widgets", "-o", "json"])).unwrap();
    let after = by_name(listed["items"].as_array().unwrap());
    assert_eq!(after.len(), 3);
    for (name, old) in &before {
        let new = &after[name];
        for field in
            ["uid", "creationTimestamp", "generation", "labels", "annotations", "finalizers", "ownerReferences"]
        {
            assert_eq!(new["metadata"][field], old["metadata"][field], "{name}: {field}");
        }
        assert_eq!(new["status"], old["status"], "{name}: status");
        let rv: u64 = new["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
        assert!(rv > main_revision, "{name}: resourceVersion {rv} not above the main apiserver's {main_revision}");
    }
    assert_eq!(after["third"]["status"]["phase"], "Ready");

    // A watch from the main apiserver's resourceVersion is expired (410), as after a compaction.
    let watch = env.admin.get(&format!("{WIDGETS}?watch=1&timeoutSeconds=1&resourceVersion={main_revision}")).unwrap();
    assert!(watch.text().contains("\"code\":410"), "{}", watch.text());
    // So is the continue token of a list the main apiserver began.
    let rest = env.admin.get(&format!("{WIDGETS}?limit=1&continue={token}")).unwrap();
    assert_eq!(rest.status, 410, "{}", rest.text());
    assert!(rest.text().contains("The provided continue parameter is too old"), "{}", rest.text());
    // Writes go on, through the aggregator, to us.
    env.kubectl(&["label", "widget", "second", "moved=yes"]);
    let second = env.direct().get(&format!("{WIDGETS}/second")).unwrap().json();
    assert_eq!(second["metadata"]["labels"]["moved"], "yes", "{second}");

    // Running it again is refused: nothing left to move.
    let again = env.run("takeover", &[]);
    assert!(!again.status.success());
    assert!(text(&again).contains("already taken over"), "{}", text(&again));
}

#[test]
fn a_failure_before_the_switch_leaves_the_cluster_as_it_was_and_writes_were_refused_meanwhile() {
    let env = start(1200, &["--takeover-timeout", "20s"]);
    // The copy's second page waits at the main apiserver's door until the test is done.
    let second_page = env.plane.hold(http::Method::GET, SECOND_PAGE, 0);
    let takeover = env.takeover_until_frozen();
    // Frozen: a create and a dry-run create through the main apiserver are refused, saying why.
    let create = env.admin.send_json("POST", WIDGETS, &widget("during"));
    assert_eq!(create.status, 403, "{}", create.text());
    assert!(create.text().contains("is being moved to crd-apiserver"), "{}", create.text());
    let dry = env.admin.send_json("POST", &format!("{WIDGETS}?dryRun=All"), &widget("during"));
    assert_eq!(dry.status, 403, "{}", dry.text());

    // Then the main apiserver fails that page.
    env.plane.set_custom_list_fault(true);
    env.plane.release_held(second_page, true);
    let out = takeover.wait_with_output().unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("rolling back"), "{}", text(&out));
    assert!(!env.policy_exists(), "the freeze is lifted");
    let service = env.plane.api_service("v1.takeover.example.com").unwrap();
    assert!(service["spec"]["service"].is_null(), "{service}");
    assert_eq!(service["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"], "true");
    let ours = env.direct().get(WIDGETS).unwrap().json();
    assert_eq!(ours["items"].as_array().unwrap().len(), 0, "our copies are removed: {ours}");
    env.plane.set_custom_list_fault(false);
    let create = env.admin.send_json("POST", WIDGETS, &widget("after"));
    assert_eq!(create.status, 201, "{}", create.text());
    // And a second attempt goes through.
    let out = env.run("takeover", &[]);
    assert!(out.status.success(), "{}\n{}", text(&out), env.server.log());
    assert!(text(&out).contains("moved 1201 objects"), "{}", text(&out));
}

#[test]
fn a_server_killed_while_copying_keeps_the_freeze_and_the_command_run_again_finishes() {
    let mut env = start(1200, &[]);
    let second_page = env.plane.hold(http::Method::GET, SECOND_PAGE, 0);
    let takeover = env.takeover_until_frozen();
    // The first page is copied, the second asked for: the server dies.
    let deadline = Instant::now() + Duration::from_secs(60);
    while env.plane.held(second_page) == 0 {
        assert!(Instant::now() < deadline, "the second page was never asked for: {}", env.server.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    env.server.kill();
    env.plane.release_held(second_page, false);
    let out = takeover.wait_with_output().unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    // No copy accepts writes meanwhile: the freeze stays.
    assert!(env.policy_exists());
    let create = env.admin.send_json("POST", WIDGETS, &widget("during"));
    assert_eq!(create.status, 403, "{}", create.text());

    let ca = env.server.pki.serving_ca();
    env.server.spawn(&["--takeover-ca-file", ca.to_str().unwrap()]);
    let out = env.run("takeover", &[]);
    assert!(out.status.success(), "{}\n{}", text(&out), env.server.log());
    assert!(text(&out).contains("resuming a takeover left in phase Copying"), "{}", text(&out));
    assert!(text(&out).contains("moved 1200 objects"), "{}", text(&out));
    assert!(!env.policy_exists());
    let listed: Value = serde_json::from_str(&env.kubectl(&["get", "widgets", "-o", "json"])).unwrap();
    assert_eq!(listed["items"].as_array().unwrap().len(), 1200);
}

/// On etcd, whose revision cannot be set: a store whose revision is behind the main
/// apiserver's still takes over (the store's offset over etcd's revision is raised for every
/// replica), and a second replica on the same etcd, which learns of it while running, hands out
/// resourceVersions above the main apiserver's and answers the main apiserver's with 410.
#[test]
fn a_takeover_into_an_etcd_behind_the_main_revision_moves_every_replicas_revisions_above_it() {
    let etcd = support::etcd::TestEtcd::start();
    let endpoint = format!("--etcd-servers={}", etcd.endpoint());
    let env = start(3, &["--storage-backend=etcd3", &endpoint]);
    let mut second = TestServer::prepare(&[WIDGET_CRD], Some(env.plane.server_kubeconfig()));
    second.spawn(&["--storage-backend=etcd3", &endpoint]);
    let on_second = Client::new(&second, Some((&env.cert.0, &env.cert.1)));
    let main_revision: u64 =
        env.admin.get(WIDGETS).unwrap().json()["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let ours: u64 =
        on_second.get(WIDGETS).unwrap().json()["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert!(ours < main_revision, "the store ({ours}) must start behind the main apiserver ({main_revision})");
    let token = env.admin.get(&format!("{WIDGETS}?limit=1")).unwrap().json()["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_string();

    let out = env.run("takeover", &[]);
    assert!(out.status.success(), "{}\n{}", text(&out), env.server.log());
    assert!(text(&out).contains("moved 3 objects"), "{}", text(&out));
    let rv = |object: &Value| -> u64 { object["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap() };
    // Both replicas serve the copies above the main apiserver's revision.
    for client in [&env.direct(), &on_second] {
        let listed = client.get(WIDGETS).unwrap().json();
        assert_eq!(listed["items"].as_array().unwrap().len(), 3, "{listed}");
        assert!(listed["items"].as_array().unwrap().iter().all(|o| rv(o) > main_revision), "{listed}");
        assert!(rv(&listed) > main_revision, "{listed}");
    }
    // A write on the replica that did not take over is numbered above it too.
    let created = on_second.send_json("POST", WIDGETS, &widget("after"));
    assert_eq!(created.status, 201, "{}\n{}", created.text(), second.log());
    assert!(rv(&created.json()) > main_revision, "{}", created.text());
    // The main apiserver's resourceVersions are expired on both, with Kubernetes' texts.
    for (client, server) in [(&env.direct(), &env.server), (&on_second, &second)] {
        let watch = client.get(&format!("{WIDGETS}?watch=1&timeoutSeconds=1&resourceVersion={main_revision}")).unwrap();
        assert!(watch.text().contains("\"code\":410"), "{}\n{}", watch.text(), server.log());
        assert!(watch.text().contains("too old resource version"), "{}", watch.text());
        let exact =
            client.get(&format!("{WIDGETS}?resourceVersion={main_revision}&resourceVersionMatch=Exact")).unwrap();
        assert_eq!(exact.status, 410, "{}", exact.text());
        assert!(exact.text().contains("too old resource version"), "{}", exact.text());
        let rest = client.get(&format!("{WIDGETS}?limit=1&continue={token}")).unwrap();
        assert_eq!(rest.status, 410, "{}", rest.text());
        assert!(rest.text().contains("The provided continue parameter is too old"), "{}", rest.text());
    }
    // kubectl through the aggregator reaches the copies.
    let listed: Value = serde_json::from_str(&env.kubectl(&["get", "widgets", "-o", "json"])).unwrap();
    assert_eq!(listed["items"].as_array().unwrap().len(), 4);
}

#[test]
fn an_apiservice_already_pointed_elsewhere_is_refused() {
    let env = start(3, &[]);
    let mut service = env.plane.api_service("v1.takeover.example.com").unwrap();
    service["metadata"]["labels"] = json!({});
    service["spec"]["service"] = json!({"namespace": "other", "name": "elsewhere", "port": 443});
    env.plane.state().put_object("apiservices", service);
    support::control_plane::apiservices::sync_services(env.plane.state());
    let out = env.run("takeover", &[]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("already sends widgets.takeover.example.com to the Service other/elsewhere"),
        "{}",
        text(&out)
    );
    assert!(!env.policy_exists());
    let ours = env.direct().get(WIDGETS).unwrap().json();
    assert_eq!(ours["items"].as_array().unwrap().len(), 0);
}

#[test]
fn handback_returns_the_objects_and_the_apiservice() {
    let env = start(3, &[]);
    let before = by_name(&env.plane.custom_objects(GROUP, "widgets"));
    let out = env.run("takeover", &[]);
    assert!(out.status.success(), "{}\n{}", text(&out), env.server.log());
    env.kubectl(&["label", "widget", "second", "changed=while-moved"]);
    env.kubectl(&["delete", "widget", "third"]);

    let out = env.run("handback", &[]);
    assert!(out.status.success(), "{}\n{}", text(&out), env.server.log());
    assert!(text(&out).contains("moved 2 objects"), "{}", text(&out));
    let service = env.plane.api_service("v1.takeover.example.com").unwrap();
    assert!(service["spec"]["service"].is_null(), "{service}");
    assert_eq!(service["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"], "true");
    assert!(!env.policy_exists());
    let back = by_name(&env.plane.custom_objects(GROUP, "widgets"));
    assert_eq!(back.keys().collect::<Vec<_>>(), ["first", "second"]);
    assert_eq!(back["second"]["metadata"]["labels"]["changed"], "while-moved");
    for name in ["first", "second"] {
        assert_eq!(back[name]["metadata"]["uid"], before[name]["metadata"]["uid"], "{name}");
    }
    // The main apiserver serves them again, writes included.
    let listed = env.admin.get(WIDGETS).unwrap().json();
    assert_eq!(listed["items"].as_array().unwrap().len(), 2, "{listed}");
    let create = env.admin.send_json("POST", WIDGETS, &widget("again"));
    assert_eq!(create.status, 201, "{}", create.text());
}

/// Runs `probe` until it answers `Some`, for at most `seconds`.
fn eventually<T>(env: &Env, what: &str, seconds: u64, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} did not happen in {seconds} seconds: {}", env.server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn points_here(env: &Env) -> bool {
    env.plane.api_service("v1.takeover.example.com").is_some_and(|s| s["spec"]["service"]["name"] == "crd-apiserver")
}

#[test]
fn a_missing_permission_is_named_and_nothing_changes() {
    let env = start(3, &[]);
    env.plane.remove_binding("crd-apiserver:takeover-freeze");
    let out = env.run("takeover", &[]);
    assert!(!out.status.success());
    assert!(text(&out).contains("cannot create resource \"validatingadmissionpolicies\""), "{}", text(&out));
    assert!(text(&out).contains("the server's service account needs this permission"), "{}", text(&out));
    assert!(!points_here(&env));
    let ours = env.direct().get(WIDGETS).unwrap().json();
    assert_eq!(ours["items"].as_array().unwrap().len(), 0, "{ours}");
    let create = env.admin.send_json("POST", WIDGETS, &widget("after"));
    assert_eq!(create.status, 201, "writes were never frozen: {}", create.text());
}

/// `--takeover-cluster-definitions`: the definitions the cluster flags select are taken over
/// as soon as they are served, once; one we cannot serve is reported and never taken over; one
/// handed back is left alone after a restart.
#[test]
fn the_automatic_mode_takes_selected_definitions_over_once() {
    const GADGETS: &str = "gadgets.takeover.example.com";
    let flags = [
        "--cluster-definitions=widgets.takeover.example.com,gadgets.takeover.example.com",
        "--takeover-cluster-definitions",
    ];
    let mut env = start_serving(&[], 3, &flags);
    // Two storage versions: kept by the main apiserver (an older release accepted it), refused
    // by our checks.
    let mut gadgets: Value =
        serde_saphyr::from_str(&WIDGET_CRD.replace("widget", "gadget").replace("Widget", "Gadget")).unwrap();
    let mut v2 = gadgets["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    gadgets["spec"]["versions"].as_array_mut().unwrap().push(v2);
    env.plane.put_crd_unchecked(gadgets);

    eventually(&env, "the automatic takeover", 60, || points_here(&env).then_some(()));
    eventually(&env, "the freeze lifted", 30, || (!env.policy_exists()).then_some(()));
    let listed: Value = serde_json::from_str(&env.kubectl(&["get", "widgets", "-o", "json"])).unwrap();
    let moved = by_name(listed["items"].as_array().unwrap());
    let before = by_name(&env.plane.custom_objects(GROUP, "widgets"));
    assert_eq!(moved.keys().collect::<Vec<_>>(), ["first", "second", "third"]);
    for (name, old) in &before {
        assert_eq!(moved[name]["metadata"]["uid"], old["metadata"]["uid"], "{name}");
    }
    eventually(&env, "the invalid definition reported", 30, || {
        env.server.log().contains("must have exactly one version marked as storage version").then_some(())
    });
    let policies =
        env.plane.state().get_object("validatingadmissionpolicies", "", &format!("crd-apiserver-takeover.{GADGETS}"));
    assert!(policies.is_none(), "an invalid definition is never frozen");
    let mut command = Command::new(support::binary());
    let refused = command
        .args(["takeover", GADGETS])
        .args(["--server", &format!("https://127.0.0.1:{}", env.server.port)])
        .args(["--certificate-authority", env.server.pki.serving_ca().to_str().unwrap()])
        .args(["--client-certificate", env.cert.0.to_str().unwrap()])
        .args(["--client-key", env.cert.1.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(text(&refused).contains(&format!("this server does not serve {GADGETS}")), "{}", text(&refused));

    // Handed back, then the server restarted with the same flags: it stays handed back.
    let out = env.run("handback", &[]);
    assert!(out.status.success(), "{}\n{}", text(&out), env.server.log());
    assert!(!points_here(&env));
    let left_alone = "automatic takeover: handed back";
    let before_restart = env.server.log().matches(left_alone).count();
    env.server.stop();
    let ca = env.server.pki.serving_ca();
    let mut restart = vec!["--takeover-ca-file", ca.to_str().unwrap()];
    restart.extend_from_slice(&flags);
    env.server.spawn(&restart);
    eventually(&env, "the handed-back definition considered", 30, || {
        (env.server.log().matches(left_alone).count() > before_restart).then_some(())
    });
    assert!(!points_here(&env));
    assert!(!env.policy_exists());
    assert_eq!(env.admin.get(WIDGETS).unwrap().json()["items"].as_array().unwrap().len(), 3);
}

/// A takeover of `TAKEOVER_OBJECTS` small objects (1,200 in the suite, three pages of its list; `hack/bench-takeover.sh`
/// sets 100,000 and reads the report it prints: freeze time, objects/s) succeeds and moves
/// them all.
#[test]
fn bench_takeover() {
    let count: usize = std::env::var("TAKEOVER_OBJECTS").ok().and_then(|c| c.parse().ok()).unwrap_or(1_200);
    let env = start(count, &[]);
    let started = Instant::now();
    let out = env.run("takeover", &[]);
    let wall = started.elapsed();
    assert!(out.status.success(), "{}\n{}", text(&out), env.server.log());
    assert!(text(&out).contains(&format!("moved {count} objects")), "{}", text(&out));
    println!("BENCH objects={count} command_seconds={:.2}", wall.as_secs_f64());
    for line in text(&out).lines() {
        println!("BENCH {line}");
    }
}
