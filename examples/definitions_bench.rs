//! Definitions alone, in process, for `hack/bench-definitions.sh`: the time and resident
//! memory of each step a server takes with a directory of definitions — loading (parse, check,
//! compile schemas, CEL rules and field manager types), the registry, discovery and the
//! OpenAPI index, then the OpenAPI documents (built on first request).
//!
//! Usage: definitions_bench DIR [--load-only | --reloads N]   (`--reloads`: only the reloads, N
//! of them, e.g. under a profiler)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::time::Instant;

use crd_apiserver::api::Catalog;
use crd_apiserver::definitions::{Registry, load_paths};

/// Resident memory in MiB, from /proc.
fn rss() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: f64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096.0 / 1048576.0
}

fn step<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let (before, start) = (rss(), Instant::now());
    let out = f();
    println!(
        "{name:<28} {:>9.1} ms   resident {:>7.1} MiB ({:+.1})",
        start.elapsed().as_secs_f64() * 1000.0,
        rss(),
        rss() - before
    );
    out
}

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("usage: definitions_bench DIR"));
    let report = step("load definitions", || load_paths(std::slice::from_ref(&dir)));
    assert!(report.problems.is_empty(), "{:?}", report.problems.first());
    let count = report.definitions.len();
    let (registry, conflicts) = step("registry", || Registry::build(report.definitions));
    assert!(conflicts.is_empty());
    match std::env::args().nth(2).as_deref() {
        Some("--load-only") => return,
        Some("--reloads") => {
            let rounds = std::env::args().nth(3).and_then(|n| n.parse().ok()).unwrap_or(3);
            return reload(&dir, rounds);
        }
        _ => {}
    }
    let catalog = step("discovery + OpenAPI index", || Catalog::new(registry));
    let groups: Vec<(String, Vec<String>)> =
        catalog.registry.groups().map(|(g, vs)| (g.to_string(), vs.to_vec())).collect();
    step("OpenAPI v3, every document", || {
        for (group, versions) in &groups {
            for version in versions {
                assert!(catalog.openapi.v3(group, version).is_some());
            }
        }
    });
    let v2 = step("OpenAPI v2", || catalog.openapi.v2().clone());
    println!("OpenAPI v2: {} bytes, hash {}", v2.body.len(), v2.hash);
    println!("{count} definitions, {:.1} MiB resident", rss());
    reload(&dir, 3);
}

/// A reload as the server runs it after one file of DIR changed (`cli::live_definitions`
/// without the store's records): scan, plan, catalog from the previous one, step by step.
fn reload(dir: &std::path::Path, rounds: usize) {
    use crd_apiserver::definitions::reload::{self, Context};
    use crd_apiserver::definitions::scan::FileCache;
    let paths = [dir.to_path_buf()];
    let (age, stored) = (|_: &str| None, |_: &str| Vec::new());
    let context = Context { age: &age, stored_versions: &stored, accepted: &reload::nothing_accepted };
    let mut cache = FileCache::default();
    let mut plan = reload::first_plan(&cache.scan(&paths), &context);
    let mut catalog = Catalog::new(std::mem::take(&mut plan.registry));
    // The file to change: DEFINITIONS_BENCH_FILE in DIR, or the first by name.
    let file = match std::env::var("DEFINITIONS_BENCH_FILE") {
        Ok(name) => dir.join(name),
        Err(_) => std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).min().unwrap(),
    };
    let original = std::fs::read(&file).unwrap();
    // JSON or YAML; written back as JSON (YAML too).
    let parsed: serde_json::Value = serde_saphyr::from_str(std::str::from_utf8(&original).unwrap()).unwrap();
    let group = parsed["spec"]["group"].as_str().unwrap().to_string();
    // Its group's OpenAPI v2 slice, built as the aggregator's download builds it.
    step("  its group's v2 slice", || catalog.openapi.v2_slice(&group).unwrap());
    println!("-- reloads, {} changed each time:", file.display());
    for round in 0..rounds {
        // A version added, then taken away again.
        let mut manifest = parsed.clone();
        if round % 2 == 0 {
            let mut extra = manifest["spec"]["versions"][0].clone();
            extra["name"] = "v1alpha9".into();
            extra["storage"] = false.into();
            manifest["spec"]["versions"].as_array_mut().unwrap().push(extra);
        }
        std::fs::write(&file, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
        let start = Instant::now();
        let scan = step("  scan (read every file)", || cache.scan(&paths));
        let mut next = step("  plan", || reload::plan(&plan.served, &scan, &context));
        assert_eq!(next.changed.len(), 1, "{:?}", next.problems.first());
        let registry = std::mem::take(&mut next.registry);
        catalog = step("  catalog", || Catalog::next(&catalog, registry));
        println!("  reload {round}: {:.1} ms", start.elapsed().as_secs_f64() * 1000.0);
        step("  its group's v2 slice", || catalog.openapi.v2_slice(&group).unwrap());
        plan = next;
    }
    std::fs::write(&file, original).unwrap();
}
