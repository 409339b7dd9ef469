//! Faults in the middle of a takeover, through the control-plane double, whose door holds a
//! chosen request so that the server is stopped at a precise step: the server killed (SIGKILL)
//! while the APIServices are partly switched and while the freeze is not yet lifted (at no
//! moment do both sides accept writes; the command run again finishes with every object), the
//! main apiserver unreachable (the command and the automatic mode fail naming it and change
//! nothing that accepts writes; the automatic mode succeeds once it is back), and the automatic
//! mode with two replicas on etcd (only the elected one takes over; when it is killed half way,
//! the next leader finishes the run without copying again).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use http::Method;
use serde_json::{Value, json};
use support::TestServer;
use support::control_plane::ControlPlane;
use support::control_plane::rbac::User;
use support::http::Client;

const GROUP: &str = "faults.example.com";
const NAME: &str = "widgets.faults.example.com";
const VERSIONS: [&str; 2] = ["v1", "v1beta1"];
const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices/";
const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/";
/// What every write refused by the freeze says.
const FROZEN: &str = "is being moved to crd-apiserver";

/// Two served versions, so that a switch can stop between their two APIServices.
const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.faults.example.com
spec:
  group: faults.example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
    - name: v1beta1
      served: true
      storage: false
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"#;

fn collection(version: &str) -> String {
    format!("/apis/{GROUP}/{version}/namespaces/default/widgets")
}

