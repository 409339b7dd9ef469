//! crd-apiserver on a three-member etcd cluster, as production runs etcd: two replicas given
//! all three endpoints, creates through the aggregator while etcd's leader is killed, then a
//! follower: every acknowledged create is kept at the resourceVersion it was acknowledged with,
//! and an informer through the aggregator sees each object exactly once without listing again.
//! Once the replicas have taken a dead member out, requests no longer fail and both replicas
//! stay ready; a member that comes back is used again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use support::control_plane::ControlPlane;
use support::control_plane::rbac::User;
use support::etcd::TestEtcd;
use support::{CRONTAB_CRD, TestServer};

fn replica(plane: &ControlPlane, endpoints: &str) -> TestServer {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], Some(plane.server_kubeconfig()));
    let servers = format!("--etcd-servers={endpoints}");
    server.spawn(&["--storage-backend=etcd3", &servers]);
    server
}

fn crontab(name: &str) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name},
        "spec": {"cronSpec": "* * * * */5", "image": name}
    }))
    .unwrap()
}

/// What the informer saw: resourceVersions applied per name, and how many times it listed.
#[derive(Default)]
struct Seen {
    applied: BTreeMap<String, Vec<String>>,
    lists: usize,
    synced: bool,
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
    let api: Api<DynamicObject> = runtime.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
        let gvk = GroupVersionKind::gvk("stable.example.com", "v1", "CronTab");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "crontabs");
        Api::namespaced_with(kube::Client::try_from(config).unwrap(), "default", &resource)
    });
    let seen = Arc::new(Mutex::new(Seen::default()));
    let informer = {
        let (api, seen) = (api.clone(), seen.clone());
        runtime.spawn(async move {
            let mut events = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
            while let Some(event) = events.next().await {
                let mut seen = seen.lock().unwrap();
                match event {
                    Ok(Event::Init) => seen.lists += 1,
                    Ok(Event::Apply(o) | Event::InitApply(o)) => {
                        let rv = o.metadata.resource_version.unwrap_or_default();
                        seen.applied.entry(o.metadata.name.unwrap_or_default()).or_default().push(rv);
                    }
                    Ok(Event::InitDone) => seen.synced = true,
                    Ok(Event::Delete(_)) | Err(_) => {}
                }
            }
        })
    };
    wait_for("the informer's first list", Duration::from_secs(10), || seen.lock().unwrap().synced);

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
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match runtime.block_on(api.create(&PostParams::default(), &crontab(&name))) {
                Ok(created) => {
                    acknowledged.insert(name.clone(), created.metadata.resource_version.unwrap());
                    break;
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    let stored = runtime.block_on(api.get(&name)).unwrap();
                    acknowledged.insert(name.clone(), stored.metadata.resource_version.unwrap());
                    break;
                }
                Err(e) => {
                    failed_attempts += 1;
                    assert!(Instant::now() < deadline, "{name} still failing: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
    assert_eq!(killed.len(), 2);
    assert_ne!(killed[0], killed[1]);

    // Once the replicas have taken the dead member out of their etcd endpoints, one member
    // down of three costs nothing: every request succeeds at once and both stay ready.
    wait_for("both replicas to take the dead member out", Duration::from_secs(10), || {
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
    wait_for("both replicas to use the member again", Duration::from_secs(10), || {
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
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let missing: Vec<String> = {
            let seen = seen.lock().unwrap();
            acknowledged.keys().filter(|name| !seen.applied.contains_key(*name)).cloned().collect()
        };
        if missing.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the informer missed {missing:?}\nfirst replica:\n{}\nsecond replica:\n{}",
            first.log(),
            second.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.lists, 1, "the informer listed again");
        for (name, rv) in &acknowledged {
            assert_eq!(seen.applied[name], std::slice::from_ref(rv), "{name}: events {:?}", seen.applied[name]);
        }
    }
    informer.abort();

    // Both replicas serve on two of three members.
    wait_for("both replicas ready", Duration::from_secs(10), || {
        plane.replica_readiness() == [(first.port, true), (second.port, true)]
    });
    eprintln!("failed attempts retried while members were lost: {failed_attempts}");
}
