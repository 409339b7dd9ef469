//! Object-count ResourceQuota enforced on our resources as kube-apiserver's quota admission
//! enforces it: the fourth CronTab under `count/crontabs.stable.example.com: 3` is refused with
//! kube-apiserver's text, `status.used` is raised in the main apiserver (the double) with
//! compare-and-swap, lost races are retried, concurrent creates never exceed `hard`, dry runs
//! charge nothing, and a quota whose usage is not known yet refuses.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::control_plane::ControlPlane;
use support::control_plane::rbac::User;
use support::http::Client;
use support::{CRONTAB_CRD, stderr};

const COUNT: &str = "count/crontabs.stable.example.com";
const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

/// A quota as the quota controller leaves it: hard in spec and status, usage counted.
fn quota(name: &str, hard: &str, used: Option<&str>) -> Value {
    let mut status = json!({"hard": {COUNT: hard}});
    if let Some(used) = used {
        status["used"] = json!({COUNT: used});
    }
    json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": "default"},
        "spec": {"hard": {COUNT: hard}}, "status": status})
}

fn used(plane: &ControlPlane, name: &str) -> String {
    plane.state().get_object("resourcequotas", "default", name).unwrap()["status"]["used"][COUNT]
        .as_str()
        .unwrap()
        .to_string()
}

fn crontab(name: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name}, "spec": {"replicas": 1}})
}

