//! Benchmark of CEL validation (release build: `hack/cel-bench.sh`): objects validated per
//! second for a CronTab carrying the documentation's replica rules, and for a list of 1,000
//! items under `self.all(...)`. Not part of the test suite.

use std::time::{Duration, Instant};

use crd_apiserver::cel::Rules;
use crd_apiserver::core::field::Path;
use serde_json::{Value, json};

/// Validates `object` repeatedly for about `seconds` and returns objects per second.
fn rate(rules: &Rules, object: &Value, old: Option<&Value>, seconds: f64) -> f64 {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_secs_f64(seconds) {
        for _ in 0..100 {
            let out = rules.validate(object, old);
            assert!(out.errors.is_empty(), "{:?}", out.errors);
            n += 1;
        }
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let crontab = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.minReplicas <= self.replicas", "message": "replicas should be greater than or equal to minReplicas."},
            {"rule": "self.replicas <= self.maxReplicas", "message": "replicas should be smaller than or equal to maxReplicas."}],
        "properties": {"minReplicas": {"type": "integer"}, "replicas": {"type": "integer"}, "maxReplicas": {"type": "integer"},
                       "cronSpec": {"type": "string"}, "image": {"type": "string"}},
        "required": ["minReplicas", "replicas", "maxReplicas"]}}});
    let (rules, errs) = Rules::compile(&crontab, &Path::nil());
    assert!(errs.is_empty(), "{errs:?}");
    let object = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "my-new-cron-object", "namespace": "default"},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "minReplicas": 1, "replicas": 5, "maxReplicas": 10}});
    println!("crontab with the docs' replica rules: {:.0} objects/s", rate(&rules, &object, None, 2.0));
    println!(
        "same, as an update (oldSelf bound, ratcheting checks): {:.0} objects/s",
        rate(&rules, &object, Some(&object), 2.0)
    );

    let list = json!({"type": "object", "properties": {"items": {"type": "array", "maxItems": 1000,
        "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}, "weight": {"type": "integer"}}},
        "x-kubernetes-validations": [{"rule": "self.all(i, i.weight >= 0 && i.name.startsWith('item-'))"}]}}});
    let (rules, errs) = Rules::compile(&list, &Path::nil());
    assert!(errs.is_empty(), "{errs:?}");
    let items: Vec<Value> = (0..1000).map(|i| json!({"name": format!("item-{i}"), "weight": i})).collect();
    let object = json!({"items": items});
    println!("list of 1,000 items under self.all(...): {:.0} objects/s", rate(&rules, &object, None, 3.0));
}
