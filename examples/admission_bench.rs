//! Admission cost on the write path, in process, for `hack/bench-admission.sh` (release
//! build): CronTab creates through `Api::serve_resource` (sled store, group commit, concurrent
//! writers) with no admission configuration (the path before admission existed, plus one index
//! probe), with 10 and 100 webhook configurations that do not match, and with one matching
//! ValidatingAdmissionPolicy, and with one matching MutatingAdmissionPolicy (an apply
//! configuration setting a label); then the admission step alone per write, and one simple rule
//! as a policy against the same rule as `x-kubernetes-validations`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{Method, Request, header};
use serde_json::{Value, json};

use crd_apiserver::admission::mutating_policy::compiled::MutatingPolicySet;
use crd_apiserver::admission::policy::compiled::PolicySet;
use crd_apiserver::admission::{
    Admission, NameLabelOnly, Operation, Plugins, Request as Attributes, Target, configuration,
};
use crd_apiserver::api::body::request_body;
use crd_apiserver::api::{Api, ApiOptions};
use crd_apiserver::core::request_info::{Query, RequestInfo};
use crd_apiserver::core::user::UserInfo;
use crd_apiserver::definitions::{Registry, load};
use crd_apiserver::store::Backend;
use crd_apiserver::store::sled::{SledOptions, SledStore};

const WRITERS: usize = 32;
const CREATES: usize = 20_000;
const PROBES: usize = 200_000;

fn webhook_configurations(
    n: usize,
) -> Vec<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> {
    (0..n)
        .map(|i| {
            serde_json::from_value(json!({"metadata": {"name": format!("other-{i}")}, "webhooks": [{
                "name": format!("hook-{i}.other.example.com"), "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": "https://127.0.0.1:1/never"},
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [format!("group-{i}.other.example.com")],
                    "apiVersions": ["*"], "resources": ["things", "widgets"]}]}]}))
            .unwrap()
        })
        .collect()
}

fn matching_policy() -> PolicySet {
    let policy = serde_json::from_value(json!({"metadata": {"name": "replicas"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": ["stable.example.com"], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["crontabs"]}]},
        "validations": [{"expression": "object.spec.replicas <= 100"}]}}))
    .unwrap();
    let binding = serde_json::from_value(json!({"metadata": {"name": "replicas-binding"}, "spec": {"policyName": "replicas", "validationActions": ["Deny"]}})).unwrap();
    PolicySet::build(&[policy], &[binding])
}

