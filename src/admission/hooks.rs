//! One admission webhook compiled from its configuration (`MutatingWebhook` or
//! `ValidatingWebhook` of `admissionregistration.k8s.io/v1`, with v1's defaults): rules,
//! match policy, selectors, failure policy, side effects, timeout, review versions and its
//! HTTPS client; and the decision whether a request calls it (`ShouldCallHook`).
//!
//! Owns webhook matching; calls nothing (that is `mutating`/`validating`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, ValidatingWebhook, WebhookClientConfig};

use super::rules::Rule;
use super::selector::Selector;
use super::{Error, NamespaceLabels, Request};
use crate::cel::policy::{Expression, Outcome, Want};
use crate::conversion::webhook::{self as https, Client};
use crate::definitions::conversion::Endpoint;

/// Kubernetes' default `timeoutSeconds` of v1 webhooks.
const DEFAULT_TIMEOUT_SECONDS: i32 = 10;

/// A compiled webhook.
pub struct Hook {
    /// `<configuration>/<name>/<position>`: tells apart hooks of the same name.
    pub uid: String,
    pub configuration: String,
    pub name: String,
    pub rules: Vec<Rule>,
    /// `matchPolicy: Equivalent` (the default): other served versions of the resource match.
    pub equivalent: bool,
    pub namespace_selector: Result<Selector, String>,
    pub object_selector: Result<Selector, String>,
    /// `failurePolicy: Ignore`: a failed call lets the request through.
    pub fail_open: bool,
    pub side_effects: String,
    pub timeout: Duration,
    pub review_versions: Vec<String>,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks only).
    pub reinvoke_if_needed: bool,
    /// The client and the URL called (with `?timeout=`), or why there is none.
    pub client: Result<(Arc<Client>, http::Uri), String>,
    /// `matchConditions`: (expression, compiled CEL over `object`, `oldObject`, `request`).
    pub match_conditions: Vec<(String, Result<Expression, String>)>,
}

/// The variables of webhook match conditions, in slot order.
const CONDITION_VARIABLES: &[&str] = &["object", "oldObject", "request", "authorizer"];
/// The slots of `request` and `authorizer` in [`CONDITION_VARIABLES`].
const REQUEST: usize = 2;
const AUTHORIZER: usize = 3;

fn endpoint_of(config: &WebhookClientConfig) -> Result<Endpoint, String> {
    match (&config.url, &config.service) {
        (Some(url), _) => Ok(Endpoint::Url(url.clone())),
        (None, Some(service)) => Ok(Endpoint::Service {
            name: service.name.clone(),
            namespace: service.namespace.clone(),
            port: u16::try_from(service.port.unwrap_or(443)).map_err(|e| e.to_string())?,
            path: service.path.clone().unwrap_or_default(),
        }),
        (None, None) => Err("a webhook client config needs a url or a service".to_string()),
    }
}

fn client_of(config: &WebhookClientConfig, timeout: Duration) -> Result<(Arc<Client>, http::Uri), String> {
    let endpoint = endpoint_of(config)?;
    let ca = config.ca_bundle.as_ref().map(|b| b.0.as_slice()).unwrap_or_default();
    let client = Arc::new(Client::connect(&endpoint, ca)?);
    let url = format!("{}?timeout={}s", https::url_of(&endpoint), timeout.as_secs());
    let uri: http::Uri = url.parse().map_err(|e| format!("invalid webhook URL: {e}"))?;
    Ok((client, uri))
}

/// The parts of both webhook kinds a hook is built from.
struct Wire<'a> {
    name: &'a str,
    rules: Option<&'a Vec<k8s_openapi::api::admissionregistration::v1::RuleWithOperations>>,
    match_policy: Option<&'a str>,
    namespace_selector: Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    object_selector: Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    failure_policy: Option<&'a str>,
    side_effects: &'a str,
    timeout_seconds: Option<i32>,
    review_versions: &'a [String],
    client_config: &'a WebhookClientConfig,
    reinvocation_policy: Option<&'a str>,
    match_conditions: Option<&'a Vec<k8s_openapi::api::admissionregistration::v1::MatchCondition>>,
}

