//! Impersonation against an authorizer of allowed (verb, group, resource, name) rules.

use std::sync::Mutex;

use super::*;
use crate::auth::BoxFuture;
use crate::auth::authz::AuthzError;
use crate::core::request_info::Query;

/// Allows what its rules name (`*` matches any name); records every question.
#[derive(Default)]
struct Rules {
    allowed: Vec<(&'static str, &'static str, &'static str, &'static str)>,
    asked: Mutex<Vec<String>>,
}

impl Authorizer for Rules {
    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        info: &'a RequestInfo,
    ) -> BoxFuture<'a, Result<Decision, AuthzError>> {
        Box::pin(async move {
            let question = format!(
                "{} {} {}/{}/{} {}/{}",
                user.name, info.verb, info.api_group, info.resource, info.subresource, info.namespace, info.name
            );
            self.asked.lock().unwrap().push(question);
            let allowed = self.allowed.iter().any(|(verb, group, resource, name)| {
                *verb == info.verb
                    && *group == info.api_group
                    && *resource == info.resource
                    && (*name == "*" || *name == info.name)
            });
            Ok(if allowed { Decision::Allow } else { Decision::Deny("no RBAC policy matched".into()) })
        })
    }
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
    }
    headers
}

fn list_crontabs() -> RequestInfo {
    let gv = crate::core::gvr::GroupVersion::new("stable.example.com", "v1");
    let path = crate::core::paths::collection_path(&gv, Some("a"), "crontabs");
    RequestInfo::parse(&http::Method::GET, &path, &Query::default()).unwrap()
}

fn alice() -> UserInfo {
    UserInfo::new("alice", vec!["system:authenticated".into()])
}

