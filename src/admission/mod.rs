//! The admission chain of k8s.io/apiserver for the resources we serve: mutating admission
//! webhooks (with reinvocation), then — after the API layer's own schema validation —
//! validating admission webhooks, as kube-apiserver orders them. The configurations come from
//! the main apiserver (read by `kube`, handed in whole through [`Admission::set_webhooks`]).
//!
//! The API layer asks through two calls, [`Admission::mutate`] and [`Admission::validate`],
//! after a cheap [`Admission::handles`]; everything else is private to this module tree.
//! Owns admission decisions and their Kubernetes wording; never touches storage, never serves
//! HTTP, never reads requests' headers (identity arrives as `UserInfo`).

pub mod authorize;
pub mod configuration;
pub mod hooks;
pub mod index;
pub mod keys;
pub mod mutating;
pub mod mutating_policy;
pub mod plugins;
pub mod policy;
pub mod quota;
pub mod review;
pub mod rules;
pub mod selector;
pub mod validating;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::core::status::StatusDetails;
use crate::core::user::UserInfo;
use crate::definitions::Definition;

pub use index::Index;
pub use plugins::{KNOWN_PLUGINS, Plugins};

/// How long a write waits for the first configurations before it is refused.
const READY_WAIT: Duration = Duration::from_secs(10);

/// The operation of a request, as admission names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    /// The kind of the options object sent with the request.
    pub fn options_kind(self) -> &'static str {
        match self {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
        }
    }
}

/// What a request addresses.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    /// Empty for the main resource.
    pub subresource: &'a str,
    /// Empty for cluster-scoped resources.
    pub namespace: &'a str,
    pub name: &'a str,
}

/// The attributes of one write, as admission sees them.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub operation: Operation,
    pub definition: &'a Definition,
    /// The request's version of the definition.
    pub version: &'a str,
    pub target: Target<'a>,
    pub user: &'a UserInfo,
    pub dry_run: bool,
    /// `CreateOptions`/`UpdateOptions`/`PatchOptions`/`DeleteOptions` as sent to webhooks.
    pub options: &'a Value,
}

impl Request<'_> {
    /// The kind objects of this request have (`autoscaling/v1 Scale` on the scale
    /// subresource).
    pub fn kind(&self, version: &str) -> (String, String, String) {
        if self.target.subresource == "scale" {
            return ("autoscaling".into(), "v1".into(), "Scale".into());
        }
        (self.definition.group.clone(), version.to_string(), self.definition.kind.clone())
    }
}

/// Why admission refused a request, in Kubernetes' words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A webhook (or policy) denied the request with this status.
    #[error("{}", .0.message)]
    Denied(Box<Denial>),
    /// 500 InternalError (`failed calling webhook ...` under failurePolicy Fail).
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// 400 BadRequest (`admission webhook "x" does not support dry run`).
    #[error("{0}")]
    BadRequest(String),
    /// 403 Forbidden on the request's resource and name, with the reason text (`<resource>
    /// "<name>" is forbidden: <text>`).
    #[error("{0}")]
    Forbidden(String),
    /// A ValidatingAdmissionPolicy denied: a Forbidden-worded error on the request's resource
    /// and name with the policy's code and reason.
    #[error("{why}")]
    Policy { code: u16, reason: String, why: String },
    /// A MutatingAdmissionPolicy failed under `failurePolicy: Fail`: 403 with this reason
    /// (`Invalid` for a failed mutation) and the policy's message as the whole text.
    #[error("{message}")]
    MutationPolicy { reason: String, message: String },
    /// 404 of the request's namespace (a namespaceSelector needs its labels).
    #[error("namespaces \"{0}\" not found")]
    NamespaceNotFound(String),
}

/// The status of a denial (boxed in [`Error`]: errors travel in every `Result`).
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    pub code: u16,
    pub reason: String,
    pub message: String,
    pub details: Option<StatusDetails>,
}

/// Labels of the cluster's namespaces, for `namespaceSelector`s.
pub trait NamespaceLabels: Send + Sync {
    /// The labels of a namespace; `Ok(None)` when it does not exist.
    fn labels<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<std::collections::BTreeMap<String, String>>, String>>;
}

/// No cluster: every namespace exists and has only its name label.
pub struct NameLabelOnly;

impl NamespaceLabels for NameLabelOnly {
    fn labels<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<std::collections::BTreeMap<String, String>>, String>> {
        Box::pin(async move { Ok(Some([("kubernetes.io/metadata.name".to_string(), name.to_string())].into())) })
    }
}

/// What a mutating pass produced.
#[derive(Debug, Default)]
pub struct Mutated {
    pub warnings: Vec<String>,
    /// Whether any webhook changed the object.
    pub changed: bool,
}

/// The cluster's admission configurations, each replaced whole when it changes.
#[derive(Default, Clone)]
struct Configurations {
    webhooks: Arc<Index>,
    policies: Arc<policy::compiled::PolicySet>,
    mutating_policies: Arc<mutating_policy::compiled::MutatingPolicySet>,
}

