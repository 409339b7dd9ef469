//! Impersonation (`Impersonate-User`, `-Uid`, `-Group`, `-Extra-*` headers) as k8s.io/apiserver
//! 1.36 decides it with constrained impersonation on (its default): the modes `associated-node`,
//! `arbitrary-node`, `serviceaccount` and `user-info` (each first asks `impersonate-on:<mode>:<verb>`
//! on the request itself, then `impersonate:<mode>` on each impersonated field, in
//! `authentication.k8s.io`), then the legacy mode (`impersonate` on `users`, `groups`,
//! `serviceaccounts` in the core group, `uids` and `userextras` in `authentication.k8s.io`). The
//! first mode that allows wins; the mode that last allowed a requestor is tried first for them.
//! When none allows, the first refusal is the answer. Behind kube-aggregator impersonation is
//! resolved by kube-apiserver before the request reaches this server; this is for requests sent
//! here directly.
//!
//! Kubernetes also caches successful impersonations for ten seconds; here each check goes to the
//! authorizer, whose SubjectAccessReview answers are cached as kube-apiserver's are.
//!
//! Owns reading the headers into the wanted user, the modes and their checks, and the resulting
//! user. Must not answer requests (the server's filter turns its errors into Statuses).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use http::HeaderMap;

use super::authz::{Authorizer, Decision};
use crate::core::field::{FieldError, Path, go_quote};
use crate::core::names;
use crate::core::request_info::RequestInfo;
use crate::core::user::{ANONYMOUS_USER, AUTHENTICATED_GROUP, MASTERS_GROUP, UNAUTHENTICATED_GROUP, UserInfo};

const USER_HEADER: &str = "impersonate-user";
const UID_HEADER: &str = "impersonate-uid";
const GROUP_HEADER: &str = "impersonate-group";
const EXTRA_PREFIX: &str = "impersonate-extra-";

const NODE_PREFIX: &str = "system:node:";
const NODES_GROUP: &str = "system:nodes";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";
const ALL_SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// The extra key naming the node a service account's token is bound to.
const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";
const ASSOCIATED_NODE_KEYS: &str = "authentication.kubernetes.io/associated-node-keys";
/// From this many groups or extra values on, a constrained mode first asks for all at once.
const MANY_CHECKS: usize = 4;
/// Requestors whose last allowing mode is remembered (Kubernetes keeps 10,000 in an LRU).
const REMEMBERED_REQUESTORS: usize = 10_000;

/// Who the headers ask to act as, as they say it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WantedUser {
    pub name: String,
    pub uid: String,
    /// `None` when no group header came (Go's nil slice; it shows in a refusal's text).
    pub groups: Option<Vec<String>>,
    pub extra: Option<BTreeMap<String, Vec<String>>>,
}

impl WantedUser {
    fn groups(&self) -> &[String] {
        self.groups.as_deref().unwrap_or_default()
    }

    fn only_name(&self) -> bool {
        self.uid.is_empty() && self.groups().is_empty() && self.extra.as_ref().is_none_or(BTreeMap::is_empty)
    }

    /// Go's `%#v` of the `*user.DefaultInfo` these headers make.
    fn go_syntax(&self) -> String {
        let strings = |items: &[String]| items.iter().map(|s| go_quote(s)).collect::<Vec<_>>().join(", ");
        let groups = match &self.groups {
            None => "[]string(nil)".to_string(),
            Some(groups) => format!("[]string{{{}}}", strings(groups)),
        };
        let extra = match &self.extra {
            None => "map[string][]string(nil)".to_string(),
            Some(extra) => {
                let entries: Vec<String> =
                    extra.iter().map(|(k, v)| format!("{}:[]string{{{}}}", go_quote(k), strings(v))).collect();
                format!("map[string][]string{{{}}}", entries.join(", "))
            }
        };
        format!(
            "&user.DefaultInfo{{Name:{}, UID:{}, Groups:{groups}, Extra:{extra}}}",
            go_quote(&self.name),
            go_quote(&self.uid)
        )
    }
}

