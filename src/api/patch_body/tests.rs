//! Patch documents read as kube-apiserver reads them. The texts are what v1.36.2's handler
//! and its JSON patch library (evanphx/json-patch v4) answer for each document.

use serde_json::json;

use super::*;

fn target() -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "c"}, "spec": {"a": 1}})
}

fn refused(result: Result<Patched, ApiError>) -> (u16, String) {
    let error = result.unwrap_err();
    (error.code, error.message)
}

#[test]
fn json_patches_that_are_not_lists_of_operations_are_400_in_gos_words() {
    let warn = FieldValidation::Warn;
    let cases: &[(&[u8], &str)] = &[
        (b"", "error decoding patch: unexpected end of JSON input"),
        (b"[", "error decoding patch: unexpected end of JSON input"),
        (
            br#"[{"op":"add",}]"#,
            "error decoding patch: invalid character '}' looking for beginning of object key string",
        ),
        (
            br#"{"op":"add"}"#,
            "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
        ),
        (b"[1]", "error decoding patch: json: cannot unmarshal number into Go value of type handlers.jsonPatchOp"),
        (br#"["x"]"#, "error decoding patch: json: cannot unmarshal string into Go value of type handlers.jsonPatchOp"),
        (
            br#"[{"op":5}]"#,
            "error decoding patch: json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string",
        ),
        (
            br#"[{"op":"add","path":5,"value":1}]"#,
            "error decoding patch: json: cannot unmarshal number into Go struct field jsonPatchOp.path of type string",
        ),
    ];
    for (patch, expected) in cases {
        assert_eq!(
            refused(json_patch(patch, &target(), warn)),
            (400, expected.to_string()),
            "{}",
            String::from_utf8_lossy(patch)
        );
    }
    // Without fieldValidation's typed decoding, the library's own words.
    let ignore = FieldValidation::Ignore;
    assert_eq!(refused(json_patch(b"[", &target(), ignore)), (400, "unexpected end of JSON input".to_string()));
    assert_eq!(
        refused(json_patch(br#"{"op":"add"}"#, &target(), ignore)),
        (400, "json: cannot unmarshal object into Go value of type jsonpatch.Patch".to_string())
    );
    assert_eq!(
        refused(json_patch(b"[1]", &target(), ignore)),
        (400, "json: cannot unmarshal number into Go value of type jsonpatch.Operation".to_string())
    );
}

#[test]
fn operations_that_do_not_apply_are_the_generic_422() {
    for patch in [
        &br#"[{"op":"explode","path":"/a"}]"#[..],
        br#"[{"op":"add","value":1}]"#,
        br#"[{"op":"move","path":"/b"}]"#,
        br#"[null]"#,
        br#"[{}]"#,
        br#"[{"op":"ADD","path":"/x","value":1}]"#,
        br#"[{"op":"add","path":"a","value":1}]"#,
        br#"[{"op":"test","path":"/spec/a","value":2}]"#,
    ] {
        for mode in [FieldValidation::Warn, FieldValidation::Ignore] {
            assert_eq!(
                refused(json_patch(patch, &target(), mode)),
                (422, "the server rejected our request due to an error in our request".to_string()),
                "{}",
                String::from_utf8_lossy(patch)
            );
        }
    }
}

#[test]
fn json_patch_reads_as_the_library_does() {
    // A missing value is null; a null document is no operation.
    let patched = json_patch(br#"[{"op":"add","path":"/a"}]"#, &target(), FieldValidation::Warn).unwrap();
    assert_eq!(patched.object["a"], Value::Null);
    assert_eq!(json_patch(b"null", &target(), FieldValidation::Warn).unwrap().object, target());
    // Fields an operation does not have, and fields given twice, are strict-decoding errors.
    let patched = json_patch(
        br#"[{"op":"add","path":"/x","value":1,"bogus":2},{"op":"add","op":"add","path":"/y","value":2}]"#,
        &target(),
        FieldValidation::Warn,
    )
    .unwrap();
    assert_eq!(
        patched.strict_errors,
        ["json patch duplicate field \"[1].op\"", "json patch unknown field \"[0].bogus\""]
    );
    assert_eq!((patched.object["x"].clone(), patched.object["y"].clone()), (json!(1), json!(2)));
    // Too many operations: 413, before any is looked at.
    let many = Value::Array(vec![json!({"op": "explode"}); MAX_JSON_PATCH_OPERATIONS + 1]).to_string();
    assert_eq!(
        refused(json_patch(many.as_bytes(), &target(), FieldValidation::Warn)),
        (413, "The allowed maximum operations in a JSON patch is 10000, got 10001".to_string())
    );
}

#[test]
fn merge_patches_in_gos_words() {
    let warn = FieldValidation::Warn;
    let cases: &[(&[u8], u16, &str)] = &[
        (b"", 400, "error decoding patch: unexpected end of JSON input"),
        (b"{", 400, "error decoding patch: unexpected end of JSON input"),
        (b"null", 400, "Invalid JSON Patch"),
        (
            b"[1]",
            400,
            "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (
            br#""x""#,
            400,
            "error decoding patch: json: cannot unmarshal string into Go value of type map[string]interface {}",
        ),
    ];
    for (patch, code, expected) in cases {
        assert_eq!(
            refused(merge_patch(patch, &target(), warn)),
            (*code, expected.to_string()),
            "{}",
            String::from_utf8_lossy(patch)
        );
    }
    assert_eq!(refused(merge_patch(b"{", &target(), FieldValidation::Ignore)), (400, "Invalid JSON Patch".to_string()));
    let patched = merge_patch(br#"{"a":1,"a":2}"#, &target(), warn).unwrap();
    assert_eq!(patched.strict_errors, ["duplicate field \"a\""]);
    assert_eq!(patched.object["a"], 2);
}
