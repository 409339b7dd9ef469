//! YAML bodies against go-yaml: each expected text is what sigs.k8s.io/yaml's `YAMLToJSON`
//! (go-yaml v2, as vendored by Kubernetes v1.36.2) answers for the input, from running it.

use super::*;

/// (input, go-yaml's error, or `ok <JSON>`)
const GO_VERDICTS: &[(&str, &str)] = &[
    ("a: [1", "yaml: line 1: did not find expected ',' or ']'"),
    ("a: {b", "yaml: line 1: did not find expected ',' or '}'"),
    ("a: 1\n b: 2", "yaml: line 2: mapping values are not allowed in this context"),
    ("a:\n- 1\n b: 2", "yaml: line 3: mapping values are not allowed in this context"),
    ("a: \"x", "yaml: found unexpected end of stream"),
    ("a: 'x", "yaml: found unexpected end of stream"),
    ("a: \"x\n", "yaml: line 2: found unexpected end of stream"),
    ("x:\n  y: \"abc\n  z: 1", "yaml: line 3: found unexpected end of stream"),
    ("a: *x", "yaml: unknown anchor 'x' referenced"),
    ("a: &x 1\nb: *y", "yaml: unknown anchor 'y' referenced"),
    ("[1", "yaml: line 1: did not find expected ',' or ']'"),
    ("a: 1: 2", "yaml: mapping values are not allowed in this context"),
    ("a: b: c\n", "yaml: mapping values are not allowed in this context"),
    ("a: b\n- c", "yaml: line 1: did not find expected key"),
    ("@x", "yaml: found character that cannot start any token"),
    ("a:\n  b: 1\n c: 2", "yaml: line 2: did not find expected key"),
    ("a:\n\tb: 1", "yaml: line 2: found character that cannot start any token"),
    ("a:\n  - b\n  c: d", "yaml: line 2: did not find expected '-' indicator"),
    ("a: b\n  c: d", "yaml: line 2: mapping values are not allowed in this context"),
    ("a: \"\\ud800\"", "yaml: found invalid Unicode character escape code"),
    ("a: !!binary foo", "yaml: !!binary value contains invalid base64 data"),
    ("{\"a\":", "yaml: line 1: did not find expected node content"),
    ("kind: X\nspec:\n  a: [\n", "yaml: line 3: did not find expected node content"),
    ("---\na: 1\n---\nb: 2", "ok {\"a\":1}"),
    ("a: 1\n---\n[unterminated", "ok {\"a\":1}"),
    ("", "ok null"),
    ("a: 017", "ok {\"a\":15}"),
    ("a: 0x1F", "ok {\"a\":31}"),
    ("a: yes", "ok {\"a\":true}"),
    ("a: 1_000", "ok {\"a\":1000}"),
    ("a: ~", "ok {\"a\":null}"),
    ("a: 1e400", "ok {\"a\":\"1e400\"}"),
    ("é: {b: -1e400, c: [2E999, 1.5]}", "ok {\"é\":{\"b\":\"-1e400\",\"c\":[\"2E999\",1.5]}}"),
    ("a: .inf", "json: unsupported value: +Inf"),
    ("a: [-.Inf]", "json: unsupported value: -Inf"),
    ("a: .NaN", "json: unsupported value: NaN"),
];

#[test]
fn errors_and_values_are_go_yamls() {
    let mut differ = Vec::new();
    for (input, expected) in GO_VERDICTS {
        let got = match first_document(input) {
            Ok(tracked) => format!("ok {}", tracked.value),
            Err(text) => text,
        };
        if &got != expected {
            differ.push(format!("{input:?}: {got:?}, go-yaml: {expected:?}"));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

#[test]
fn nesting_stops_past_ten_thousand_levels() {
    let flow = |depth: usize| format!("a: {}1{}", "[".repeat(depth - 1), "]".repeat(depth - 1));
    let (ok, refused) = std::thread::Builder::new()
        .stack_size(crate::core::nesting::THREAD_STACK_BYTES)
        .spawn(move || (first_document(&flow(MAX_DEPTH)).map(|_| ()), first_document(&flow(MAX_DEPTH + 1)).map(|_| ())))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(ok, Ok(()));
    assert_eq!(refused, Err("yaml: exceeded max depth of 10000".to_string()));
}

#[test]
fn duplicates_are_noted_and_the_last_wins() {
    let tracked = first_document("spec:\n  a: 1\n  a: 2\n").unwrap();
    assert_eq!(tracked.value, serde_json::json!({"spec": {"a": 2}}));
    assert_eq!(tracked.duplicates, ["spec.a"]);
}

#[test]
fn aliases_cannot_amplify_a_yaml_body() {
    // One megabyte repeated a thousand times through aliases would decode to a gigabyte.
    let mut text = format!("a: &a \"{}\"\n", "x".repeat(1_000_000));
    for (name, from) in [("b", "a"), ("c", "b"), ("d", "c")] {
        text.push_str(&format!("{name}: &{name} [{}]\n", vec![format!("*{from}"); 10].join(",")));
    }
    // go-yaml refuses such a document in these words (its limit is a ratio of aliases).
    assert_eq!(first_document(&text).unwrap_err(), "yaml: document contains excessive aliasing");
    // A plain body of the same size decodes.
    let plain = format!("a: \"{}\"\nb: [1, 2]\n", "x".repeat(2_500_000));
    assert_eq!(first_document(&plain).unwrap().value["b"], serde_json::json!([1, 2]));
}