/// Why impersonation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImpersonationError {
    /// Headers that ask for something but no user name (400).
    BadRequest(String),
    /// A check that did not allow (403).
    Forbidden(Box<Refusal>),
}

/// A check that did not allow: who asked, the attributes asked about, the authorizer's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub requestor: UserInfo,
    pub attributes: RequestInfo,
    pub reason: String,
}

fn forbidden(requestor: UserInfo, attributes: RequestInfo, reason: String) -> ImpersonationError {
    ImpersonationError::Forbidden(Box::new(Refusal { requestor, attributes, reason }))
}

/// Reads the impersonation headers and removes them. `Ok(None)`: no user is impersonated (the
/// request goes on as its own).
pub fn take_wanted_user(headers: &mut HeaderMap) -> Result<Option<WantedUser>, ImpersonationError> {
    let text = |value: &http::HeaderValue| String::from_utf8_lossy(value.as_bytes()).into_owned();
    let mut wanted = WantedUser {
        name: headers.get(USER_HEADER).map(text).unwrap_or_default(),
        uid: headers.get(UID_HEADER).map(text).unwrap_or_default(),
        ..WantedUser::default()
    };
    let groups: Vec<String> = headers.get_all(GROUP_HEADER).iter().map(text).collect();
    if !groups.is_empty() {
        wanted.groups = Some(groups);
    }
    let extra_names: Vec<http::HeaderName> =
        headers.keys().filter(|name| name.as_str().starts_with(EXTRA_PREFIX)).cloned().collect();
    for name in &extra_names {
        let key = name.as_str().get(EXTRA_PREFIX.len()..).unwrap_or_default();
        // Percent-decoded as Go's `url.PathUnescape` (kept as sent when malformed).
        let key = crate::core::paths::unescape(key).map(|k| k.into_owned()).unwrap_or_else(|_| key.to_string());
        let values = headers.get_all(name).iter().map(text);
        wanted.extra.get_or_insert_default().entry(key).or_default().extend(values);
    }
    let has_user = !wanted.name.is_empty();
    if !has_user && (!wanted.uid.is_empty() || wanted.groups.is_some() || !extra_names.is_empty()) {
        return Err(ImpersonationError::BadRequest(format!(
            "requested {} without impersonating a user name",
            wanted.go_syntax()
        )));
    }
    if !has_user {
        return Ok(None);
    }
    // Nothing after this point may tell that impersonation was used.
    for name in [USER_HEADER, UID_HEADER, GROUP_HEADER] {
        headers.remove(name);
    }
    for name in extra_names {
        headers.remove(name);
    }
    Ok(Some(wanted))
}

/// The namespace and name of a service account's user name (`SplitUsername`).
fn service_account(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let mut parts = rest.split(':');
    let (namespace, name) = (parts.next()?, parts.next()?);
    let valid = parts.next().is_none()
        && names::dns1123_label(namespace).is_empty()
        && names::dns1123_subdomain(name).is_empty();
    valid.then_some((namespace, name))
}

/// The node name of a node's user name.
fn node(username: &str) -> Option<&str> {
    let name = username.strip_prefix(NODE_PREFIX)?;
    names::dns1123_subdomain(name).is_empty().then_some(name)
}

/// The impersonation modes, in the order Kubernetes tries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    AssociatedNode,
    ArbitraryNode,
    ServiceAccount,
    UserInfo,
    Legacy,
}

