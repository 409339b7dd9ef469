//! kube-apiserver's impersonation in front of everything the double serves or proxies: the
//! `Impersonate-*` headers name who the request acts as, allowed by the rule table as
//! kube-apiserver 1.36 allows it. Constrained impersonation's modes come first
//! (`associated-node`: a service account bound to a node as that node; `arbitrary-node`;
//! `serviceaccount`; `user-info`: anyone else, with groups, uid and extra), each asking
//! `impersonate-on:<mode>:<verb>` on the request and then `impersonate:<mode>` on each field
//! (one question for four groups or extra values first), refusing `system:masters`, empty
//! groups and malformed extra; then the legacy `impersonate` verb. The mode that last allowed
//! a requestor is asked first; the first refusal is the answer. What the aggregator proxies
//! then carries the impersonated user in `X-Remote-*` headers, never the `Impersonate-*` ones.
//! Not modelled: kube-apiserver's ten-second memory of allowed impersonations (the rule table
//! is asked every time, which answers alike while the rules stand).

use std::collections::BTreeMap;

use super::rbac::{self, Attributes, User};
use super::respond::{self, Response};
use super::state::{State, lock};

const MODES: [&str; 5] = ["associated-node", "arbitrary-node", "serviceaccount", "user-info", "legacy"];
const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";
const SUBDOMAIN_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const PATH_RULE: &str = "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')";

fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Go's `%#v` of a string slice (`nil` when absent).
fn go_strings(items: &[String]) -> String {
    if items.is_empty() {
        return "[]string(nil)".into();
    }
    format!("[]string{{{}}}", items.iter().map(|s| go_quote(s)).collect::<Vec<_>>().join(", "))
}

/// The user the request acts as: `requestor` unless the headers impersonate someone (they are
/// removed), or the refusal.
pub fn resolve(
    state: &State,
    headers: &mut http::HeaderMap,
    requestor: User,
    request: &Attributes,
) -> Result<User, Response> {
    let text = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    let name = headers.get("impersonate-user").map(text).unwrap_or_default();
    let uid = headers.get("impersonate-uid").map(text).unwrap_or_default();
    let groups: Vec<String> = headers.get_all("impersonate-group").iter().map(text).collect();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (header, value) in headers.iter() {
        if let Some(key) = header.as_str().strip_prefix("impersonate-extra-") {
            extra.entry(percent_decoded(key)).or_default().push(text(value));
        }
    }
    if name.is_empty() {
        if uid.is_empty() && groups.is_empty() && extra.is_empty() {
            return Ok(requestor);
        }
        let extra = if extra.is_empty() {
            "map[string][]string(nil)".to_string()
        } else {
            let entries: Vec<String> =
                extra.iter().map(|(k, v)| format!("{}:{}", go_quote(k), go_strings(v))).collect();
            format!("map[string][]string{{{}}}", entries.join(", "))
        };
        let message = format!(
            "requested &user.DefaultInfo{{Name:\"\", UID:{}, Groups:{}, Extra:{extra}}} without impersonating a user name",
            go_quote(&uid),
            go_strings(&groups)
        );
        return Err(respond::status(400, "BadRequest", &message, None));
    }
    let names: Vec<http::HeaderName> =
        headers.keys().filter(|h| h.as_str().starts_with("impersonate-")).cloned().collect();
    for header in names {
        headers.remove(header);
    }
    let wanted = User { name, uid, groups, extra };
    let rules = lock(&state.rules).clone();
    let remembered = lock(&state.impersonation_modes).get(&requestor.name).copied();
    let order = remembered.into_iter().chain((0..MODES.len()).filter(|i| Some(*i) != remembered));
    let mut first_refusal = None;
    for index in order {
        let check = Check { rules: &rules, mode: MODES[index], requestor: &requestor };
        match check.run(&wanted, request) {
            Ok(Some(user)) => {
                lock(&state.impersonation_modes).insert(requestor.name.clone(), index);
                return Ok(user);
            }
            Ok(None) => {}
            Err(refusal) => {
                first_refusal.get_or_insert(refusal);
            }
        }
    }
    Err(first_refusal.unwrap())
}

