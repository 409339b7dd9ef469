//! Behind kube-aggregator: real kubectl through the control-plane double, authorization by
//! SubjectAccessReview (cached; an outage never allows), and what reaches the server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::Duration;

use support::cluster::TestCluster;
use support::control_plane::rbac::User;
use support::{CRONTAB_CRD, stderr, table};

const CRONTAB: &str = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: nightly\nspec:\n  cronSpec: '0 0 * * *'\n  image: backup\n";

fn started() -> TestCluster {
    let cluster = TestCluster::start_with(&[CRONTAB_CRD], &["--authorization-webhook-cache-authorized-ttl=10s"]);
    cluster.grant("alice", &["get", "list", "watch"], "stable.example.com", &["crontabs"], Some(&["a"]));
    cluster.grant("bob", &["*"], "stable.example.com", &["*"], None);
    for namespace in ["a", "b"] {
        cluster.plane.state().create_namespace(namespace).unwrap();
    }
    cluster
}

#[test]
fn alice_reads_in_her_namespace_and_bob_does_everything() {
    let cluster = started();
    let alice = cluster.user("alice", &["developers"]);
    let bob = cluster.user("bob", &[]);

    // Discovery through the aggregator lists the server's resources.
    let resources = table(&cluster.kubectl_ok(&bob, &["api-resources", "--no-headers"]));
    let crontabs = resources.iter().find(|r| r[0] == "crontabs").expect("crontabs listed");
    assert_eq!(crontabs[1..], ["ct", "stable.example.com/v1", "true", "CronTab"]);

    let out = cluster.kubectl_stdin(&alice, &["create", "-n", "a", "-f", "-"], CRONTAB);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): error when creating \"STDIN\": crontabs.stable.example.com is forbidden: \
         User \"alice\" cannot create resource \"crontabs\" in API group \"stable.example.com\" in the namespace \"a\""
    );
    let out = cluster.kubectl_stdin(&bob, &["create", "-n", "a", "-f", "-"], CRONTAB);
    assert!(out.status.success(), "{}", stderr(&out));

    let rows = table(&cluster.kubectl_ok(&alice, &["get", "crontabs", "-n", "a"]));
    assert_eq!(rows[1][0], "nightly");
    assert_eq!(
        cluster.kubectl_ok(&alice, &["get", "ct", "nightly", "-n", "a", "-o", "jsonpath={.spec.image}"]),
        "backup"
    );
    let out = cluster.kubectl(&alice, &["get", "crontabs", "-n", "b"]);
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): crontabs.stable.example.com is forbidden: User \"alice\" cannot list \
         resource \"crontabs\" in API group \"stable.example.com\" in the namespace \"b\""
    );
    let out = cluster.kubectl(&alice, &["delete", "crontab", "nightly", "-n", "a"]);
    assert!(
        stderr(&out)
            .contains("crontabs.stable.example.com \"nightly\" is forbidden: User \"alice\" cannot delete resource"),
        "{}",
        stderr(&out)
    );
    assert!(cluster.kubectl_ok(&bob, &["delete", "crontab", "nightly", "-n", "a"]).contains("deleted"));

    // The review the server asked for alice's create: the whole identity and every attribute.
    let create = cluster
        .plane
        .sar_log()
        .into_iter()
        .find(|s| s["user"] == "alice" && s["resourceAttributes"]["verb"] == "create")
        .expect("a review of alice's create");
    assert_eq!(create["groups"], serde_json::json!(["developers", "system:authenticated"]));
    assert_eq!(
        create["resourceAttributes"],
        serde_json::json!({"namespace": "a", "verb": "create", "group": "stable.example.com", "version": "v1", "resource": "crontabs"})
    );

    // What the aggregator sent: the user as headers, never the client's bearer token.
    let proxied = cluster.plane.proxied_headers();
    let alices: Vec<_> =
        proxied.iter().filter(|h| h.iter().any(|(k, v)| k == "x-remote-user" && v == "alice")).collect();
    assert!(!alices.is_empty());
    for headers in alices {
        assert!(!headers.iter().any(|(k, _)| k == "authorization"));
        let groups: Vec<&str> =
            headers.iter().filter(|(k, _)| k == "x-remote-group").map(|(_, v)| v.as_str()).collect();
        assert_eq!(groups, ["developers", "system:authenticated"]);
    }
}

