//! Bodies decoded, and refused in kube-apiserver's words. The expected texts are what
//! apimachinery v1.36.2's JSON serializer answers for each body (run as the custom resource
//! handler runs it), wrapped as `transformDecodeError` wraps them.

use super::*;

const CRONTAB: Expected<'static> = Expected { group: "stable.example.com", version: "v1", kind: "CronTab" };

fn decode(body: &[u8], content_type: Option<&str>) -> Result<Decoded, ApiError> {
    decode_object(&Bytes::copy_from_slice(body), content_type, CRONTAB)
}

fn refusal(body: &[u8]) -> String {
    let error = decode(body, None).unwrap_err();
    assert_eq!((error.code, error.reason.as_ref()), (400, "BadRequest"), "{}", error.message);
    error.message
}

#[test]
fn decodes_json_and_yaml_objects() {
    let json = decode(br#"{"kind":"CronTab","a":1}"#, Some("application/json")).unwrap();
    assert_eq!(json.value["a"], 1);
    let yaml = decode(b"kind: CronTab\na: 1\nb: yes\n", Some("application/yaml; charset=utf-8")).unwrap();
    assert_eq!(yaml.value["a"], 1);
}

#[test]
fn numbers_decode_to_the_nearest_float() {
    // The largest float32, written by Go's strconv: one unit in the last place off under
    // serde_json's default fast parser, which made `self.val == 3.40...e+38` rules fail.
    let body = br#"{"kind":"K","f": 3.4028234663852886e+38, "g": 2.2250738585072014e-308}"#;
    let decoded = decode(body, None).unwrap();
    assert_eq!(decoded.value["f"].as_f64(), Some(f64::from(f32::MAX)));
    assert_eq!(decoded.value["g"].as_f64(), Some(f64::MIN_POSITIVE));
    let yaml = decode(b"kind: K\nf: 3.4028234663852886e+38\n", Some("application/yaml")).unwrap();
    assert_eq!(yaml.value["f"].as_f64(), Some(f64::from(f32::MAX)));
}

#[test]
fn integers_past_int64_are_float64s_as_in_go() {
    let decoded = decode(br#"{"kind":"K","a":18446744073709551615,"b":9223372036854775807}"#, None).unwrap();
    assert_eq!(decoded.value["a"].as_f64(), Some(18446744073709551615.0));
    assert!(decoded.value["a"].as_u64().is_none());
    assert_eq!(decoded.value["b"].as_i64(), Some(i64::MAX));
}

#[test]
fn malformed_bodies_are_refused_in_kubernetes_words() {
    let unrecognized = "the object provided is unrecognized (must be of type CronTab): ";
    let cases: &[(&[u8], &str)] = &[
        (
            br#"{"apiVersion":"#,
            "couldn't get version/kind; json parse error: unexpected end of JSON input ({\"apiVersion\":)",
        ),
        (b"", "couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)"),
        (b"   ", "couldn't get version/kind; json parse error: unexpected end of JSON input (202020)"),
        (
            br#"{"a":1,}"#,
            "couldn't get version/kind; json parse error: invalid character '}' looking for beginning of object key string ({\"a\":1,})",
        ),
        (
            b"nul",
            "couldn't get version/kind; json parse error: invalid character ' ' in literal null (expecting 'l') (6e756c)",
        ),
        (
            br#"{"kind":"CronTab","apiVersion":"stable.example.com/v1","spec":{"cronSpec":"x"}} trailing"#,
            "couldn't get version/kind; json parse error: invalid character 't' after top-level value ({\"kind\":\"CronTab\",\"apiVersion\" ...)",
        ),
        (
            b"[1]",
            "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (5b315d)",
        ),
        (
            br#"{"kind":5}"#,
            "couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ({\"kind\":5})",
        ),
        (
            br#"{"apiVersion":["v1"],"kind":"CronTab"}"#,
            "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go struct field .apiVersion of type string ({\"apiVersion\":[\"v1\"],\"kind\":\"C ...)",
        ),
        (
            br#"{"apiVersion":"a/b/c","kind":"CronTab"}"#,
            "unexpected GroupVersion string: a/b/c ({\"apiVersion\":\"a/b/c\",\"kind\":\" ...)",
        ),
        (b"null", "Object 'Kind' is missing in 'null' (6e756c6c)"),
        (br#"{"a":"\ud800"}"#, "Object 'Kind' is missing in '{\"a\":\"\\ud800\"}' ({\"a\":\"\\ud800\"})"),
        (br#"{"kind":""}"#, "Object 'Kind' is missing in '{\"kind\":\"\"}' ({\"kind\":\"\"})"),
    ];
    for (body, expected) in cases {
        assert_eq!(refusal(body), format!("{unrecognized}{expected}"), "{}", String::from_utf8_lossy(body));
    }
}

#[test]
fn numbers_go_cannot_hold_are_refused_once_the_kind_is_known() {
    assert_eq!(
        refusal(br#"{"a":1e999,"kind":"CronTab","apiVersion":"stable.example.com/v1"}"#),
        "CronTab in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal number 1e999 into Go value of type float64"
    );
    // The kind and version read from the body, the endpoint's where the body has none.
    assert_eq!(
        refusal(br#"{"a":[-1E+400]}"#),
        "CronTab in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal number -1E+400 into Go value of type float64"
    );
    assert_eq!(
        refusal(br#"{"a":1e999,"kind":"Foo","apiVersion":"x/v2"}"#),
        "Foo in version \"v2\" cannot be handled as a CronTab: json: cannot unmarshal number 1e999 into Go value of type float64"
    );
    // A tiny number is 0, as Go reads it.
    assert_eq!(decode(br#"{"kind":"K","a":1e-999}"#, None).unwrap().value["a"], 0.0);
}

#[test]
fn strings_are_read_as_go_reads_them() {
    let body = b"{\"kind\":\"K\",\"a\":\"\\ud800x\\udc00\",\"b\":\"\xff\",\"c\":\"\\ud83d\\ude00\"}";
    let decoded = decode(body, None).unwrap();
    assert_eq!(decoded.value["a"], "\u{fffd}x\u{fffd}");
    assert_eq!(decoded.value["b"], "\u{fffd}");
    assert_eq!(decoded.value["c"], "\u{1f600}");
}

#[test]
fn nesting_is_accepted_to_ten_thousand_levels() {
    let nested = |depth: usize| format!("{{\"kind\":\"K\",\"a\":{}{}}}", "[".repeat(depth - 1), "]".repeat(depth - 1));
    // Run where the stack is as large as the server's threads have.
    let decoded = std::thread::Builder::new()
        .stack_size(crate::core::nesting::THREAD_STACK_BYTES)
        .spawn(move || {
            let ok = decode(nested(10_000).as_bytes(), None).map(|d| d.value["kind"].clone());
            let refused = decode(nested(10_001).as_bytes(), None).map(|d| d.value["kind"].clone());
            (ok, refused)
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(decoded.0.unwrap(), "K");
    let refused = decoded.1.unwrap_err().message;
    assert!(
        refused.ends_with(
            "json parse error: invalid character '[' exceeded max depth ({\"kind\":\"K\",\"a\":[[[[[[[[[[[[[[ ...)"
        ),
        "{refused}"
    );
}

#[test]
fn refuses_unknown_types() {
    let error = decode(b"{}", Some("text/plain")).unwrap_err();
    assert_eq!(error.code, 415);
}

#[test]
fn yaml_bodies_are_refused_in_go_yamls_words() {
    // kube-apiserver v1.36.2's answers: go-yaml's text, the body's start in hexadecimal.
    let error = decode(b"kind: CronTab\nspec: [1\n", Some("application/yaml")).unwrap_err();
    assert_eq!(
        error.message,
        "the object provided is unrecognized (must be of type CronTab): yaml: line 2: did not find expected ',' or ']' (6b696e643a2043726f6e5461620a737065633a205b310a)"
    );
    let error = decode(b"", Some("application/yaml")).unwrap_err();
    assert_eq!(
        error.message,
        "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '' (<empty>)"
    );
}
