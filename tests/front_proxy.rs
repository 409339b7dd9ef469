//! HTTP-level checks of who the server believes: front-proxy headers only from a verified,
//! allowed proxy certificate; CA rotation through the cluster's ConfigMap without a restart;
//! bearer tokens by TokenReview; the aggregator's discovery probe; and a start-up that cannot
//! read the authentication ConfigMap.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crd_apiserver::cli::pki::{Authority, Leaf, Pem};
use support::cluster::TestCluster;
use support::control_plane::ControlPlane;
use support::control_plane::rbac::User;
use support::http::{Client, Response};
use support::{CRONTAB_CRD, TestServer};

const LIST: &str = "/apis/stable.example.com/v1/namespaces/a/crontabs";
const GROUP_VERSION: &str = "/apis/stable.example.com/v1";

/// Writes a certificate and key where the test client can read them.
fn files(cluster: &TestCluster, name: &str, pem: &Pem) -> (PathBuf, PathBuf) {
    let cert = cluster.server.write(&format!("{name}.crt"), &pem.cert);
    let key = cluster.server.write(&format!("{name}.key"), &pem.key);
    (cert, key)
}

fn as_proxy(cluster: &TestCluster, name: &str, pem: &Pem, path: &str, user: &str, groups: &[&str]) -> Response {
    let (cert, key) = files(cluster, name, pem);
    let mut client = Client::new(&cluster.server, Some((&cert, &key))).header("X-Remote-User", user);
    for group in groups {
        client = client.header("X-Remote-Group", group);
    }
    client.get(path).unwrap()
}

fn proxy_leaf(ca: &Authority, cn: &str, expired: bool) -> Pem {
    ca.issue(&Leaf { common_name: cn.into(), client: true, expired, ..Leaf::default() }).unwrap()
}

#[test]
fn identity_headers_are_believed_only_from_the_front_proxy() {
    let cluster = TestCluster::start(&[CRONTAB_CRD]);
    let plane = &cluster.plane;
    let admin = ["system:masters"];

    // The real front proxy: believed.
    let ok = as_proxy(&cluster, "proxy", &plane.front_proxy_client, LIST, "system:admin", &admin);
    assert_eq!(ok.status, 200, "{}", ok.text());

    // No certificate: the headers are ignored and the request is anonymous.
    let anonymous = Client::new(&cluster.server, None)
        .header("X-Remote-User", "system:admin")
        .header("X-Remote-Group", "system:masters")
        .get(LIST)
        .unwrap();
    assert_eq!(anonymous.status, 403);
    assert_eq!(
        anonymous.json()["message"],
        "crontabs.stable.example.com is forbidden: User \"system:anonymous\" cannot list resource \"crontabs\" in API group \"stable.example.com\" in the namespace \"a\""
    );

    // A certificate from another CA, an expired or not yet valid one, one whose CN is not
    // allowed, or one whose extended key usages leave out client authentication (as Go's
    // x509 verification refuses it): refused.
    let other_ca = Authority::new("front-proxy-ca").unwrap();
    let proxy_ca = &plane.front_proxy_ca;
    let issue = |leaf: Leaf| proxy_ca.issue(&Leaf { common_name: "front-proxy-client".into(), ..leaf }).unwrap();
    for (name, pem) in [
        ("other-ca", proxy_leaf(&other_ca, "front-proxy-client", false)),
        ("expired", proxy_leaf(proxy_ca, "front-proxy-client", true)),
        ("not-yet-valid", issue(Leaf { client: true, not_yet_valid: true, ..Leaf::default() })),
        ("wrong-cn", proxy_leaf(proxy_ca, "mallory", false)),
        ("server-auth-only", issue(Leaf { server: true, ..Leaf::default() })),
    ] {
        let refused = as_proxy(&cluster, name, &pem, LIST, "system:admin", &admin);
        assert_eq!(refused.status, 401, "{name}: {}", refused.text());
        assert_eq!(refused.json()["reason"], "Unauthorized", "{name}");
    }

    // A certificate without extended key usages is good for any use, client authentication
    // included, as Go's verification has it: believed.
    let no_usages = as_proxy(&cluster, "no-eku", &issue(Leaf::default()), LIST, "system:admin", &admin);
    assert_eq!(no_usages.status, 200, "{}", no_usages.text());

    // The proxy's certificate naming nobody: the requestheader authenticator passes, and the
    // certificate is not a user of the client CA either: refused.
    let (cert, key) = files(&cluster, "proxy", &plane.front_proxy_client);
    let nobody = Client::new(&cluster.server, Some((&cert, &key))).get(LIST).unwrap();
    assert_eq!(nobody.status, 401, "{}", nobody.text());

    // A client certificate from the cluster's client CA (learned from the ConfigMap) is a user
    // of its own; its identity headers mean nothing.
    let carol = plane.client_ca.issue(&Leaf { common_name: "carol".into(), client: true, ..Leaf::default() }).unwrap();
    let response = as_proxy(&cluster, "carol", &carol, LIST, "system:admin", &admin);
    assert_eq!(response.status, 403);
    assert!(response.text().contains("User \\\"carol\\\" cannot list"), "{}", response.text());
}