/// Go's `url.PathUnescape`, keeping a malformed key as it came.
fn percent_decoded(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
            match hex {
                Some(byte) => out.push(byte),
                None => return key.to_string(),
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

fn dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(dns_label)
}

fn service_account(name: &str) -> Option<(&str, &str)> {
    let mut parts = name.strip_prefix("system:serviceaccount:")?.split(':');
    let (namespace, account) = (parts.next()?, parts.next()?);
    (parts.next().is_none() && dns_label(namespace) && dns_subdomain(account)).then_some((namespace, account))
}

fn node(name: &str) -> Option<&str> {
    name.strip_prefix("system:node:").filter(|n| dns_subdomain(n))
}

/// What constrained impersonation refuses in extra (`validateExtra`).
fn extra_problem(extra: &BTreeMap<String, Vec<String>>) -> Option<String> {
    for (key, values) in extra {
        if key.is_empty() {
            return Some("impersonating the empty string key in extra is not allowed".into());
        }
        let invalid = |value: &str, why: &str| format!("extra.key: Invalid value: {}: {why}", go_quote(value));
        let errors = match key.split_once('/') {
            Some((host, path)) if !host.is_empty() && !path.is_empty() => {
                let mut errors = Vec::new();
                if !dns_subdomain(host) {
                    errors.push(invalid(host, SUBDOMAIN_RULE));
                }
                if !path.bytes().all(|b| b.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&b)) {
                    errors.push(invalid(path, PATH_RULE));
                }
                errors
            }
            _ => vec![invalid(key, "must be a domain-prefixed path (such as \"acme.io/foo\")")],
        };
        match errors.as_slice() {
            [] => {}
            [one] => return Some(format!("impersonating an invalid key in extra is not allowed: {one}")),
            many => {
                return Some(format!("impersonating an invalid key in extra is not allowed: [{}]", many.join(", ")));
            }
        }
        if *key != key.to_lowercase() {
            return Some(format!("impersonating a non-lowercase key in extra is not allowed: {}", go_quote(key)));
        }
        if values.iter().any(String::is_empty) {
            return Some("impersonating the empty string value in extra is not allowed".into());
        }
    }
    None
}

/// One mode's checks for one requestor.
struct Check<'a> {
    rules: &'a [rbac::Rule],
    mode: &'static str,
    requestor: &'a User,
}