impl Configurations {
    fn covers(&self, group: &str, resource: &str) -> bool {
        self.webhooks.covers(group, resource)
            || self.policies.covers(group, resource)
            || self.mutating_policies.covers(group, resource)
    }
}

/// The admission chain: current configurations plus what matching needs.
pub struct Admission {
    /// The webhooks and policies, swapped as one so that a write reads them with one load.
    current: ArcSwap<Configurations>,
    /// Whether the webhook configurations were read once; until then writes wait, then are
    /// refused.
    synced: AtomicBool,
    policies_synced: AtomicBool,
    mutating_policies_synced: AtomicBool,
    /// Where policy params are read (none: policies with params fail to configure).
    params: Option<Arc<dyn policy::ParamSource>>,
    /// The server's authorizer, for CEL's `authorizer` (none: its checks error).
    authorizer: Option<Arc<dyn crate::auth::authz::Authorizer>>,
    namespaces: Arc<dyn NamespaceLabels>,
    /// The cluster's ResourceQuotas (none: no quota admission).
    quotas: Option<Arc<dyn quota::QuotaSource>>,
    plugins: Plugins,
}

impl Admission {
    /// An admission chain with no configurations that never waits for any (no cluster).
    pub fn without_cluster() -> Admission {
        Admission::without_cluster_running(Plugins::default())
    }

    /// [`Admission::without_cluster`] with chosen plugins (only namespace lifecycle matters
    /// without a cluster).
    pub fn without_cluster_running(plugins: Plugins) -> Admission {
        let admission = Admission::new(Arc::new(NameLabelOnly), plugins);
        admission.synced.store(true, Ordering::SeqCst);
        admission.policies_synced.store(true, Ordering::SeqCst);
        admission.mutating_policies_synced.store(true, Ordering::SeqCst);
        admission
    }

    /// An admission chain waiting for its first configurations.
    pub fn new(namespaces: Arc<dyn NamespaceLabels>, plugins: Plugins) -> Admission {
        Admission {
            current: ArcSwap::from_pointee(Configurations::default()),
            synced: AtomicBool::new(false),
            policies_synced: AtomicBool::new(!plugins.validating_policies),
            mutating_policies_synced: AtomicBool::new(!plugins.mutating_policies),
            params: None,
            authorizer: None,
            namespaces,
            quotas: None,
            plugins,
        }
    }

    /// The same chain reading policy params from `params`.
    pub fn with_params(mut self, params: Arc<dyn policy::ParamSource>) -> Admission {
        self.params = Some(params);
        self
    }

    /// The same chain answering CEL's `authorizer` with the server's authorizer.
    pub fn with_authorizer(mut self, authorizer: Arc<dyn crate::auth::authz::Authorizer>) -> Admission {
        self.authorizer = Some(authorizer);
        self
    }

    /// CEL's `authorizer` for the request's user, when some expression of the step may ask
    /// (`used`): building it copies the request's identity.
    fn authorizer_for(&self, request: &Request<'_>, used: bool) -> Option<Arc<dyn crate::cel::policy::Authorize>> {
        if !used {
            return None;
        }
        let authorizer = self.authorizer.clone()?;
        Some(Arc::new(authorize::RequestAuthorizer::new(authorizer, request)))
    }

    /// Replaces the ValidatingAdmissionPolicies and bindings.
    pub fn set_policies(&self, set: policy::compiled::PolicySet) {
        let set = Arc::new(set);
        self.current.rcu(|c| Configurations { policies: set.clone(), ..Configurations::clone(c) });
        self.policies_synced.store(true, Ordering::SeqCst);
    }

    /// Replaces the MutatingAdmissionPolicies and bindings.
    pub fn set_mutating_policies(&self, set: mutating_policy::compiled::MutatingPolicySet) {
        let set = Arc::new(set);
        self.current.rcu(|c| Configurations { mutating_policies: set.clone(), ..Configurations::clone(c) });
        self.mutating_policies_synced.store(true, Ordering::SeqCst);
    }

    /// The same chain enforcing the object-count quotas of `quotas`.
    pub fn with_quotas(mut self, quotas: Arc<dyn quota::QuotaSource>) -> Admission {
        if self.plugins.resource_quota {
            self.quotas = Some(quotas);
        }
        self
    }

    /// The plugins that run.
    pub fn plugins(&self) -> &Plugins {
        &self.plugins
    }

