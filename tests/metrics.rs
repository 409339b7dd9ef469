//! `/metrics` as an admin scrapes it: Kubernetes' metric names and labels with exact values
//! after a known sequence of requests, both exposition formats, bounded labels, and
//! authorization as kube-apiserver authorizes the path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use support::cluster::TestCluster;
use support::control_plane::rbac::{Rule, Subject, User};
use support::http::Client;
use support::{CRONTAB_CRD, TestServer};

/// One sample of the text exposition: name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the Prometheus text format (label values here never hold `,` or `"`).
fn parse(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}').unwrap()),
            None => (series, ""),
        };
        let labels = labels
            .split(',')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap();
                (k.to_string(), v.trim_matches('"').to_string())
            })
            .collect();
        let value = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
        };
        samples.push(Sample { name: name.to_string(), labels, value });
    }
    samples
}

/// The value of the one sample of `name` whose labels include `want`.
fn value(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> Option<f64> {
    let matching: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name && want.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
        .collect();
    assert!(matching.len() <= 1, "several {name} samples match {want:?}: {matching:?}");
    matching.first().map(|s| s.value)
}

fn scrape(client: &Client) -> Vec<Sample> {
    let response = client.get("/metrics").unwrap();
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    parse(&response.text())
}

const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn crontab(name: &str) -> serde_json::Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name},
           "spec": {"cronSpec": "* * * * */5", "image": "backup"}})
}

/// The crontab series of `apiserver_request_total` with these labels.
fn requests(samples: &[Sample], verb: &str, scope: &str, dry_run: &str, code: &str) -> Option<f64> {
    let labels = [
        ("verb", verb),
        ("dry_run", dry_run),
        ("group", "stable.example.com"),
        ("version", "v1"),
        ("resource", "crontabs"),
        ("subresource", ""),
        ("scope", scope),
        ("component", "apiserver"),
        ("code", code),
    ];
    value(samples, "apiserver_request_total", &labels)
}

#[test]
fn a_known_sequence_of_requests_gives_exactly_those_counts() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    for name in ["a", "b", "c"] {
        assert_eq!(client.send_json("POST", CRONTABS, &crontab(name)).status, 201);
    }
    assert_eq!(client.get(&format!("{CRONTABS}/missing")).unwrap().status, 404);
    assert_eq!(client.send_json("POST", &format!("{CRONTABS}?dryRun=All"), &crontab("d")).status, 201);
    // Paths that name nothing served add no series.
    assert_eq!(client.get("/apis/stable.example.com/v1/namespaces/default/nothings").unwrap().status, 404);
    assert_eq!(client.get("/apis/made.up/v9/things").unwrap().status, 404);
    let list = client.get(CRONTABS).unwrap();
    assert_eq!(list.status, 200);

    let samples = scrape(&client);
    assert_eq!(requests(&samples, "POST", "resource", "", "201"), Some(3.0));
    assert_eq!(requests(&samples, "GET", "resource", "", "404"), Some(1.0));
    assert_eq!(requests(&samples, "POST", "resource", "All", "201"), Some(1.0));
    assert_eq!(requests(&samples, "LIST", "namespace", "", "200"), Some(1.0));
    let crontab_series: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == "apiserver_request_total" && s.labels.get("group").is_some_and(|g| !g.is_empty()))
        .collect();
    assert_eq!(crontab_series.len(), 4, "{crontab_series:#?}");
    assert!(samples.iter().all(|s| s.labels.get("resource").is_none_or(|r| r != "nothings" && r != "things")));

    // The histograms count the same requests; sizes are recorded for gets and lists only.
    let post = [("verb", "POST"), ("dry_run", ""), ("resource", "crontabs"), ("scope", "resource")];
    assert_eq!(value(&samples, "apiserver_request_duration_seconds_count", &post), Some(3.0));
    let le_inf = [post.as_slice(), &[("le", "+Inf")]].concat();
    assert_eq!(value(&samples, "apiserver_request_duration_seconds_bucket", &le_inf), Some(3.0));
    let get = [("verb", "GET"), ("resource", "crontabs"), ("scope", "resource")];
    assert_eq!(value(&samples, "apiserver_response_sizes_count", &get), Some(1.0));
    let list_size = [("verb", "LIST"), ("resource", "crontabs")];
    assert!(value(&samples, "apiserver_response_sizes_sum", &list_size).unwrap() > 100.0);
    assert_eq!(value(&samples, "apiserver_response_sizes_count", &[("verb", "POST")]), None);

    // Four stored writes went through group commit (the dry run did not).
    assert!(value(&samples, "crd_apiserver_group_commit_batch_size_sum", &[]).unwrap() >= 3.0);
    assert!(value(&samples, "crd_apiserver_group_commit_flush_duration_seconds_count", &[]).unwrap() >= 1.0);
    assert_eq!(value(&samples, "crd_apiserver_definitions_served", &[]), Some(1.0));
    assert!(value(&samples, "authentication_attempts", &[("result", "success")]).unwrap() >= 7.0);
    assert!(value(&samples, "authorization_attempts_total", &[("result", "allowed")]).unwrap() >= 7.0);
    assert!(value(&samples, "process_resident_memory_bytes", &[]).unwrap() > 1e6);
    assert!(value(&samples, "process_open_fds", &[]).unwrap() > 3.0);
    // The list's three items were written from their stored bytes.
    assert!(value(&samples, "crd_apiserver_verbatim_reads_total", &[("result", "hit")]).unwrap() >= 3.0);
}

