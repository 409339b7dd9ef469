//! The dashboard's queries through Prometheus' promtool: `check rules` parses each of them
//! with Prometheus' own PromQL parser, `test rules` evaluates chosen panels over made-up series
//! and compares with values worked out by hand (and, for `scraped.rs`, over real scrapes).

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

fn binary() -> PathBuf {
    std::env::var_os("PROMTOOL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/promtool"))
}

/// Runs promtool on a file holding `document` (JSON, which promtool reads as YAML).
pub fn promtool(args: &[&str], document: &Value) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("input.yaml");
    std::fs::write(&file, serde_json::to_string_pretty(document).unwrap()).unwrap();
    let out = Command::new(binary()).args(args).arg(&file).output().unwrap_or_else(|e| {
        panic!("cannot run {} ({e}): run hack/install-promtool.sh (hack/test.sh does)", binary().display())
    });
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// The job Prometheus gives crd-apiserver's targets (the Prometheus Operator names it after the
/// Service: `crd-apiserver` for the README's install).
pub const JOB: &str = "crd-apiserver";

/// A query as Grafana sends it, with the variables' values put in.
pub fn as_sent(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__range", "1h")
        .replace("$job", JOB)
        .replace("$instance", ".+")
        .replace("$resource", ".*")
}

/// Every query parses as PromQL (as a recording rule's expression).
pub fn check_rules(queries: &[String]) {
    let rules: Vec<Value> = queries
        .iter()
        .enumerate()
        .map(|(i, expr)| json!({"record": format!("dashboard:query_{i}"), "expr": as_sent(expr)}))
        .collect();
    let (ok, text) = promtool(&["check", "rules"], &json!({"groups": [{"name": "dashboard", "rules": rules}]}));
    assert!(ok, "{text}");
    assert!(text.contains(&format!("SUCCESS: {} rules found", queries.len())), "{text}");
}

/// The query of the panel titled `title`, target `ref_id`.
fn panel_query(dashboard: &Value, title: &str, ref_id: &str) -> String {
    let panel = dashboard["panels"].as_array().unwrap().iter().find(|p| p["title"] == title);
    let panel = panel.unwrap_or_else(|| panic!("no panel {title}"));
    let target = panel["targets"].as_array().unwrap().iter().find(|t| t["refId"] == ref_id).unwrap();
    as_sent(target["expr"].as_str().unwrap())
}

/// A series of a scraped target: `name{job, instance, labels}` with promtool's value notation.
fn series(name: &str, job: &str, instance: &str, labels: &[(&str, &str)], values: &str) -> Value {
    let mut text = format!("{name}{{job=\"{job}\",instance=\"{instance}\"");
    for (k, v) in labels {
        text.push_str(&format!(",{k}=\"{v}\""));
    }
    text.push('}');
    json!({"series": text, "values": values})
}

const A: &str = "10.0.0.1:8443";
const B: &str = "10.0.0.2:8443";

type Labels = Vec<(&'static str, &'static str)>;

/// The labels of one crontab request series.
fn request(verb: &'static str, code: Option<&'static str>) -> Labels {
    let mut labels = vec![
        ("verb", verb),
        ("dry_run", ""),
        ("group", "stable.example.com"),
        ("version", "v1"),
        ("resource", "crontabs"),
        ("subresource", ""),
        ("scope", "resource"),
        ("component", "apiserver"),
    ];
    labels.extend(code.map(|c| ("code", c)));
    labels
}

fn with(labels: &Labels, more: (&'static str, &'static str)) -> Labels {
    let mut out = labels.clone();
    out.push(more);
    out
}

