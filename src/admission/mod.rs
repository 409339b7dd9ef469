//! The admission chain of k8s.io/apiserver for the resources we serve: mutating admission
//! webhooks (with reinvocation), then — after the API layer's own schema validation —
//! validating admission webhooks, as kube-apiserver orders them. The configurations come from
//! the main apiserver (read by `kube`, handed in whole through [`Admission::set_webhooks`]).
//!
//! The API layer asks through [`Admission::begin`] (one load of the configurations, one probe
//! of their indexes: `None` when nothing applies) and the two steps of what it returns,
//! [`Step::mutate`] and [`Step::validate`]; everything else is private to this module tree.
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

use arc_swap::{ArcSwap, Guard};
use futures_util::future::{BoxFuture, Either};
use serde_json::Value;

use crate::core::status::StatusDetails;
use crate::core::user::UserInfo;
use crate::definitions::Definition;

pub use index::Index;
use keys::Probe;
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

/// What of the configurations may apply to one resource (one probe of each index; a plugin
/// that does not run finds nothing).
#[derive(Debug, Clone, Copy, Default)]
struct Found {
    mutating_hooks: Probe,
    validating_hooks: Probe,
    policies: Probe,
    mutating_policies: Probe,
}

impl Found {
    fn is_empty(&self) -> bool {
        self.mutating_hooks.is_empty()
            && self.validating_hooks.is_empty()
            && self.policies.is_empty()
            && self.mutating_policies.is_empty()
    }
}

impl Configurations {
    fn find(&self, plugins: &Plugins, group: &str, resource: &str) -> Found {
        let mut found = Found::default();
        if plugins.mutating_webhooks {
            found.mutating_hooks = self.webhooks.probe_mutating(group, resource);
        }
        if plugins.validating_webhooks {
            found.validating_hooks = self.webhooks.probe_validating(group, resource);
        }
        if plugins.validating_policies {
            found.policies = self.policies.probe(group, resource);
        }
        if plugins.mutating_policies {
            found.mutating_policies = self.mutating_policies.probe(group, resource);
        }
        found
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
    /// Whether everything was read once (all the flags above and the quotas): one load on
    /// every write instead of four. Only ever set, as they are.
    all_synced: AtomicBool,
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
            all_synced: AtomicBool::new(false),
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
        if self.all_synced.load(Ordering::Acquire) {
            return true;
        }
        let synced = self.synced.load(Ordering::SeqCst)
            && self.policies_synced.load(Ordering::SeqCst)
            && self.mutating_policies_synced.load(Ordering::SeqCst)
            && self.quotas.as_ref().is_none_or(|q| q.is_synced());
        if synced {
            self.all_synced.store(true, Ordering::Release);
        }
        synced
    }

    /// The admission of one write to a resource, for both of its steps: the configurations
    /// as they are now (one load) and what of them may apply (one probe of each index).
    /// `None` when no admission step can apply: the write skips admission entirely (no
    /// allocation).
    pub fn begin(&self, group: &str, resource: &str) -> Option<Step<'_>> {
        if !self.is_synced() {
            return Some(Step { admission: self, read: None });
        }
        let current = self.current.load();
        let found = current.find(&self.plugins, group, resource);
        if found.is_empty() && !self.quotas.as_ref().is_some_and(|q| q.covers(group, resource)) {
            return None;
        }
        Some(Step { admission: self, read: Some((current, found)) })
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