async fn impersonate(
    rules: Rules,
    pairs: &[(&str, &str)],
) -> (Result<(UserInfo, &'static str), ImpersonationError>, Vec<String>) {
    let rules = Arc::new(rules);
    let impersonation = Impersonation::new(rules.clone());
    let wanted = take_wanted_user(&mut headers(pairs)).unwrap().unwrap();
    let result = impersonation.impersonate(&alice(), &list_crontabs(), &wanted).await;
    let asked = rules.asked.lock().unwrap().clone();
    (result, asked)
}

#[test]
fn headers_make_the_wanted_user_and_are_removed() {
    let mut sent = headers(&[
        ("Impersonate-User", "bob"),
        ("Impersonate-Uid", "b-1"),
        ("Impersonate-Group", "devs"),
        ("Impersonate-Group", "ops"),
        ("Impersonate-Extra-Scopes", "view"),
        ("Impersonate-Extra-Scopes", "edit"),
        ("Impersonate-Extra-acme.io%2fteam", "blue"),
        ("Accept", "application/json"),
    ]);
    let wanted = take_wanted_user(&mut sent).unwrap().unwrap();
    assert_eq!(wanted.name, "bob");
    assert_eq!(wanted.uid, "b-1");
    assert_eq!(wanted.groups, Some(vec!["devs".to_string(), "ops".to_string()]));
    let extra = wanted.extra.unwrap();
    assert_eq!(extra["scopes"], vec!["view".to_string(), "edit".to_string()]);
    assert_eq!(extra["acme.io/team"], vec!["blue".to_string()]);
    assert_eq!(sent.keys().map(|k| k.as_str()).collect::<Vec<_>>(), vec!["accept"]);

    assert_eq!(take_wanted_user(&mut headers(&[("Accept", "x")])), Ok(None));
    assert_eq!(take_wanted_user(&mut headers(&[("Impersonate-User", "")])), Ok(None));
    let refused = take_wanted_user(&mut headers(&[("Impersonate-Group", "devs"), ("Impersonate-Extra-K", "v")]));
    assert_eq!(
        refused,
        Err(ImpersonationError::BadRequest(
            "requested &user.DefaultInfo{Name:\"\", UID:\"\", Groups:[]string{\"devs\"}, Extra:map[string][]string{\"k\":[]string{\"v\"}}} without impersonating a user name".into()
        ))
    );
    let refused = take_wanted_user(&mut headers(&[("Impersonate-Uid", "u")]));
    assert_eq!(
        refused,
        Err(ImpersonationError::BadRequest(
            "requested &user.DefaultInfo{Name:\"\", UID:\"u\", Groups:[]string(nil), Extra:map[string][]string(nil)} without impersonating a user name".into()
        ))
    );
}

#[tokio::test]
async fn legacy_impersonation_asks_impersonate_on_each_field_after_the_constrained_mode_said_no() {
    let rules = Rules {
        allowed: vec![
            ("impersonate", "", "users", "bob"),
            ("impersonate", "", "groups", "devs"),
            ("impersonate", "authentication.k8s.io", "uids", "b-1"),
            ("impersonate", "authentication.k8s.io", "userextras", "view"),
        ],
        ..Rules::default()
    };
    let pairs = [
        ("Impersonate-User", "bob"),
        ("Impersonate-Uid", "b-1"),
        ("Impersonate-Group", "devs"),
        ("Impersonate-Extra-Scopes", "view"),
    ];
    let (result, asked) = impersonate(rules, &pairs).await;
    let (user, mode) = result.unwrap();
    assert_eq!(mode, "legacy");
    assert_eq!(user.name, "bob");
    assert_eq!(user.uid, "b-1");
    assert_eq!(user.groups, vec!["devs".to_string(), "system:authenticated".to_string()]);
    assert_eq!(user.extra["scopes"], vec!["view".to_string()]);
    assert_eq!(
        asked,
        vec![
            "alice impersonate-on:user-info:list stable.example.com/crontabs/ a/",
            "alice impersonate /users/ /bob",
            "alice impersonate authentication.k8s.io/uids/ /b-1",
            "alice impersonate /groups/ /devs",
            "alice impersonate authentication.k8s.io/userextras/scopes /view",
        ]
    );
}

#[tokio::test]
async fn without_any_right_the_first_refusal_is_the_constrained_modes() {
    let (result, _) = impersonate(Rules::default(), &[("Impersonate-User", "bob")]).await;
    let Err(ImpersonationError::Forbidden(refusal)) = result else { panic!("{result:?}") };
    let Refusal { requestor, attributes, reason } = *refusal;
    assert_eq!(requestor.name, "alice");
    assert_eq!(
        (
            attributes.verb.as_str(),
            attributes.api_group.as_str(),
            attributes.resource.as_str(),
            attributes.namespace.as_str()
        ),
        ("impersonate-on:user-info:list", "stable.example.com", "crontabs", "a")
    );
    assert_eq!(reason, "no RBAC policy matched");
}

#[tokio::test]
async fn the_mode_that_last_allowed_a_requestor_is_asked_first() {
    let rules = Arc::new(Rules { allowed: vec![("impersonate", "", "users", "bob")], ..Rules::default() });
    let impersonation = Impersonation::new(rules.clone());
    let bob = take_wanted_user(&mut headers(&[("Impersonate-User", "bob")])).unwrap().unwrap();
    assert_eq!(impersonation.impersonate(&alice(), &list_crontabs(), &bob).await.unwrap().1, "legacy");
    // Carol is no one alice may impersonate: legacy (remembered) refuses first now.
    let carol = take_wanted_user(&mut headers(&[("Impersonate-User", "carol")])).unwrap().unwrap();
    let refusal = impersonation.impersonate(&alice(), &list_crontabs(), &carol).await.unwrap_err();
    let ImpersonationError::Forbidden(refusal) = refusal else { panic!("{refusal:?}") };
    let attributes = refusal.attributes;
    assert_eq!(
        (attributes.verb.as_str(), attributes.resource.as_str(), attributes.name.as_str()),
        ("impersonate", "users", "carol")
    );
}

#[tokio::test]
async fn constrained_modes_impersonate_users_and_service_accounts() {
    let rules = Rules {
        allowed: vec![
            ("impersonate-on:user-info:list", "stable.example.com", "crontabs", "*"),
            ("impersonate:user-info", "authentication.k8s.io", "users", "bob"),
            ("impersonate:user-info", "authentication.k8s.io", "groups", "*"),
        ],
        ..Rules::default()
    };
    let groups = [
        ("Impersonate-User", "bob"),
        ("Impersonate-Group", "a"),
        ("Impersonate-Group", "b"),
        ("Impersonate-Group", "c"),
        ("Impersonate-Group", "d"),
    ];
    let (result, asked) = impersonate(rules, &groups).await;
    let (user, mode) = result.unwrap();
    assert_eq!(mode, "user-info");
    assert_eq!(user.groups, ["a", "b", "c", "d", "system:authenticated"]);
    // Four groups or more: all of them asked for at once first.
    assert_eq!(asked.last().unwrap(), "alice impersonate:user-info authentication.k8s.io/groups/ /*");

    let rules = Rules {
        allowed: vec![
            ("impersonate-on:serviceaccount:list", "stable.example.com", "crontabs", "*"),
            ("impersonate:serviceaccount", "authentication.k8s.io", "serviceaccounts", "robot"),
        ],
        ..Rules::default()
    };
    let (result, asked) = impersonate(rules, &[("Impersonate-User", "system:serviceaccount:ops:robot")]).await;
    let (user, mode) = result.unwrap();
    assert_eq!(mode, "serviceaccount");
    assert_eq!(user.groups, ["system:serviceaccounts", "system:serviceaccounts:ops", "system:authenticated"]);
    assert_eq!(asked[1], "alice impersonate:serviceaccount authentication.k8s.io/serviceaccounts/ ops/robot");
}

#[tokio::test]
async fn constrained_modes_refuse_what_legacy_impersonation_never_checked() {
    let allowed = vec![
        ("impersonate-on:user-info:list", "stable.example.com", "crontabs", "*"),
        ("impersonate:user-info", "authentication.k8s.io", "users", "*"),
        ("impersonate:user-info", "authentication.k8s.io", "groups", "*"),
        ("impersonate:user-info", "authentication.k8s.io", "userextras", "*"),
    ];
    for (header, value, expected) in [
        ("Impersonate-Group", "system:masters", "impersonating the system:masters group is not allowed"),
        ("Impersonate-Group", "", "impersonating the empty string group is not allowed"),
        (
            "Impersonate-Extra-Scopes",
            "x",
            "impersonating an invalid key in extra is not allowed: extra.key: Invalid value: \"scopes\": must be a domain-prefixed path (such as \"acme.io/foo\")",
        ),
        (
            "Impersonate-Extra-acme.io%2f%54eam",
            "x",
            "impersonating a non-lowercase key in extra is not allowed: \"acme.io/Team\"",
        ),
        ("Impersonate-Extra-acme.io%2Fteam", "", "impersonating the empty string value in extra is not allowed"),
        // Both halves wrong: an aggregate of both, as kube-apiserver 1.36 words it.
        (
            "Impersonate-Extra-a_b.io%2Fa%20b",
            "x",
            "impersonating an invalid key in extra is not allowed: [extra.key: Invalid value: \"a_b.io\": a lowercase \
             RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end \
             with an alphanumeric character (e.g. 'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), extra.key: Invalid value: \"a b\": \
             Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')]",
        ),
    ] {
        let rules = Rules { allowed: allowed.clone(), ..Rules::default() };
        let (result, _) = impersonate(rules, &[("Impersonate-User", "bob"), (header, value)]).await;
        let Err(ImpersonationError::Forbidden(refusal)) = result else { panic!("{header}: {result:?}") };
        assert_eq!(refusal.reason, expected, "{header}: {value}");
    }
}

#[tokio::test]
async fn nodes_and_anonymous() {
    let rules = Rules {
        allowed: vec![
            ("impersonate-on:arbitrary-node:list", "stable.example.com", "crontabs", "*"),
            ("impersonate:arbitrary-node", "authentication.k8s.io", "nodes", "n1"),
        ],
        ..Rules::default()
    };
    let (result, _) = impersonate(rules, &[("Impersonate-User", "system:node:n1")]).await;
    let (user, mode) = result.unwrap();
    assert_eq!(
        (mode, user.groups.as_slice()),
        ("arbitrary-node", ["system:nodes".to_string(), "system:authenticated".to_string()].as_slice())
    );

    let rules = Rules { allowed: vec![("impersonate", "", "users", "system:anonymous")], ..Rules::default() };
    let (result, _) = impersonate(rules, &[("Impersonate-User", "system:anonymous")]).await;
    assert_eq!(result.unwrap().0.groups, ["system:unauthenticated"]);
}

#[tokio::test]
async fn a_service_account_on_a_node_impersonates_that_node_for_any_node() {
    let rules = Arc::new(Rules {
        allowed: vec![
            ("impersonate-on:associated-node:list", "stable.example.com", "crontabs", "*"),
            ("impersonate:associated-node", "authentication.k8s.io", "nodes", "*"),
        ],
        ..Rules::default()
    });
    let impersonation = Impersonation::new(rules.clone());
    let mut agent = UserInfo::new("system:serviceaccount:kube-system:agent", vec![]);
    agent.extra.insert(NODE_NAME_KEY.into(), vec!["n1".into()]);
    agent.extra.insert("authentication.kubernetes.io/pod-name".into(), vec!["agent-x".into()]);
    let wanted = take_wanted_user(&mut headers(&[("Impersonate-User", "system:node:n1")])).unwrap().unwrap();
    let (user, mode) = impersonation.impersonate(&agent, &list_crontabs(), &wanted).await.unwrap();
    assert_eq!((user.name.as_str(), mode), ("system:node:n1", "associated-node"));
    assert_eq!(
        rules.asked.lock().unwrap()[1],
        "system:serviceaccount:kube-system:agent impersonate:associated-node authentication.k8s.io/nodes/ /*"
    );
    // Another node is not its own.
    let other = take_wanted_user(&mut headers(&[("Impersonate-User", "system:node:n2")])).unwrap().unwrap();
    assert!(impersonation.impersonate(&agent, &list_crontabs(), &other).await.is_err());
}
