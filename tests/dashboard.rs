//! The Grafana dashboard (manifests/grafana/crd-apiserver.json, the chart's copy the same file):
//! a well-formed dashboard whose every query reads only metric families and labels listed in
//! manifests/grafana/metrics.txt (what the server's /metrics promises), picks crd-apiserver's
//! series out of a Prometheus that also scrapes kube-apiserver (same names), rates only counters,
//! and parses and computes what its panel says with Prometheus' own promtool
//! (installed by hack/install-promtool.sh); and every query finds series in scrapes of a real
//! server made as the chart's ServiceMonitor says (`dashboard/scraped.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod dashboard {
    pub mod promql;
    pub mod promtool;
    pub mod scraped;
}
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use dashboard::promql::{self, Query};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn dashboard_text() -> String {
    std::fs::read_to_string(root().join("manifests/grafana/crd-apiserver.json")).unwrap()
}

fn dashboard_json() -> Value {
    serde_json::from_str(&dashboard_text()).unwrap()
}

/// Labels Prometheus attaches to every sample of a target: the only ones a query may use
/// beyond what /metrics itself exposes.
const TARGET_LABELS: &[&str] = &["job", "instance"];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Counter,
    Gauge,
    /// A histogram's `_bucket` series.
    Bucket,
}

/// Every series name a query may select, with its kind and labels, from metrics.txt.
fn series() -> BTreeMap<String, (Kind, BTreeSet<String>)> {
    let text = std::fs::read_to_string(root().join("manifests/grafana/metrics.txt")).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let (name, kind) = (words.next().unwrap(), words.next().unwrap());
        let labels: BTreeSet<String> = words.map(String::from).collect();
        match kind {
            "counter" => out.insert(name.to_string(), (Kind::Counter, labels)),
            "gauge" => out.insert(name.to_string(), (Kind::Gauge, labels)),
            "histogram" => {
                let mut with_le = labels.clone();
                with_le.insert("le".to_string());
                out.insert(format!("{name}_bucket"), (Kind::Bucket, with_le));
                out.insert(format!("{name}_sum"), (Kind::Counter, labels.clone()));
                out.insert(format!("{name}_count"), (Kind::Counter, labels))
            }
            other => panic!("metrics.txt: unknown type {other} in {line}"),
        };
    }
    out
}

/// Every query of the dashboard: (where, PromQL, legend).
fn queries(dashboard: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            out.push((
                format!("panel {:?} {}", panel["title"], target["refId"]),
                target["expr"].as_str().unwrap().to_string(),
                target["legendFormat"].as_str().unwrap_or_default().to_string(),
            ));
        }
    }
    out
}

/// What is wrong with one query's names and labels, if anything.
fn check_query(query: &Query, legend: &str, series: &BTreeMap<String, (Kind, BTreeSet<String>)>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut common: Option<BTreeSet<String>> = None;
    for selector in &query.selectors {
        let Some((kind, labels)) = series.get(&selector.metric) else {
            problems.push(format!("{} is not in metrics.txt", selector.metric));
            continue;
        };
        let allowed = |label: &str| labels.contains(label) || TARGET_LABELS.contains(&label);
        for (label, ..) in &selector.matchers {
            if !allowed(label) {
                problems.push(format!("{} has no label {label}", selector.metric));
            }
        }
        // Only crd-apiserver's targets: kube-apiserver exposes the same names.
        let picks = |label: &str, op: &str, value: &str| {
            selector.matchers.iter().any(|(l, o, v)| l == label && o == op && v == value)
        };
        if !picks("job", "=", "$job") || !picks("instance", "=~", "$instance") {
            problems.push(format!("{} is not limited to job=\"$job\", instance=~\"$instance\"", selector.metric));
        }
        let rated = selector.enclosing.iter().any(|f| ["rate", "irate", "increase"].contains(&f.as_str()));
        match kind {
            Kind::Counter | Kind::Bucket if !rated => {
                problems.push(format!("{} is a counter read raw", selector.metric))
            }
            Kind::Gauge if rated => problems.push(format!("{} is a gauge read as a rate", selector.metric)),
            Kind::Bucket if !selector.enclosing.iter().any(|f| f == "histogram_quantile") => {
                problems.push(format!("{} is read outside histogram_quantile", selector.metric))
            }
            _ => {}
        }
        let mut here: BTreeSet<String> = labels.clone();
        here.extend(TARGET_LABELS.iter().map(|l| l.to_string()));
        common = Some(match common {
            None => here,
            Some(c) => c.intersection(&here).cloned().collect(),
        });
    }
    let common = common.unwrap_or_default();
    for label in &query.grouping {
        if !common.contains(label) {
            problems.push(format!("grouping by {label}, which not every selected metric has"));
        }
    }
    // A legend can only show labels the result keeps.
    let shown: BTreeSet<String> = if query.aggregated { query.grouping.iter().cloned().collect() } else { common };
    for label in legend.split("{{").skip(1).filter_map(|s| s.split_once("}}")).map(|(l, _)| l.trim()) {
        if !shown.contains(label) {
            problems.push(format!("the legend shows {label}, which the result does not have"));
        }
    }
    problems
}