#[test]
fn rotating_the_front_proxy_ca_needs_no_restart() {
    let mut cluster = TestCluster::start(&[CRONTAB_CRD]);
    let bob = cluster.user("bob", &[]);
    cluster.grant("bob", &["*"], "stable.example.com", &["*"], None);
    cluster.kubectl_ok(&bob, &["get", "crontabs", "-n", "a"]);

    let old = cluster.plane.rotate_front_proxy_ca();
    // The server follows the ConfigMap's watch: soon the old proxy certificate is refused.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = as_proxy(&cluster, "old-proxy", &old, LIST, "system:admin", &["system:masters"]);
        if response.status == 401 {
            break;
        }
        assert!(Instant::now() < deadline, "the old proxy certificate is still accepted");
        std::thread::sleep(Duration::from_millis(100));
    }
    let new = cluster.plane.front_proxy_client.clone();
    assert_eq!(as_proxy(&cluster, "new-proxy", &new, LIST, "system:admin", &["system:masters"]).status, 200);
    cluster.kubectl_ok(&bob, &["get", "crontabs", "-n", "a"]);

    // Allowed names follow the ConfigMap too.
    let mut data = cluster.plane.standard_configmap();
    data.insert("requestheader-allowed-names".into(), "[\"aggregator\"]".into());
    cluster.plane.set_auth_configmap(Some(data));
    let deadline = Instant::now() + Duration::from_secs(60);
    while as_proxy(&cluster, "new-proxy", &new, LIST, "system:admin", &["system:masters"]).status != 401 {
        assert!(Instant::now() < deadline, "the allowed names did not change");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(cluster.server.log().contains("authentication settings from configmap"), "{}", cluster.server.log());
}

#[test]
fn bearer_tokens_are_reviewed_and_cached() {
    let cluster = TestCluster::start(&[CRONTAB_CRD]);
    cluster.plane.add_user("carol-token", User::new("carol", &["auditors"]));
    cluster.grant("carol", &["list"], "stable.example.com", &["crontabs"], None);
    let carol = Client::new(&cluster.server, None).header("Authorization", "Bearer carol-token");
    let before = cluster.plane.token_review_calls();
    assert_eq!(carol.get(LIST).unwrap().status, 200);
    assert_eq!(carol.get(LIST).unwrap().status, 200);
    assert_eq!(cluster.plane.token_review_calls(), before + 1, "the second request is answered from the cache");
    let spec = cluster.plane.sar_log().into_iter().find(|s| s["user"] == "carol").unwrap();
    assert_eq!(spec["groups"], serde_json::json!(["auditors", "system:authenticated"]));

    let forged = Client::new(&cluster.server, None).header("Authorization", "Bearer forged").get(LIST).unwrap();
    assert_eq!(forged.status, 401);
    assert_eq!(forged.json()["message"], "Unauthorized");
}

#[test]
fn the_aggregator_probe_is_answered_without_a_review() {
    let cluster = TestCluster::start(&[CRONTAB_CRD]);
    let before = cluster.plane.sar_calls();
    let probe = as_proxy(
        &cluster,
        "proxy",
        &cluster.plane.front_proxy_client,
        GROUP_VERSION,
        "system:kube-aggregator",
        &["system:masters", "system:authenticated"],
    );
    assert_eq!(probe.status, 200, "{}", probe.text());
    assert_eq!(probe.json()["kind"], "APIResourceList");
    assert_eq!(cluster.plane.sar_calls(), before, "system:masters needs no review");

    // The OpenAPI download comes as system:aggregator without groups: allowed by the review
    // because system:authenticated is added.
    let openapi =
        as_proxy(&cluster, "proxy", &cluster.plane.front_proxy_client, "/openapi/v3", "system:aggregator", &[]);
    assert_eq!(openapi.status, 200, "{}", openapi.text());
    assert!(openapi.json()["paths"]["apis/stable.example.com/v1"].is_object());
}

