//! Regression tests for CEL at the edges of its value ranges and budgets, found by fuzzing:
//! arithmetic past int64, uint64, durations and timestamps fails with cel-go's overflow
//! errors; results larger than the budget are refused before they are built; formatting
//! takes any precision Go takes, without panicking.

use serde_json::json;

use super::Rules;
use crate::core::field::Path;

/// The errors of one rule on a string property `v` holding "x"; the rule must compile.
fn runtime_errors(rule: &str) -> Vec<String> {
    let schema = json!({"type": "object", "properties": {"v": {
        "type": "string", "x-kubernetes-validations": [{"rule": rule}]}}});
    let (rules, errs) = Rules::compile(&schema, &Path::new("openAPIV3Schema"));
    assert!(errs.is_empty(), "{rule}: {errs:?}");
    rules.validate(&json!({"v": "x"}), None).errors.iter().map(ToString::to_string).collect()
}

/// Checks that a rule fails at run time with `message` (cel-go's words).
fn fails_with(rule: &str, message: &str) {
    assert_eq!(
        runtime_errors(rule),
        vec![format!("v: Invalid value: \"string\": {message} evaluating rule: {rule}")],
        "{rule}"
    );
}

#[test]
fn int_arithmetic_past_int64_is_an_integer_overflow() {
    fails_with("9223372036854775807 + 1 > 0", "integer overflow");
    fails_with("-9223372036854775808 - 1 < 0", "integer overflow");
    fails_with("9223372036854775807 * 2 > 0", "integer overflow");
    fails_with("-9223372036854775808 / -1 > 0", "integer overflow");
    fails_with("-9223372036854775808 % -1 == 0", "integer overflow");
    // Conversions of computed values overflow at run time (`size(self)` is 1) ...
    fails_with("int(double(size(self)) * 9223372036854775807.0) > 0", "integer overflow");
    fails_with("int(uint(size(self)) * 18446744073709551615u) > 0", "integer overflow");
    // ... conversions of constants when the program is built, as cel-go's planner folds them.
    assert_eq!(
        compile_errors("int(9223372036854775807.0) > 0"),
        vec!["program instantiation failed: integer overflow".to_string()]
    );
}

#[test]
fn uint_arithmetic_past_uint64_is_an_unsigned_integer_overflow() {
    fails_with("18446744073709551615u + 1u > 0u", "unsigned integer overflow");
    fails_with("0u - 1u > 0u", "unsigned integer overflow");
    fails_with("18446744073709551615u * 2u > 0u", "unsigned integer overflow");
    fails_with("uint(-size(self)) > 0u", "unsigned integer overflow");
    fails_with("uint(-double(size(self))) > 0u", "unsigned integer overflow");
    assert_eq!(
        compile_errors("uint(-1) > 0u"),
        vec!["program instantiation failed: unsigned integer overflow".to_string()]
    );
}

#[test]
fn durations_are_bounded_by_go_time_duration() {
    // Go's time.Duration holds about 292 years of nanoseconds; cel-go's duration arithmetic
    // checks int64 overflow.
    fails_with("duration('2562047h') + duration('2562047h') > duration('1s')", "integer overflow");
    fails_with("duration('-2562047h') - duration('2562047h') < duration('1s')", "integer overflow");
    fails_with(
        "timestamp('9999-12-30T00:00:00Z') - timestamp('0001-01-01T00:00:00Z') > duration('1s')",
        "integer overflow",
    );
    assert_eq!(runtime_errors("duration('-2562047h47m16.854775808s') < duration('0s')"), Vec::<String>::new());
    assert_eq!(runtime_errors("duration('2562047h47m16.854775807s') > duration('0s')"), Vec::<String>::new());
}

#[test]
fn timestamps_shifted_past_year_9999_are_a_timestamp_overflow() {
    fails_with(
        "timestamp('9999-12-30T00:00:00Z') + duration('48h') > timestamp('2000-01-01T00:00:00Z')",
        "timestamp overflow",
    );
    fails_with(
        "timestamp('0001-01-01T00:00:00Z') - duration('1s') < timestamp('2000-01-01T00:00:00Z')",
        "timestamp overflow",
    );
}