#[test]
fn reviews_are_cached_for_the_ttl_and_an_outage_denies() {
    let cluster = started();
    let alice = cluster.user("alice", &[]);
    cluster.kubectl_ok(&alice, &["get", "crontabs", "-n", "a"]);
    let after_first = cluster.plane.sar_calls();
    assert!(after_first >= 1);
    cluster.kubectl_ok(&alice, &["get", "crontabs", "-n", "a"]);
    assert_eq!(cluster.plane.sar_calls(), after_first, "the second list is allowed from the cache");
    // The TTL was set to 10 s (two kubectl runs fit in it on a busy machine): once it has
    // passed, the server asks again.
    std::thread::sleep(Duration::from_millis(10_500));
    cluster.kubectl_ok(&alice, &["get", "crontabs", "-n", "a"]);
    assert_eq!(cluster.plane.sar_calls(), after_first + 1);

    // The main apiserver fails every review: a request not in the cache gets a 500, never
    // access.
    cluster.plane.set_sar_outage(true);
    let out = cluster.kubectl(&alice, &["get", "crontabs", "-n", "a", "--field-selector", "metadata.name=x"]);
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(text.starts_with("Error from server (InternalError): Internal error occurred: "), "{text}");
    cluster.plane.set_sar_outage(false);
    cluster.kubectl_ok(&alice, &["get", "crontabs", "-n", "a", "--field-selector", "metadata.name=x"]);
}

#[test]
fn aggregated_discovery_is_fetched_once_then_revalidated() {
    let cluster = started();
    let (status, first) = cluster.plane.aggregated_discovery();
    assert_eq!(status, 200);
    let group =
        first["items"].as_array().unwrap().iter().find(|i| i["metadata"]["name"] == "stable.example.com").unwrap();
    let crontabs = &group["versions"][0]["resources"][0];
    assert_eq!(crontabs["resource"], "crontabs");
    assert_eq!(
        crontabs["responseKind"],
        serde_json::json!({"group": "stable.example.com", "version": "v1", "kind": "CronTab"})
    );
    // The second fetch carries If-None-Match and the server answers 304.
    let (_, second) = cluster.plane.aggregated_discovery();
    assert_eq!(second, first);
    assert_eq!(cluster.plane.state().discovery_not_modified.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn the_namespace_controller_empties_a_deleted_namespace() {
    let cluster = started();
    let bob = cluster.user("bob", &[]);
    cluster.plane.state().create_namespace("doomed").unwrap();
    let out = cluster.kubectl_stdin(&bob, &["create", "-n", "doomed", "-f", "-"], CRONTAB);
    assert!(out.status.success(), "{}", stderr(&out));
    cluster.plane.state().delete_namespace("doomed").unwrap();
    assert_eq!(cluster.plane.run_namespace_controller("doomed"), Ok(0));
    assert!(!cluster.plane.state().objects.lock().unwrap().namespaces.contains_key("doomed"));
    let out = cluster.kubectl(&bob, &["get", "crontab", "nightly", "-n", "doomed"]);
    assert_eq!(stderr(&out).trim(), "Error from server (NotFound): crontabs.stable.example.com \"nightly\" not found");
    // The controller asked as itself, and the server reviewed it.
    assert!(
        cluster.plane.sar_log().iter().any(|s| s["user"] == "system:serviceaccount:kube-system:namespace-controller"
            && s["resourceAttributes"]["verb"] == "deletecollection")
    );
}

#[test]
fn extra_user_information_reaches_the_review() {
    let cluster = started();
    let mut user = User::new("dana", &["ops"]);
    user.extra.insert("example.com/team".into(), vec!["blue".into(), "green".into()]);
    user.extra.insert("scopes".into(), vec!["read".into()]);
    cluster.plane.add_user("dana-token", user);
    let dana = cluster.plane.token_kubeconfig("dana-token");
    let out = cluster.kubectl(&dana, &["get", "crontabs", "-n", "a"]);
    assert!(stderr(&out).contains("User \"dana\" cannot list resource \"crontabs\""), "{}", stderr(&out));
    let spec = cluster.plane.sar_log().into_iter().find(|s| s["user"] == "dana").unwrap();
    assert_eq!(spec["extra"], serde_json::json!({"example.com/team": ["blue", "green"], "scopes": ["read"]}));
    assert_eq!(spec["groups"], serde_json::json!(["ops", "system:authenticated"]));
}
