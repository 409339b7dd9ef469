//! The cluster's ResourceQuotas for object-count quota admission (answering
//! `admission::quota::QuotaSource`): every quota followed with list+watch, indexed by
//! namespace and by the group/resource their `count/...` limits name; live reads of one quota;
//! status updates with the resourceVersion as precondition (409 on a lost race).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use ::kube::api::{Api, PostParams};
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::ResourceQuota;

use super::{describe, follow};
use crate::admission::Denial;
use crate::admission::quota::{QuotaSource, UpdateFailure, counted};

#[derive(Default)]
struct Snapshot {
    by_namespace: HashMap<String, Vec<ResourceQuota>>,
    /// group -> resources some quota counts.
    counted: HashMap<String, HashSet<String>>,
}

impl Snapshot {
    fn build(quotas: Vec<ResourceQuota>) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for quota in quotas {
            let hard = quota.spec.as_ref().and_then(|s| s.hard.as_ref()).into_iter().flatten();
            let status_hard = quota.status.as_ref().and_then(|s| s.hard.as_ref()).into_iter().flatten();
            for (name, _) in hard.chain(status_hard) {
                if let Some((group, resource)) = counted(name) {
                    snapshot.counted.entry(group.to_string()).or_default().insert(resource.to_string());
                }
            }
            let namespace = quota.metadata.namespace.clone().unwrap_or_default();
            snapshot.by_namespace.entry(namespace).or_default().push(quota);
        }
        snapshot
    }
}

pub struct QuotaCache {
    client: ::kube::Client,
    snapshot: RwLock<Arc<Snapshot>>,
    synced: AtomicBool,
}

impl QuotaCache {
    /// Starts following the cluster's ResourceQuotas.
    pub fn start(client: ::kube::Client) -> Arc<QuotaCache> {
        let cache = Arc::new(QuotaCache {
            client: client.clone(),
            snapshot: RwLock::new(Arc::default()),
            synced: AtomicBool::new(false),
        });
        let follower = cache.clone();
        let api: Api<ResourceQuota> = Api::all(client);
        tokio::spawn(follow::follow(api, "resourcequotas", move |items| {
            *follower.snapshot.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Snapshot::build(items));
            follower.synced.store(true, Ordering::SeqCst);
        }));
        cache
    }

    fn current(&self) -> Arc<Snapshot> {
        self.snapshot.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Puts a quota just written into the cache, so the next admission starts from it.
    fn remember(&self, written: &ResourceQuota) {
        let mut slot = self.snapshot.write().unwrap_or_else(|p| p.into_inner());
        let mut quotas: Vec<ResourceQuota> = slot.by_namespace.values().flatten().cloned().collect();
        let same = |q: &ResourceQuota| {
            q.metadata.namespace == written.metadata.namespace && q.metadata.name == written.metadata.name
        };
        quotas.retain(|q| !same(q));
        quotas.push(written.clone());
        *slot = Arc::new(Snapshot::build(quotas));
    }
}

fn failure(error: &::kube::Error) -> UpdateFailure {
    match error {
        ::kube::Error::Api(status) => UpdateFailure {
            conflict: status.code == 409,
            status: Denial {
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
                details: None,
            },
        },
        other => UpdateFailure {
            conflict: false,
            status: Denial {
                code: 500,
                reason: "InternalError".into(),
                message: format!("Internal error occurred: {other}"),
                details: None,
            },
        },
    }
}

impl QuotaSource for QuotaCache {
    fn is_synced(&self) -> bool {
        self.synced.load(Ordering::SeqCst)
    }

    fn covers(&self, group: &str, resource: &str) -> bool {
        self.current().counted.get(group).is_some_and(|r| r.contains(resource))
    }

    fn quotas<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<Vec<ResourceQuota>, String>> {
        let found = self.current().by_namespace.get(namespace).cloned().unwrap_or_default();
        Box::pin(async move { Ok(found) })
    }

    fn live<'a>(&'a self, namespace: &'a str, name: &'a str) -> BoxFuture<'a, Result<Option<ResourceQuota>, String>> {
        Box::pin(async move {
            let api: Api<ResourceQuota> = Api::namespaced(self.client.clone(), namespace);
            api.get_opt(name).await.map_err(|e| describe(&e))
        })
    }

    fn update_status<'a>(&'a self, quota: &'a ResourceQuota) -> BoxFuture<'a, Result<ResourceQuota, UpdateFailure>> {
        Box::pin(async move {
            let namespace = quota.metadata.namespace.clone().unwrap_or_default();
            let name = quota.metadata.name.clone().unwrap_or_default();
            let api: Api<ResourceQuota> = Api::namespaced(self.client.clone(), &namespace);
            let written = api.replace_status(&name, &PostParams::default(), quota).await.map_err(|e| failure(&e))?;
            self.remember(&written);
            Ok(written)
        })
    }
}