impl Hook {
    pub fn mutating(configuration: &str, position: usize, w: &MutatingWebhook) -> Hook {
        Hook::build(
            configuration,
            position,
            Wire {
                name: &w.name,
                rules: w.rules.as_ref(),
                match_policy: w.match_policy.as_deref(),
                namespace_selector: w.namespace_selector.as_ref(),
                object_selector: w.object_selector.as_ref(),
                failure_policy: w.failure_policy.as_deref(),
                side_effects: &w.side_effects,
                timeout_seconds: w.timeout_seconds,
                review_versions: &w.admission_review_versions,
                client_config: &w.client_config,
                reinvocation_policy: w.reinvocation_policy.as_deref(),
                match_conditions: w.match_conditions.as_ref(),
            },
        )
    }

    pub fn validating(configuration: &str, position: usize, w: &ValidatingWebhook) -> Hook {
        Hook::build(
            configuration,
            position,
            Wire {
                name: &w.name,
                rules: w.rules.as_ref(),
                match_policy: w.match_policy.as_deref(),
                namespace_selector: w.namespace_selector.as_ref(),
                object_selector: w.object_selector.as_ref(),
                failure_policy: w.failure_policy.as_deref(),
                side_effects: &w.side_effects,
                timeout_seconds: w.timeout_seconds,
                review_versions: &w.admission_review_versions,
                client_config: &w.client_config,
                reinvocation_policy: None,
                match_conditions: w.match_conditions.as_ref(),
            },
        )
    }

