//! Feeds Kubernetes' CEL test cases (the conformance JSON kept beside the repository:
//! `cel_validation.json`; `cel_cost_and_compile.json` with its runtime costs, estimated costs
//! and per-rule compile results; the definition cases of `crd_validation.json` that carry
//! rules, compared on the errors about rules) through `crd_apiserver::cel` and prints the pass
//! rate. Run by `hack/cel-conformance.sh`; not part of the test suite.

#![allow(clippy::indexing_slicing)] // JSON test data indexed with serde_json's total `Index`.

use std::process::ExitCode;

use crd_apiserver::cel::{self, Rules};
use crd_apiserver::core::field::{FieldError, Path};
use serde_json::Value;

fn budget_of(options: &Value) -> i64 {
    match options.get("cost_budget") {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(cel::RUNTIME_COST_BUDGET),
        Some(Value::String(s)) if s == "unlimited" => i64::MAX,
        _ => cel::RUNTIME_COST_BUDGET,
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Cost cases (cel_cost_and_compile.json): exact runtime and estimated costs.
fn run_cost_case(case: &Value) -> Option<Result<(), String>> {
    let expect = &case["expect"];
    let is_root = case["options"]["is_root"].as_bool().unwrap_or(false);
    let (rules, _) = Rules::compile_node(&case["schema"], &Path::new("openAPIV3Schema"), is_root);
    match case["kind"].as_str()? {
        "runtime_cost" => {
            let want = expect["runtime_cost"].as_i64()?;
            let out = rules.validate_at(&Path::new("root"), &case["object"], None, cel::RUNTIME_COST_BUDGET);
            let got = cel::RUNTIME_COST_BUDGET - out.remaining_budget;
            Some(if out.errors.is_empty() && got == want {
                Ok(())
            } else {
                Err(format!("cost {got}, want {want}; {:?}", out.errors))
            })
        }
        "estimated_cost" => {
            let want = expect["estimated_max_cost"].as_u64()?;
            let got = rules.root_rule_costs().first().copied().flatten();
            Some(if got == Some(want) { Ok(()) } else { Err(format!("estimate {got:?}, want {want}")) })
        }
        _ => None,
    }
}

/// Compile cases (cel_cost_and_compile.json): one matcher per rule on the schema's root.
fn run_compile_case(case: &Value) -> Result<(), String> {
    let is_root = case["options"]["is_root"].as_bool().unwrap_or(false);
    let (rules, _) = Rules::compile_node(&case["schema"], &Path::new("openAPIV3Schema"), is_root);
    let mut outcomes = rules.root_rule_outcomes().into_iter();
    let specs = case["schema"]["x-kubernetes-validations"].as_array().cloned().unwrap_or_default();
    let matchers = case["expect"]["per_rule_results"].as_array().cloned().unwrap_or_default();
    if specs.len() != matchers.len() {
        return Err(format!("{} rules, {} matchers", specs.len(), matchers.len()));
    }
    for (i, (spec, matcher)) in specs.iter().zip(&matchers).enumerate() {
        // A rule with no text compiles to no program and no error.
        let outcome = if spec["rule"].as_str().unwrap_or("").trim().is_empty() { None } else { outcomes.next() };
        if !compile_matches(matcher, outcome.as_ref()) {
            return Err(format!("rule {i}: {outcome:?} does not satisfy {matcher}"));
        }
    }
    Ok(())
}

/// Whether one compile outcome (`None`: no program) satisfies a matcher of the case.
fn compile_matches(matcher: &Value, outcome: Option<&cel::RuleOutcome>) -> bool {
    if let Some(all) = matcher.get("all").and_then(Value::as_array) {
        return all.iter().all(|m| compile_matches(m, outcome));
    }
    let error = outcome.and_then(|o| o.error.as_deref());
    if matcher.get("no_error").is_some() {
        return error.is_none();
    }
    if matcher.get("uses_oldSelf").is_some() {
        return outcome.is_some_and(|o| o.uses_old_self) == matcher["uses_oldSelf"].as_bool().unwrap_or(false);
    }
    if matcher.get("custom_predicate").is_some_and(|p| p == "program is nil") {
        return outcome.is_none();
    }
    if let Some(wanted) = matcher.get("contains").and_then(Value::as_str) {
        return error.is_some_and(|e| e.contains(wanted));
    }
    false
}

/// The schema of a definition case (crd_validation.json) whose rules can be checked alone.
fn definition_schema(case: &Value) -> Option<&Value> {
    let schema = match case["operation"].as_str()? {
        "validate-schema" => &case["validation"]["openAPIV3Schema"],
        "create" => &case["crd_internal"]["spec"]["validation"]["openAPIV3Schema"],
        _ => return None,
    };
    schema.get("type").and(serde_json::to_string(schema).ok()?.contains("x-kubernetes-validations").then_some(schema))
}

/// Definition cases: the errors compiling the schema's rules gives, against the errors
/// Kubernetes reports about rules (under `x-kubernetes-validations`, and the schema-wide cost).
fn run_definition_case(case: &Value) -> Result<(), String> {
    let schema = definition_schema(case).ok_or("not a rules case")?;
    let root = "spec.validation.openAPIV3Schema";
    let (_, errs) = Rules::compile(schema, &Path::new(root));
    let mut got: Vec<(String, String)> =
        errs.iter().map(|e| (e.kind.reason().to_string(), e.field.to_string())).collect();
    let about_rules = |field: &str, kind: &str| {
        field.contains("x-kubernetes-validations") || (field == root && kind == "FieldValueForbidden")
    };
    let mut want: Vec<(String, String)> = strings_of(&case["expect"]["errors"], "type")
        .into_iter()
        .zip(strings_of(&case["expect"]["errors"], "field"))
        .filter(|(kind, field)| about_rules(field, kind))
        .collect();
    got.sort();
    want.sort();
    if got == want { Ok(()) } else { Err(format!("errors {got:?}, want {want:?}")) }
}

fn strings_of(list: &Value, key: &str) -> Vec<String> {
    list.as_array().map(|a| a.iter().map(|e| e[key].as_str().unwrap_or("").to_string()).collect()).unwrap_or_default()
}

/// Whether a case of the file is one this runner checks.
fn is_cel_case(case: &Value) -> bool {
    case.get("operation").is_none() || definition_schema(case).is_some()
}

/// Whether the outcome of one case matches what Kubernetes' test expects; `Err` explains.
fn run_case(case: &Value) -> Result<(), String> {
    let expect = &case["expect"];
    if case.get("kind").is_some_and(|k| k == "runtime_cost" || k == "estimated_cost") {
        return run_cost_case(case).unwrap_or_else(|| Err("not run".into()));
    }
    if case.get("kind").is_some_and(|k| k == "compile") {
        return run_compile_case(case);
    }
    if case.get("operation").is_some() {
        return run_definition_case(case);
    }
    if case["test"] == "TestValidateFieldPath" {
        let got = cel::resolve_field_path(&case["schema"], case["field_path"].as_str().unwrap_or(""));
        return match (expect["ok"].as_bool(), got) {
            (Some(true), Ok(_)) => Ok(()),
            (Some(false), Err(e)) => {
                let want = strings(expect.get("errors"));
                if want.iter().all(|w| e.contains(w.as_str())) {
                    Ok(())
                } else {
                    Err(format!("error {e:?}, want {want:?}"))
                }
            }
            (_, got) => Err(format!("got {got:?}")),
        };
    }
    let options = &case["options"];
    let is_root = options["is_root"].as_bool().unwrap_or(false);
    let (rules, _load_errors) = Rules::compile_node(&case["schema"], &Path::new("openAPIV3Schema"), is_root);
    let old = case.get("old_object").filter(|o| !o.is_null());
    let root = Path::new(options["error_path_root"].as_str().unwrap_or("root"));
    let per_call = options.get("per_call_limit").and_then(Value::as_u64).unwrap_or(cel::PER_CALL_LIMIT);
    let outcome = rules.validate_with_limits(&root, &case["object"], old, budget_of(options), per_call);
    let errs: Vec<String> = outcome.errors.iter().map(FieldError::to_string).collect();
    let summary = || format!("errors {errs:?} warnings {:?}", outcome.warnings);
    if expect["ok"].as_bool() == Some(true) && expect.get("warnings_exact").is_none() {
        return if errs.is_empty() { Ok(()) } else { Err(summary()) };
    }
    if let Some(n) = expect.get("exact_error_count").and_then(Value::as_u64) {
        if errs.len() as u64 != n {
            return Err(format!("want {n} errors; {}", summary()));
        }
    }
    if let Some(w) = expect.get("warnings_exact") {
        let want = strings(Some(w));
        if want != outcome.warnings {
            return Err(format!("want warnings {want:?}; {}", summary()));
        }
    }
    if let Some(set) = expect.get("errors_exact_set").and_then(Value::as_array) {
        let mut want: Vec<(String, String)> = set
            .iter()
            .map(|e| (e["type"].as_str().unwrap_or("").to_string(), e["field"].as_str().unwrap_or("").to_string()))
            .collect();
        let mut got: Vec<(String, String)> =
            outcome.errors.iter().map(|e| (e.kind.reason().to_string(), e.field.to_string())).collect();
        want.sort();
        got.sort();
        want.dedup();
        got.dedup();
        return if want == got { Ok(()) } else { Err(format!("want {want:?}; got {got:?}")) };
    }
    let want = strings(expect.get("errors"));
    if !want.is_empty() && errs.is_empty() {
        return Err(format!("want errors {want:?}; {}", summary()));
    }
    for w in &want {
        if !errs.iter().any(|e| e.contains(w.as_str())) {
            return Err(format!("want an error containing {w:?}; {}", summary()));
        }
    }
    if let Some(remaining) = expect.get("remaining_budget").and_then(Value::as_i64) {
        let matches = if remaining < 0 { outcome.remaining_budget < 0 } else { outcome.remaining_budget == remaining };
        if !matches {
            return Err(format!("want remaining budget {remaining}, got {}", outcome.remaining_budget));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let path = std::env::args().nth(1).unwrap_or_else(|| "../shared/conformance/cel_validation.json".into());
    let verbose = std::env::args().any(|a| a == "-v");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let data: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let mut cases = data["cases"].as_array().cloned().unwrap_or_default();
    cases.retain(is_cel_case);
    let mut passed = 0;
    let mut by_test: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    for case in &cases {
        let result = std::panic::catch_unwind(|| run_case(case)).unwrap_or_else(|_| Err("panicked".into()));
        let entry = by_test.entry(case["test"].as_str().unwrap_or("").to_string()).or_default();
        entry.1 += 1;
        match result {
            Ok(()) => {
                passed += 1;
                entry.0 += 1;
            }
            Err(why) => {
                if verbose {
                    println!("FAIL {}: {why}", case["name"].as_str().unwrap_or(""));
                }
            }
        }
    }
    for (test, (p, n)) in &by_test {
        println!("{test}: {p}/{n}");
    }
    println!(
        "cel_validation: {passed}/{} passed ({:.1}%)",
        cases.len(),
        100.0 * passed as f64 / cases.len().max(1) as f64
    );
    ExitCode::SUCCESS
}
