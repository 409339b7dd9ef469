//! crd-apiserver on a three-member etcd cluster, as production runs etcd: two replicas given
//! all three endpoints, creates through the aggregator while etcd's leader is killed, then a
//! follower: every acknowledged create is kept at the resourceVersion it was acknowledged with,
//! and an informer through the aggregator sees each object exactly once without listing again.
//! Once the replicas have taken a dead member out, requests no longer fail and both replicas
//! stay ready; a member that comes back is used again. A replica starts while any one member is
//! down, and waits (not ready, saying why) while no quorum is up.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::{ListParams, PostParams};
use support::control_plane::ControlPlane;
use support::control_plane::rbac::User;
use support::etcd::TestEtcd;
use support::informer::{Informer, create_acknowledged, crontab, crontabs};
use support::{CRONTAB_CRD, TestServer};

fn replica(plane: &ControlPlane, endpoints: &str) -> TestServer {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], Some(plane.server_kubeconfig()));
    let servers = format!("--etcd-servers={endpoints}");
    server.spawn(&["--storage-backend=etcd3", &servers]);
    server
}

fn wait_for(what: &str, within: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn losing_etcd_members_under_writes_loses_no_acknowledged_write() {
    let mut members = TestEtcd::cluster(3);
    let endpoints = members.iter().map(TestEtcd::endpoint).collect::<Vec<_>>().join(",");
    let plane = ControlPlane::start();
    let (first, second) = (replica(&plane, &endpoints), replica(&plane, &endpoints));
    plane.register_replicas(&[first.port, second.port], &[&first.pki.serving_ca(), &second.pki.serving_ca()]);
    plane.register("stable.example.com", "v1");
    plane.register("crd-apiserver.io", "v1alpha1");
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    let kubeconfig = plane.token_kubeconfig("admin-token");

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let api = runtime.block_on(crontabs(&kubeconfig));
    let informer = Informer::start(&runtime, &api);

    // Creates through the aggregator. A failed attempt is retried; AlreadyExists on a retry
    // means the failed attempt was written after all: acknowledged either way.
    const OBJECTS: usize = 90;
    let mut acknowledged = BTreeMap::new();
    let mut failed_attempts = 0;
    let mut killed = Vec::new();
    for i in 0..OBJECTS {
        if i == OBJECTS / 3 {
            let leader = members.iter().position(TestEtcd::is_leader).expect("the cluster has a leader");
            members[leader].kill();
            killed.push(leader);
        }
        if i == 2 * OBJECTS / 3 {
            let back = killed[0];
            members[back].resume();
            let follower = (0..members.len()).find(|&m| m != back && !members[m].is_leader()).unwrap();
            members[follower].kill();
            killed.push(follower);
        }
        let name = format!("c{i:03}");
        let rv = create_acknowledged(&runtime, &api, &name, &mut failed_attempts);
        acknowledged.insert(name, rv);
    }
    assert_eq!(killed.len(), 2);
    assert_ne!(killed[0], killed[1]);

    // Once the replicas have taken the dead member out of their etcd endpoints, one member
    // down of three costs nothing: every request succeeds at once and both stay ready.
    wait_for("both replicas to take the dead member out", Duration::from_secs(60), || {
        [&first, &second].iter().all(|r| r.log().contains("requests go to the others"))
    });
    for i in OBJECTS..OBJECTS + 40 {
        let name = format!("c{i:03}");
        let created = runtime.block_on(api.create(&PostParams::default(), &crontab(&name)));
        let created = created.unwrap_or_else(|e| panic!("{name} with one etcd member down: {e}"));
        acknowledged.insert(name, created.metadata.resource_version.unwrap());
        assert_eq!(plane.replica_readiness(), [(first.port, true), (second.port, true)]);
    }
    // The member back: both replicas send requests to it again.
    members[killed[1]].resume();
    wait_for("both replicas to use the member again", Duration::from_secs(60), || {
        [&first, &second].iter().all(|r| r.log().matches("requests go to it too").count() >= 2)
    });

    // Every acknowledged create is stored, at the resourceVersion it was acknowledged with.
    let listed = runtime.block_on(api.list(&ListParams::default())).unwrap();
    let stored: BTreeMap<String, String> = listed
        .items
        .iter()
        .map(|o| (o.metadata.name.clone().unwrap(), o.metadata.resource_version.clone().unwrap()))
        .collect();
    assert_eq!(stored, acknowledged);

    // The informer saw each exactly once, at that version, having listed only once.
    informer.assert_saw_each_once(&acknowledged, || {
        format!("first replica:\n{}\nsecond replica:\n{}", first.log(), second.log())
    });
    drop(informer);

    // Both replicas serve on two of three members.
    wait_for("both replicas ready", Duration::from_secs(60), || {
        plane.replica_readiness() == [(first.port, true), (second.port, true)]
    });
    eprintln!("failed attempts retried while members were lost: {failed_attempts}");
}

/// Starts of a replica with one member of three down, in each position of `--etcd-servers`:
/// its first reads must never go to the dead member, whichever the client would pick.
const STARTS_PER_POSITION: usize = 4;

#[test]
fn a_replica_starts_while_any_one_etcd_member_is_down() {
    let mut members = TestEtcd::cluster(3);
    let endpoints = members.iter().map(TestEtcd::endpoint).collect::<Vec<_>>().join(",");
    let plane = ControlPlane::start();
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    for (down, member) in members.iter_mut().enumerate() {
        member.kill();
        for start in 0..STARTS_PER_POSITION {
            let mut server = TestServer::prepare(&[CRONTAB_CRD], Some(plane.server_kubeconfig()));
            let servers = format!("--etcd-servers={endpoints}");
            // Waits for /readyz, and fails if the server exits.
            server.spawn(&["--storage-backend=etcd3", &servers]);
            let client = support::http::Client::new(&server, None).header("Authorization", "Bearer admin-token");
            let path = "/apis/stable.example.com/v1/namespaces/default/crontabs";
            let body = format!(
                r#"{{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{{"name":"m{down}-{start}"}}}}"#
            );
            let created = client.send("POST", path, "application/json", body).unwrap();
            assert_eq!(created.status, 201, "member {down} down, start {start}: {}", created.text());
            server.stop();
        }
        member.resume();
    }
}

#[test]
fn a_replica_waits_for_an_etcd_quorum_before_it_serves() {
    let mut members = TestEtcd::cluster(3);
    let endpoints = members.iter().map(TestEtcd::endpoint).collect::<Vec<_>>().join(",");
    let plane = ControlPlane::start();
    members[0].kill();
    members[2].kill();
    let mut server = TestServer::prepare(&[CRONTAB_CRD], Some(plane.server_kubeconfig()));
    let servers = format!("--etcd-servers={endpoints}");
    // etcd calls time out after 2 s (half the request timeout): the first refusal comes soon.
    server.launch(&["--storage-backend=etcd3", &servers, "--request-timeout=4s"]);
    wait_for("the replica to say it waits for etcd", Duration::from_secs(30), || {
        server.log().contains("etcd is unreachable; retrying (the server is not ready until etcd answers)")
    });
    // Not serving yet: nothing answers on its port.
    assert!(support::http::Client::new(&server, None).get("/readyz").is_err(), "{}", server.log());
    members[0].resume();
    members[2].resume();
    server.wait_ready();
    assert!(server.log().contains("connected to etcd"), "{}", server.log());
}
