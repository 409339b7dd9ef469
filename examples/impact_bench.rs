//! Impact analyses over a real sled store, in process.
//!
//! `impact_bench fill DIR OBJECTS EXCEEDING` writes OBJECTS CronTabs of about 1 KiB (the seeds'
//! CronTab, `manifests/examples/crontabs.yaml`, stored in v1, as a server stores them) into a
//! new sled store at DIR, EXCEEDING of them (spread evenly) with 7 replicas and the others with
//! 3; `crd-apiserver impact --storage DIR` then reads it as a stopped server's store
//! (`hack/impact-example.sh`, the README's worked example).
//!
//! `impact_bench bench DIR [SLED-CACHE-MIB]` runs `impact::analyze` over the store filled so, for the CronTab
//! with one CEL rule added (`self.replicas <= 5` on `spec`), and prints objects per second of
//! wall time and per CPU-second of the process, and the peak resident memory
//! (`hack/bench-impact.sh`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use bytes::Bytes;
use crd_apiserver::definitions::load::Loaded;
use crd_apiserver::definitions::reload::Served;
use crd_apiserver::impact::{self, candidate};
use crd_apiserver::lifecycle::stored_versions;
use crd_apiserver::store::sled::{SledOptions, SledStore};
use crd_apiserver::store::{Backend, Store, key};
use serde_json::{Value, json};

/// The allocator the `crd-apiserver` binary runs with (`src/main.rs`), so that the figures are
/// those of `crd-apiserver impact` and of the server's analyses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CRONTAB: &str = include_str!("../manifests/examples/crontabs.yaml");

/// The text of an annotation that brings an object to about 1 KiB.
fn padding() -> String {
    "The nightly report of the accounting team: it reads the ledger, sums every account, \
     and mails the totals to the finance list. "
        .repeat(6)
}

fn object(i: u64, replicas: u64, padding: &str) -> Bytes {
    let value = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": format!("ct-{i:05}"), "namespace": "default",
            "uid": format!("6f1c1d2e-0000-4000-8000-{i:012}"), "generation": 1,
            "creationTimestamp": "2026-11-25T10:00:00Z", "labels": {"app": "reports", "team": "accounting"},
            "annotations": {"example.com/description": padding}},
        "spec": {"cronSpec": "0 2 * * *", "image": "registry.example.com/reports:1.4.2", "replicas": replicas}});
    Bytes::from(serde_json::to_vec(&value).unwrap())
}

fn fill(dir: &Path, objects: u64, exceeding: u64) {
    assert!(!dir.exists(), "{} exists: fill writes a new store", dir.display());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let store = Backend::Sled(SledStore::open(dir, SledOptions::default()).unwrap());
    runtime.block_on(async {
        stored_versions::add(&store, "crontabs.stable.example.com", "v1").await.unwrap();
        let padding = padding();
        // Every (objects / exceeding)-th object, from the middle of the first stretch.
        let stride = objects.checked_div(exceeding).unwrap_or(u64::MAX);
        let exceeds = |i: u64| exceeding > 0 && i % stride == stride / 2 && i / stride < exceeding;
        let mut written = 0;
        let indices: Vec<u64> = (0..objects).collect();
        for chunk in indices.chunks(500) {
            let writes = chunk.iter().map(|&i| {
                let store = store.clone();
                let bytes = object(i, if exceeds(i) { 7 } else { 3 }, &padding);
                async move {
                    let key = key::object_key("stable.example.com", "crontabs", Some("default"), &format!("ct-{i:05}"));
                    store.create(&key, bytes).await
                }
            });
            for result in futures_util::future::join_all(writes).await {
                result.unwrap();
                written += 1;
            }
        }
        let size = object(0, 3, &padding).len();
        println!("{written} CronTabs of {size} bytes in {}, {exceeding} of them with 7 replicas", dir.display());
    });
    store.close();
}

fn loaded(text: &str) -> Loaded {
    candidate::parse(text.as_bytes(), "bench").unwrap()
}

/// Seconds of CPU the process has used (user and system), from `/proc/self/stat`.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() / 1024
}

/// `cache_mib`: sled's page cache (the server's default when `None`); a small one shows the
/// scan's own memory, which does not grow with the number of objects.
fn bench(dir: &Path, cache_mib: Option<u64>) {
    let current = loaded(CRONTAB);
    let mut manifest: Value = serde_saphyr::from_str(CRONTAB).unwrap();
    manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] =
        json!([{"rule": "self.replicas <= 5", "message": "at most 5 replicas"}]);
    let candidate = loaded(&serde_json::to_string(&manifest).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let mut options = SledOptions::default();
    if let Some(mib) = cache_mib {
        options.cache_capacity = mib << 20;
    }
    let store = Backend::Sled(SledStore::open(dir, options).unwrap());
    let served = HashMap::from([(
        current.definition.name.clone(),
        Served { loaded: current.clone(), file: PathBuf::from("crontabs.yaml") },
    )]);
    let stored = vec!["v1".to_string()];
    let subject = impact::Subject {
        served: &served,
        candidate: &candidate,
        file: Path::new("candidate.yaml"),
        stored_versions: &stored,
    };
    let rss_before = peak_rss_mib();
    let (cpu, wall) = (cpu_seconds(), Instant::now());
    let report = impact::analyze(
        &store,
        runtime.handle(),
        &subject,
        &impact::Options::default(),
        &AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap();
    let (wall, cpu) = (wall.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    let objects = report.objects as f64;
    println!("{}", report.summary());
    println!(
        "{} objects in {wall:.2} s: {:.0} objects/s; {cpu:.2} CPU-seconds: {:.0} objects per CPU-second; \
         peak resident memory {rss_before} MiB before, {} MiB after",
        report.objects,
        objects / wall,
        objects / cpu.max(0.01),
        peak_rss_mib()
    );
    store.close();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("fill") => fill(Path::new(&args[2]), args[3].parse().unwrap(), args[4].parse().unwrap()),
        Some("bench") => bench(Path::new(&args[2]), args.get(3).map(|mib| mib.parse().unwrap())),
        _ => {
            eprintln!("usage: impact_bench fill DIR OBJECTS EXCEEDING | impact_bench bench DIR [SLED-CACHE-MIB]");
            std::process::exit(2);
        }
    }
}
