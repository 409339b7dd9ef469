//! Prometheus' view of a real server: the server runs with the serving certificate the chart
//! generates, behind the control-plane double; it is scraped exactly as the chart's rendered
//! ServiceMonitor says (HTTPS, path, the CA from the named Secret key, the TLS server name, the
//! bearer token of the service account the chart's metrics-reader role is bound to); the
//! scrape exposes every family of metrics.txt with its type and labels; the scrapes, labelled
//! as Prometheus labels a target, are fed to promtool, and every dashboard query must find
//! series in them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use crd_apiserver::definitions::load::parse_documents;
use http_body_util::{BodyExt, Empty};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

use crate::dashboard::promtool::{self, JOB};
use crate::support::cluster::TestCluster;
use crate::support::control_plane::ControlPlane;
use crate::support::control_plane::rbac::{Rule, Subject, User};
use crate::support::{CRONTAB_CRD, TestServer};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The chart as `helm install crd-apiserver ... --namespace crd-apiserver` renders it, with the
/// ServiceMonitor on and the reader role bound to kube-prometheus' Prometheus account.
fn render_chart() -> Vec<Value> {
    let crontabs =
        format!("definitions.inline.crontabs\\.yaml={}", root().join("manifests/examples/crontabs.yaml").display());
    let chart = root().join("manifests/helm/crd-apiserver");
    let out = std::process::Command::new(root().join(".tools/bin/helm"))
        .args(["template", "crd-apiserver", chart.to_str().unwrap(), "--namespace", "crd-apiserver"])
        .args(["--set-file", &crontabs, "--set", "metrics.serviceMonitor.enabled=true"])
        .args(["--set", "metrics.readerRole.bindServiceAccount.name=prometheus-k8s"])
        .args(["--set", "metrics.readerRole.bindServiceAccount.namespace=monitoring"])
        .env("HELM_CACHE_HOME", std::env::temp_dir().join("crd-apiserver-helm-cache"))
        .env("HELM_CONFIG_HOME", std::env::temp_dir().join("crd-apiserver-helm-config"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run helm ({e}): run hack/install-helm.sh (hack/test.sh does)"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    parse_documents(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// How the ServiceMonitor tells Prometheus to scrape, with what it points at resolved.
struct Scraper {
    port: u16,
    config: Arc<rustls::ClientConfig>,
    server_name: String,
    path: String,
    token: String,
}

impl Scraper {
    fn new(objects: &[Value], port: u16, token: &str) -> Scraper {
        let monitor = find(objects, "ServiceMonitor", "crd-apiserver");
        let endpoint = &monitor["spec"]["endpoints"][0];
        assert_eq!(endpoint["scheme"], "https");
        // Prometheus reads its own service account token from this file in its pod.
        assert_eq!(endpoint["bearerTokenFile"], "/var/run/secrets/kubernetes.io/serviceaccount/token");
        let tls = &endpoint["tlsConfig"];
        let secret = find(objects, "Secret", tls["ca"]["secret"]["name"].as_str().unwrap());
        let ca = secret["data"][tls["ca"]["secret"]["key"].as_str().unwrap()].as_str().unwrap();
        let ca = base64::engine::general_purpose::STANDARD.decode(ca).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&ca) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Scraper {
            port,
            config: Arc::new(config),
            server_name: tls["serverName"].as_str().unwrap().to_string(),
            path: endpoint["path"].as_str().unwrap().to_string(),
            token: token.to_string(),
        }
    }

    /// GET `path` (the endpoint's, by default) as Prometheus sends it: status and body.
    fn get(&self, path: Option<&str>, token: Option<&str>) -> std::io::Result<(u16, String)> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async {
            let err = |e: &dyn std::fmt::Display| std::io::Error::other(e.to_string());
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
            let name = ServerName::try_from(self.server_name.clone()).map_err(|e| err(&e))?;
            let tls = tokio_rustls::TlsConnector::from(self.config.clone()).connect(name, tcp).await?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await.map_err(|e| err(&e))?;
            tokio::spawn(connection);
            let mut request = http::Request::get(path.unwrap_or(&self.path)).header("host", &self.server_name);
            if let Some(token) = token.or(Some(self.token.as_str())).filter(|t| !t.is_empty()) {
                request = request.header("authorization", format!("Bearer {token}"));
            }
            let response =
                sender.send_request(request.body(Empty::<Bytes>::new()).unwrap()).await.map_err(|e| err(&e))?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await.map_err(|e| err(&e))?.to_bytes();
            Ok((status, String::from_utf8_lossy(&body).into_owned()))
        })
    }
}

