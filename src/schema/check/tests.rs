//! Table tests of the definition-time schema rules, with Kubernetes' paths and wording.

use serde_json::{Value, json};

use super::*;

fn errors(schema: Value) -> Vec<String> {
    validate(&schema, &Path::new("spec").child("versions").index(0).child("schema"), false)
        .iter()
        .map(|e| e.to_string())
        .collect()
}

fn assert_has(schema: Value, expected: &str) {
    let got = errors(schema);
    assert!(got.iter().any(|e| e == expected), "missing {expected:?} in {got:#?}");
}

const P: &str = "spec.versions[0].schema.openAPIV3Schema";

#[test]
fn structural_types() {
    assert_has(
        json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}),
        &format!("{P}.properties[spec].type: Required value: must not be empty for specified object fields"),
    );
    assert_has(json!({"properties": {}}), &format!("{P}.type: Required value: must not be empty at the root"));
    assert_has(
        json!({"type": "object", "properties": {"l": {"type": "array", "items": {}}}}),
        &format!("{P}.properties[l].items.type: Required value: must not be empty for specified array items"),
    );
    assert_has(
        json!({"type": "object", "properties": {"l": {"type": "array"}}}),
        &format!("{P}.properties[l].items: Required value: must be specified"),
    );
    assert_has(json!({"type": "string"}), &format!(r#"{P}.type: Invalid value: "string": must be object at the root"#));
    assert!(errors(json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true}, "j": {"x-kubernetes-preserve-unknown-fields": true}}})).is_empty());
}

#[test]
fn junctors_hold_validations_only() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}},
        "anyOf": [{"properties": {"a": {"type": "integer", "minimum": 1}, "b": {"minimum": 1}}, "description": "x"}]});
    let got = errors(schema);
    for expected in [
        format!("{P}.anyOf[0].description: Forbidden: must be empty to be structural"),
        format!("{P}.anyOf[0].properties[a].type: Forbidden: must be empty to be structural"),
        format!("{P}.properties[b]: Required value: because it is defined in {P}.anyOf[0].properties[b]"),
    ] {
        assert!(got.contains(&expected), "missing {expected:?} in {got:#?}");
    }
    // The two int-or-string patterns are allowed.
    assert!(
        errors(json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}]}}}))
        .is_empty()
    );
}

#[test]
fn metadata_may_only_restrict_names() {
    assert!(
        errors(json!({"type": "object", "properties": {"metadata": {"type": "object",
        "properties": {"name": {"type": "string", "maxLength": 10}}}}}))
        .is_empty()
    );
    assert_has(
        json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}),
        &format!(
            "{P}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
        ),
    );
}

#[test]
fn forbidden_keywords() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string", "xml": {"name": "x"}, "readOnly": true,
        "uniqueItems": true, "$ref": "#/x", "patternProperties": {"x": {}}}}});
    let got = errors(schema);
    for expected in [
        format!("{P}.properties[a].xml: Forbidden: xml is not supported"),
        format!("{P}.properties[a].readOnly: Forbidden: readOnly is not supported"),
        format!(
            "{P}.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        ),
        format!("{P}.properties[a].$ref: Forbidden: $ref is not supported"),
        format!("{P}.properties[a].patternProperties: Forbidden: patternProperties is not supported"),
    ] {
        assert!(got.contains(&expected), "missing {expected:?} in {got:#?}");
    }
    assert_has(
        json!({"type": "object", "properties": {"m": {"type": "object", "properties": {"a": {"type": "string"}},
            "additionalProperties": {"type": "string"}}}}),
        &format!(
            "{P}.properties[m].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        ),
    );
    assert_has(
        json!({"type": "object", "properties": {"a": {"type": "bogus"}}}),
        &format!(
            r#"{P}.properties[a].type: Unsupported value: "bogus": supported values: "array", "boolean", "integer", "number", "object", "string""#
        ),
    );
}

#[test]
fn extensions_must_agree() {
    assert_has(
        json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object",
            "properties": {"k": {"type": "string"}}}}}}),
        &format!(
            "{P}.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
        ),
    );
    assert_has(
        json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
            "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}}),
        &format!(
            "{P}.properties[l].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
        ),
    );
    assert_has(
        json!({"type": "object", "properties": {"s": {"type": "string", "x-kubernetes-list-type": "set"}}}),
        &format!(
            r#"{P}.properties[s].type: Invalid value: "string": must be array if x-kubernetes-list-type is specified"#
        ),
    );
    assert_has(
        json!({"type": "object", "properties": {"e": {"type": "object", "x-kubernetes-embedded-resource": true}}}),
        &format!(
            "{P}.properties[e].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"
        ),
    );
    assert_has(
        json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}}}),
        &format!(
            "{P}.properties[p].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"
        ),
    );
}

#[test]
fn defaults_are_checked() {
    assert_has(
        json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}}),
        &format!("{P}.properties[metadata].default: Forbidden: must not be set in top-level metadata"),
    );
    assert_has(
        json!({"type": "object", "properties": {"r": {"type": "integer", "minimum": 1, "default": 0}}}),
        &format!("{P}.properties[r].default: Invalid value: 0:  in body should be greater than or equal to 1"),
    );
}

#[test]
fn patterns_must_compile() {
    assert_has(
        json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "("}}}),
        &format!(
            "{P}.properties[s].pattern: Invalid value: \"(\": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): `(`"
        ),
    );
}

#[test]
fn the_status_subresource_restricts_the_root() {
    let got = validate(&json!({"type": "object", "additionalProperties": {"type": "string"}}), &Path::new("s"), true);
    assert!(got[0].to_string().starts_with("s.openAPIV3Schema: Invalid value: "), "{got:?}");
    assert!(
        got[0]
            .to_string()
            .ends_with("fields are allowed at the root of the schema if the status subresource is enabled")
    );
}

#[test]
fn warnings_name_unrecognized_formats() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string", "format": "made-up"},
        "s": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object"}}}});
    assert_eq!(
        warnings(&schema),
        [
            r#"unrecognized format "made-up""#,
            r#"x-kubernetes-list-type: set for items of type "object" is not supported by server-side apply or CEL validation rules"#
        ]
    );
}
