//! Impersonation sent to the server directly (`kubectl --as`, `--as-group`, `--as-uid`, raw
//! `Impersonate-*` headers), decided by SubjectAccessReviews the control-plane double answers
//! from its rule table, as k8s.io/apiserver 1.36 decides it: constrained impersonation first,
//! then the legacy `impersonate` verb; the request then runs as the impersonated user.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::json;

use support::cluster::TestCluster;
use support::control_plane::rbac::{Rule, Subject, User};
use support::http::Client;
use support::{CRONTAB_CRD, kubectl_with, stderr, stdout, table};

const CRONTAB: &str = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: nightly\nspec:\n  cronSpec: '0 0 * * *'\n  image: backup\n";

/// A kubeconfig that reaches the server itself (not the aggregator) with a user's token.
fn direct_kubeconfig(cluster: &TestCluster, name: &str) -> PathBuf {
    let token = format!("{name}-direct-token");
    cluster.plane.add_user(&token, User::new(name, &[]));
    let ca = std::fs::read(cluster.server.pki.serving_ca()).unwrap();
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: direct\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority-data: {ca}\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: direct\n  context:\n    cluster: direct\n    user: user\n    namespace: a\ncurrent-context: direct\n",
        cluster.server.port
    );
    let path = cluster.server.dir.path().join(format!("{name}-direct.kubeconfig"));
    std::fs::write(&path, text).unwrap();
    path
}

fn started() -> TestCluster {
    let cluster = TestCluster::start(&[CRONTAB_CRD]);
    cluster.plane.state().create_namespace("a").unwrap();
    // Bob may do everything with crontabs in `a`; alice nothing, but impersonate bob (and the
    // group `devs`) the legacy way.
    cluster.grant("bob", &["*"], "stable.example.com", &["crontabs"], Some(&["a"]));
    let alice = || vec![Subject::User("alice".into())];
    cluster
        .plane
        .add_rule(Rule::resources("alice-as-bob", alice(), &["impersonate"], &[""], &["users"]).named(&["bob"]));
    cluster
        .plane
        .add_rule(Rule::resources("alice-as-devs", alice(), &["impersonate"], &[""], &["groups"]).named(&["devs"]));
    cluster
}

fn kubectl(cluster: &TestCluster, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> std::process::Output {
    kubectl_with(kubeconfig, cluster.server.dir.path(), args, stdin)
}

#[test]
fn kubectl_as_runs_the_request_as_the_impersonated_user_when_allowed() {
    let cluster = started();
    let alice = direct_kubeconfig(&cluster, "alice");

    // Alice alone may not list; as bob she may, and what she creates is created by bob.
    let out = kubectl(&cluster, &alice, &["get", "crontabs"], None);
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): crontabs.stable.example.com is forbidden: User \"alice\" cannot list \
         resource \"crontabs\" in API group \"stable.example.com\" in the namespace \"a\""
    );
    let out = kubectl(&cluster, &alice, &["--as", "bob", "create", "-f", "-"], Some(CRONTAB));
    assert!(out.status.success(), "{}\n{}", stderr(&out), cluster.server.log());
    let rows = table(&stdout(&kubectl(&cluster, &alice, &["--as", "bob", "get", "crontabs"], None)));
    assert_eq!(rows[1][0], "nightly");
    let out =
        kubectl(&cluster, &alice, &["--as", "bob", "--as-group", "devs", "get", "ct", "nightly", "-o", "name"], None);
    assert_eq!(stdout(&out).trim(), "crontab.stable.example.com/nightly", "{}", stderr(&out));

    // The reviews: alice asked to impersonate (the constrained mode first, then legacy), the
    // request itself asked as bob with the groups he was given.
    let log = cluster.plane.sar_log();
    let impersonate = log
        .iter()
        .find(|s| s["user"] == "alice" && s["resourceAttributes"]["verb"] == "impersonate")
        .expect("alice's impersonate review");
    assert_eq!(
        impersonate["resourceAttributes"],
        json!({"verb": "impersonate", "version": "v1", "resource": "users", "name": "bob"})
    );
    // (kubectl's discovery came first: the constrained mode was asked for it and refused, and
    // the legacy mode, which allowed, is asked first for alice from then on.)
    let impersonating = |s: &&serde_json::Value| {
        s["user"] == "alice"
            && [&s["resourceAttributes"]["verb"], &s["nonResourceAttributes"]["verb"]]
                .iter()
                .any(|v| v.as_str().is_some_and(|v| v.starts_with("impersonate")))
    };
    let first = log.iter().find(impersonating).unwrap();
    assert_eq!(first["nonResourceAttributes"]["verb"], "impersonate-on:user-info:get", "{first}");
    let as_bob = log
        .iter()
        .find(|s| s["user"] == "bob" && s["resourceAttributes"]["verb"] == "create")
        .expect("bob's create review");
    assert_eq!(as_bob["groups"], json!(["system:authenticated"]));
    assert!(log.iter().any(|s| s["user"] == "bob" && s["groups"] == json!(["devs", "system:authenticated"])));
}

