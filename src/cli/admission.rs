//! Starts the admission chain from the cluster: follows the Mutating and Validating webhook
//! configurations, ValidatingAdmissionPolicies and MutatingAdmissionPolicies (v1, or v1beta1
//! where the main apiserver serves only that) with their bindings (list+watch through
//! `kube::follow`) and hands every new set to `admission`; namespace labels come from the
//! namespace cache, ResourceQuotas from `kube::quotas`. Every follower is registered for
//! `/readyz`'s informer-sync. Without a cluster (development mode) nothing is admitted but
//! namespace lifecycle.

use std::sync::{Arc, Mutex};

use ::kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use futures_util::future::BoxFuture;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
};
use serde_json::Value;

use crate::admission::mutating_policy::compiled::MutatingPolicySet;
use crate::admission::policy::compiled::PolicySet;
use crate::admission::quota::QuotaSource;
use crate::admission::{Admission, NamespaceLabels, Plugins, configuration};
use crate::kube::follow;
use crate::kube::namespaces::NamespaceCache;
use crate::kube::params::ClusterParams;
use crate::kube::quotas::QuotaCache;
use crate::server::health::Informers;

/// `on_change`, after which the follower named `kind` counts as synced (its first list, or the
/// empty set of a kind the main apiserver does not serve, arrived).
fn synced_after<K, F: Fn(Vec<K>) + Send + Sync>(
    informers: &Informers,
    kind: &str,
    on_change: F,
) -> impl Fn(Vec<K>) + Send + Sync + use<K, F> {
    let synced = informers.flag(kind);
    move |items| {
        on_change(items);
        synced.mark();
    }
}

/// Namespace labels from the cluster's namespace cache.
struct ClusterLabels(Arc<NamespaceCache>);

impl NamespaceLabels for ClusterLabels {
    fn labels<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<std::collections::BTreeMap<String, String>>, String>> {
        Box::pin(async move { self.0.labels(name).await.map(|l| l.map(|l| (*l).clone())).map_err(|e| e.to_string()) })
    }
}

/// The latest configurations of both kinds; the index is built once both were listed.
#[derive(Default)]
struct Latest {
    mutating: Option<Vec<MutatingWebhookConfiguration>>,
    validating: Option<Vec<ValidatingWebhookConfiguration>>,
}

fn lock(latest: &Mutex<Latest>) -> std::sync::MutexGuard<'_, Latest> {
    latest.lock().unwrap_or_else(|p| p.into_inner())
}

fn publish(admission: &Admission, latest: &Latest) {
    if let (Some(mutating), Some(validating)) = (&latest.mutating, &latest.validating) {
        admission.set_webhooks(configuration::index(mutating, validating));
        tracing::debug!(mutating = mutating.len(), validating = validating.len(), "admission webhook configurations");
    }
}

/// The latest policies and bindings; compiled once both were listed.
#[derive(Default)]
struct LatestPolicies {
    policies: Option<Vec<ValidatingAdmissionPolicy>>,
    bindings: Option<Vec<ValidatingAdmissionPolicyBinding>>,
}

fn publish_policies(admission: &Admission, latest: &LatestPolicies) {
    if let (Some(policies), Some(bindings)) = (&latest.policies, &latest.bindings) {
        admission.set_policies(PolicySet::build(policies, bindings));
    }
}

/// Follows ValidatingAdmissionPolicies and their bindings.
fn follow_policies(admission: &Arc<Admission>, client: &::kube::Client, informers: &Informers) {
    let latest = Arc::new(Mutex::new(LatestPolicies::default()));
    let (a, l) = (admission.clone(), latest.clone());
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let on_change = synced_after(informers, "*v1.ValidatingAdmissionPolicy", move |items| {
        let mut latest = l.lock().unwrap_or_else(|p| p.into_inner());
        latest.policies = Some(items);
        publish_policies(&a, &latest);
    });
    tokio::spawn(follow::follow(api, "validatingadmissionpolicies", on_change));
    let (a, l) = (admission.clone(), latest);
    let api: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let on_change = synced_after(informers, "*v1.ValidatingAdmissionPolicyBinding", move |items| {
        let mut latest = l.lock().unwrap_or_else(|p| p.into_inner());
        latest.bindings = Some(items);
        publish_policies(&a, &latest);
    });
    tokio::spawn(follow::follow(api, "validatingadmissionpolicybindings", on_change));
}

