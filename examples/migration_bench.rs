//! Storage-version migration throughput and memory, in process over a real sled store: loads N
//! CronTabs stored in v1beta1, makes v1 the storage version and runs the built-in migration
//! (`lifecycle::migrate`, `None` conversion, no rate limit) on a one-worker runtime while a
//! writer keeps updating random objects by compare-and-swap, as users would. Prints objects per
//! second and the resident memory before, during (peak) and after, then checks that every
//! acknowledged write is there and every object is in v1.
//! With `WRITES_PER_SECOND` 0 nothing writes meanwhile. When `PERF_CTL_FIFO` names the control
//! fifo of `perf stat --control fifo:... -D -1`, counting is enabled for the migration only
//! (`hack/bench-migration.sh` does this to give instructions per object).
//! `CACHE_MIB` is sled's page cache (the server's `--storage-cache-mb`, 256 by default).
//! Usage: migration_bench [OBJECTS] [WRITES_PER_SECOND] [DIR] [CACHE_MIB]  (hack/bench-migration.sh)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use crd_apiserver::definitions::Definition;
use crd_apiserver::definitions::load::definition_from_value;
use crd_apiserver::lifecycle::migrate::{self, progress::State};
use crd_apiserver::lifecycle::stored_versions;
use crd_apiserver::store::sled::{SledOptions, SledStore};
use crd_apiserver::store::{Backend, Store, key};
use serde_json::{Value, json};

fn crontab(storage: &str) -> Definition {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"cronSpec": {"type": "string"}, "image": {"type": "string"},
                       "replicas": {"type": "integer", "default": 1}}}}}});
    let versions: Vec<Value> = ["v1beta1", "v1"]
        .iter()
        .map(|v| json!({"name": v, "served": true, "storage": *v == storage, "schema": schema}))
        .collect();
    definition_from_value(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {"group": "stable.example.com", "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"}, "versions": versions}}),
        "bench",
    )
    .unwrap()
}

fn name(i: u64) -> String {
    format!("cron-{i:08}")
}

fn object(i: u64, version: &str, image: &str) -> Bytes {
    let value = json!({"apiVersion": format!("stable.example.com/{version}"), "kind": "CronTab",
        "metadata": {"name": name(i), "namespace": "default", "uid": format!("00000000-0000-0000-0000-{i:012}"),
            "generation": 1, "creationTimestamp": "2026-11-25T10:00:00Z", "labels": {"app": "bench"}},
        "spec": {"cronSpec": "* * * * */5", "image": image, "replicas": 3}});
    Bytes::from(serde_json::to_vec(&value).unwrap())
}

