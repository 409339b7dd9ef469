//! Definitions alone, in process, for `hack/bench-definitions.sh`: the time and resident
//! memory of each step a server takes with a directory of definitions — loading (parse, check,
//! compile schemas, CEL rules and field manager types), the registry, discovery and the
//! OpenAPI index, then the OpenAPI documents (built on first request).
//!
//! Usage: definitions_bench DIR [--load-only]
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
    let report = step("load definitions", || load_paths(&[dir]));
    assert!(report.problems.is_empty(), "{:?}", report.problems.first());
    let count = report.definitions.len();
    let (registry, conflicts) = step("registry", || Registry::build(report.definitions));
    assert!(conflicts.is_empty());
    if std::env::args().nth(2).as_deref() == Some("--load-only") {
        return;
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
}