/// A MutatingAdmissionPolicy labelling every CronTab created.
fn mutating_policy() -> MutatingPolicySet {
    let policy = json!({"metadata": {"name": "label"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": ["stable.example.com"], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["crontabs"]}]},
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{metadata: Object.metadata{labels: {'team': 'a'}}}"}}]}});
    let binding = json!({"metadata": {"name": "label-binding"}, "spec": {"policyName": "label"}});
    MutatingPolicySet::from_json(&[policy], &[binding])
}

/// What admission is configured with.
#[derive(Clone, Copy, PartialEq)]
enum Policy {
    None,
    Validating,
    Mutating,
}

fn admission(configurations: usize, policy: Policy) -> Admission {
    let admission = Admission::new(Arc::new(NameLabelOnly), Plugins::default());
    admission.set_webhooks(configuration::index(&[], &webhook_configurations(configurations)));
    admission.set_policies(if policy == Policy::Validating { matching_policy() } else { PolicySet::default() });
    admission.set_mutating_policies(if policy == Policy::Mutating {
        mutating_policy()
    } else {
        MutatingPolicySet::default()
    });
    admission
}

fn registry() -> Registry {
    let manifest = std::fs::read_to_string("manifests/examples/crontabs.yaml").expect("run from the repository root");
    let doc = load::parse_documents(&manifest).unwrap().into_iter().next().unwrap();
    Registry::build(vec![load::definition_from_value(doc, "crontabs.yaml").map_err(|p| p.errors).unwrap()]).0
}

fn create_request(i: usize) -> Request<crd_apiserver::api::body::ReqBody> {
    let path = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    let body = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": format!("c{i}")},
        "spec": {"cronSpec": "*/5 * * * *", "image": "cron:1", "replicas": 3}});
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(request_body(Bytes::from(body.to_string())))
        .unwrap();
    request.extensions_mut().insert(RequestInfo::parse(&Method::POST, path, &Query::parse(None)).unwrap());
    request.extensions_mut().insert(UserInfo::new("bench", vec!["system:masters".into()]));
    request
}

/// Creates per second with `WRITERS` concurrent writers.
fn create_throughput(runtime: &tokio::runtime::Runtime, admission: Admission) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let store =
        SledStore::open(dir.path(), SledOptions { cache_capacity: 64 << 20, ..SledOptions::default() }).unwrap();
    let api =
        Arc::new(Api::new(Backend::Sled(store), registry(), ApiOptions::default()).with_admission(Arc::new(admission)));
    runtime.block_on(async {
        let start = Instant::now();
        let tasks: Vec<_> = (0..WRITERS)
            .map(|w| {
                let api = api.clone();
                tokio::spawn(async move {
                    for i in (w..CREATES).step_by(WRITERS) {
                        let response = api.serve_resource(create_request(i)).await;
                        assert_eq!(response.status(), 201);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        CREATES as f64 / start.elapsed().as_secs_f64()
    })
}

/// Nanoseconds per write of the admission steps alone (`begin` first, as the API layer calls
/// it; mutating then validating).
fn admission_step(runtime: &tokio::runtime::Runtime, admission: &Admission, object: &Value) -> f64 {
    let registry = registry();
    let served = registry.lookup("stable.example.com", "v1", "crontabs").unwrap();
    let user = UserInfo::new("bench", vec![]);
    let options = json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"});
    let request = Attributes {
        operation: Operation::Create,
        definition: &served.definition,
        version: "v1",
        target: Target {
            group: "stable.example.com",
            resource: "crontabs",
            subresource: "",
            namespace: "default",
            name: "c",
        },
        user: &user,
        dry_run: false,
        options: &options,
    };
    // One object mutated in place: a mutating policy does all its work each time (evaluation
    // and merge), and its label is already there from the second write on.
    let mut object = object.clone();
    let start = Instant::now();
    admission_step_loop(runtime, admission, &request, &mut object);
    start.elapsed().as_secs_f64() * 1e9 / PROBES as f64
}

/// The measured loop of [`admission_step`] (apart, for callgrind's `--toggle-collect`).
#[inline(never)]
fn admission_step_loop(
    runtime: &tokio::runtime::Runtime,
    admission: &Admission,
    request: &Attributes<'_>,
    object: &mut Value,
) {
    runtime.block_on(async {
        for _ in 0..PROBES {
            if let Some(step) = admission.begin("stable.example.com", "crontabs") {
                step.mutate(request, Some(object), None).await.unwrap();
                step.validate(request, Some(object), None).await.unwrap();
            }
        }
    })
}

/// Nanoseconds per evaluation of `self.spec.replicas <= 100` as `x-kubernetes-validations`.
fn schema_rule(object: &Value) -> f64 {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": "self.replicas <= 100"}],
        "properties": {"cronSpec": {"type": "string"}, "image": {"type": "string"}, "replicas": {"type": "integer"}}}}});
    let (rules, errors) = crd_apiserver::cel::Rules::compile(&schema, &crd_apiserver::core::field::Path::nil());
    assert!(errors.is_empty());
    let start = Instant::now();
    schema_rule_loop(&rules, object);
    start.elapsed().as_secs_f64() * 1e9 / PROBES as f64
}

/// The measured loop of [`schema_rule`] (apart, for callgrind's `--toggle-collect`).
#[inline(never)]
fn schema_rule_loop(rules: &crd_apiserver::cel::Rules, object: &Value) {
    for _ in 0..PROBES {
        assert!(rules.validate(object, None).errors.is_empty());
    }
}

fn main() {
    // Rounds of the throughput runs (argument; default 3; 0 measures the steps alone).
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    // A second argument runs one step alone, for instruction counts under callgrind
    // (hack/callgrind-admission.sh): `vap`, `map`, `none`, `hooks10`, `hooks100` (10 or 100
    // non-matching webhook configurations) or `schema`.
    let only = std::env::args().nth(2);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let object = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "c", "namespace": "default"},
        "spec": {"cronSpec": "*/5 * * * *", "image": "cron:1", "replicas": 3}});
    let scenarios: [(&str, usize, Policy); 5] = [
        ("no configuration (before)", 0, Policy::None),
        ("10 non-matching webhook configurations", 10, Policy::None),
        ("100 non-matching webhook configurations", 100, Policy::None),
        ("1 matching ValidatingAdmissionPolicy", 0, Policy::Validating),
        ("1 matching MutatingAdmissionPolicy", 0, Policy::Mutating),
    ];
    // Rounds interleave the scenarios, so that other load on the machine spreads over all of
    // them; each scenario reports its median.
    let mut rates = vec![Vec::new(); scenarios.len()];
    for _ in 0..rounds {
        for (i, (_, configurations, policy)) in scenarios.iter().enumerate() {
            rates[i].push(create_throughput(&runtime, admission(*configurations, *policy)));
        }
    }
    if rounds > 0 {
        report_throughput(&scenarios, &mut rates, rounds);
    }
    if let Some(only) = only {
        let ns = match only.as_str() {
            "schema" => schema_rule(&object),
            "vap" => admission_step(&runtime, &admission(0, Policy::Validating), &object),
            "map" => admission_step(&runtime, &admission(0, Policy::Mutating), &object),
            "hooks10" => admission_step(&runtime, &admission(10, Policy::None), &object),
            "hooks100" => admission_step(&runtime, &admission(100, Policy::None), &object),
            _ => admission_step(&runtime, &admission(0, Policy::None), &object),
        };
        println!("{only}: {ns:.0} ns");
        return;
    }
    println!("admission step alone, per write:");
    for (name, configurations, policy) in scenarios {
        let ns = admission_step(&runtime, &admission(configurations, policy), &object);
        println!("  {name:42} {ns:8.0} ns");
    }
    println!("the same rule as x-kubernetes-validations: {:.0} ns", schema_rule(&object));
}

/// Prints each scenario's median create rate and its ratio to the first.
fn report_throughput(scenarios: &[(&str, usize, Policy)], rates: &mut [Vec<f64>], rounds: usize) {
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let medians: Vec<f64> = rates.iter_mut().map(median).collect();
    println!("creates/s with {WRITERS} writers, {CREATES} CronTabs per run, median of {rounds} (sled, group commit):");
    for ((name, _, _), rate) in scenarios.iter().zip(&medians) {
        println!("  {name:42} {rate:8.0}/s  ratio {:.3}", rate / medians[0]);
    }
}