#[test]
fn impersonation_that_is_not_allowed_is_refused_in_kubernetes_words() {
    let cluster = started();
    let alice = direct_kubeconfig(&cluster, "alice");
    // `get --raw`: no discovery before the request, whose refusal kubectl prints.
    let list = "/apis/stable.example.com/v1/namespaces/a/crontabs";
    let refused = |args: &[&str]| {
        let args: Vec<&str> = args.iter().copied().chain(["get", "--raw", list]).collect();
        let out = kubectl(&cluster, &alice, &args, None);
        assert!(!out.status.success(), "{args:?} succeeded");
        stderr(&out).trim().to_string()
    };
    // Nothing allows carol: the first refusal, the constrained user-info mode's, is the answer.
    assert_eq!(
        refused(&["--as", "carol"]),
        "Error from server (Forbidden): crontabs.stable.example.com is forbidden: User \"alice\" cannot \
         impersonate-on:user-info:list resource \"crontabs\" in API group \"stable.example.com\" in the namespace \"a\""
    );
    // Once the legacy mode allowed alice something, it is asked first for her.
    let out = kubectl(&cluster, &alice, &["--as", "bob", "get", "--raw", list], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        refused(&["--as", "carol"]),
        "Error from server (Forbidden): users \"carol\" is forbidden: User \"alice\" cannot impersonate resource \
         \"users\" in API group \"\" at the cluster scope"
    );
    assert_eq!(
        refused(&["--as", "bob", "--as-group", "ops"]),
        "Error from server (Forbidden): groups \"ops\" is forbidden: User \"alice\" cannot impersonate resource \
         \"groups\" in API group \"\" at the cluster scope"
    );
    assert_eq!(
        refused(&["--as", "bob", "--as-uid", "b-1"]),
        "Error from server (Forbidden): uids.authentication.k8s.io \"b-1\" is forbidden: User \"alice\" cannot \
         impersonate resource \"uids\" in API group \"authentication.k8s.io\" at the cluster scope"
    );
    // A service account: its own resource and namespace.
    assert_eq!(
        refused(&["--as", "system:serviceaccount:ops:robot"]),
        "Error from server (Forbidden): serviceaccounts \"robot\" is forbidden: User \"alice\" cannot impersonate \
         resource \"serviceaccounts\" in API group \"\" in the namespace \"ops\""
    );
    // Nothing was created by any of them.
    let out = kubectl(&cluster, &alice, &["--as", "bob", "get", "crontabs", "-o", "name"], None);
    assert_eq!(stdout(&out).trim(), "");
}

#[test]
fn impersonation_headers_without_a_user_are_a_bad_request() {
    let cluster = started();
    let token = "alice-raw-token";
    cluster.plane.add_user(token, User::new("alice", &[]));
    let client = Client::new(&cluster.server, None).header("Authorization", &format!("Bearer {token}"));
    let refused = client
        .clone()
        .header("Impersonate-Group", "devs")
        .get("/apis/stable.example.com/v1/namespaces/a/crontabs")
        .unwrap();
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert_eq!(
        refused.json()["message"],
        "requested &user.DefaultInfo{Name:\"\", UID:\"\", Groups:[]string{\"devs\"}, Extra:map[string][]string(nil)} \
         without impersonating a user name"
    );
    // With the user, the group goes with it; a path outside the API is impersonated too.
    let allowed = client.header("Impersonate-User", "bob").header("Impersonate-Group", "devs").get("/apis").unwrap();
    assert_eq!(allowed.status, 200, "{}", allowed.text());
    assert!(cluster.plane.sar_log().iter().any(|s| s["user"] == "bob"
        && s["groups"] == json!(["devs", "system:authenticated"])
        && s["nonResourceAttributes"]["path"] == "/apis"));
}