#[test]
fn watches_are_counted_while_they_run() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    for name in ["a", "b"] {
        assert_eq!(client.send_json("POST", CRONTABS, &crontab(name)).status, 201);
    }
    // A watch from the beginning sends both objects, then ends after its timeout (long enough
    // for a scrape to see it on a busy machine).
    let watcher = {
        let client = Client::admin(&server);
        std::thread::spawn(move || client.get(&format!("{CRONTABS}?watch=true&timeoutSeconds=10")).unwrap())
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let labels = [("group", "stable.example.com"), ("version", "v1"), ("kind", "CronTab")];
    loop {
        let samples = scrape(&client);
        // The watcher registers inside the handler and the long-running gauge counts the
        // request once the handler hands back its streaming response: wait for both.
        let watch = [("verb", "WATCH"), ("resource", "crontabs"), ("scope", "namespace")];
        if value(&samples, "apiserver_registered_watchers", &labels) == Some(1.0)
            && value(&samples, "apiserver_longrunning_requests", &watch) == Some(1.0)
        {
            break;
        }
        assert!(Instant::now() < deadline, "the watch was never registered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let body = watcher.join().unwrap();
    assert_eq!(body.status, 200);
    let samples = scrape(&client);
    assert_eq!(value(&samples, "apiserver_registered_watchers", &labels), Some(0.0));
    let watch = [("verb", "WATCH"), ("resource", "crontabs"), ("scope", "namespace")];
    assert_eq!(value(&samples, "apiserver_longrunning_requests", &watch), Some(0.0));
    assert_eq!(requests(&samples, "WATCH", "namespace", "", "200"), Some(1.0));
    let events = [("group", "stable.example.com"), ("version", "v1"), ("resource", "crontabs")];
    assert_eq!(value(&samples, "apiserver_watch_events_total", &events), Some(2.0));
    let sizes = value(&samples, "apiserver_watch_events_sizes_sum", &events).unwrap();
    assert_eq!(sizes as usize, body.body.len(), "the events' sizes add up to the body");
}

#[test]
fn stored_objects_are_counted_periodically() {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], None);
    server.spawn(&["--storage-metrics-interval=1s"]);
    let client = Client::admin(&server);
    for name in ["a", "b", "c"] {
        assert_eq!(client.send_json("POST", CRONTABS, &crontab(name)).status, 201);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let samples = scrape(&client);
        let legacy = value(&samples, "apiserver_storage_objects", &[("resource", "crontabs.stable.example.com")]);
        let current =
            value(&samples, "apiserver_resource_objects", &[("group", "stable.example.com"), ("resource", "crontabs")]);
        if legacy == Some(3.0) {
            assert_eq!(current, Some(3.0));
            assert!(value(&samples, "apiserver_storage_size_bytes", &[]).unwrap() > 0.0);
            break;
        }
        assert!(Instant::now() < deadline, "objects never counted: {legacy:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn openmetrics_is_served_when_asked_for() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server).header("Accept", "application/openmetrics-text;version=1.0.0,text/plain;q=0.5");
    let response = client.get("/metrics").unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.headers["content-type"], "application/openmetrics-text; version=1.0.0; charset=utf-8");
    let text = response.text();
    assert!(text.contains("# TYPE apiserver_request counter\n"), "{text}");
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn metrics_are_authorized_as_a_non_resource_path() {
    let cluster = TestCluster::start(&[CRONTAB_CRD]);
    cluster.plane.add_user("prometheus-token", User::new("system:serviceaccount:monitoring:prometheus", &[]));
    let scraper = Client::new(&cluster.server, None).header("Authorization", "Bearer prometheus-token");
    let refused = scraper.get("/metrics").unwrap();
    assert_eq!(refused.status, 403);
    assert_eq!(
        refused.json()["message"],
        "forbidden: User \"system:serviceaccount:monitoring:prometheus\" cannot get path \"/metrics\""
    );
    // As kube-prometheus grants it: a group allowed to get the path.
    cluster.plane.add_user("monitoring-token", User::new("monitoring", &["system:monitoring"]));
    cluster.plane.add_rule(Rule::paths(
        "monitoring",
        vec![Subject::Group("system:monitoring".into())],
        &["get"],
        &["/metrics"],
    ));
    let monitoring = Client::new(&cluster.server, None).header("Authorization", "Bearer monitoring-token");
    let response = monitoring.get("/metrics").unwrap();
    assert_eq!(response.status, 200, "{}", response.text());
    let samples = parse(&response.text());
    assert!(value(&samples, "authorization_attempts_total", &[("result", "denied")]).unwrap() >= 1.0);
    // The SubjectAccessReviews went to the main apiserver and were counted by code.
    assert!(value(&samples, "apiserver_delegated_authz_request_total", &[("code", "201")]).unwrap() >= 2.0);
    assert!(value(&samples, "apiserver_delegated_authn_request_total", &[("code", "201")]).unwrap() >= 2.0);
}

#[test]
fn always_allowed_paths_open_metrics_without_a_review() {
    let cluster = TestCluster::start_with(
        &[CRONTAB_CRD],
        &["--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"],
    );
    let anonymous = Client::new(&cluster.server, None);
    let response = anonymous.get("/metrics").unwrap();
    assert_eq!(response.status, 200, "{}", response.text());
    assert!(cluster.plane.sar_log().iter().all(|review| review["nonResourceAttributes"]["path"] != "/metrics"));
}