    fn build(configuration: &str, position: usize, w: Wire<'_>) -> Hook {
        let seconds = w.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS).clamp(1, 30);
        let timeout = Duration::from_secs(u64::try_from(seconds).unwrap_or(10));
        Hook {
            uid: format!("{configuration}/{}/{position}", w.name),
            configuration: configuration.to_string(),
            name: w.name.to_string(),
            rules: w.rules.into_iter().flatten().map(Rule::compile).collect(),
            equivalent: w.match_policy != Some("Exact"),
            namespace_selector: Selector::compile(w.namespace_selector),
            object_selector: Selector::compile(w.object_selector),
            fail_open: w.failure_policy == Some("Ignore"),
            side_effects: w.side_effects.to_string(),
            timeout,
            review_versions: w.review_versions.to_vec(),
            reinvoke_if_needed: w.reinvocation_policy == Some("IfNeeded"),
            client: client_of(w.client_config, timeout),
            match_conditions: w
                .match_conditions
                .into_iter()
                .flatten()
                .map(|c| (c.expression.clone(), Expression::compile(&c.expression, CONDITION_VARIABLES, Want::Bool)))
                .collect(),
        }
    }

    /// The version a request matches this hook in: the request's own, or (under
    /// `Equivalent`) another served version of the same definition; `None` when no rule
    /// matches.
    pub fn matching_version(&self, request: &Request<'_>) -> Option<String> {
        let own = self.rules.iter().any(|r| r.matches(request.operation, &request.target, request.version));
        if own {
            return Some(request.version.to_string());
        }
        if !self.equivalent {
            return None;
        }
        request
            .definition
            .served_versions()
            .filter(|v| v.name != request.version)
            .find(|v| self.rules.iter().any(|r| r.matches(request.operation, &request.target, &v.name)))
            .map(|v| v.name.clone())
    }

    /// Whether the request calls this hook, and in which version (`ShouldCallHook`): the
    /// namespace and object selectors, then the rules. Selector errors count only when the
    /// rules match.
    pub async fn should_call(
        &self,
        request: &Request<'_>,
        namespaces: &dyn NamespaceLabels,
        object: Option<&serde_json::Value>,
        old: Option<&serde_json::Value>,
        authorizer: Option<&std::sync::Arc<dyn crate::cel::policy::Authorize>>,
    ) -> Result<Option<String>, Error> {
        let Some(version) = self.matching_version(request) else { return Ok(None) };
        if !self.namespace_matches(request, namespaces).await? {
            return Ok(None);
        }
        let selector = self.object_selector.as_ref().map_err(|e| Error::Internal(e.clone()))?;
        if !selector.is_empty() {
            let selected = |o: Option<&serde_json::Value>| o.is_some_and(|o| selector.matches_object(o));
            if !selected(object) && !selected(old) {
                return Ok(None);
            }
        }
        if !self.conditions_match(request, &version, object, old, authorizer)? {
            return Ok(None);
        }
        Ok(Some(version))
    }

    /// Whether some match condition reads the variable at `slot` of [`CONDITION_VARIABLES`].
    fn conditions_read(&self, slot: usize) -> bool {
        self.match_conditions.iter().any(|(_, c)| c.as_ref().is_ok_and(|c| c.reads(slot)))
    }

    /// Whether some match condition reads `authorizer`.
    pub fn uses_authorizer(&self) -> bool {
        self.conditions_read(AUTHORIZER)
    }

    /// The match conditions: any false skips the hook; errors refuse the request under
    /// `failurePolicy: Fail` and skip the hook under Ignore.
    fn conditions_match(
        &self,
        request: &Request<'_>,
        version: &str,
        object: Option<&serde_json::Value>,
        old: Option<&serde_json::Value>,
        authorizer: Option<&std::sync::Arc<dyn crate::cel::policy::Authorize>>,
    ) -> Result<bool, Error> {
        if self.match_conditions.is_empty() {
            return Ok(true);
        }
        // `request` is built only when a condition reads it.
        let request_value = if self.conditions_read(REQUEST) {
            super::review::request_json("", request, &super::review::Reviewed { version, object: None, old: None })
        } else {
            serde_json::Value::Null
        };
        let mut errors = Vec::new();
        for (source, condition) in &self.match_conditions {
            let outcome = condition.as_ref().map_err(Clone::clone).and_then(|program| {
                program
                    .evaluate(&[object, old, Some(&request_value)], authorizer, None)
                    .map_err(|e| format!("expression '{source}' resulted in error: {e}"))
            });
            match outcome {
                Ok(Outcome::Bool(false)) => return Ok(false),
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
        match errors.as_slice() {
            [] => Ok(true),
            _ if self.fail_open => Ok(false),
            [one] => Err(Error::Forbidden(one.clone())),
            many => Err(Error::Forbidden(format!("[{}]", many.join(", ")))),
        }
    }

    async fn namespace_matches(&self, request: &Request<'_>, namespaces: &dyn NamespaceLabels) -> Result<bool, Error> {
        let namespace = request.target.namespace;
        if namespace.is_empty() {
            return Ok(true);
        }
        let selector = self.namespace_selector.as_ref().map_err(|e| Error::Internal(e.clone()))?;
        if selector.is_empty() {
            return Ok(true);
        }
        match namespaces.labels(namespace).await {
            Ok(Some(labels)) => Ok(selector.matches_map(&labels)),
            Ok(None) => Err(Error::NamespaceNotFound(namespace.to_string())),
            Err(e) => Err(Error::Internal(e)),
        }
    }

    /// Checks that a dry-run request may call this hook (`sideEffects`).
    pub fn check_dry_run(&self, dry_run: bool) -> Result<(), super::review::CallError> {
        if !dry_run || matches!(self.side_effects.as_str(), "None" | "NoneOnDryRun") {
            return Ok(());
        }
        Err(super::review::CallError::Rejected(Error::BadRequest(format!(
            "admission webhook \"{}\" does not support dry run",
            self.name
        ))))
    }
}
