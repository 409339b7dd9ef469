//! Several replicas on one etcd behind one Service, as a cluster runs them: the double's
//! aggregator sends requests to the ready replicas in turn. A replica killed with `kill -9`
//! under a stream of creates: the other keeps serving, the writer's retries lose nothing, an
//! informer (kube-rs' watcher, through the aggregator) resumes its watch on the other replica
//! from the same resourceVersion and sees every object exactly once, with no re-list, and
//! kubectl goes on working.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use support::control_plane::ControlPlane;
use support::control_plane::rbac::User;
use support::etcd::TestEtcd;
use support::{CRONTAB_CRD, TestServer, kubectl_with, stdout};

fn replica(plane: &ControlPlane, etcd: &TestEtcd) -> TestServer {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], Some(plane.server_kubeconfig()));
    let servers = format!("--etcd-servers={}", etcd.endpoint());
    server.spawn(&["--storage-backend=etcd3", &servers]);
    server
}

async fn crontabs(kubeconfig: &std::path::Path) -> Api<DynamicObject> {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("stable.example.com", "v1", "CronTab"), "crontabs");
    Api::namespaced_with(kube::Client::try_from(config).unwrap(), "default", &resource)
}

fn crontab(name: &str) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name},
        "spec": {"cronSpec": "* * * * */5", "image": name}
    }))
    .unwrap()
}

/// What the informer saw: objects applied per name, and how many times it listed.
#[derive(Default)]
struct Seen {
    applied: BTreeMap<String, Vec<String>>,
    lists: usize,
    synced: bool,
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

    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.lock().unwrap().synced {
        assert!(Instant::now() < deadline, "the informer never synced");
        std::thread::sleep(Duration::from_millis(50));
    }
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
    assert_eq!(acknowledged.len(), OBJECTS);
    // The dead replica is out of the rotation; the other served on.
    let deadline = Instant::now() + Duration::from_secs(5);
    while plane.replica_readiness() != [(first.port, false), (second.port, true)] {
        assert!(Instant::now() < deadline, "{:?}", plane.replica_readiness());
        std::thread::sleep(Duration::from_millis(100));
    }

    // Every acknowledged object reaches the informer exactly once, at the version the create
    // answered, with no second list: the watch resumed on the other replica.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let complete = {
            let seen = seen.lock().unwrap();
            acknowledged.keys().all(|name| seen.applied.contains_key(name))
        };
        if complete {
            break;
        }
        assert!(Instant::now() < deadline, "the informer missed objects: {:?}", seen.lock().unwrap().applied.keys());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.lists, 1, "the informer listed again");
        for (name, rv) in &acknowledged {
            assert_eq!(seen.applied[name], std::slice::from_ref(rv), "{name}: events {:?}", seen.applied[name]);
        }
        assert_eq!(seen.applied.len(), OBJECTS, "{:?}", seen.applied.keys());
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while open_watches(&second) != 1 {
        assert!(Instant::now() < deadline, "the watch never moved to the surviving replica");
        std::thread::sleep(Duration::from_millis(50));
    }
    informer.abort();

    // kubectl through the aggregator lists every object, from the surviving replica.
    let listed = stdout(&kubectl_with(&kubeconfig, second.dir.path(), &["get", "crontabs", "-o", "name"], None));
    assert_eq!(listed.lines().count(), OBJECTS, "{listed}");
    eprintln!("failed attempts retried after the kill: {failed_attempts}");
}
