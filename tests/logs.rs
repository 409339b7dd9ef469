//! Logs of a running server as an admin reads them: `--logging-format=json` lines that all
//! parse, the request line at `-v=3` with kube-apiserver's httplog fields and the `Audit-ID`
//! the aggregator sends (echoed in the response), klog's text lines, slow requests with their
//! phases, and an unknown format refused at start.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use serde_json::{Value, json};
use support::admission_webhook::AdmissionWebhooks;
use support::cluster::TestCluster;
use support::control_plane::ControlPlane;
use support::control_plane::rbac::User;
use support::http::Client;
use support::{CRONTAB_CRD, TestServer};

const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

/// The server behind the double, started with `flags` and without the test's `RUST_LOG`
/// (which would choose the lines instead of `-v`).
fn cluster(plane: ControlPlane, flags: &[&str]) -> TestCluster {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], Some(plane.server_kubeconfig()));
    server.launcher = ["env", "-u", "RUST_LOG"].map(String::from).to_vec();
    server.spawn(flags);
    plane.register_backend(server.port, &server.pki.serving_ca());
    plane.register("stable.example.com", "v1");
    plane.add_user("admin-token", User::new("admin", &["system:masters"]));
    TestCluster { plane, server }
}

fn crontab(name: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name}, "spec": {"image": "nginx", "replicas": 1}})
}

fn audit_id(response: &support::http::Response) -> String {
    response.headers.get("audit-id").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default()
}

/// The request lines (`"msg":"HTTP"`) of a JSON log, by audit ID.
fn request_line<'a>(lines: &'a [Value], audit_id: &str) -> &'a Value {
    let found: Vec<&Value> = lines.iter().filter(|l| l["msg"] == "HTTP" && l["audit-ID"] == audit_id).collect();
    assert_eq!(found.len(), 1, "one request line for {audit_id}: {found:#?}");
    found[0]
}

#[test]
fn json_lines_parse_and_every_request_line_carries_its_audit_id() {
    let cluster = cluster(ControlPlane::start(), &["--logging-format=json", "-v=3"]);
    let client = Client::to_plane(&cluster.plane, "admin-token").header("User-Agent", "logs-test/1.0");

    // The aggregator's Audit-ID is the request's: echoed and logged.
    let created = client.clone().header("Audit-ID", "e2e-audit-create").send_json("POST", CRONTABS, &crontab("one"));
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(audit_id(&created), "e2e-audit-create");
    // Without one from the client, the double (as kube-apiserver) makes one and sends it on.
    let read = client.get(&format!("{CRONTABS}/one")).unwrap();
    assert_eq!(read.status, 200);
    let read_id = audit_id(&read);
    assert!(uuid::Uuid::parse_str(&read_id).is_ok(), "{read_id:?}");
    let listed = client.get(CRONTABS).unwrap();
    let missing = client.get(&format!("{CRONTABS}/missing")).unwrap();
    assert_eq!(missing.status, 404);
    // Straight to the server with no Audit-ID at all: the server makes one.
    let direct = Client::new(&cluster.server, None).get("/readyz").unwrap();
    let direct_id = uuid::Uuid::parse_str(&audit_id(&direct)).unwrap();
    assert_eq!(direct_id.get_version_num(), 4);

    let log = cluster.server.log();
    let lines: Vec<Value> =
        log.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))).collect();
    for line in &lines {
        assert!(line["ts"].as_f64().is_some_and(|ts| ts > 1.7e12), "{line}");
        assert!(line["msg"].is_string(), "{line}");
        assert!(line["v"].is_u64() || line.get("err").is_some() || line.get("v").is_none(), "{line}");
    }
    let http: Vec<&Value> = lines.iter().filter(|l| l["msg"] == "HTTP").collect();
    assert!(http.len() >= 5, "{log}");
    for line in &http {
        assert_eq!(line["v"], 3, "{line}");
        for key in ["verb", "URI", "latency", "audit-ID", "srcIP", "resp"] {
            assert!(line.get(key).is_some(), "{key} missing: {line}");
        }
    }

    let create = request_line(&lines, "e2e-audit-create");
    assert_eq!(create["verb"], "POST");
    assert_eq!(create["URI"], CRONTABS);
    assert_eq!(create["resp"], 201);
    assert_eq!(create["user"], "admin");
    assert_eq!(create["userAgent"], "logs-test/1.0");
    assert_eq!(create["apiGroup"], "stable.example.com");
    assert_eq!(create["apiVersion"], "v1");
    assert_eq!(create["resource"], "crontabs");
    assert_eq!(create["namespace"], "default");
    assert!(create["srcIP"].as_str().unwrap().starts_with("127.0.0.1:"), "{create}");
    let get = request_line(&lines, &read_id);
    assert_eq!((&get["verb"], &get["name"], &get["resp"]), (&json!("GET"), &json!("one"), &json!(200)));
    let list = request_line(&lines, &audit_id(&listed));
    assert_eq!((&list["verb"], &list["resp"]), (&json!("LIST"), &json!(200)));
    assert!(list.get("name").is_none(), "{list}");
    let not_found = request_line(&lines, &audit_id(&missing));
    assert_eq!(not_found["resp"], 404);
    let ready = request_line(&lines, &direct_id.to_string());
    assert_eq!(
        (&ready["verb"], &ready["URI"], &ready["user"]),
        (&json!("GET"), &json!("/readyz"), &json!("system:anonymous"))
    );
}