/// The MutatingAdmissionPolicy API versions followed, preferred first: `v1` (Kubernetes
/// 1.36) and `v1beta1` (1.34, 1.35). A version the main apiserver does not serve is followed as
/// empty; a policy served in both is the same object, taken once.
const MUTATING_POLICY_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// The latest MutatingAdmissionPolicies and bindings of each followed version.
#[derive(Default)]
struct LatestMutating {
    policies: [Option<Vec<Value>>; 2],
    bindings: [Option<Vec<Value>>; 2],
}

impl LatestMutating {
    /// Every object of the preferred version, plus those only the other one serves; `None`
    /// until every list was read once.
    fn merged(lists: &[Option<Vec<Value>>; 2]) -> Option<Vec<Value>> {
        let mut names = std::collections::BTreeSet::new();
        let mut all = Vec::new();
        for list in lists {
            for object in list.as_ref()? {
                if names
                    .insert(object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string())
                {
                    all.push(object.clone());
                }
            }
        }
        Some(all)
    }
}

/// Follows MutatingAdmissionPolicies and their bindings.
fn follow_mutating_policies(admission: &Arc<Admission>, client: &::kube::Client, informers: &Informers) {
    let latest = Arc::new(Mutex::new(LatestMutating::default()));
    for (slot, version) in MUTATING_POLICY_VERSIONS.iter().enumerate() {
        for (plural, kind) in [
            ("mutatingadmissionpolicies", "MutatingAdmissionPolicy"),
            ("mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding"),
        ] {
            let resource = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("admissionregistration.k8s.io", version, kind),
                plural,
            );
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let (admission, latest) = (admission.clone(), latest.clone());
            let on_change = synced_after(informers, &format!("*{version}.{kind}"), move |items: Vec<DynamicObject>| {
                let values: Vec<Value> = items.iter().filter_map(|o| serde_json::to_value(o).ok()).collect();
                let mut latest = latest.lock().unwrap_or_else(|p| p.into_inner());
                let lists = if kind.ends_with("Binding") { &mut latest.bindings } else { &mut latest.policies };
                if let Some(list) = lists.get_mut(slot) {
                    *list = Some(values);
                }
                if let (Some(policies), Some(bindings)) =
                    (LatestMutating::merged(&latest.policies), LatestMutating::merged(&latest.bindings))
                {
                    admission.set_mutating_policies(MutatingPolicySet::from_json(&policies, &bindings));
                }
            });
            tokio::spawn(follow::follow(api, plural, on_change));
        }
    }
}

/// The admission chain of a server talking to `client`'s cluster (none: development mode);
/// its followers are registered with `informers`.
pub fn start(
    client: Option<::kube::Client>,
    namespaces: Arc<NamespaceCache>,
    plugins: Plugins,
    authorizer: Arc<dyn crate::auth::authz::Authorizer>,
    informers: &Informers,
) -> Arc<Admission> {
    tracing::info!(plugins = %plugins.running().join(","), "admission plugins");
    let Some(client) = client else {
        return Arc::new(Admission::without_cluster_running(plugins));
    };
    let quotas = QuotaCache::start(client.clone());
    if plugins.resource_quota {
        let followed = quotas.clone();
        informers.register("*v1.ResourceQuota", move || followed.is_synced());
    }
    let admission = Arc::new(
        Admission::new(Arc::new(ClusterLabels(namespaces)), plugins.clone())
            .with_quotas(quotas)
            .with_params(Arc::new(ClusterParams::new(client.clone())))
            .with_authorizer(authorizer),
    );
    if plugins.validating_policies {
        follow_policies(&admission, &client, informers);
    }
    if plugins.mutating_policies {
        follow_mutating_policies(&admission, &client, informers);
    }
    let latest = Arc::new(Mutex::new(Latest::default()));
    if !plugins.mutating_webhooks {
        lock(&latest).mutating = Some(Vec::new());
    } else {
        let (admission, latest) = (admission.clone(), latest.clone());
        let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let on_change = synced_after(informers, "*v1.MutatingWebhookConfiguration", move |items| {
            let mut latest = lock(&latest);
            latest.mutating = Some(items);
            publish(&admission, &latest);
        });
        tokio::spawn(follow::follow(api, "mutatingwebhookconfigurations", on_change));
    }
    if !plugins.validating_webhooks {
        lock(&latest).validating = Some(Vec::new());
        publish(&admission, &lock(&latest));
    } else {
        let (admission, latest) = (admission.clone(), latest.clone());
        let api: Api<ValidatingWebhookConfiguration> = Api::all(client);
        let on_change = synced_after(informers, "*v1.ValidatingWebhookConfiguration", move |items| {
            let mut latest = lock(&latest);
            latest.validating = Some(items);
            publish(&admission, &latest);
        });
        tokio::spawn(follow::follow(api, "validatingwebhookconfigurations", on_change));
    }
    admission
}
