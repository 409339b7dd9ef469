//! Benchmark of the full write-path validation (decode, type checks, coercion, defaults,
//! system metadata, schema validation, list types, storage encoding) — the functions a create
//! runs — for the documentation's CronTab and for a large generated schema. Prints objects/s.
//!
//! Usage: `cargo run --release --example bench-schema -- [SECONDS] [crontab|large]` (see
//! `hack/bench-schema.sh`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crd_apiserver::api::strict;
use crd_apiserver::api::write::FieldValidation;
use crd_apiserver::cli::validate::{Outcome, validate_one};
use crd_apiserver::definitions::load::definition_from_value;
use crd_apiserver::definitions::registry::Served;

fn served(schema: Value, kind: &str, plural: &str) -> Served {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.bench.example.com")},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]}});
    let definition = Arc::new(definition_from_value(crd, "bench").unwrap_or_else(|p| panic!("{p}")));
    let version = definition.version("v1").cloned().unwrap();
    Served::new(definition, version)
}

fn crontab() -> (Served, Vec<u8>) {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "cronSpec": {"type": "string", "pattern": r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$", "default": "5 0 * * *"},
        "image": {"type": "string"},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
    }}}});
    let object = json!({"apiVersion": "bench.example.com/v1", "kind": "CronTab", "metadata": {"name": "my-new-cron-object"},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 5}});
    (served(schema, "CronTab", "crontabs"), serde_json::to_vec(&object).unwrap())
}

/// 40 groups of 25 typed fields each (strings with patterns and formats, bounded integers,
/// enums, defaults), plus a 200-item map list of objects: ~1,000 schema nodes, ~6,000 values.
fn large() -> (Served, Vec<u8>) {
    let mut groups = Map::new();
    let mut values = Map::new();
    for g in 0..40 {
        let mut fields = Map::new();
        let mut data = Map::new();
        for f in 0..25 {
            let name = format!("field{f}");
            let (schema, value) = match f % 5 {
                0 => (
                    json!({"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 63}),
                    json!(format!("name-{g}-{f}")),
                ),
                1 => (json!({"type": "integer", "minimum": 0, "maximum": 1000, "default": 5}), json!(f * 7)),
                2 => (json!({"type": "string", "enum": ["Always", "Never", "IfNotPresent"]}), json!("Always")),
                3 => (json!({"type": "string", "format": "date-time"}), json!("2024-01-02T03:04:05Z")),
                _ => (
                    json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}),
                    json!(["a", "b", "c"]),
                ),
            };
            fields.insert(name.clone(), schema);
            data.insert(name, value);
        }
        groups.insert(format!("group{g}"), json!({"type": "object", "properties": fields}));
        values.insert(format!("group{g}"), Value::Object(data));
    }
    groups.insert(
        "ports".into(),
        json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string", "maxLength": 15},
                "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                "protocol": {"type": "string", "enum": ["TCP", "UDP"], "default": "TCP"}}}}),
    );
    values.insert(
        "ports".into(),
        Value::Array((0..200).map(|i| json!({"name": format!("p{i}"), "port": 1000 + i})).collect()),
    );
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": groups}}});
    let object = json!({"apiVersion": "bench.example.com/v1", "kind": "Big", "metadata": {"name": "big", "labels": {"app": "bench"}},
        "spec": values});
    (served(schema, "Big", "bigs"), serde_json::to_vec(&object).unwrap())
}

fn run(label: &str, served: &Served, body: &[u8], budget: Duration) {
    let once = || {
        let tracked = strict::from_json(body).unwrap().tracked;
        match validate_one(served, tracked, None, FieldValidation::Strict) {
            Outcome::Stored(..) => {}
            Outcome::Refused(e, _) => panic!("{label}: {}", e.message),
        }
    };
    for _ in 0..20 {
        once();
    }
    // Batches of about 10 ms; the machine is shared, so the median and the best batch are
    // reported rather than the mean.
    let start = Instant::now();
    let probe = Instant::now();
    once();
    let per_batch = ((0.01 / probe.elapsed().as_secs_f64()) as usize).max(1);
    let mut batches = Vec::new();
    while start.elapsed() < budget {
        let t = Instant::now();
        for _ in 0..per_batch {
            once();
        }
        batches.push(t.elapsed().as_secs_f64() / per_batch as f64);
    }
    batches.sort_by(f64::total_cmp);
    let median = batches[batches.len() / 2];
    let best = batches[0];
    println!(
        "{label:8} {:>6} bytes  median {:>8.0} objects/s ({:>7.1} µs/object)  best {:>8.0} objects/s ({:>7.1} µs/object)",
        body.len(),
        1.0 / median,
        median * 1e6,
        1.0 / best,
        best * 1e6
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds = args.iter().find_map(|a| a.parse().ok()).unwrap_or(3);
    let only = args.iter().find(|a| a.parse::<u64>().is_err()).map(String::as_str);
    let budget = Duration::from_secs(seconds);
    if only.is_none_or(|o| o == "crontab") {
        let (served, body) = crontab();
        run("crontab", &served, &body, budget);
    }
    if only.is_none_or(|o| o == "large") {
        let (served, body) = large();
        run("large", &served, &body, budget);
    }
}