/// Tells `perf stat` (through its control fifo, when given) to start or stop counting.
fn perf_control(command: &str) {
    if let Ok(fifo) = std::env::var("PERF_CTL_FIFO") {
        use std::io::Write;
        let mut control = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
        control.write_all(format!("{command}\n").as_bytes()).unwrap();
        // perf polls the fifo; give it the moment to act before the measured work goes on.
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    kib / 1024
}

async fn load(store: &Backend, objects: u64) {
    let started = Instant::now();
    let mut next = 0;
    while next < objects {
        let end = (next + 2000).min(objects);
        let writes = (next..end).map(|i| {
            let key = key::object_key("stable.example.com", "crontabs", Some("default"), &name(i));
            async move { store.create(&key, object(i, "v1beta1", "original")).await }
        });
        for result in futures_util::future::join_all(writes).await {
            result.unwrap();
        }
        next = end;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!("loaded {objects} objects in v1beta1: {seconds:.1} s ({:.0} objects/s)", objects as f64 / seconds);
}

/// Updates random objects by compare-and-swap at about `rate` a second until `stop`; returns
/// the last acknowledged image of each object it wrote.
async fn writer(
    store: Backend,
    objects: u64,
    rate: u64,
    stop: Arc<AtomicBool>,
    counts: Arc<(AtomicU64, AtomicU64)>,
) -> HashMap<u64, String> {
    let mut acknowledged = HashMap::new();
    let mut n: u64 = 0;
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let i = seed % objects;
        let key = key::object_key("stable.example.com", "crontabs", Some("default"), &name(i));
        let current = store.get(&key).await.unwrap().unwrap();
        n += 1;
        let image = format!("user-{n}");
        match store.update(&key, current.revision, object(i, "v1", &image)).await {
            Ok(_) => {
                acknowledged.insert(i, image);
                counts.0.fetch_add(1, Ordering::Relaxed);
            }
            // The migrator rewrote it between the read and the write: a user would retry.
            Err(_) => {
                counts.1.fetch_add(1, Ordering::Relaxed);
            }
        }
        let due = Duration::from_secs_f64(n as f64 / rate as f64);
        if let Some(ahead) = due.checked_sub(started.elapsed()) {
            tokio::time::sleep(ahead).await;
        }
    }
    acknowledged
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let objects: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let write_rate: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(500);
    let base = args.get(3).map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let cache_mib: u64 = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(256);
    let dir = tempfile::tempdir_in(base).unwrap();
    // One worker: the migration's own work runs on one core (sled's writer has its thread).
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async {
        let options = SledOptions { cache_capacity: cache_mib << 20, ..SledOptions::default() };
        println!("sled page cache: {cache_mib} MiB");
        let store = Backend::Sled(SledStore::open(dir.path(), options).unwrap());
        load(&store, objects).await;
        stored_versions::add(&store, "crontabs.stable.example.com", "v1beta1").await.unwrap();
        let before = rss_mib();

        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let peak = Arc::new(AtomicU64::new(before));
        let sampler = {
            let (stop, peak) = (stop.clone(), peak.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_mib(), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        let users = (write_rate > 0)
            .then(|| tokio::spawn(writer(store.clone(), objects, write_rate, stop.clone(), counts.clone())));

        let definition = crontab("v1");
        stored_versions::record_storage_versions(&store, [&definition]).await.unwrap();
        perf_control("enable");
        let started = Instant::now();
        let mut pages = 0u64;
        // Resident memory as the migration goes, every tenth of the objects of each pass.
        let mut trace = [Vec::new(), Vec::new()];
        let step = (objects / 10).max(1);
        let progress = migrate::migrate(&store, &definition, migrate::Options::default(), &|| true, &mut |p| {
            pages += 1;
            let looked_at: u64 = p.objects_per_version.values().sum();
            let pass = &mut trace[usize::from(p.last_objects_per_version.is_some())];
            if looked_at / step > pass.len() as u64 {
                pass.push(rss_mib());
            }
        })
        .await
        .unwrap();
        let seconds = started.elapsed().as_secs_f64();
        perf_control("disable");
        stop.store(true, Ordering::Relaxed);
        let acknowledged = match users {
            Some(users) => users.await.unwrap(),
            None => HashMap::new(),
        };
        sampler.join().unwrap();
        let after = rss_mib();

        assert_eq!(progress.state, State::Done);
        println!(
            "migrated {} objects (+{} already rewritten by users) in {seconds:.2} s: {:.0} objects/s (two passes: \
             rewrite, then the check that none is left); {pages} pages",
            progress.migrated,
            progress.yielded_to_writers,
            objects as f64 / seconds,
        );
        println!(
            "users meanwhile: {} acknowledged writes to {} objects, {} conflicts (the migrator's rewrite came first)",
            counts.0.load(Ordering::Relaxed),
            acknowledged.len(),
            counts.1.load(Ordering::Relaxed)
        );
        println!(
            "resident memory: before {before} MiB, during (peak) {} MiB, after {after} MiB",
            peak.load(Ordering::Relaxed)
        );
        for (pass, trace) in ["first pass (rewrite)", "second pass (check)"].iter().zip(&trace) {
            let trace: Vec<String> = trace.iter().map(u64::to_string).collect();
            println!("resident memory every tenth of the {pass} (MiB): {}", trace.join(" "));
        }

        // Nothing lost or overwritten: every object in v1, each user write as acknowledged.
        let stored = stored_versions::read(&store, "crontabs.stable.example.com").await.unwrap();
        assert_eq!(stored, ["v1"]);
        for (i, image) in &acknowledged {
            let key = key::object_key("stable.example.com", "crontabs", Some("default"), &name(*i));
            let value: Value = serde_json::from_slice(&store.get(&key).await.unwrap().unwrap().value).unwrap();
            assert_eq!(value["spec"]["image"], json!(image), "{key}");
        }
        let prefix = key::resource_prefix("stable.example.com", "crontabs");
        let mut left = 0u64;
        let mut after_key = None;
        loop {
            let options = crd_apiserver::store::ListOptions {
                start_after: after_key.clone(),
                limit: Some(5000),
                ..Default::default()
            };
            let page = store.list(&prefix, options).await.unwrap();
            let needle: &[u8] = b"\"stable.example.com/v1\"";
            left += page.items.iter().filter(|kv| !kv.value.windows(needle.len()).any(|w| w == needle)).count() as u64;
            after_key = page.items.last().map(|kv| kv.key.clone());
            if !page.more {
                break;
            }
        }
        assert_eq!(left, 0, "objects left in another version");
        println!("checked: storedVersions [\"v1\"], every acknowledged user write intact, no object left in v1beta1");
        let closing = store.clone();
        tokio::task::spawn_blocking(move || closing.close()).await.unwrap();
    });
}