#[test]
fn an_unreadable_configmap_stops_the_server_unless_tolerated() {
    let plane = ControlPlane::start();
    plane.remove_binding("crd-apiserver:extension-apiserver-authentication-reader");
    let mut server = TestServer::prepare(&[CRONTAB_CRD], Some(plane.server_kubeconfig()));
    server.launch(&[]);
    assert!(!server.wait_exit(Duration::from_secs(30)), "the server must fail");
    let log = server.log();
    assert!(log.contains("cannot read configmap/extension-apiserver-authentication in kube-system"), "{log}");
    assert!(log.contains("RoleBinding in kube-system to the Role extension-apiserver-authentication-reader"), "{log}");
    // Quoted in the log line as klog quotes an error (`err="..."`).
    assert!(log.contains(r#"configmaps \"extension-apiserver-authentication\" is forbidden"#), "{log}");

    // Tolerated: the server starts, and front-proxy authentication begins once the binding
    // exists.
    server.spawn(&["--authentication-tolerate-lookup-failure"]);
    plane.register_backend(server.port, &server.pki.serving_ca());
    let proxy = &plane.front_proxy_client;
    let cert = server.write("proxy.crt", &proxy.cert);
    let key = server.write("proxy.key", &proxy.key);
    let client = Client::new(&server, Some((&cert, &key)))
        .header("X-Remote-User", "system:admin")
        .header("X-Remote-Group", "system:masters");
    // Without the cluster's settings nobody vouches for the headers: anonymous.
    let anonymous = client.get(LIST).unwrap();
    assert_eq!(anonymous.status, 403);
    assert!(anonymous.text().contains("system:anonymous"), "{}", anonymous.text());
    for rule in support::control_plane::rbac::default_rules() {
        if rule.binding == "crd-apiserver:extension-apiserver-authentication-reader" {
            plane.add_rule(rule);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.get(LIST).unwrap().status != 200 {
        assert!(Instant::now() < deadline, "the server never read the configmap: {}", server.log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn ready_only_once_the_authentication_settings_are_loaded() {
    let plane = ControlPlane::start();
    plane.state().configmaps_held.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut server = TestServer::prepare(&[CRONTAB_CRD], Some(plane.server_kubeconfig()));
    server.launch(&[]);
    let client = Client::new(&server, None);
    let deadline = Instant::now() + Duration::from_secs(60);
    let early = loop {
        if let Ok(response) = client.get("/readyz") {
            break response;
        }
        assert!(Instant::now() < deadline, "the server never listened: {}", server.log());
        std::thread::sleep(Duration::from_millis(20));
    };
    // Listening and alive at once, but not ready while the ConfigMap is being read: the
    // followers of the main apiserver have not all listed yet.
    assert_eq!(early.status, 500, "{}", early.text());
    assert_eq!(
        early.text(),
        "[+]ping ok\n[+]log ok\n[+]sled ok\n[-]informer-sync failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n"
    );
    assert_eq!(client.get("/livez").unwrap().status, 200);
    // Still not ready until the ConfigMap can be read.
    assert_eq!(client.get("/readyz").unwrap().status, 500);
    plane.state().configmaps_held.store(false, std::sync::atomic::Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.get("/readyz").unwrap().status != 200 {
        assert!(Instant::now() < deadline, "never ready: {}", server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The log said which check failed and why.
    assert!(
        server.log().contains("informers not started yet: [") && server.log().contains("*v1.ConfigMap"),
        "{}",
        server.log()
    );
}

#[test]
fn development_mode_needs_no_main_apiserver() {
    // No kubeconfig, no cluster: the development PKI's client and front-proxy CAs, allow-all.
    let server = TestServer::start(&[CRONTAB_CRD]);
    assert!(server.log().contains("development mode: every authenticated user may do everything"), "{}", server.log());
    assert_eq!(Client::admin(&server).get(LIST).unwrap().status, 200);
    let proxy = (server.pki.path("front-proxy-client.crt"), server.pki.path("front-proxy-client.key"));
    let proxied =
        Client::new(&server, Some((&proxy.0, &proxy.1))).header("X-Remote-User", "someone").get(LIST).unwrap();
    assert_eq!(proxied.status, 200, "{}", proxied.text());
    // Without credentials nobody is allowed, even in development mode.
    let anonymous = Client::new(&server, None).get(LIST).unwrap();
    assert_eq!(anonymous.status, 403);
    assert!(anonymous.text().contains("system:anonymous"));
}

#[test]
fn development_mode_believes_only_the_development_front_proxy() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let read = |file: &str| std::fs::read_to_string(server.pki.path(file)).unwrap();
    let proxy_ca = Authority::load(&read("front-proxy-ca.crt"), &read("front-proxy-ca.key")).unwrap();
    let ask = |cert: PathBuf, key: PathBuf| {
        Client::new(&server, Some((&cert, &key)))
            .header("X-Remote-User", "alice")
            .header("X-Remote-Group", "system:authenticated")
            .get(LIST)
            .unwrap()
    };

    // The proxy certificate the development PKI wrote is the front proxy.
    let proxy = ask(server.pki.path("front-proxy-client.crt"), server.pki.path("front-proxy-client.key"));
    assert_eq!(proxy.status, 200, "{}", proxy.text());

    // Another certificate from the same CA is not: its identity headers are refused.
    let mallory = proxy_leaf(&proxy_ca, "mallory", false);
    let (cert, key) = (server.write("mallory.crt", &mallory.cert), server.write("mallory.key", &mallory.key));
    let refused = ask(cert, key);
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert_eq!(refused.json()["reason"], "Unauthorized");
}