    /// Replaces the webhook configurations (every Mutating and Validating configuration of
    /// the cluster) and marks the chain ready.
    pub fn set_webhooks(&self, index: Index) {
        let index = Arc::new(index);
        self.current.rcu(|c| Configurations { webhooks: index.clone(), ..Configurations::clone(c) });
        self.synced.store(true, Ordering::SeqCst);
    }

    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::SeqCst)
            && self.policies_synced.load(Ordering::SeqCst)
            && self.mutating_policies_synced.load(Ordering::SeqCst)
            && self.quotas.as_ref().is_none_or(|q| q.is_synced())
    }

    /// Whether any admission step might apply to a resource: false means the write may skip
    /// admission entirely (no allocation, one index probe).
    pub fn handles(&self, group: &str, resource: &str) -> bool {
        !self.is_synced()
            || self.current.load().covers(group, resource)
            || self.quotas.as_ref().is_some_and(|q| q.covers(group, resource))
    }

    /// Waits for the first configurations as kube-apiserver's admission plugins do
    /// (`WaitForReady`: at most ten seconds), then refuses.
    async fn ready(&self) -> Result<(), Error> {
        if self.is_synced() {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + READY_WAIT;
        while tokio::time::Instant::now() < deadline {
            if self.is_synced() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(Error::Forbidden("not yet ready to handle request".to_string()))
    }

    /// Mutating admission: MutatingAdmissionPolicies, then mutating webhooks, in order; when
    /// either changed the object and an earlier step asked `reinvocationPolicy: IfNeeded`,
    /// both run once more (k8s.io/apiserver's reinvoker). `object` is changed in place (in the
    /// request version); `old` is the current object of updates.
    pub async fn mutate(
        &self,
        request: &Request<'_>,
        mut object: Option<&mut Value>,
        old: Option<&Value>,
    ) -> Result<Mutated, Error> {
        self.ready().await?;
        let mut mutated = Mutated::default();
        if !self.plugins.mutating_webhooks && !self.plugins.mutating_policies {
            return Ok(mutated);
        }
        let (group, resource) = (request.target.group, request.target.resource);
        let current = self.current.load();
        let run_webhooks = self.plugins.mutating_webhooks && current.webhooks.mutating_covers(group, resource);
        let run_policies = self.plugins.mutating_policies && current.mutating_policies.covers(group, resource);
        if !run_webhooks && !run_policies {
            return Ok(mutated);
        }
        // The guard is kept rather than turned into an Arc (two atomic operations fewer per
        // write); arc-swap allows holding it across awaits, at the cost of a slower load
        // elsewhere on this thread while it is held.
        let index = run_webhooks.then_some(&current.webhooks);
        let policies = run_policies.then_some(&current.mutating_policies);
        let uses_authorizer =
            index.is_some_and(|i| i.uses_authorizer()) || policies.is_some_and(|p| p.uses_authorizer());
        let authorizer = self.authorizer_for(request, uses_authorizer);
        let params = self.params.as_deref();
        let mut policy_state = mutating_policy::Reinvocation::default();
        let mut webhook_state = mutating::Reinvocation::default();
        // How many times a plugin changed the object: each plugin remembers the count it left,
        // so a reinvocation round knows whether another one changed the object since (instead
        // of keeping a copy of the object to compare).
        let mut changes = 0u64;
        for round in 0..2 {
            let reinvoking = round == 1;
            let mut should_reinvoke = false;
            if let Some(policies) = policies {
                let changed = mutating_policy::dispatch(
                    policies,
                    self.namespaces.as_ref(),
                    params,
                    request,
                    object.as_deref_mut(),
                    old,
                    authorizer.as_ref(),
                    &mut policy_state,
                    reinvoking,
                    changes,
                )
                .await?;
                mutated.changed |= changed;
                changes += u64::from(changed);
                should_reinvoke |= changed;
            }
            if let Some(index) = index {
                let changed = mutating::dispatch(
                    index,
                    self.namespaces.as_ref(),
                    request,
                    object.as_deref_mut(),
                    old,
                    authorizer.as_ref(),
                    &mut webhook_state,
                    reinvoking,
                    changes,
                    &mut mutated,
                )
                .await?;
                changes += u64::from(changed);
                should_reinvoke |= changed;
            }
            if !should_reinvoke {
                break;
            }
        }
        Ok(mutated)
    }

    /// Validating admission: ValidatingAdmissionPolicies, every matching webhook in
    /// parallel, then (creates only) the
    /// object-count quota, last as in kube-apiserver. `object` is absent on deletes. Returns
    /// the webhooks' warnings.
    pub async fn validate(
        &self,
        request: &Request<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<Vec<String>, Error> {
        self.ready().await?;
        let mut warnings = Vec::new();
        let (group, resource) = (request.target.group, request.target.resource);
        let current = self.current.load();
        // The guard is kept, as in `mutate`.
        let policies = Some(current.policies.for_resource(group, resource))
            .filter(|applicable| self.plugins.validating_policies && !applicable.is_empty());
        let run_webhooks = self.plugins.validating_webhooks && current.webhooks.validating_covers(group, resource);
        let index = run_webhooks.then_some(&current.webhooks);
        let uses_authorizer =
            index.is_some_and(|i| i.uses_authorizer()) || (policies.is_some() && current.policies.uses_authorizer());
        let authorizer = self.authorizer_for(request, uses_authorizer);
        let authorizer = authorizer.as_ref();
        if let Some(policies) = policies {
            let params = self.params.as_deref();
            warnings.extend(
                policy::dispatch(policies, self.namespaces.as_ref(), params, request, object, old, authorizer).await?,
            );
        }
        if let Some(index) = index {
            warnings
                .extend(validating::dispatch(index, self.namespaces.as_ref(), request, object, old, authorizer).await?);
        }
        if let (Some(quotas), Operation::Create) = (&self.quotas, request.operation) {
            quota::admit(quotas.as_ref(), request).await?;
        }
        Ok(warnings)
    }
}