/// Input series: a minute apart, counters rising at steady rates. kube-apiserver's series of
/// the same names (job "apiserver") are there too, and must not count.
fn input_series() -> Vec<Value> {
    let get_ok = request("GET", Some("200"));
    let get_failed = request("GET", Some("500"));
    let get = request("GET", None);
    let watch = request("WATCH", None);
    let mut input = vec![
        // 60 requests a minute answered 200 and 20 answered 500: a 5xx ratio of 0.25.
        series("apiserver_request_total", JOB, A, &get_ok, "0+60x10"),
        series("apiserver_request_total", JOB, A, &get_failed, "0+20x10"),
        series("apiserver_request_total", "apiserver", A, &get_failed, "0+1000x10"),
    ];
    // 98 gets a second within 0.5 s, 2 between 0.5 and 1 s: p99 = 0.5 + 0.5 * 1/2 = 0.75 s.
    // Long watches, if counted, would put the p99 at the highest finite bound (1 s).
    for (le, gets, watches) in
        [("0.5", "0+5880x10", "0+0x10"), ("1", "0+6000x10", "0+0x10"), ("+Inf", "0+6000x10", "0+60000x10")]
    {
        let name = "apiserver_request_duration_seconds_bucket";
        input.push(series(name, JOB, A, &with(&get, ("le", le)), gets));
        input.push(series(name, JOB, A, &with(&watch, ("le", le)), watches));
    }
    // 60 batches a minute holding 300 writes: 5 a batch on average; half of them hold one write.
    let batch = "crd_apiserver_group_commit_batch_size";
    input.push(series(&format!("{batch}_sum"), JOB, A, &[], "0+300x10"));
    input.push(series(&format!("{batch}_count"), JOB, A, &[], "0+60x10"));
    for (le, count) in [("1", "0+30x10"), ("2", "0+30x10"), ("4", "0+45x10"), ("8", "0+60x10"), ("+Inf", "0+60x10")] {
        input.push(series(&format!("{batch}_bucket"), JOB, A, &[("le", le)], count));
    }
    // Two replicas count the same 7 crontabs (a shared store); one counts 3 tenants.
    for instance in [A, B] {
        input.push(series(
            "apiserver_storage_objects",
            JOB,
            instance,
            &[("resource", "crontabs.stable.example.com")],
            "7x10",
        ));
        input.push(series(
            "apiserver_current_inflight_requests",
            JOB,
            instance,
            &[("request_kind", "readOnly")],
            "3x10",
        ));
    }
    input.push(series("apiserver_storage_objects", JOB, A, &[("resource", "tenants.platform.example.com")], "3x10"));
    input.push(series(
        "apiserver_storage_objects",
        "apiserver",
        A,
        &[("resource", "crontabs.stable.example.com")],
        "50x10",
    ));
    // 45 of 60 objects a minute served from their stored bytes.
    input.push(series("crd_apiserver_verbatim_reads_total", JOB, A, &[("result", "hit")], "0+45x10"));
    input.push(series("crd_apiserver_verbatim_reads_total", JOB, A, &[("result", "miss")], "0+15x10"));
    input
}

/// Chosen panels evaluated over [`input_series`] compute the values worked out above.
pub fn test_panels(dashboard: &Value) {
    let expect = |title: &str, ref_id: &str, labels: &str, value: f64| {
        json!({"expr": panel_query(dashboard, title, ref_id), "eval_time": "10m",
               "exp_samples": [{"labels": labels, "value": value}]})
    };
    let cases = vec![
        expect("5xx ratio", "A", "{}", 0.25),
        expect("Latency p99 by resource", "A", r#"{group="stable.example.com", resource="crontabs"}"#, 0.75),
        expect("Group commit: writes per batch", "A", "{}", 1.0),
        expect("Group commit: writes per batch", "C", "{}", 5.0),
        expect("Stored objects", "A", "{}", 10.0),
        expect("Verbatim reads", "A", "{}", 0.75),
        expect("Requests in flight", "A", r#"{request_kind="readOnly"}"#, 6.0),
    ];
    let document = json!({
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": input_series(), "promql_expr_test": cases}],
    });
    let (ok, text) = promtool(&["test", "rules"], &document);
    assert!(ok, "{text}");
    assert!(text.contains("SUCCESS"), "{text}");
}