#[test]
fn a_range_larger_than_the_budget_is_refused_before_it_is_built() {
    // Kubernetes refuses the rule when the definition loads: the estimate is the range's size.
    let rule = "lists.range(9223372036854775807).size() > 0";
    assert!(compile_errors(rule).iter().any(|e| e.starts_with("estimated rule cost exceeds budget")), "{rule}");
    // Were it run anyway, evaluation stops before allocating the list.
    let schema = json!({"type": "object", "properties": {"v": {
        "type": "string", "x-kubernetes-validations": [{"rule": rule}]}}});
    let (rules, _) = Rules::compile(&schema, &Path::new("openAPIV3Schema"));
    let errors: Vec<String> = rules.validate(&json!({"v": "x"}), None).errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("cost"), "{errors:?}");
    assert_eq!(runtime_errors("lists.range(3) == [0, 1, 2]"), Vec::<String>::new());
}

#[test]
fn format_takes_go_precisions_beyond_rusts_formatter() {
    // Rust's formatter panics past u16::MAX digits; an f64's expansion ends long before.
    let rule = "'%.70000f'.format([1.5]).size() == 70002 && '%.70000e'.format([1.5]).startsWith('1.5000')";
    assert_eq!(runtime_errors(rule), Vec::<String>::new());
    fails_with(
        "'%.1000000001f'.format([1.0]) != ''",
        "error during formatting: error while parsing precision: precision 1000000001 exceeds maximum allowed precision 1000000",
    );
    fails_with(
        "'%.99999999999999999999f'.format([1.0]) != ''",
        "error during formatting: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"99999999999999999999\": value out of range",
    );
}

/// The compile errors of one rule on a string property `v`, rendered.
fn compile_errors(rule: &str) -> Vec<String> {
    let schema = json!({"type": "object", "properties": {"v": {
        "type": "string", "x-kubernetes-validations": [{"rule": rule}]}}});
    let (_, errs) = Rules::compile(&schema, &Path::new("openAPIV3Schema"));
    errs.iter().map(|e| e.detail.clone()).collect()
}

#[test]
fn deeply_nested_expressions_are_refused_at_compile_time_not_a_stack_overflow() {
    let recursion = "compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: 250";
    for depth in [300, 1_000, 20_000] {
        let parens = format!("{}true{}", "(".repeat(depth), ")".repeat(depth));
        assert_eq!(compile_errors(&parens), vec![recursion.to_string()], "{depth} parentheses");
        let lists = format!("{}1{} != []", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(compile_errors(&lists), vec![recursion.to_string()], "{depth} lists");
        let sum = format!("1{} > 0", " + 1".repeat(depth));
        assert_eq!(compile_errors(&sum), vec![recursion.to_string()], "{depth} additions");
    }
    assert_eq!(compile_errors(&format!("{}true{}", "(".repeat(200), ")".repeat(200))), Vec::<String>::new());
    // `||` and `&&` chains are balanced, as cel-go balances them: no depth limit.
    assert_eq!(compile_errors(&vec!["self == 'x'"; 5_000].join(" || ")), Vec::<String>::new());
}

#[test]
fn expressions_over_100000_code_points_are_refused() {
    let rule = format!("self == '{}'", "é".repeat(100_000));
    assert_eq!(
        compile_errors(&rule),
        vec![
            "compilation failed: ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100010, limit 100000"
        ]
    );
}

#[test]
fn the_deepest_expression_allowed_evaluates_on_a_runtime_workers_stack() {
    // Tokio's workers have 2 MiB stacks: rules run there, per request.
    let rule = format!("1{} > 0 && {}", " + 1".repeat(240), vec!["self == 'x'"; 2_000].join(" || "));
    let errors =
        std::thread::Builder::new().stack_size(2 << 20).spawn(move || runtime_errors(&rule)).unwrap().join().unwrap();
    assert_eq!(errors, Vec::<String>::new());
}