#[test]
fn the_fourth_object_exceeds_the_quota() {
    let plane = ControlPlane::start();
    plane.state().put_object("resourcequotas", quota("crontab-count", "3", Some("0")));
    let cluster = TestCluster::start_on(plane, &[CRONTAB_CRD], &[]);
    let alice = cluster.user("alice", &["system:masters"]);
    let manifest =
        |name: &str| format!("apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: {name}\n");
    for i in 1..=3 {
        cluster.kubectl_stdin_ok(&alice, &["create", "-f", "-"], &manifest(&format!("ct-{i}")));
    }
    assert_eq!(used(&cluster.plane, "crontab-count"), "3");
    // A dry run is checked but charges nothing.
    let dry = cluster.kubectl_stdin(&alice, &["create", "--dry-run=server", "-f", "-"], &manifest("ct-dry"));
    assert_eq!(
        stderr(&dry).trim(),
        format!(
            "Error from server (Forbidden): error when creating \"STDIN\": crontabs.stable.example.com \"ct-dry\" is forbidden: exceeded quota: crontab-count, requested: {COUNT}=1, used: {COUNT}=3, limited: {COUNT}=3"
        )
    );
    let out = cluster.kubectl_stdin(&alice, &["create", "-f", "-"], &manifest("ct-4"));
    assert_eq!(
        stderr(&out).trim(),
        format!(
            "Error from server (Forbidden): error when creating \"STDIN\": crontabs.stable.example.com \"ct-4\" is forbidden: exceeded quota: crontab-count, requested: {COUNT}=1, used: {COUNT}=3, limited: {COUNT}=3"
        )
    );
    assert_eq!(cluster.kubectl_ok(&alice, &["get", "crontabs", "-o", "name"]).lines().count(), 3);

    // The quota controller recounts after a delete; then there is room for one more.
    cluster.kubectl_ok(&alice, &["delete", "crontab", "ct-1"]);
    cluster.plane.state().put_object("resourcequotas", {
        let mut q = cluster.plane.state().get_object("resourcequotas", "default", "crontab-count").unwrap();
        q["status"]["used"][COUNT] = json!("2");
        q
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let out = cluster.kubectl_stdin(&alice, &["create", "--dry-run=server", "-f", "-"], &manifest("ct-5"));
        if out.status.success() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", stderr(&out));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(used(&cluster.plane, "crontab-count"), "2");
    cluster.kubectl_stdin_ok(&alice, &["create", "-f", "-"], &manifest("ct-5"));
    assert_eq!(used(&cluster.plane, "crontab-count"), "3");
}

#[test]
fn status_updates_are_compare_and_swap() {
    let plane = ControlPlane::start();
    plane.state().put_object("resourcequotas", quota("crontab-count", "5", Some("0")));
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    let cluster = TestCluster::start_on(plane, &[CRONTAB_CRD], &[]);
    let client = Client::to_plane(&cluster.plane, "admin-token");
    let state = cluster.plane.state();

    // Another writer changes the quota just before our update: 409, then a retry against the
    // live quota succeeds.
    state.status_races.store(1, Ordering::SeqCst);
    let before = state.status_updates.load(Ordering::SeqCst);
    let response = client.send_json("POST", CRONTABS, &crontab("raced"));
    assert_eq!(response.status, 201, "{}", response.text());
    assert_eq!(state.status_updates.load(Ordering::SeqCst) - before, 2);
    assert_eq!(used(&cluster.plane, "crontab-count"), "1");

    // Lost every time: after the retries, the conflict is the answer and nothing is stored.
    state.status_races.store(10, Ordering::SeqCst);
    let response = client.send_json("POST", CRONTABS, &crontab("always-raced"));
    assert_eq!(response.status, 409, "{}", response.text());
    assert_eq!(
        response.json()["message"],
        "Operation cannot be fulfilled on resourcequotas \"crontab-count\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(client.get(&format!("{CRONTABS}/always-raced")).unwrap().status, 404);
    state.status_races.store(0, Ordering::SeqCst);

    // Many creates at once: exactly the room left is used, never more.
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let client = &client;
                scope.spawn(move || client.send_json("POST", CRONTABS, &crontab(&format!("many-{i}"))).status)
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 4, "{statuses:?}");
    assert!(statuses.iter().all(|s| matches!(s, 201 | 403 | 409)), "{statuses:?}");
    assert_eq!(used(&cluster.plane, "crontab-count"), "5");

    // A quota the controller has not counted yet refuses.
    state.put_object("resourcequotas", quota("uncounted", "10", None));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let response = loop {
        let response = client.send_json("POST", CRONTABS, &crontab("unknown"));
        if response.json()["message"].as_str().unwrap().contains("uncounted") || std::time::Instant::now() > deadline {
            break response;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(response.status, 403);
    assert_eq!(
        response.json()["message"],
        format!(
            "crontabs.stable.example.com \"unknown\" is forbidden: status unknown for quota: uncounted, resources: {COUNT}"
        )
    );
}

#[test]
fn two_replicas_never_exceed_the_quota() {
    // Two servers (each with its own store) behind one main apiserver: the quota lives there,
    // and compare-and-swap on its status keeps both under `hard`.
    let plane = ControlPlane::start();
    plane.state().put_object("resourcequotas", quota("crontab-count", "5", Some("0")));
    let cluster = TestCluster::start_on(plane, &[CRONTAB_CRD], &[]);
    let second = support::TestServer::start_delegated(&[CRONTAB_CRD], &cluster.plane.server_kubeconfig(), &[]);
    // The admin presents a certificate of the cluster's client CA to each replica directly.
    let (cert, key) = cluster.plane.write_admin_certificate(second.dir.path(), "admin");
    let replicas = [Client::new(&cluster.server, Some((&cert, &key))), Client::new(&second, Some((&cert, &key)))];
    for replica in &replicas {
        assert_eq!(replica.get(CRONTABS).unwrap().status, 200, "the admin is authenticated by both replicas");
    }
    let answers: Vec<(u16, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..10)
            .map(|i| {
                let client = &replicas[i % 2];
                scope.spawn(move || {
                    let response = client.send_json("POST", CRONTABS, &crontab(&format!("r-{i}")));
                    (response.status, response.text())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(answers.iter().filter(|(s, _)| *s == 201).count(), 5, "{answers:?}");
    for (status, text) in answers.iter().filter(|(s, _)| *s != 201) {
        assert!(
            (*status == 403 && text.contains("exceeded quota: crontab-count")) || *status == 409,
            "{status}: {text}"
        );
    }
    assert_eq!(used(&cluster.plane, "crontab-count"), "5");
}