#[test]
fn every_query_reads_only_listed_metrics_and_labels() {
    let series = series();
    let dashboard = dashboard_json();
    let queries = queries(&dashboard);
    assert!(queries.len() >= 40, "{} queries", queries.len());
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for (place, expr, legend) in &queries {
        match promql::read(expr) {
            Ok(query) => {
                used.extend(query.selectors.iter().map(|s| s.metric.clone()));
                problems.extend(check_query(&query, legend, &series).into_iter().map(|p| format!("{place}: {p}")));
            }
            Err(e) => problems.push(format!("{place}: {e}")),
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    // The dashboard shows what the issue asks for.
    for metric in [
        "apiserver_request_total",
        "apiserver_request_duration_seconds_bucket",
        "apiserver_current_inflight_requests",
        "apiserver_longrunning_requests",
        "apiserver_registered_watchers",
        "apiserver_watch_events_total",
        "apiserver_storage_objects",
        "apiserver_storage_size_bytes",
        "crd_apiserver_group_commit_batch_size_bucket",
        "crd_apiserver_group_commit_flush_duration_seconds_bucket",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
    ] {
        assert!(used.contains(metric), "no panel shows {metric}");
    }
}

#[test]
fn the_checks_catch_what_they_are_for() {
    let series = series();
    let check = |expr: &str, legend: &str| check_query(&promql::read(expr).unwrap(), legend, &series).join("; ");
    let scoped = r#"job="$job", instance=~"$instance""#;
    assert_eq!(
        check(&format!("sum by (resource) (rate(apiserver_request_total{{{scoped}}}[5m]))"), "{{resource}}"),
        ""
    );
    assert!(check(&format!("apiserver_requests_total{{{scoped}}}"), "").contains("not in metrics.txt"));
    assert!(check(&format!("apiserver_storage_objects{{{scoped}, kind=\"x\"}}"), "").contains("no label kind"));
    assert!(check("apiserver_storage_objects", "").contains("not limited to job"));
    assert!(check(&format!("apiserver_request_total{{{scoped}}}"), "").contains("counter read raw"));
    assert!(check(&format!("rate(process_open_fds{{{scoped}}}[5m])"), "").contains("gauge read as a rate"));
    assert!(
        check(&format!("sum by (kind) (rate(apiserver_request_total{{{scoped}}}[5m]))"), "")
            .contains("grouping by kind")
    );
    assert!(
        check(&format!("sum(rate(apiserver_request_total{{{scoped}}}[5m]))"), "{{verb}}").contains("legend shows verb")
    );
    assert!(
        check(&format!("sum by (le) (rate(apiserver_response_sizes_bucket{{{scoped}}}[5m]))"), "")
            .contains("outside histogram_quantile")
    );
}

#[test]
fn template_variables_read_listed_metrics() {
    let series = series();
    let dashboard = dashboard_json();
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let names: Vec<&str> = variables.iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["datasource", "job", "instance", "resource"]);
    assert_eq!(variables[0]["type"], "datasource");
    assert_eq!(variables[0]["query"], "prometheus");
    for variable in &variables[1..] {
        let query = variable["query"]["query"].as_str().unwrap();
        assert_eq!(variable["definition"], query);
        let inner = query.strip_prefix("label_values(").and_then(|q| q.strip_suffix(')')).unwrap();
        let (selector, label) = inner.rsplit_once(", ").unwrap();
        let read = promql::read(selector).unwrap();
        let metric = &read.selectors[0].metric;
        let (_, labels) = series.get(metric).unwrap_or_else(|| panic!("{metric} is not in metrics.txt"));
        assert!(labels.contains(label) || TARGET_LABELS.contains(&label), "{metric} has no label {label}");
        for (l, ..) in &read.selectors[0].matchers {
            assert!(labels.contains(l) || TARGET_LABELS.contains(&l.as_str()), "{metric} has no label {l}");
        }
    }
    // The job list comes from a family only crd-apiserver exposes, not one kube-apiserver shares.
    assert!(variables[1]["query"]["query"].as_str().unwrap().contains("crd_apiserver_"));
}

#[test]
fn the_dashboard_is_well_formed() {
    let dashboard = dashboard_json();
    assert_eq!(dashboard["uid"], "crd-apiserver");
    assert_eq!(dashboard["title"], "crd-apiserver");
    assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 36);
    let defined: BTreeSet<String> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().into())
        .collect();
    let mut ids = BTreeSet::new();
    let mut cells = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap();
        assert!(ids.insert(panel["id"].as_u64().unwrap()), "panel id of {title} used twice");
        let at = |k: &str| panel["gridPos"][k].as_u64().unwrap();
        assert!(at("x") + at("w") <= 24, "{title} is wider than the dashboard");
        for x in at("x")..at("x") + at("w") {
            for y in at("y")..at("y") + at("h") {
                assert!(cells.insert((x, y)), "{title} overlaps another panel at {x},{y}");
            }
        }
        if panel["type"] == "row" {
            continue;
        }
        assert!(["timeseries", "stat"].contains(&panel["type"].as_str().unwrap()), "{title}");
        assert!(!panel["description"].as_str().unwrap().is_empty(), "{title} has no description");
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title} has no query");
        let refs: BTreeSet<&str> = targets.iter().map(|t| t["refId"].as_str().unwrap()).collect();
        assert_eq!(refs.len(), targets.len(), "{title} repeats a refId");
        for target in targets {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{title}");
            let expr = target["expr"].as_str().unwrap();
            for used in expr.split('$').skip(1) {
                let name: String = used.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                assert!(
                    defined.contains(&name) || ["__rate_interval", "__range"].contains(&name.as_str()),
                    "{title} uses ${name}, which is not defined"
                );
            }
        }
    }
}

#[test]
fn promtool_parses_every_query() {
    let queries: Vec<String> = queries(&dashboard_json()).into_iter().map(|(_, expr, _)| expr).collect();
    dashboard::promtool::check_rules(&queries);
}

#[test]
fn panels_compute_what_they_say() {
    dashboard::promtool::test_panels(&dashboard_json());
}
