//! Several replicas on one etcd behind one Service, as a cluster runs them: the double's
//! aggregator sends requests to the ready replicas in turn. A replica killed with `kill -9`
//! under a stream of creates: the other keeps serving, the writer's retries lose nothing, an
//! informer (kube-rs' watcher, through the aggregator) resumes its watch on the other replica
//! from the same resourceVersion and sees every object exactly once, with no re-list, and
//! kubectl goes on working. A file refused on every replica for dropping a stored version is
//! served by each, follower or leader, once the leader's migration took the version out.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use support::control_plane::ControlPlane;
use support::control_plane::rbac::User;
use support::etcd::TestEtcd;
use support::informer::{Informer, create_acknowledged, crontabs};
use support::{CRONTAB_CRD, TestServer, kubectl_with, stdout};

fn replica(plane: &ControlPlane, etcd: &TestEtcd) -> TestServer {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], Some(plane.server_kubeconfig()));
    let servers = format!("--etcd-servers={}", etcd.endpoint());
    server.spawn(&["--storage-backend=etcd3", &servers]);
    server
}

/// Watches of crontabs open on a replica now (`apiserver_longrunning_requests`).
fn open_watches(server: &TestServer) -> i64 {
    // The admin's token, checked by the replica with the double's TokenReview.
    let client = support::http::Client::new(server, None).header("Authorization", "Bearer admin-token");
    let answer = client.get("/metrics").unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    let metrics = answer.text();
    metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_longrunning_requests{") && l.contains(r#"resource="crontabs""#))
        .filter(|l| l.contains(r#"verb="WATCH""#))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<i64>().unwrap())
        .sum()
}

#[test]
fn a_replica_killed_under_writes_loses_nothing_and_watches_resume_on_another() {
    let etcd = TestEtcd::start();
    let plane = ControlPlane::start();
    let mut first = replica(&plane, &etcd);
    let second = replica(&plane, &etcd);
    // At first only the replica that will be killed is behind the Service: the informer's
    // watch is on it.
    plane.register_replicas(&[first.port], &[&first.pki.serving_ca()]);
    plane.register("stable.example.com", "v1");
    plane.register("crd-apiserver.io", "v1alpha1");
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    let kubeconfig = plane.token_kubeconfig("admin-token");

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let api = runtime.block_on(crontabs(&kubeconfig));
    // The informer: list, then watch, retrying with backoff from the last resourceVersion.
    let informer = Informer::start(&runtime, &api);
    let deadline = Instant::now() + Duration::from_secs(60);
    while open_watches(&first) != 1 {
        assert!(Instant::now() < deadline, "the informer never watched");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(open_watches(&second), 0);
    plane.register_replicas(&[first.port, second.port], &[&first.pki.serving_ca(), &second.pki.serving_ca()]);

    // Creates through the aggregator; a failed attempt is retried, and AlreadyExists on a
    // retry means the failed attempt was written: acknowledged either way.
    const OBJECTS: usize = 60;
    let mut acknowledged = BTreeMap::new();
    let mut failed_attempts = 0;
    for i in 0..OBJECTS {
        let name = format!("c{i:03}");
        if i == OBJECTS / 3 {
            first.kill();
        }
        let rv = create_acknowledged(&runtime, &api, &name, &mut failed_attempts);
        acknowledged.insert(name, rv);
    }
    assert_eq!(acknowledged.len(), OBJECTS);
    // The dead replica is out of the rotation; the other served on.
    let deadline = Instant::now() + Duration::from_secs(5);
    while plane.replica_readiness() != [(first.port, false), (second.port, true)] {
        assert!(Instant::now() < deadline, "{:?}", plane.replica_readiness());
        std::thread::sleep(Duration::from_millis(100));
    }

    // Every acknowledged object reaches the informer exactly once, at the version the create
    // answered, with no second list: the watch resumed on the other replica.
    informer.assert_saw_each_once(&acknowledged, String::new);
    let deadline = Instant::now() + Duration::from_secs(60);
    while open_watches(&second) != 1 {
        assert!(Instant::now() < deadline, "the watch never moved to the surviving replica");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(informer);

    // kubectl through the aggregator lists every object, from the surviving replica.
    let listed = stdout(&kubectl_with(&kubeconfig, second.dir.path(), &["get", "crontabs", "-o", "name"], None));
    assert_eq!(listed.lines().count(), OBJECTS, "{listed}");
    eprintln!("failed attempts retried after the kill: {failed_attempts}");
}

/// The work that must run once (namespace sweeper, migrations, status objects) runs on one
/// elected replica, and moves to another when that one is killed. The other waits for it
/// quietly: its campaign outlasts the etcd request timeout (1 s here: half of
/// `--request-timeout`) many times over, and waiting to lead is no failure.
#[test]
fn run_once_work_moves_to_another_replica_when_the_leader_dies() {
    const LEADS: &str = "this replica leads the run-once work";
    let etcd = TestEtcd::start();
    let plane = ControlPlane::start();
    let timing = [
        // Leases long enough that a busy machine never misses a renewal by accident.
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=200ms",
        "--request-timeout=2s",
    ];
    let start = || {
        let mut server = TestServer::prepare(&[CRONTAB_CRD], Some(plane.server_kubeconfig()));
        let servers = format!("--etcd-servers={}", etcd.endpoint());
        let mut flags = vec!["--storage-backend=etcd3", servers.as_str()];
        flags.extend(timing);
        server.spawn(&flags);
        server
    };
    let mut replicas = [start(), start()];
    let deadline = Instant::now() + Duration::from_secs(30);
    let leaders = |replicas: &[TestServer]| replicas.iter().filter(|r| r.log().contains(LEADS)).count();
    while leaders(&replicas) == 0 {
        assert!(Instant::now() < deadline, "no replica was elected");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Two leases later, still exactly one.
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(leaders(&replicas), 1);
    let leader = replicas.iter().position(|r| r.log().contains(LEADS)).unwrap();
    replicas[leader].kill();
    let follower = &replicas[1 - leader];
    let killed = Instant::now();
    while !follower.log().contains(LEADS) {
        assert!(killed.elapsed() < Duration::from_secs(30), "nobody took over:\n{}", follower.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("the other replica led {:?} after the leader was killed", killed.elapsed());
    // It waited through the 8 s above and the lease's expiry, one campaign all along.
    assert!(!follower.log().contains("campaigning for the run-once work failed"), "{}", follower.log());
}

/// The CronTab stored in v1beta1, in v1beta1 and v1 with v1 stored, or in v1 alone.
fn versioned_crontab(versions: &[(&str, bool)]) -> String {
    let versions: Vec<serde_json::Value> = versions
        .iter()
        .map(|(name, storage)| {
            serde_json::json!({"name": name, "served": true, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
        })
        .collect();
    serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"}, "versions": versions}})
    .to_string()
}

#[test]
fn every_replica_serves_a_dropped_version_once_the_leaders_migration_allows_it() {
    const OBJECTS: usize = 1000;
    let etcd = TestEtcd::start();
    let plane = ControlPlane::start();
    let start = || {
        let mut server =
            TestServer::prepare(&[&versioned_crontab(&[("v1beta1", true)])], Some(plane.server_kubeconfig()));
        let servers = format!("--etcd-servers={}", etcd.endpoint());
        // Slow enough that both files are edited again long before the migration ends.
        server.spawn(&["--storage-backend=etcd3", &servers, "--storage-migration-rate=200"]);
        server
    };
    let replicas = [start(), start()];
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    plane.state().create_namespace("default").ok();
    let client =
        |server: &TestServer| support::http::Client::new(server, None).header("Authorization", "Bearer admin-token");
    let served = |server: &TestServer, version: &str| {
        let path = format!("/apis/stable.example.com/{version}/namespaces/default/crontabs");
        client(server).get(&path).unwrap().status
    };
    let writer = client(&replicas[0]);
    for i in 0..OBJECTS {
        let object = serde_json::json!({"apiVersion": "stable.example.com/v1beta1", "kind": "CronTab",
            "metadata": {"name": format!("c{i:04}")}});
        let created = writer.send_json("POST", "/apis/stable.example.com/v1beta1/namespaces/default/crontabs", &object);
        assert_eq!(created.status, 201, "{}", created.text());
    }
    let replace = |server: &TestServer, text: &str| {
        let file = server.definitions_dir().join("00.yaml");
        std::fs::write(file.with_extension("staged"), text).unwrap();
        std::fs::rename(file.with_extension("staged"), &file).unwrap();
    };
    let wait = |what: &str, probe: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !probe() {
            assert!(Instant::now() < deadline, "{what} did not happen in 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // Each replica's files (one ConfigMap, mounted in each pod) make v1 the storage version...
    for replica in &replicas {
        replace(replica, &versioned_crontab(&[("v1beta1", false), ("v1", true)]));
    }
    wait("v1 served by both", &|| replicas.iter().all(|r| served(r, "v1") == 200));
    // ...then drop v1beta1 at once: refused by both while the leader migrates.
    for replica in &replicas {
        replace(replica, &versioned_crontab(&[("v1", true)]));
    }
    let refusal = "missing from spec.versions; v1beta1 was previously a storage version";
    wait("the refusal on both", &|| replicas.iter().all(|r| r.log().contains(refusal)));
    assert!(replicas.iter().all(|r| served(r, "v1beta1") == 200));
    // The leader's migration takes v1beta1 out of storedVersions: both replicas then serve
    // their files as they are, the follower as well as the leader.
    wait("v1beta1 gone from both", &|| replicas.iter().all(|r| served(r, "v1beta1") == 404));
    for replica in &replicas {
        let list = client(replica).get("/apis/stable.example.com/v1/namespaces/default/crontabs").unwrap().json();
        assert_eq!(list["items"].as_array().unwrap().len(), OBJECTS);
    }
}