#[test]
fn through_the_aggregator_the_main_apiserver_impersonates_and_the_server_sees_the_user() {
    let cluster = started();
    let alice = cluster.user("alice", &[]);
    let out = cluster.kubectl_stdin(&alice, &["--as", "bob", "create", "-n", "a", "-f", "-"], CRONTAB);
    assert!(out.status.success(), "{}", stderr(&out));
    // The aggregator proxied bob, without the impersonation headers.
    let proxied = cluster.plane.proxied_headers();
    let create = proxied.iter().rev().find(|h| h.iter().any(|(k, v)| k == "x-remote-user" && v == "bob")).unwrap();
    assert!(!create.iter().any(|(k, _)| k.starts_with("impersonate-")), "{create:?}");
    // Refused by the main apiserver in the very words the server uses when asked directly.
    let list = "/apis/stable.example.com/v1/namespaces/a/crontabs";
    let out = cluster.kubectl(&alice, &["--as", "bob", "--as-group", "ops", "get", "--raw", list]);
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): groups \"ops\" is forbidden: User \"alice\" cannot impersonate resource \
         \"groups\" in API group \"\" at the cluster scope"
    );
}

#[test]
fn constrained_impersonation_runs_as_the_user_and_refuses_what_kubernetes_refuses() {
    let cluster = started();
    // Alice may list crontabs as anyone of user-info's kind, impersonate carol and any group.
    let alice_rule = |name: &str, verbs: &[&str], group: &str, resources: &[&str]| {
        Rule::resources(name, vec![Subject::User("alice".into())], verbs, &[group], resources)
    };
    cluster.plane.add_rule(alice_rule(
        "alice-on-list",
        &["impersonate-on:user-info:list"],
        "stable.example.com",
        &["crontabs"],
    ));
    cluster.plane.add_rule(
        alice_rule("alice-as-carol", &["impersonate:user-info"], "authentication.k8s.io", &["users"]).named(&["carol"]),
    );
    cluster.plane.add_rule(alice_rule(
        "alice-as-groups",
        &["impersonate:user-info"],
        "authentication.k8s.io",
        &["groups"],
    ));
    let direct = direct_kubeconfig(&cluster, "alice");
    let aggregated = cluster.user("alice", &[]);
    let list = "/apis/stable.example.com/v1/namespaces/a/crontabs";
    // The same words from the server asked directly and from kube-apiserver (the double) in
    // front of it; checked against a real kube-apiserver 1.36.2.
    for kubeconfig in [&direct, &aggregated] {
        let out = kubectl(&cluster, kubeconfig, &["--as", "carol", "get", "--raw", list], None);
        assert_eq!(
            stderr(&out).trim(),
            "Error from server (Forbidden): crontabs.stable.example.com is forbidden: User \"carol\" cannot list \
             resource \"crontabs\" in API group \"stable.example.com\" in the namespace \"a\"",
            "impersonated, carol herself may not list"
        );
        let out = kubectl(
            &cluster,
            kubeconfig,
            &["--as", "carol", "--as-group", "system:masters", "get", "--raw", list],
            None,
        );
        assert_eq!(
            stderr(&out).trim(),
            "Error from server (Forbidden): groups.authentication.k8s.io \"system:masters\" is forbidden: User \
             \"alice\" cannot impersonate:user-info resource \"groups\" in API group \"authentication.k8s.io\" at the \
             cluster scope: impersonating the system:masters group is not allowed"
        );
        let out = kubectl(&cluster, kubeconfig, &["--as", "carol", "--as-group=", "get", "--raw", list], None);
        assert_eq!(
            stderr(&out).trim(),
            "Error from server (Forbidden): groups.authentication.k8s.io is forbidden: User \"alice\" cannot \
             impersonate:user-info resource \"groups\" in API group \"authentication.k8s.io\" at the cluster scope: \
             impersonating the empty string group is not allowed"
        );
    }
    // Extra with a key that is no domain-prefixed path: the Status as kube-apiserver writes it.
    let token = "alice-raw-token";
    cluster.plane.add_user(token, User::new("alice", &[]));
    let refused = Client::new(&cluster.server, None)
        .header("Authorization", &format!("Bearer {token}"))
        .header("Impersonate-User", "carol")
        .header("Impersonate-Extra-Scopes", "view")
        .get(list)
        .unwrap();
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(
        refused.json(),
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden",
            "code": 403, "details": {"group": "authentication.k8s.io", "kind": "userextras"},
            "message": "userextras.authentication.k8s.io is forbidden: User \"alice\" cannot impersonate:user-info \
                        resource \"userextras\" in API group \"authentication.k8s.io\" at the cluster scope: \
                        impersonating an invalid key in extra is not allowed: extra.key: Invalid value: \"scopes\": \
                        must be a domain-prefixed path (such as \"acme.io/foo\")"
        })
    );
}