fn widget(version: &str, name: &str) -> Value {
    json!({"apiVersion": format!("{GROUP}/{version}"), "kind": "Widget",
           "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 1}})
}

/// The double serving widgets itself with `objects` objects, the server's service account
/// granted what a takeover needs (the chart's `takeover.rbac`), and an admin.
fn plane_with_widgets(objects: usize) -> ControlPlane {
    let plane = ControlPlane::start();
    plane.create_crd(serde_saphyr::from_str(CRD).unwrap()).unwrap();
    plane.autoregister();
    plane.grant_takeover(GROUP, "widgets");
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    for i in 0..objects {
        plane.seed_custom(GROUP, "widgets", widget("v1", &format!("w{i:05}")));
    }
    plane
}

/// A server of the double's cluster (not started), and a cluster admin's client certificate
/// for the `takeover` command.
fn prepare(plane: &ControlPlane, files: &[&str]) -> (TestServer, (PathBuf, PathBuf)) {
    let server = TestServer::prepare(files, Some(plane.server_kubeconfig()));
    let cert = plane.write_admin_certificate(server.dir.path(), "admin-cluster");
    (server, cert)
}

fn ca_flag(server: &TestServer) -> String {
    format!("--takeover-ca-file={}", server.pki.serving_ca().display())
}

/// The server serving the definition from its files, behind the double.
fn start(plane: &ControlPlane) -> (TestServer, (PathBuf, PathBuf)) {
    let (mut server, cert) = prepare(plane, &[CRD]);
    server.spawn(&[&ca_flag(&server)]);
    plane.register_backend(server.port, &server.pki.serving_ca());
    (server, cert)
}

fn takeover(server: &TestServer, cert: &(PathBuf, PathBuf)) -> Command {
    let mut command = Command::new(support::binary());
    command
        .args(["takeover", NAME])
        .args(["--server", &format!("https://127.0.0.1:{}", server.port)])
        .args(["--certificate-authority", server.pki.serving_ca().to_str().unwrap()])
        .args(["--client-certificate", cert.0.to_str().unwrap()])
        .args(["--client-key", cert.1.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Waits (up to `seconds`) until `probe` holds.
fn wait_until(what: &str, seconds: u64, logs: &dyn Fn() -> String, probe: &dyn Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !probe() {
        assert!(Instant::now() < deadline, "{what} did not happen in {seconds} s:\n{}", logs());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn points_here(plane: &ControlPlane, version: &str) -> bool {
    plane.api_service(&format!("{version}.{GROUP}")).is_some_and(|s| {
        s["spec"]["service"]["name"] == "crd-apiserver" && s["metadata"]["labels"].get(AUTOMANAGED).is_none()
    })
}

const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

fn local(plane: &ControlPlane, version: &str) -> bool {
    plane
        .api_service(&format!("{version}.{GROUP}"))
        .is_some_and(|s| s["spec"]["service"].is_null() && s["metadata"]["labels"][AUTOMANAGED] == "true")
}

fn frozen(plane: &ControlPlane) -> bool {
    plane.state().get_object("validatingadmissionpolicies", "", &format!("crd-apiserver-takeover.{NAME}")).is_some()
}

/// A create of `name` in `version` through the main apiserver (the double), as a client of the
/// cluster sends it: the status and the answer.
fn create(plane: &ControlPlane, version: &str, name: &str) -> (u16, String) {
    let answer = Client::to_plane(plane, "admin-token").send_json("POST", &collection(version), &widget(version, name));
    (answer.status, answer.text())
}

/// Whichever side serves each version now, a create is refused: by the freeze (in the main
/// apiserver, and in this server, which follows the same policies), or because the side it
/// reaches is down.
fn assert_no_side_accepts_writes(plane: &ControlPlane, name: &str, down_is_fine: bool) {
    for version in VERSIONS {
        let (status, answer) = create(plane, version, name);
        if down_is_fine && status == 503 {
            continue;
        }
        assert_eq!(status, 403, "{version}: {answer}");
        assert!(answer.contains(FROZEN), "{version}: {answer}");
    }
}

fn uids(items: &[Value]) -> std::collections::BTreeMap<String, Value> {
    items.iter().map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), o["metadata"]["uid"].clone())).collect()
}

/// Once the takeover is done: both APIServices are ours, the freeze is lifted, kubectl through
/// the aggregator lists every object with its uid, and a write in either version reaches this
/// server only (the main apiserver's copies are untouched).
fn assert_taken_over(plane: &ControlPlane, server: &TestServer, before: &[Value]) {
    for version in VERSIONS {
        assert!(points_here(plane, version), "{version}: {:?}", plane.api_service(&format!("{version}.{GROUP}")));
    }
    assert!(!frozen(plane), "the freeze is lifted");
    let kubeconfig = plane.token_kubeconfig("admin-token");
    let out = support::kubectl_with(&kubeconfig, server.dir.path(), &["get", "widgets", "-o", "json"], None);
    assert!(out.status.success(), "{}\n{}", support::stderr(&out), server.log());
    let listed: Value = serde_json::from_str(&support::stdout(&out)).unwrap();
    assert_eq!(uids(listed["items"].as_array().unwrap()), uids(before), "every object, with its uid");
    for version in VERSIONS {
        let (status, answer) = create(plane, version, &format!("after-{version}"));
        assert_eq!(status, 201, "{version}: {answer}");
    }
    assert_eq!(plane.custom_objects(GROUP, "widgets").len(), before.len(), "the main apiserver's copies");
}

#[test]
fn a_server_killed_while_the_apiservices_are_partly_switched_resumes_with_one_writable_side() {
    let plane = plane_with_widgets(3);
    let before = plane.custom_objects(GROUP, "widgets");
    let (mut server, cert) = start(&plane);
    // The second APIService's switch is held: the first points here, the second not yet.
    let hold = plane.hold(Method::PUT, APISERVICES, 1);
    let running = takeover(&server, &cert).spawn().unwrap();
    wait_until("the second APIService's switch", 60, &|| server.log(), &|| plane.held(hold) == 1);
    let switched: Vec<bool> = VERSIONS.iter().map(|v| points_here(&plane, v)).collect();
    assert_eq!(switched.iter().filter(|s| **s).count(), 1, "partly switched: {switched:?}");
    assert!(VERSIONS.iter().any(|v| local(&plane, v)));
    assert_no_side_accepts_writes(&plane, "during-switch", false);

    server.kill();
    plane.release_held(hold, false);
    let out = running.wait_with_output().unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(frozen(&plane), "the freeze stays while nobody finishes the takeover");
    assert_no_side_accepts_writes(&plane, "server-down", true);

    server.spawn(&[&ca_flag(&server)]);
    assert_no_side_accepts_writes(&plane, "restarted", false);
    let out = takeover(&server, &cert).output().unwrap();
    assert!(out.status.success(), "{}\n{}", text(&out), server.log());
    assert!(text(&out).contains("resuming a takeover left in phase Copied"), "{}", text(&out));
    assert!(text(&out).contains("moved 3 objects"), "{}", text(&out));
    assert_taken_over(&plane, &server, &before);
}

#[test]
fn a_server_killed_before_the_freeze_is_lifted_keeps_writes_refused_until_the_command_runs_again() {
    let plane = plane_with_widgets(3);
    let before = plane.custom_objects(GROUP, "widgets");
    let (mut server, cert) = start(&plane);
    // The freeze's lift is held: both APIServices point here, writes still refused.
    let hold = plane.hold(Method::DELETE, BINDINGS, 0);
    let running = takeover(&server, &cert).spawn().unwrap();
    wait_until("the lift", 60, &|| server.log(), &|| plane.held(hold) == 1);
    assert!(VERSIONS.iter().all(|v| points_here(&plane, v)));
    assert_no_side_accepts_writes(&plane, "during-lift", false);

    server.kill();
    plane.release_held(hold, false);
    let out = running.wait_with_output().unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(frozen(&plane));
    server.spawn(&[&ca_flag(&server)]);
    // Restarted, this server follows the freeze still in place: nothing accepts writes.
    assert_no_side_accepts_writes(&plane, "restarted", false);
    let out = takeover(&server, &cert).output().unwrap();
    assert!(out.status.success(), "{}\n{}", text(&out), server.log());
    assert!(text(&out).contains("resuming a takeover left in phase Switched"), "{}", text(&out));
    assert!(text(&out).contains("moved 3 objects"), "{}", text(&out));
    assert_taken_over(&plane, &server, &before);
}

#[test]
fn the_main_apiserver_unreachable_fails_the_takeover_naming_it_and_a_later_run_moves_everything() {
    const OBJECTS: usize = 1200;
    let plane = plane_with_widgets(OBJECTS);
    let before = plane.custom_objects(GROUP, "widgets");
    let (server, cert) = start(&plane);
    let ours = || {
        let direct = Client::new(&server, Some((&cert.0, &cert.1)));
        direct.get(&collection("v1")).unwrap().json()["items"].as_array().unwrap().len()
    };
    let unchanged = || {
        assert!(VERSIONS.iter().all(|v| local(&plane, v)), "the APIServices are the main apiserver's");
        assert_eq!(ours(), 0, "nothing copied stays here");
    };

    // Down from the start: refused before anything changes.
    plane.set_down(true);
    let out = takeover(&server, &cert).output().unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("the main apiserver cannot be reached"), "{}", text(&out));
    plane.set_down(false);
    unchanged();
    assert!(!frozen(&plane));

    // Down while the second page is on its way (the first one copied).
    let hold = plane.hold(Method::GET, "/widgets?limit=500&continue=", 0);
    let running = takeover(&server, &cert).spawn().unwrap();
    wait_until("the second page", 60, &|| server.log(), &|| plane.held(hold) == 1);
    plane.set_down(true);
    let out = running.wait_with_output().unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("the main apiserver cannot be reached"), "{}", text(&out));
    assert!(text(&out).contains("rolling back"), "{}", text(&out));
    plane.release_held(hold, false);
    unchanged();
    // The freeze could not be lifted (the main apiserver is down): its writes stay refused
    // rather than two copies taking writes.
    assert!(frozen(&plane));

    plane.set_down(false);
    let out = takeover(&server, &cert).output().unwrap();
    assert!(out.status.success(), "{}\n{}", text(&out), server.log());
    assert!(text(&out).contains(&format!("moved {OBJECTS} objects")), "{}", text(&out));
    assert_taken_over(&plane, &server, &before);
}

#[test]
fn the_automatic_mode_retries_a_takeover_the_unreachable_main_apiserver_failed() {
    let plane = plane_with_widgets(3);
    let before = plane.custom_objects(GROUP, "widgets");
    // The automatic takeover is stopped at its freeze, and the main apiserver goes down.
    let hold = plane.hold(Method::POST, POLICIES, 0);
    let (mut server, cert) = prepare(&plane, &[]);
    server.spawn(&[&ca_flag(&server), &format!("--cluster-definitions={NAME}"), "--takeover-cluster-definitions"]);
    plane.register_backend(server.port, &server.pki.serving_ca());
    wait_until("the automatic takeover's freeze", 60, &|| server.log(), &|| plane.held(hold) == 1);
    plane.set_down(true);
    plane.release_held(hold, false);
    wait_until("the failure logged", 30, &|| server.log(), &|| {
        server
            .log()
            .lines()
            .any(|l| l.contains("automatic takeover failed") && l.contains("the main apiserver cannot be reached"))
    });
    assert!(!frozen(&plane));
    assert!(VERSIONS.iter().all(|v| local(&plane, v)));
    let direct = Client::new(&server, Some((&cert.0, &cert.1)));
    assert_eq!(direct.get(&collection("v1")).unwrap().json()["items"].as_array().unwrap().len(), 0);

    // Back: the next attempt (10 s later) takes it over.
    plane.set_down(false);
    wait_until("the retried takeover", 60, &|| server.log(), &|| {
        VERSIONS.iter().all(|v| points_here(&plane, v)) && !frozen(&plane)
    });
    wait_until("the report", 10, &|| server.log(), &|| server.log().contains("automatic takeover: done"));
    assert_taken_over(&plane, &server, &before);
}

/// The main apiserver's resourceVersions a client may still hold after a takeover, and what a
/// replica must answer for them: 410 Expired, as after a compaction.
struct OldVersions {
    revision: u64,
    token: String,
}

impl OldVersions {
    fn take(plane: &ControlPlane) -> OldVersions {
        let admin = Client::to_plane(plane, "admin-token");
        let page = admin.get(&format!("{}?limit=1", collection("v1"))).unwrap().json();
        OldVersions {
            revision: page["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap(),
            token: page["metadata"]["continue"].as_str().unwrap().to_string(),
        }
    }

    fn assert_expired(&self, client: &Client, who: &str) {
        let rest = client.get(&format!("{}?limit=1&continue={}", collection("v1"), self.token)).unwrap();
        assert_eq!(rest.status, 410, "{who}: the main apiserver's continue token: {}", rest.text());
        let exact = format!("{}?resourceVersion={}&resourceVersionMatch=Exact", collection("v1"), self.revision);
        let exact = client.get(&exact).unwrap();
        assert_eq!(exact.status, 410, "{who}: a list at the main apiserver's resourceVersion: {}", exact.text());
    }
}

/// Three replicas on etcd with `--takeover-cluster-definitions`: only the elected one starts
/// the takeover; killed while switching, the one elected next finishes it from its record
/// without copying again; the replica that never led answers the main apiserver's
/// resourceVersions as expired, as the one that finished does.
#[test]
fn with_replicas_only_the_leader_takes_over_and_the_next_leader_finishes_a_killed_ones_run() {
    let etcd = support::etcd::TestEtcd::start();
    let plane = plane_with_widgets(3);
    let before = plane.custom_objects(GROUP, "widgets");
    // etcd's revision past every one the main apiserver gave out, as when the server shares
    // the main apiserver's etcd.
    let main_revision = support::control_plane::state::lock(&plane.state().objects).revision;
    let mut i = 0;
    let mut put = || {
        i += 1;
        etcd.put(&format!("/main-apiserver/other/k{i}"), "x")
    };
    while put() <= main_revision + 100 {}
    // The automatic takeover stops before its freeze, then before its switch.
    let freeze = plane.hold(Method::POST, POLICIES, 0);
    let hold = plane.hold(Method::PUT, APISERVICES, 0);
    let servers = format!("--etcd-servers={}", etcd.endpoint());
    let replica = || {
        let (mut server, cert) = prepare(&plane, &[]);
        let ca = ca_flag(&server);
        server.spawn(&[
            "--storage-backend=etcd3",
            &servers,
            &ca,
            &format!("--cluster-definitions={NAME}"),
            "--takeover-cluster-definitions",
            "--leader-elect-lease-duration=2s",
            "--leader-elect-renew-deadline=1500ms",
            "--leader-elect-retry-period=200ms",
        ]);
        (server, cert)
    };
    let mut replicas = [replica(), replica(), replica()];
    let ports: Vec<u16> = replicas.iter().map(|(r, _)| r.port).collect();
    let cas: Vec<PathBuf> = replicas.iter().map(|(r, _)| r.pki.serving_ca()).collect();
    plane.register_replicas(&ports, &cas.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    let logs =
        |r: &[(TestServer, (PathBuf, PathBuf))]| r.iter().map(|(s, _)| s.log()).collect::<Vec<_>>().join("\n----\n");
    const STARTING: &str = "automatic takeover: starting";
    const DONE: &str = "automatic takeover: done";
    wait_until("the leader's freeze", 60, &|| logs(&replicas), &|| plane.held(freeze) == 1);
    // Other clients of the main etcd went on: the main apiserver's resourceVersions are now
    // recent ones, which every replica's watch window still holds. A client lists from there.
    let mut last = 0;
    for _ in 0..200 {
        last = put();
    }
    plane.set_revision(last - 100);
    let old = OldVersions::take(&plane);
    plane.release_held(freeze, true);
    wait_until("the leader's switch", 60, &|| logs(&replicas), &|| plane.held(hold) == 1);
    let started: Vec<bool> = replicas.iter().map(|(r, _)| r.log().contains(STARTING)).collect();
    assert_eq!(started.iter().filter(|s| **s).count(), 1, "{started:?}\n{}", logs(&replicas));
    let leader = started.iter().position(|s| *s).unwrap();
    assert!(replicas[leader].0.log().contains("copied 3 objects"), "{}", replicas[leader].0.log());

    replicas[leader].0.kill();
    plane.release_held(hold, false);
    wait_until("the next leader's takeover", 60, &|| logs(&replicas), &|| {
        replicas.iter().any(|(r, _)| r.log().contains(DONE))
    });
    let next = replicas.iter().position(|(r, _)| r.log().contains(DONE)).unwrap();
    let follower = (0..3).find(|i| *i != leader && *i != next).unwrap();
    let log = replicas[next].0.log();
    assert!(log.contains("Resume(Copied)"), "{log}");
    assert!(!log.contains("copying the objects"), "copied once: {log}");
    assert_eq!(log.matches(STARTING).count(), 1, "{log}");
    assert!(!replicas[follower].0.log().contains(STARTING), "{}", replicas[follower].0.log());
    wait_until("the killed replica out of the Service", 10, &|| logs(&replicas), &|| {
        plane.replica_readiness().iter().filter(|(_, ready)| *ready).count() == 2
    });
    assert_taken_over(&plane, &replicas[next].0, &before);
    for i in [next, follower] {
        let (server, cert) = &replicas[i];
        old.assert_expired(&Client::new(server, Some((&cert.0, &cert.1))), &format!("replica {i}"));
    }
}