/// The double's grants for the chart's metrics-reader ClusterRole and its binding.
fn rules_of_the_reader_role(objects: &[Value]) -> Vec<Rule> {
    let role = find(objects, "ClusterRole", "crd-apiserver:metrics-reader");
    let binding = find(objects, "ClusterRoleBinding", "crd-apiserver:metrics-reader");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    let subjects: Vec<Subject> = binding["subjects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            assert_eq!(s["kind"], "ServiceAccount");
            Subject::User(format!(
                "system:serviceaccount:{}:{}",
                s["namespace"].as_str().unwrap(),
                s["name"].as_str().unwrap()
            ))
        })
        .collect();
    let strings =
        |v: &Value| -> Vec<String> { v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().into()).collect() };
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| {
            let (verbs, urls) = (strings(&rule["verbs"]), strings(&rule["nonResourceURLs"]));
            let verbs: Vec<&str> = verbs.iter().map(String::as_str).collect();
            let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
            Rule::paths("crd-apiserver:metrics-reader", subjects.clone(), &verbs, &urls)
        })
        .collect()
}

/// Starts the server with the chart's serving certificate behind the double, as the
/// aggregator reaches it (the double dials the Service's name, which the certificate names).
fn start(objects: &[Value]) -> TestCluster {
    let plane = ControlPlane::start();
    let mut server = TestServer::prepare(&[CRONTAB_CRD], Some(plane.server_kubeconfig()));
    let secret = find(objects, "Secret", "crd-apiserver-serving");
    let pem =
        |key: &str| base64::engine::general_purpose::STANDARD.decode(secret["data"][key].as_str().unwrap()).unwrap();
    std::fs::write(server.pki.serving_cert(), pem("tls.crt")).unwrap();
    std::fs::write(server.pki.serving_key(), pem("tls.key")).unwrap();
    std::fs::write(server.pki.serving_ca(), pem("ca.crt")).unwrap();
    server.launch(&["--storage-metrics-interval=1s"]);
    plane.register_backend(server.port, &server.pki.serving_ca());
    plane.register("stable.example.com", "v1");
    TestCluster { plane, server }
}

/// One scrape's samples as Prometheus stores them: series (with the target's job and
/// instance labels) and value.
fn samples(text: &str, instance: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, format!(",{}", rest.strip_suffix('}').unwrap())),
            None => (series, String::new()),
        };
        let labels = if labels == "," { String::new() } else { labels };
        out.push((format!("{name}{{job=\"{JOB}\",instance=\"{instance}\"{labels}}}"), value.to_string()));
    }
    out
}

/// Panels whose families have no series until something happens that this run does not do.
const EMPTY_IN_THIS_RUN: &[(&str, &str)] = &[
    ("Aborted requests", "no request timed out or lost its client"),
    ("Conversion webhook requests", "no definition converts by webhook"),
    ("Conversion webhook p99 by definition", "no definition converts by webhook"),
];

