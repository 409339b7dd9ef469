//! Starts the admission chain from the cluster: follows the Mutating and Validating webhook
//! configurations of the main apiserver (list+watch through `kube::follow`) and hands every
//! new set to `admission`; namespace labels come from the namespace cache, ResourceQuotas
//! from `kube::quotas`. Without a cluster
//! (development mode) nothing is admitted but namespace lifecycle.

use std::sync::{Arc, Mutex};

use ::kube::api::Api;
use futures_util::future::BoxFuture;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
};

use crate::admission::policy::compiled::PolicySet;
use crate::admission::{Admission, NamespaceLabels, Plugins, configuration};
use crate::kube::follow;
use crate::kube::namespaces::NamespaceCache;
use crate::kube::params::ClusterParams;
use crate::kube::quotas::QuotaCache;

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
fn follow_policies(admission: &Arc<Admission>, client: &::kube::Client) {
    let latest = Arc::new(Mutex::new(LatestPolicies::default()));
    let (a, l) = (admission.clone(), latest.clone());
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    tokio::spawn(follow::follow(api, "validatingadmissionpolicies", move |items| {
        let mut latest = l.lock().unwrap_or_else(|p| p.into_inner());
        latest.policies = Some(items);
        publish_policies(&a, &latest);
    }));
    let (a, l) = (admission.clone(), latest);
    let api: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    tokio::spawn(follow::follow(api, "validatingadmissionpolicybindings", move |items| {
        let mut latest = l.lock().unwrap_or_else(|p| p.into_inner());
        latest.bindings = Some(items);
        publish_policies(&a, &latest);
    }));
}

/// The admission chain of a server talking to `client`'s cluster (none: development mode).
pub fn start(
    client: Option<::kube::Client>,
    namespaces: Arc<NamespaceCache>,
    plugins: Plugins,
    authorizer: Arc<dyn crate::auth::authz::Authorizer>,
) -> Arc<Admission> {
    tracing::info!(plugins = %plugins.running().join(","), "admission plugins");
    let Some(client) = client else {
        return Arc::new(Admission::without_cluster_running(plugins));
    };
    let quotas = QuotaCache::start(client.clone());
    let admission = Arc::new(
        Admission::new(Arc::new(ClusterLabels(namespaces)), plugins.clone())
            .with_quotas(quotas)
            .with_params(Arc::new(ClusterParams::new(client.clone())))
            .with_authorizer(authorizer),
    );
    if plugins.validating_policies {
        follow_policies(&admission, &client);
    }
    let latest = Arc::new(Mutex::new(Latest::default()));
    if !plugins.mutating_webhooks {
        lock(&latest).mutating = Some(Vec::new());
    } else {
        let (admission, latest) = (admission.clone(), latest.clone());
        let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        tokio::spawn(follow::follow(api, "mutatingwebhookconfigurations", move |items| {
            let mut latest = lock(&latest);
            latest.mutating = Some(items);
            publish(&admission, &latest);
        }));
    }
    if !plugins.validating_webhooks {
        lock(&latest).validating = Some(Vec::new());
        publish(&admission, &lock(&latest));
    } else {
        let (admission, latest) = (admission.clone(), latest.clone());
        let api: Api<ValidatingWebhookConfiguration> = Api::all(client);
        tokio::spawn(follow::follow(api, "validatingwebhookconfigurations", move |items| {
            let mut latest = lock(&latest);
            latest.validating = Some(items);
            publish(&admission, &latest);
        }));
    }
    admission
}
