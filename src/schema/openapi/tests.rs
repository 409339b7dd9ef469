//! Table tests of value validation, one family per keyword, with Kubernetes' wording.

use serde_json::{Value, json};

use super::*;
use crate::schema::compile::compile;

/// Validates `object` against `schema` and compares the set of error texts.
fn check(schema: Value, object: Value, expected: &[&str]) {
    let compiled = compile(&schema);
    let mut got: Vec<String> = validate(&compiled, &object, &Path::nil()).iter().map(|e| e.to_string()).collect();
    got.sort();
    let mut want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(got, want, "schema {schema} object {object}");
}

fn object_with(field: Value) -> Value {
    json!({"type": "object", "properties": {"f": field}})
}

#[test]
fn the_seed_crontab() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "cronSpec": {"type": "string", "pattern": r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$"},
        "image": {"type": "string"},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
    }}}});
    check(
        schema.clone(),
        json!({"spec": {"cronSpec": "* * * *", "image": "x", "replicas": 15}}),
        &[
            r#"spec.cronSpec: Invalid value: "* * * *": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'"#,
            "spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10",
        ],
    );
    check(schema.clone(), json!({"spec": {"cronSpec": "* * * * */5", "replicas": 5}}), &[]);
    check(
        schema,
        json!({"spec": {"replicas": "many"}}),
        &[r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#],
    );
}

