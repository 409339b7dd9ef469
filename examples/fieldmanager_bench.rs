//! The field manager alone, in process, for `hack/bench-apply.sh`: microseconds per apply
//! (creating, changing a field, changing nothing) and per update of a CronTab, without HTTP
//! or storage.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::time::Instant;

use crd_apiserver::fieldmanager::{FieldManager, Schema, Set, Versions, now};
use serde_json::{Value, json};

const API_VERSION: &str = "stable.example.com/v1";

struct CronTabVersions(Schema);

impl Versions for CronTabVersions {
    fn schema(&self, api_version: &str) -> Option<&Schema> {
        (api_version == API_VERSION).then_some(&self.0)
    }

    fn convert(&self, _: &Value, api_version: &str) -> Result<Value, String> {
        Err(format!("no version {api_version}"))
    }
}

fn config(replicas: i64) -> Value {
    json!({
        "apiVersion": API_VERSION, "kind": "CronTab",
        "metadata": {"name": "c", "labels": {"app": "bench", "tier": "batch"}, "annotations": {"owner": "team-a"}},
        "spec": {"cronSpec": "*/5 * * * *", "image": "registry.example.com/team/cron-runner:1.2.3", "replicas": replicas}
    })
}

fn measure(name: &str, n: usize, mut op: impl FnMut(usize)) {
    let start = Instant::now();
    for i in 0..n {
        op(i);
    }
    println!("{name:<13} {:>7.1} µs", start.elapsed().as_secs_f64() * 1e6 / n as f64);
}

fn main() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "cronSpec": {"type": "string"}, "image": {"type": "string"}, "replicas": {"type": "integer"}}}}});
    let versions = CronTabVersions(Schema::custom_resource(Some(&schema)));
    let ignored = Set::new();
    let fm = FieldManager {
        versions: &versions,
        api_version: API_VERSION,
        kind: "CronTab",
        subresource: "",
        ignored: &ignored,
    };
    let placeholder = json!({"apiVersion": API_VERSION, "kind": "CronTab"});
    let mut live = fm.apply(&placeholder, &config(1), "bench", false, now()).unwrap();
    let meta = live["metadata"].as_object_mut().unwrap();
    meta.insert("uid".into(), json!("0b7c1a3e-5d6f-4e1a-9b2c-3d4e5f6a7b8c"));
    meta.insert("resourceVersion".into(), json!("5"));
    meta.insert("generation".into(), json!(1));
    let n = 50_000;
    println!("field manager, CronTab, in process:");
    measure("apply-create", n, |_| drop(fm.apply(&placeholder, &config(1), "bench", false, now()).unwrap()));
    measure("apply-change", n, |i| drop(fm.apply(&live, &config(2 + (i % 2) as i64), "bench", false, now()).unwrap()));
    measure("apply-noop", n, |_| drop(fm.apply(&live, &config(1), "bench", false, now()).unwrap()));
    measure("update", n, |i| {
        let mut new = live.clone();
        new["spec"]["replicas"] = json!(i);
        fm.update(&live, &mut new, "kubectl-edit", now());
    });
}