#[test]
fn slow_requests_are_logged_with_their_phases_in_klog_text() {
    // Every create waits three seconds for a validating webhook.
    let hooks = AdmissionWebhooks::start();
    let plane = ControlPlane::start();
    let hook = hooks.hook("slow.example.com", "/slow", &["CREATE"]);
    let configuration = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "slow"}, "webhooks": [hook]});
    plane.state().put_object("validatingwebhookconfigurations", configuration);
    let cluster = cluster(plane, &["--slow-request-threshold=1s"]);
    let client = Client::to_plane(&cluster.plane, "admin-token");
    let created = client.clone().header("Audit-ID", "slow-create").send_json("POST", CRONTABS, &crontab("slow"));
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(client.get(&format!("{CRONTABS}/slow")).unwrap().status, 200);

    let log = cluster.server.log();
    let header = regex::Regex::new(r"^[IWE]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.?]+:\d+\] ").unwrap();
    for line in log.lines() {
        assert!(header.is_match(line), "not a klog line: {line}");
    }
    // At the default verbosity there is no line per request, only the slow one.
    assert!(!log.contains("] \"HTTP\""), "{log}");
    let slow: Vec<&str> = log.lines().filter(|l| l.contains("] \"Slow request\"")).collect();
    assert_eq!(slow.len(), 1, "{log}");
    let field = |key: &str| {
        let pattern = regex::Regex::new(&format!(r#" {key}=("[^"]*"|\d+)"#)).unwrap();
        pattern.captures(slow[0]).unwrap_or_else(|| panic!("no {key}: {}", slow[0]))[1].trim_matches('"').to_string()
    };
    assert_eq!(field("verb"), "POST");
    assert_eq!(field("audit-ID"), "slow-create");
    assert_eq!(field("resp"), "201");
    assert_eq!(field("resource"), "crontabs");
    let seconds = |key: &str| go_seconds(&field(key));
    // The webhook's three seconds are the admission phase's.
    assert!(seconds("admission") >= 3.0, "{}", slow[0]);
    assert!(seconds("latency") >= seconds("admission"), "{}", slow[0]);
    for phase in ["filters", "decode", "store", "encode"] {
        assert!(seconds(phase) < 3.0, "{}", slow[0]);
    }
}

/// A Go duration (`1m3.5s`, `12.3ms`, `840.5µs`) in seconds.
fn go_seconds(text: &str) -> f64 {
    let units = regex::Regex::new(r"([0-9.]+)(ms|µs|ns|h|m|s)").unwrap();
    let total: f64 = units
        .captures_iter(text)
        .map(|c| {
            let n: f64 = c[1].parse().unwrap();
            n * match &c[2] {
                "h" => 3600.0,
                "m" => 60.0,
                "s" => 1.0,
                "ms" => 1e-3,
                "µs" => 1e-6,
                _ => 1e-9,
            }
        })
        .sum();
    assert_eq!(units.replace_all(text, "").as_ref(), "", "not a Go duration: {text}");
    total
}

#[test]
fn an_unknown_logging_format_is_refused_at_start() {
    let out = std::process::Command::new(support::binary())
        .args(["serve", "--dev", "--logging-format=xml"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(r#"format: Invalid value: "xml": Unsupported log format"#), "{stderr}");
    let check = std::process::Command::new(support::binary())
        .args(["--logging-format", "yaml", "check", "x.yaml"])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&check.stderr).contains(r#"format: Invalid value: "yaml""#));
}