const MODES: [Mode; 5] =
    [Mode::AssociatedNode, Mode::ArbitraryNode, Mode::ServiceAccount, Mode::UserInfo, Mode::Legacy];

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::AssociatedNode => "associated-node",
            Mode::ArbitraryNode => "arbitrary-node",
            Mode::ServiceAccount => "serviceaccount",
            Mode::UserInfo => "user-info",
            Mode::Legacy => "legacy",
        }
    }

    fn constrained(self) -> bool {
        self != Mode::Legacy
    }

    fn verb(self) -> String {
        if self.constrained() { format!("impersonate:{}", self.name()) } else { "impersonate".to_string() }
    }

    /// The group and version of the `users` and `groups` checks.
    fn user_group_version(self) -> (&'static str, &'static str) {
        if self.constrained() { ("authentication.k8s.io", "v1") } else { ("", "v1") }
    }

    /// Whether the mode can impersonate `wanted` for `requestor` at all.
    fn applies(self, wanted: &WantedUser, requestor: &UserInfo) -> bool {
        match self {
            Mode::AssociatedNode => {
                wanted.only_name()
                    && node(&wanted.name).is_some_and(|node| {
                        service_account(&requestor.name).is_some()
                            && requestor
                                .extra
                                .get(NODE_NAME_KEY)
                                .is_some_and(|v| matches!(v.as_slice(), [only] if only == node))
                    })
            }
            Mode::ArbitraryNode => wanted.only_name() && node(&wanted.name).is_some(),
            Mode::ServiceAccount => wanted.only_name() && service_account(&wanted.name).is_some(),
            Mode::UserInfo => node(&wanted.name).is_none() && service_account(&wanted.name).is_none(),
            Mode::Legacy => true,
        }
    }
}

/// Resource attributes of one impersonation check.
fn attributes(verb: &str, (group, version): (&str, &str), resource: &str, name: &str) -> RequestInfo {
    RequestInfo {
        is_resource_request: true,
        verb: verb.to_string(),
        api_group: group.to_string(),
        api_version: version.to_string(),
        resource: resource.to_string(),
        name: name.to_string(),
        ..RequestInfo::default()
    }
}

/// Decides impersonation with the server's authorizer chain.
pub struct Impersonation {
    authorizer: Arc<dyn Authorizer>,
    /// The mode that last allowed each requestor (by name).
    last_mode: Mutex<HashMap<String, usize>>,
}

/// One mode's checks for one request.
struct Check<'a> {
    impersonation: &'a Impersonation,
    mode: Mode,
    requestor: &'a UserInfo,
}

impl Impersonation {
    pub fn new(authorizer: Arc<dyn Authorizer>) -> Impersonation {
        Impersonation { authorizer, last_mode: Mutex::default() }
    }

    /// The user `requestor` acts as for the request `info`, and the mode that allowed it.
    pub async fn impersonate(
        &self,
        requestor: &UserInfo,
        info: &RequestInfo,
        wanted: &WantedUser,
    ) -> Result<(UserInfo, &'static str), ImpersonationError> {
        let remembered = self.last_mode.lock().ok().and_then(|modes| modes.get(&requestor.name).copied());
        let order = remembered.into_iter().chain((0..MODES.len()).filter(|i| Some(*i) != remembered));
        let mut first_refusal = None;
        for index in order {
            let Some(&mode) = MODES.get(index) else { continue };
            match (Check { impersonation: self, mode, requestor }).run(info, wanted).await {
                Ok(Some(user)) => {
                    if let Ok(mut modes) = self.last_mode.lock() {
                        if modes.len() >= REMEMBERED_REQUESTORS && !modes.contains_key(&requestor.name) {
                            modes.clear();
                        }
                        modes.insert(requestor.name.clone(), index);
                    }
                    return Ok((user, mode.name()));
                }
                Ok(None) => {}
                Err(refusal) => {
                    first_refusal.get_or_insert(refusal);
                }
            }
        }
        // The legacy mode always applies, so some mode refused.
        Err(first_refusal.unwrap_or_else(|| {
            forbidden(requestor.clone(), info.clone(), "all impersonation modes failed".to_string())
        }))
    }
}

