//! A kube-rs watcher (the Rust counterpart of client-go's informer) syncs through watch-list
//! and through list+watch, then follows changes, and recovers across a server restart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeSet;

use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use support::http::Client;
use support::{CRONTAB_CRD, TestServer};

const COLL: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn create(server: &TestServer, name: &str) {
    let body = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name}, "spec": {"image": "x"}});
    assert_eq!(Client::admin(server).send_json("POST", COLL, &body).status, 201);
}

fn api(runtime: &tokio::runtime::Runtime, server: &TestServer) -> Api<DynamicObject> {
    runtime.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(server.kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("stable.example.com", "v1", "CronTab"),
            "crontabs",
        );
        Api::namespaced_with(client, "default", &resource)
    })
}

type Events = std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Event<DynamicObject>, watcher::Error>> + Send>>;

/// Names delivered by the initial sync (Init ... InitDone).
fn initial_sync(runtime: &tokio::runtime::Runtime, events: &mut Events) -> BTreeSet<String> {
    runtime.block_on(async {
        let mut names = BTreeSet::new();
        loop {
            let event =
                tokio::time::timeout(Duration::from_secs(20), events.next()).await.expect("event in time").unwrap();
            match event {
                Ok(Event::Init) => names.clear(),
                Ok(Event::InitApply(o)) => {
                    names.insert(o.metadata.name.unwrap());
                }
                Ok(Event::InitDone) => return names,
                Ok(other) => panic!("unexpected event during sync: {other:?}"),
                // A restarted server drops the old watch; the watcher backs off and retries.
                Err(_) => {}
            }
        }
    })
}

fn next_change(runtime: &tokio::runtime::Runtime, events: &mut Events) -> (String, String) {
    runtime.block_on(async {
        loop {
            let event =
                tokio::time::timeout(Duration::from_secs(20), events.next()).await.expect("event in time").unwrap();
            match event {
                Ok(Event::Apply(o)) => return ("apply".into(), o.metadata.name.unwrap()),
                Ok(Event::Delete(o)) => return ("delete".into(), o.metadata.name.unwrap()),
                Ok(_) | Err(_) => {}
            }
        }
    })
}

fn run(streaming: bool) {
    let mut server = TestServer::start(&[CRONTAB_CRD]);
    for name in ["a", "b", "c"] {
        create(&server, name);
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let api = api(&runtime, &server);
    let config = if streaming { watcher::Config::default().streaming_lists() } else { watcher::Config::default() };
    let mut events: Events = runtime.block_on(async { watcher::watcher(api, config).default_backoff().boxed() });
    assert_eq!(
        initial_sync(&runtime, &mut events),
        BTreeSet::from(["a".to_string(), "b".to_string(), "c".to_string()])
    );

    create(&server, "d");
    assert_eq!(next_change(&runtime, &mut events), ("apply".to_string(), "d".to_string()));
    assert_eq!(Client::admin(&server).request("DELETE", &format!("{COLL}/a"), None, None).unwrap().status, 200);
    assert_eq!(next_change(&runtime, &mut events), ("delete".to_string(), "a".to_string()));

    // After a restart the watcher either resumes from its resourceVersion (the store keeps its
    // revisions) or relists; either way it sees what happened meanwhile and carries on.
    server.stop();
    server.spawn(&[]);
    create(&server, "e");
    let seen_e = runtime.block_on(async {
        loop {
            match tokio::time::timeout(Duration::from_secs(20), events.next()).await.expect("event in time").unwrap() {
                Ok(Event::Apply(o)) if o.metadata.name.as_deref() == Some("e") => return "resumed",
                Ok(Event::InitApply(o)) if o.metadata.name.as_deref() == Some("e") => return "relisted",
                Ok(_) | Err(_) => {}
            }
        }
    });
    assert!(["resumed", "relisted"].contains(&seen_e));
    create(&server, "f");
    assert_eq!(next_change(&runtime, &mut events), ("apply".to_string(), "f".to_string()));
}

#[test]
fn informer_syncs_with_watch_list() {
    run(true);
}

#[test]
fn informer_syncs_with_list_and_watch() {
    run(false);
}