impl Check<'_> {
    fn legacy(&self) -> bool {
        self.mode == "legacy"
    }

    fn verb(&self) -> String {
        if self.legacy() { "impersonate".into() } else { format!("impersonate:{}", self.mode) }
    }

    /// The group of the `users`, `groups`, `nodes` and `serviceaccounts` questions.
    fn user_group(&self) -> &'static str {
        if self.legacy() { "" } else { "authentication.k8s.io" }
    }

    fn field(&self, group: &str, resource: &str, name: &str) -> Attributes {
        Attributes {
            resource_request: true,
            verb: self.verb(),
            group: group.into(),
            resource: resource.into(),
            name: name.into(),
            ..Attributes::default()
        }
    }

    /// Who the questions name: for `associated-node`, the service account with its extra
    /// reduced to the keys, so that one answer holds on every node.
    fn asker(&self) -> User {
        let mut asker = self.requestor.clone();
        if self.mode == "associated-node" {
            let keys: Vec<String> = asker.extra.keys().cloned().collect();
            asker.extra = BTreeMap::from([("authentication.kubernetes.io/associated-node-keys".to_string(), keys)]);
        }
        asker
    }

    fn ask(&self, attrs: &Attributes) -> Result<(), Response> {
        let mut attrs = attrs.clone();
        if self.mode == "associated-node" && attrs.verb == self.verb() {
            attrs.name = "*".into();
        }
        let asker = self.asker();
        match rbac::decide(self.rules, &asker, &attrs) {
            Some(_) => Ok(()),
            None => Err(respond::forbidden(&asker, &attrs)),
        }
    }

    fn refuse(&self, attrs: &Attributes, reason: &str) -> Response {
        respond::forbidden_because(&self.asker(), attrs, reason)
    }

    fn applies(&self, wanted: &User) -> bool {
        let only_name = wanted.uid.is_empty() && wanted.groups.is_empty() && wanted.extra.is_empty();
        match self.mode {
            "associated-node" => {
                only_name
                    && node(&wanted.name).is_some_and(|node| {
                        service_account(&self.requestor.name).is_some()
                            && self
                                .requestor
                                .extra
                                .get(NODE_NAME_KEY)
                                .is_some_and(|v| matches!(v.as_slice(), [only] if only == node))
                    })
            }
            "arbitrary-node" => only_name && node(&wanted.name).is_some(),
            "serviceaccount" => only_name && service_account(&wanted.name).is_some(),
            "user-info" => node(&wanted.name).is_none() && service_account(&wanted.name).is_none(),
            _ => true,
        }
    }

    /// The user if the mode allows, `None` if it does not apply, or its refusal.
    fn run(&self, wanted: &User, request: &Attributes) -> Result<Option<User>, Response> {
        if !self.applies(wanted) {
            return Ok(None);
        }
        let legacy = self.legacy();
        if !legacy {
            self.ask(&Attributes {
                verb: format!("impersonate-on:{}:{}", self.mode, request.verb),
                ..request.clone()
            })?;
        }
        let mut user = wanted.clone();
        let mut username = self.field(self.user_group(), "users", &wanted.name);
        if let Some(node) = node(&wanted.name).filter(|_| !legacy) {
            username = self.field(self.user_group(), "nodes", node);
            user.groups = vec!["system:nodes".into()];
        }
        if let Some((namespace, account)) = service_account(&wanted.name) {
            username =
                Attributes { namespace: namespace.into(), ..self.field(self.user_group(), "serviceaccounts", account) };
            if wanted.groups.is_empty() {
                user.groups = vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")];
            }
        }
        self.ask(&username)?;
        if !wanted.uid.is_empty() {
            self.ask(&self.field("authentication.k8s.io", "uids", &wanted.uid))?;
        }
        self.groups(&wanted.groups)?;
        self.extra(&wanted.extra)?;
        let group = if user.name == "system:anonymous" { "system:unauthenticated" } else { "system:authenticated" };
        if !user.groups.iter().any(|g| g == group || g == "system:unauthenticated") {
            user.groups.push(group.into());
        }
        Ok(Some(user))
    }

    fn groups(&self, groups: &[String]) -> Result<(), Response> {
        if groups.is_empty() {
            return Ok(());
        }
        let mut attrs = self.field(self.user_group(), "groups", "");
        if !self.legacy() {
            if groups.iter().any(String::is_empty) {
                return Err(self.refuse(&attrs, "impersonating the empty string group is not allowed"));
            }
            if groups.iter().any(|g| g == "system:masters") {
                attrs.name = "system:masters".into();
                return Err(self.refuse(&attrs, "impersonating the system:masters group is not allowed"));
            }
            if groups.len() >= 4 && self.ask(&self.field(self.user_group(), "groups", "*")).is_ok() {
                return Ok(());
            }
        }
        for group in groups {
            attrs.name = group.clone();
            self.ask(&attrs)?;
        }
        Ok(())
    }

    fn extra(&self, extra: &BTreeMap<String, Vec<String>>) -> Result<(), Response> {
        if extra.is_empty() {
            return Ok(());
        }
        let mut attrs = self.field("authentication.k8s.io", "userextras", "");
        if !self.legacy() {
            if let Some(problem) = extra_problem(extra) {
                return Err(self.refuse(&attrs, &problem));
            }
            let values: usize = extra.values().map(Vec::len).sum();
            let all = Attributes { subresource: "*".into(), ..self.field("authentication.k8s.io", "userextras", "*") };
            if (extra.len() >= 4 || values >= 4) && self.ask(&all).is_ok() {
                return Ok(());
            }
        }
        for (key, values) in extra {
            attrs.subresource = key.clone();
            for value in values {
                attrs.name = value.clone();
                self.ask(&attrs)?;
            }
        }
        Ok(())
    }
}