#[test]
fn every_query_finds_series_in_scrapes_made_as_the_service_monitor_says() {
    let objects = render_chart();
    let cluster = start(&objects);
    cluster.plane.add_user(
        "prometheus-k8s-token",
        User::new(
            "system:serviceaccount:monitoring:prometheus-k8s",
            &["system:serviceaccounts", "system:authenticated"],
        ),
    );
    cluster
        .plane
        .add_user("other-token", User::new("system:serviceaccount:monitoring:other", &["system:authenticated"]));
    let scraper = Scraper::new(&objects, cluster.server.port, "prometheus-k8s-token");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(scraper.get(Some("/readyz"), None), Ok((200, _))) {
        assert!(Instant::now() < deadline, "never ready: {}", cluster.server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    for rule in rules_of_the_reader_role(&objects) {
        cluster.plane.add_rule(rule);
    }
    // Accounts the role is not bound to, and anonymous scrapers, are refused.
    assert_eq!(scraper.get(None, Some("other-token")).unwrap().0, 403);
    assert_eq!(scraper.get(None, Some("")).unwrap().0, 403);

    // Traffic through the double as a user would make it: writes, reads, a 404, a watch.
    let alice = cluster.user("alice", &[]);
    cluster.grant("alice", &["*"], "stable.example.com", &["crontabs"], None);
    for name in ["a", "b", "c"] {
        let manifest = format!(
            "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {{name: {name}, namespace: default}}\nspec: {{cronSpec: '* * * * */5', image: backup}}\n"
        );
        cluster.kubectl_stdin_ok(&alice, &["create", "-f", "-"], &manifest);
    }
    cluster.kubectl_ok(&alice, &["get", "crontabs", "-n", "default"]);
    cluster.kubectl_ok(&alice, &["get", "crontab", "a", "-n", "default", "-o", "json"]);
    assert!(!cluster.kubectl(&alice, &["get", "crontab", "missing", "-n", "default"]).status.success());
    let watch = "/apis/stable.example.com/v1/namespaces/default/crontabs?watch=true&timeoutSeconds=1";
    cluster.kubectl_ok(&alice, &["get", "--raw", watch]);

    let (_, text) = scraper.get(None, None).unwrap();
    check_families(&text);

    // Scrapes a second apart, once the stored objects were counted.
    let instance = format!("127.0.0.1:{}", cluster.server.port);
    let mut scrapes = Vec::new();
    while scrapes.len() < 4 {
        let (status, text) = scraper.get(None, None).unwrap();
        assert_eq!(status, 200, "{text}");
        if scrapes.is_empty() && !text.contains("apiserver_storage_objects{") {
            assert!(Instant::now() < deadline, "objects never counted:\n{text}");
        } else {
            scrapes.push(samples(&text, &instance));
        }
        std::thread::sleep(Duration::from_millis(if scrapes.is_empty() { 100 } else { 1000 }));
        cluster.kubectl_ok(&alice, &["get", "crontabs", "-n", "default"]);
    }
    check_queries_over(&scrapes);
}

/// Every family of metrics.txt is exposed with its type, and its samples carry exactly the
/// labels listed (what the dashboard's name checks rely on).
fn check_families(text: &str) {
    let listed = std::fs::read_to_string(root().join("manifests/grafana/metrics.txt")).unwrap();
    let mut problems = std::collections::BTreeSet::new();
    for line in listed.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let (name, kind) = (words.next().unwrap(), words.next().unwrap());
        let labels: std::collections::BTreeSet<&str> = words.collect();
        let exposed = text.lines().find_map(|l| l.strip_prefix(&format!("# TYPE {name} ")));
        // A counter whose name lacks `_total` (Kubernetes' authentication_attempts) cannot be
        // typed counter in the text format.
        let untyped_counter = kind == "counter" && !name.ends_with("_total") && exposed == Some("untyped");
        if exposed != Some(kind) && !untyped_counter {
            problems.insert(format!("{name}: exposed as {exposed:?}, listed as {kind}"));
        }
        let suffixes: &[&str] = if kind == "histogram" { &["_bucket", "_sum", "_count"] } else { &[""] };
        for suffix in suffixes {
            let mut want = labels.clone();
            if *suffix == "_bucket" {
                want.insert("le");
            }
            for sample in text.lines().filter_map(|l| l.strip_prefix(&format!("{name}{suffix}"))) {
                let Some(inner) =
                    sample.strip_prefix('{').and_then(|rest| rest.split_once('}')).map(|(inner, _)| inner)
                else {
                    if sample.starts_with(' ') && !want.is_empty() {
                        problems.insert(format!("{name}{suffix} has no labels, listed with {want:?}"));
                    }
                    continue;
                };
                let have: std::collections::BTreeSet<&str> =
                    inner.split(',').filter_map(|pair| pair.split_once('=')).map(|(label, _)| label).collect();
                if have != want {
                    problems.insert(format!("{name}{suffix} has labels {have:?}, listed {want:?}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Every dashboard query but the panels of [`EMPTY_IN_THIS_RUN`] returns at least one series
/// over the scrapes (a minute apart in promtool's time, as with a 1m scrape interval).
fn check_queries_over(scrapes: &[Vec<(String, String)>]) {
    let mut series: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (i, scrape) in scrapes.iter().enumerate() {
        for (key, value) in scrape {
            let values = series.entry(key).or_insert_with(|| vec!["_"; scrapes.len()]);
            values[i] = value;
        }
    }
    let input: Vec<Value> =
        series.iter().map(|(key, values)| json!({"series": key, "values": values.join(" ")})).collect();
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("manifests/grafana/crd-apiserver.json")).unwrap())
            .unwrap();
    let mut cases = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap();
        if EMPTY_IN_THIS_RUN.iter().any(|(t, _)| *t == title) {
            continue;
        }
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = promtool::as_sent(target["expr"].as_str().unwrap());
            cases.push(json!({"expr": format!("count({expr}) > bool 0 or vector(0)"),
                              "eval_time": format!("{}m", scrapes.len() - 1),
                              "exp_samples": [{"labels": "{}", "value": 1}]}));
        }
    }
    assert!(cases.len() >= 40, "{} queries", cases.len());
    let document = json!({
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": input, "promql_expr_test": cases}],
    });
    let (ok, text) = promtool::promtool(&["test", "rules"], &document);
    assert!(ok, "queries that found nothing (got 0):\n{text}");
}