    /// [`Step::mutate`] over configurations read and probed.
    async fn mutate_in(
        &self,
        current: &Configurations,
        found: Found,
        request: &Request<'_>,
        mut object: Option<&mut Value>,
        old: Option<&Value>,
    ) -> Result<Mutated, Error> {
        let mut mutated = Mutated::default();
        let hooks = current.webhooks.mutating_in(found.mutating_hooks);
        let policies = current.mutating_policies.found(found.mutating_policies);
        let uses_authorizer = (!hooks.is_empty() && current.webhooks.uses_authorizer())
            || (!policies.is_empty() && current.mutating_policies.uses_authorizer());
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
            if !policies.is_empty() {
                let changed = mutating_policy::dispatch(
                    policies.clone(),
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
            if !hooks.is_empty() {
                let changed = mutating::dispatch(
                    &hooks,
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

    /// [`Step::validate`] over configurations read and probed.
    async fn validate_in(
        &self,
        current: &Configurations,
        found: Found,
        request: &Request<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<Vec<String>, Error> {
        let mut warnings = Vec::new();
        let hooks = current.webhooks.validating_in(found.validating_hooks);
        let uses_authorizer = (!hooks.is_empty() && current.webhooks.uses_authorizer())
            || (!found.policies.is_empty() && current.policies.uses_authorizer());
        let authorizer = self.authorizer_for(request, uses_authorizer);
        let authorizer = authorizer.as_ref();
        if !found.policies.is_empty() {
            let applicable = current.policies.found(found.policies);
            let params = self.params.as_deref();
            warnings.extend(
                policy::dispatch(applicable, self.namespaces.as_ref(), params, request, object, old, authorizer)
                    .await?,
            );
        }
        if !hooks.is_empty() {
            warnings.extend(
                validating::dispatch(&hooks, self.namespaces.as_ref(), request, object, old, authorizer).await?,
            );
        }
        if let (Some(quotas), Operation::Create) = (&self.quotas, request.operation) {
            quota::admit(quotas.as_ref(), request).await?;
        }
        Ok(warnings)
    }
}

/// The admission of one write (from [`Admission::begin`]): the configurations as they were
/// when it began, and what of them may apply to its resource, for both steps. Holding them
/// costs nothing on other threads: a changed configuration is swapped in beside them.
pub struct Step<'a> {
    admission: &'a Admission,
    /// `None` when the configurations were not read yet: each step then waits for them (as
    /// kube-apiserver's plugins do) and reads them itself.
    read: Option<(Guard<Arc<Configurations>>, Found)>,
}

impl Step<'_> {
    /// Mutating admission: MutatingAdmissionPolicies, then mutating webhooks, in order; when
    /// either changed the object and an earlier step asked `reinvocationPolicy: IfNeeded`,
    /// both run once more (k8s.io/apiserver's reinvoker). `object` is changed in place (in the
    /// request version); `old` is the current object of updates. Decided at once, without a
    /// future to run, when nothing mutating applies.
    pub fn mutate<'s>(
        &'s self,
        request: &'s Request<'s>,
        object: Option<&'s mut Value>,
        old: Option<&'s Value>,
    ) -> impl Future<Output = Result<Mutated, Error>> + Send + 's {
        match &self.read {
            Some((_, found)) if found.mutating_hooks.is_empty() && found.mutating_policies.is_empty() => {
                Either::Left(std::future::ready(Ok(Mutated::default())))
            }
            // Boxed: the decided case then moves a small value, not the whole future.
            _ => Either::Right(Box::pin(async move {
                match &self.read {
                    Some((current, found)) => self.admission.mutate_in(current, *found, request, object, old).await,
                    None => {
                        self.admission.ready().await?;
                        let current = self.admission.current.load();
                        let target = &request.target;
                        let found = current.find(&self.admission.plugins, target.group, target.resource);
                        self.admission.mutate_in(&current, found, request, object, old).await
                    }
                }
            })),
        }
    }

    /// Validating admission: ValidatingAdmissionPolicies, every matching webhook in
    /// parallel, then (creates only) the object-count quota, last as in kube-apiserver.
    /// `object` is absent on deletes. Returns the webhooks' warnings. Decided at once, without
    /// a future to run, when only policies apply and none needs anything fetched (params,
    /// namespace labels, `namespaceObject`).
    pub fn validate<'s>(
        &'s self,
        request: &'s Request<'s>,
        object: Option<&'s Value>,
        old: Option<&'s Value>,
    ) -> impl Future<Output = Result<Vec<String>, Error>> + Send + 's {
        if let Some(decided) = self.validate_now(request, object, old) {
            return Either::Left(std::future::ready(decided));
        }
        // Boxed, as in `mutate`.
        Either::Right(Box::pin(async move {
            match &self.read {
                Some((current, found)) => self.admission.validate_in(current, *found, request, object, old).await,
                None => {
                    self.admission.ready().await?;
                    let current = self.admission.current.load();
                    let target = &request.target;
                    let found = current.find(&self.admission.plugins, target.group, target.resource);
                    self.admission.validate_in(&current, found, request, object, old).await
                }
            }
        }))
    }

    /// [`Step::validate`]'s decision when nothing must be awaited for it (`None`: something
    /// must).
    fn validate_now(
        &self,
        request: &Request<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Option<Result<Vec<String>, Error>> {
        let (current, found) = self.read.as_ref()?;
        let admission = self.admission;
        let counted = || admission.quotas.as_ref().is_some_and(|q| quota::applies(q.as_ref(), request));
        if !found.validating_hooks.is_empty() || (request.operation == Operation::Create && counted()) {
            return None;
        }
        if found.policies.is_empty() {
            return Some(Ok(Vec::new()));
        }
        let applicable = current.policies.found(found.policies);
        if current.policies.may_await() && policy::awaits(applicable.clone(), request) {
            return None;
        }
        let authorizer = admission.authorizer_for(request, current.policies.uses_authorizer());
        Some(policy::dispatch_now(applicable, request, object, old, authorizer.as_ref()))
    }
}