#[test]
fn types_and_nullable() {
    check(
        object_with(json!({"type": "object"})),
        json!({"f": 7}),
        &[r#"f: Invalid value: "integer": f in body must be of type object: "integer""#],
    );
    check(
        object_with(json!({"type": "object"})),
        json!({"f": 7.5}),
        &[r#"f: Invalid value: "number": f in body must be of type object: "number""#],
    );
    check(
        object_with(json!({"type": "string"})),
        json!({"f": null}),
        &[r#"f: Invalid value: "null": f in body must be of type string: "null""#],
    );
    check(object_with(json!({"type": "string", "nullable": true})), json!({"f": null}), &[]);
    check(object_with(json!({"type": "integer"})), json!({"f": 3.0}), &[]);
    check(object_with(json!({"type": "number"})), json!({"f": 3}), &[]);
    check(object_with(json!({})), json!({"f": [1]}), &[]);
}

#[test]
fn int_or_string() {
    let s = object_with(json!({"x-kubernetes-int-or-string": true}));
    check(s.clone(), json!({"f": 80}), &[]);
    check(s.clone(), json!({"f": "http"}), &[]);
    check(
        s,
        json!({"f": false}),
        &[r#"f: Invalid value: "boolean": f in body must be of type integer,string: "boolean""#],
    );
    let with_any_of =
        object_with(json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}));
    check(
        with_any_of,
        json!({"f": []}),
        &[
            r#"<nil>: Invalid value: "": "f" must validate at least one schema (anyOf)"#,
            r#"f: Invalid value: "array": f in body must be of type integer,string: "array""#,
            r#"f: Invalid value: "array": f in body must be of type integer: "array""#,
        ],
    );
}

#[test]
fn strings() {
    check(
        object_with(json!({"type": "string", "maxLength": 3})),
        json!({"f": "abcd"}),
        &["f: Too long: may not be more than 3 bytes"],
    );
    check(object_with(json!({"type": "string", "maxLength": 3})), json!({"f": "äöü"}), &[]);
    check(
        object_with(json!({"type": "string", "minLength": 2})),
        json!({"f": "a"}),
        &[r#"f: Invalid value: "a": f in body should be at least 2 chars long"#],
    );
    check(
        object_with(json!({"type": "string", "pattern": "("})),
        json!({"f": "a"}),
        &[
            r#"f: Invalid value: "a": f in body should match '(, but pattern is invalid: error parsing regexp: missing closing ): `(`'"#,
        ],
    );
    check(
        object_with(json!({"type": "string", "format": "date"})),
        json!({"f": "yesterday"}),
        &[r#"f: Invalid value: "yesterday": f in body must be of type date: "yesterday""#],
    );
    check(object_with(json!({"type": "string", "format": "made-up"})), json!({"f": "anything"}), &[]);
}

#[test]
fn numbers() {
    let s =
        object_with(json!({"type": "integer", "minimum": 2, "exclusiveMaximum": true, "maximum": 5, "multipleOf": 2}));
    check(s.clone(), json!({"f": 4}), &[]);
    check(
        s.clone(),
        json!({"f": 5}),
        &[
            "f: Invalid value: 5: f in body should be a multiple of 2",
            "f: Invalid value: 5: f in body should be less than 5",
        ],
    );
    check(s, json!({"f": 0}), &["f: Invalid value: 0: f in body should be greater than or equal to 2"]);
    check(
        object_with(json!({"type": "number", "maximum": 1.5})),
        json!({"f": 2.25}),
        &["f: Invalid value: 2.25: f in body should be less than or equal to 1.5"],
    );
    check(
        object_with(json!({"type": "integer", "format": "int32"})),
        json!({"f": 2147483648i64}),
        &[r#"<nil>: Invalid value: "": Checked value must be of type integer with format int32 in f"#],
    );
    check(
        object_with(json!({"type": "integer"})),
        json!({"f": 1.5}),
        &[
            r#"f: Invalid value: "number": f in body must be of type integer: "number""#,
            r#"<nil>: Invalid value: "": Checked value must be of type integer (default format) in f"#,
        ],
    );
}

#[test]
fn enums() {
    check(
        object_with(json!({"type": "string", "enum": ["a", "b"]})),
        json!({"f": "c"}),
        &[r#"f: Unsupported value: "c": supported values: "a", "b""#],
    );
    check(
        object_with(json!({"type": "integer", "enum": [1, 2]})),
        json!({"f": 3}),
        &[r#"f: Unsupported value: 3: supported values: "1", "2""#],
    );
    check(object_with(json!({"type": "number", "enum": [1, 2]})), json!({"f": 2.0}), &[]);
}

#[test]
fn arrays_and_objects() {
    check(
        object_with(json!({"type": "array", "maxItems": 1, "items": {"type": "string"}})),
        json!({"f": ["a", 1]}),
        &[
            "f: Too many: 2: must have at most 1 item",
            r#"f[1]: Invalid value: "integer": f[1] in body must be of type string: "integer""#,
        ],
    );
    check(
        object_with(json!({"type": "array", "minItems": 2})),
        json!({"f": []}),
        &["f: Invalid value: 0: f in body should have at least 2 items"],
    );
    check(
        object_with(json!({"type": "object", "maxProperties": 1})),
        json!({"f": {"a": 1, "b": 2}}),
        &["f: Too many: 2: must have at most 1 item"],
    );
    check(
        object_with(json!({"type": "object", "minProperties": 1})),
        json!({"f": {}}),
        &["f: Invalid value: 0: f in body should have at least 1 properties"],
    );
    check(
        json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "object", "required": ["b"]}}}),
        json!({}),
        &["a: Required value"],
    );
    check(
        json!({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "integer"}}}}),
        json!({"m": {"x": "1"}}),
        &[r#"m.x: Invalid value: "string": m.x in body must be of type integer: "string""#],
    );
}

#[test]
fn junctors() {
    let s = object_with(json!({"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}], "not": {"enum": [5]}}));
    check(s.clone(), json!({"f": -1}), &[]);
    check(
        s.clone(),
        json!({"f": 3}),
        &[r#"<nil>: Invalid value: "": "f" must validate one and only one schema (oneOf). Found 2 valid alternatives"#],
    );
    check(
        s,
        json!({"f": 5}),
        &[
            r#"<nil>: Invalid value: "": "f" must validate one and only one schema (oneOf). Found 2 valid alternatives"#,
            r#"<nil>: Invalid value: "": "f" must not validate the schema (not)"#,
        ],
    );
    let all = object_with(json!({"type": "string", "allOf": [{"minLength": 2}, {"pattern": "^a"}]}));
    check(
        all,
        json!({"f": "b"}),
        &[
            r#"<nil>: Invalid value: "": "f" must validate all the schemas (allOf). None validated"#,
            r#"f: Invalid value: "b": f in body should be at least 2 chars long"#,
            r#"f: Invalid value: "b": f in body should match '^a'"#,
        ],
    );
}

#[test]
fn ratcheting_keeps_unchanged_invalid_values() {
    let s = compile(&json!({"type": "object", "properties": {
        "small": {"type": "integer", "maximum": 5},
        "list": {"type": "array", "items": {"type": "integer", "maximum": 5}},
        "keyed": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                  "items": {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "integer", "maximum": 5}}}},
    }}));
    let old = json!({"small": 9, "list": [9], "keyed": [{"k": "a", "v": 9}]});
    let errors = |new: Value| validate_update(&s, &new, &old, &Path::nil()).len();
    assert_eq!(errors(old.clone()), 0);
    assert_eq!(errors(json!({"small": 9, "list": [9], "keyed": [{"k": "b", "v": 1}, {"k": "a", "v": 9}]})), 0);
    assert_eq!(errors(json!({"small": 8})), 1, "a changed value is validated");
    assert_eq!(errors(json!({"list": [9, 1]})), 1, "atomic lists only ratchet as a whole");
    assert_eq!(validate(&s, &old, &Path::nil()).len(), 3);
}