impl Check<'_> {
    /// The impersonated user if the mode allows it, `None` if it does not apply.
    async fn run(&self, info: &RequestInfo, wanted: &WantedUser) -> Result<Option<UserInfo>, ImpersonationError> {
        if !self.mode.applies(wanted, self.requestor) {
            return Ok(None);
        }
        if self.mode.constrained() {
            // May the requestor make this very request while impersonating in this mode?
            let mut on = info.clone();
            on.verb = format!("impersonate-on:{}:{}", self.mode.name(), info.verb);
            self.authorize(on).await?;
        }
        let mut actual = UserInfo {
            name: wanted.name.clone(),
            uid: wanted.uid.clone(),
            groups: wanted.groups().to_vec(),
            extra: wanted.extra.clone().unwrap_or_default(),
        };
        self.authorize_username(wanted, &mut actual).await?;
        if !wanted.uid.is_empty() {
            self.authorize(attributes(&self.mode.verb(), ("authentication.k8s.io", "v1"), "uids", &wanted.uid)).await?;
        }
        self.authorize_groups(wanted.groups()).await?;
        if let Some(extra) = &wanted.extra {
            self.authorize_extra(extra).await?;
        }
        if actual.name == ANONYMOUS_USER {
            ensure_group(&mut actual, UNAUTHENTICATED_GROUP);
        } else if !actual.in_group(UNAUTHENTICATED_GROUP) {
            ensure_group(&mut actual, AUTHENTICATED_GROUP);
        }
        Ok(Some(actual))
    }

    async fn authorize_username(&self, wanted: &WantedUser, actual: &mut UserInfo) -> Result<(), ImpersonationError> {
        let mut asked = attributes(&self.mode.verb(), self.mode.user_group_version(), "users", &wanted.name);
        let groups = wanted.groups();
        if let Some(node) = node(&wanted.name).filter(|_| self.mode.constrained()) {
            asked.resource = "nodes".into();
            asked.name = node.into();
            if !groups.is_empty() {
                return Err(self.refusal(
                    asked,
                    format!("when impersonating a node, cannot impersonate groups {}", go_list(groups)),
                ));
            }
            actual.groups = vec![NODES_GROUP.to_string()];
        }
        if let Some((namespace, name)) = service_account(&wanted.name) {
            asked.resource = "serviceaccounts".into();
            asked.namespace = namespace.into();
            asked.name = name.into();
            if self.mode.constrained() && !groups.is_empty() {
                return Err(self.refusal(
                    asked,
                    format!("when impersonating a service account, cannot impersonate groups {}", go_list(groups)),
                ));
            }
            if groups.is_empty() {
                actual.groups =
                    vec![ALL_SERVICE_ACCOUNTS_GROUP.to_string(), format!("system:serviceaccounts:{namespace}")];
            }
        }
        self.authorize(asked).await
    }

    async fn authorize_groups(&self, groups: &[String]) -> Result<(), ImpersonationError> {
        if groups.is_empty() {
            return Ok(());
        }
        let mut asked = attributes(&self.mode.verb(), self.mode.user_group_version(), "groups", "");
        if self.mode.constrained() {
            if groups.iter().any(String::is_empty) {
                return Err(self.refusal(asked, "impersonating the empty string group is not allowed".into()));
            }
            if groups.iter().any(|g| g == MASTERS_GROUP) {
                asked.name = MASTERS_GROUP.into();
                return Err(self.refusal(asked, "impersonating the system:masters group is not allowed".into()));
            }
            if groups.len() >= MANY_CHECKS {
                let mut all = asked.clone();
                all.name = "*".into();
                if self.authorize(all).await.is_ok() {
                    return Ok(());
                }
            }
        }
        for group in groups {
            asked.name = group.clone();
            self.authorize(asked.clone()).await?;
        }
        Ok(())
    }

    async fn authorize_extra(&self, extra: &BTreeMap<String, Vec<String>>) -> Result<(), ImpersonationError> {
        if extra.is_empty() {
            return Ok(());
        }
        let mut asked = attributes(&self.mode.verb(), ("authentication.k8s.io", "v1"), "userextras", "");
        if self.mode.constrained() {
            if let Some(problem) = extra_problem(extra) {
                return Err(self.refusal(asked, problem));
            }
            if extra.len() >= MANY_CHECKS || extra.values().map(Vec::len).sum::<usize>() >= MANY_CHECKS {
                let mut all = asked.clone();
                all.subresource = "*".into();
                all.name = "*".into();
                if self.authorize(all).await.is_ok() {
                    return Ok(());
                }
            }
        }
        for (key, values) in extra {
            asked.subresource = key.clone();
            for value in values {
                asked.name = value.clone();
                self.authorize(asked.clone()).await?;
            }
        }
        Ok(())
    }

    /// Asks the authorizer; anything but an allow is a refusal naming what was asked.
    async fn authorize(&self, mut asked: RequestInfo) -> Result<(), ImpersonationError> {
        let mut requestor = self.requestor.clone();
        if self.mode == Mode::AssociatedNode {
            // Asked so that one answer holds for the service account on every node: its extra
            // reduced to the keys, and any node's name.
            let mut keys: Vec<String> = requestor.extra.keys().cloned().collect();
            keys.sort();
            requestor.extra = BTreeMap::from([(ASSOCIATED_NODE_KEYS.to_string(), keys)]);
            if asked.verb == self.mode.verb() {
                asked.name = "*".into();
            }
        }
        let reason = match self.impersonation.authorizer.authorize(&requestor, &asked).await {
            Ok(Decision::Allow) => return Ok(()),
            Ok(Decision::Deny(reason)) => reason,
            Ok(Decision::NoOpinion) => String::new(),
            Err(e) => e.to_string(),
        };
        Err(forbidden(requestor, asked, reason))
    }

    fn refusal(&self, attributes: RequestInfo, reason: String) -> ImpersonationError {
        forbidden(self.requestor.clone(), attributes, reason)
    }
}

