//! Conformance runner: feeds Kubernetes' own test tables (the JSON files of a conformance
//! directory, `../shared/conformance` by default) through crd-apiserver's schema engine (and the
//! conversion webhook checks) and
//! prints a pass rate per file. Reference data stays outside the repository; this only reads it.
//!
//! Usage: `cargo run --example conformance -- [DIR] [-v]` (see `hack/conformance.sh`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod conversion_cases;
mod crd_cases;
mod scenario_cases;
mod schema_cases;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// How one case went.
pub enum Verdict {
    Pass,
    Fail(String),
    /// Not ours to run (CEL rules, CRD updates, ...), with the reason.
    Skip(&'static str),
}

/// The tally of one file.
#[derive(Default)]
struct Tally {
    pass: usize,
    fail: Vec<(String, String)>,
    skipped: std::collections::BTreeMap<&'static str, usize>,
    skipped_names: Vec<(&'static str, String)>,
}

type Runner = fn(&Value, &Value) -> Verdict;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let verbose = args.iter().any(|a| a == "-v");
    let dir = args
        .iter()
        .find(|a| !a.starts_with('-'))
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance"));
    let files: &[(&str, Runner)] = &[
        ("openapi_validation", schema_cases::openapi_validation),
        ("ratcheting_unit", schema_cases::ratcheting_unit),
        ("pruning", schema_cases::pruning),
        ("defaulting", schema_cases::defaulting),
        ("listtype", schema_cases::listtype),
        ("objectmeta", schema_cases::objectmeta),
        ("crd_structural_schema", crd_cases::structural_schema),
        ("crd_validation", crd_cases::crd_validation),
        ("ratcheting_scenarios", scenario_cases::ratcheting_scenario),
        ("integration_http", scenario_cases::integration_http),
        ("conversion_webhook", conversion_cases::conversion_webhook),
    ];
    let (mut total_pass, mut total_run) = (0, 0);
    for (name, runner) in files {
        let path = dir.join(format!("{name}.json"));
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                println!("{name}: cannot read {}: {e}", path.display());
                continue;
            }
        };
        let file: Value = serde_json::from_str(&text).expect("conformance file is JSON");
        let mut tally = Tally::default();
        for case in file["cases"].as_array().into_iter().flatten() {
            let label = case["name"].as_str().unwrap_or("?").to_string();
            let verdict =
                std::panic::catch_unwind(|| runner(case, &file)).unwrap_or_else(|_| Verdict::Fail("panicked".into()));
            match verdict {
                Verdict::Pass => tally.pass += 1,
                Verdict::Fail(why) => tally.fail.push((label, why)),
                Verdict::Skip(reason) => {
                    *tally.skipped.entry(reason).or_default() += 1;
                    tally.skipped_names.push((reason, label));
                }
            }
        }
        let run = tally.pass + tally.fail.len();
        total_pass += tally.pass;
        total_run += run;
        let skipped: Vec<String> = tally.skipped.iter().map(|(r, n)| format!("{n} {r}")).collect();
        let rate = if run == 0 { 100.0 } else { 100.0 * tally.pass as f64 / run as f64 };
        println!(
            "{name:24} {:3}/{:<3} passed ({rate:5.1}%){}",
            tally.pass,
            run,
            if skipped.is_empty() { String::new() } else { format!("; skipped: {}", skipped.join(", ")) }
        );
        if verbose {
            for (reason, label) in &tally.skipped_names {
                println!("    SKIP {label} ({reason})");
            }
        }
        for (label, why) in &tally.fail {
            if verbose {
                println!("    FAIL {label}\n         {}", why.replace('\n', "\n         "));
            } else {
                println!("    FAIL {label}");
            }
        }
    }
    let rate = if total_run == 0 { 100.0 } else { 100.0 * total_pass as f64 / total_run as f64 };
    println!("{:24} {total_pass:3}/{total_run:<3} passed ({rate:5.1}%)", "total");
}

/// Whether a JSON value mentions CEL rules anywhere.
pub fn has_cel(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(k, v)| k == "x-kubernetes-validations" || has_cel(v)),
        Value::Array(items) => items.iter().any(has_cel),
        _ => false,
    }
}

/// Compares two sets of strings, as a verdict.
pub fn same_set(mut got: Vec<String>, want: &Value) -> Verdict {
    let mut want: Vec<String> =
        want.as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_string)).collect();
    got.sort();
    got.dedup();
    want.sort();
    want.dedup();
    if got == want { Verdict::Pass } else { Verdict::Fail(format!("got  {got:#?}\nwant {want:#?}")) }
}

/// Compares returned errors with expected `{type, field[, contains]}` entries as a multiset.
pub fn same_errors(
    got: &[crd_apiserver::core::field::FieldError],
    want: &Value,
    map_field: impl Fn(&str) -> String,
) -> Verdict {
    let mut remaining: Vec<(String, String, String)> =
        got.iter().map(|e| (e.kind.reason().to_string(), map_field(e.field.as_str()), e.to_string())).collect();
    let mut missing = Vec::new();
    for expected in want.as_array().into_iter().flatten() {
        let kind = expected["type"].as_str().unwrap_or_default();
        let field = expected["field"].as_str().unwrap_or_default();
        let contains = expected["contains"].as_str().unwrap_or_default();
        match remaining.iter().position(|(k, f, text)| k == kind && f == field && text.contains(contains)) {
            Some(i) => {
                remaining.remove(i);
            }
            None => missing.push(format!("{kind} {field} {contains}")),
        }
    }
    if missing.is_empty() && remaining.is_empty() {
        Verdict::Pass
    } else {
        let extra: Vec<&String> = remaining.iter().map(|(_, _, t)| t).collect();
        Verdict::Fail(format!("missing {missing:#?}\nunexpected {extra:#?}"))
    }
}
