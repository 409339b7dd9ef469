//! What the failover tests share: CronTabs through the aggregator with kube-rs, creates that
//! count as acknowledged once the server said so (a retried create answered AlreadyExists was
//! written by the failed attempt), and a kube-rs informer that records every object it applied
//! and how many times it listed, so a test can say "each acknowledged object exactly once, at
//! the acknowledged resourceVersion, with no second list".

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::runtime::Runtime;

/// The `default` namespace's crontabs (the seed CronTab, `stable.example.com/v1`) as the
/// kubeconfig's user.
pub async fn crontabs(kubeconfig: &Path) -> Api<DynamicObject> {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    let gvk = GroupVersionKind::gvk("stable.example.com", "v1", "CronTab");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "crontabs");
    Api::namespaced_with(kube::Client::try_from(config).unwrap(), "default", &resource)
}

pub fn crontab(name: &str) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name},
        "spec": {"cronSpec": "* * * * */5", "image": name}
    }))
    .unwrap()
}

/// Creates `name`, retrying failed attempts for up to 30 s (each counted in
/// `failed_attempts`), and returns the resourceVersion it was acknowledged with. AlreadyExists
/// on a retry means an attempt that failed for the client was written: the stored object's
/// resourceVersion is then the acknowledged one.
pub fn create_acknowledged(
    runtime: &Runtime,
    api: &Api<DynamicObject>,
    name: &str,
    failed_attempts: &mut usize,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match runtime.block_on(api.create(&PostParams::default(), &crontab(name))) {
            Ok(created) => return created.metadata.resource_version.unwrap(),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                return runtime.block_on(api.get(name)).unwrap().metadata.resource_version.unwrap();
            }
            Err(e) => {
                *failed_attempts += 1;
                assert!(Instant::now() < deadline, "{name} still failing: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// What the informer saw: resourceVersions applied per name, and how many times it listed.
#[derive(Default)]
pub struct Seen {
    pub applied: BTreeMap<String, Vec<String>>,
    pub lists: usize,
    pub synced: bool,
}

/// kube-rs' watcher with its default backoff (list, then watch, resuming from the last
/// resourceVersion after an error), as controllers run it.
pub struct Informer {
    pub seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Informer {
    /// Starts the informer and waits (up to 10 s) for its first list.
    pub fn start(runtime: &Runtime, api: &Api<DynamicObject>) -> Informer {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let task = {
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
        let deadline = Instant::now() + Duration::from_secs(60);
        while !seen.lock().unwrap().synced {
            assert!(Instant::now() < deadline, "the informer never synced");
            std::thread::sleep(Duration::from_millis(50));
        }
        Informer { seen, task }
    }

    /// Waits (up to 30 s) until every acknowledged name has reached the informer, then a
    /// little longer for duplicates, and checks each came exactly once at its acknowledged
    /// resourceVersion with the informer never listing again. `context` is added to the
    /// failure message (e.g. the servers' logs).
    pub fn assert_saw_each_once(&self, acknowledged: &BTreeMap<String, String>, context: impl Fn() -> String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let missing: Vec<String> = {
                let seen = self.seen.lock().unwrap();
                acknowledged.keys().filter(|name| !seen.applied.contains_key(*name)).cloned().collect()
            };
            if missing.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "the informer missed {missing:?}\n{}", context());
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(500));
        let seen = self.seen.lock().unwrap();
        assert_eq!(seen.lists, 1, "the informer listed again");
        for (name, rv) in acknowledged {
            assert_eq!(seen.applied[name], std::slice::from_ref(rv), "{name}: events {:?}", seen.applied[name]);
        }
        assert_eq!(seen.applied.len(), acknowledged.len(), "{:?}", seen.applied.keys());
    }
}

impl Drop for Informer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