fn ensure_group(user: &mut UserInfo, group: &str) {
    if !user.in_group(group) {
        user.groups.push(group.to_string());
    }
}

/// Go's `%q` of a string slice: `["a" "b"]`.
fn go_list(items: &[String]) -> String {
    format!("[{}]", items.iter().map(|s| go_quote(s)).collect::<Vec<_>>().join(" "))
}

/// What constrained impersonation refuses in extra keys and values (`validateExtra`), keys in
/// order.
fn extra_problem(extra: &BTreeMap<String, Vec<String>>) -> Option<String> {
    for (key, values) in extra {
        if key.is_empty() {
            return Some("impersonating the empty string key in extra is not allowed".into());
        }
        if let Some(invalid) = domain_prefixed_path(key) {
            return Some(format!("impersonating an invalid key in extra is not allowed: {invalid}"));
        }
        if *key != key.to_lowercase() {
            return Some(format!("impersonating a non-lowercase key in extra is not allowed: {}", go_quote(key)));
        }
        if values.is_empty() {
            return Some("impersonating empty values in extra is not allowed".into());
        }
        if values.iter().any(String::is_empty) {
            return Some("impersonating the empty string value in extra is not allowed".into());
        }
    }
    None
}

/// `IsDomainPrefixedPath(extra.key)`'s errors as one aggregate's text, if any.
fn domain_prefixed_path(key: &str) -> Option<String> {
    let at = Path::new("extra").child("key");
    let mut errors: Vec<String> = Vec::new();
    match key.split_once('/') {
        Some((host, path)) if !host.is_empty() && !path.is_empty() => {
            for problem in names::dns1123_subdomain(host) {
                errors.push(FieldError::invalid(at.clone(), host, problem).to_string());
            }
            let valid_path = path.bytes().all(|b| b.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&b));
            if !valid_path {
                let rule = r"Invalid path (regex used for validation is '[A-Za-z0-9/\-._~%!$&'()*+,;=:]+')";
                errors.push(FieldError::invalid(at, path, rule).to_string());
            }
        }
        _ => errors
            .push(FieldError::invalid(at, key, "must be a domain-prefixed path (such as \"acme.io/foo\")").to_string()),
    }
    errors.dedup();
    match errors.len() {
        0 => None,
        1 => errors.pop(),
        _ => Some(format!("[{}]", errors.join(", "))),
    }
}

#[cfg(test)]
mod tests;
