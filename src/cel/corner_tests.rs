//! Tests of CEL corners where Kubernetes' own tests and sources pin behaviour down: equality
//! of objects kept with x-kubernetes-preserve-unknown-fields (as list items and fields), and
//! the format library's checks of names with trailing punctuation, UUIDs, date-times and
//! base64 as kube-openapi and apimachinery make them.

use serde_json::{Value, json};

use super::Rules;
use super::library::format::validate;
use crate::core::field::Path;

/// Whether `rule` holds on `object` (an object with `props`); it must compile and run.
fn holds(rule: &str, props: Value, object: Value) -> bool {
    let schema = json!({"type": "object", "properties": props, "x-kubernetes-validations": [{"rule": rule}]});
    let (rules, errs) = Rules::compile_node(&schema, &Path::new("openAPIV3Schema"), false);
    assert!(errs.is_empty(), "{rule}: {errs:?}");
    let out = rules.validate_at(&Path::nil(), &object, None, super::RUNTIME_COST_BUDGET);
    match out.errors.as_slice() {
        [] => true,
        [e] if e.detail.starts_with("failed rule") => false,
        other => panic!("{rule}: {other:?}"),
    }
}

#[test]
fn preserved_objects_in_a_list_compare_by_all_their_entries() {
    let props =
        json!({"l": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
    let object = json!({"l": [{"a": "x", "b": 1}, {"a": "x", "b": 1}, {"a": "x", "b": 1.5}, {"a": "x"}, {}, {}]});
    assert!(holds("self.l[0] == self.l[1]", props.clone(), object.clone()));
    assert!(holds("self.l[0] != self.l[2]", props.clone(), object.clone()));
    // A different number of entries is never equal; two empty objects are.
    assert!(holds("self.l[0] != self.l[3] && self.l[4] == self.l[5]", props.clone(), object));
    // Integers and floating point numbers are different data, as in Kubernetes' unstructured
    // decoding; and an unknown field missing on the other side (with as many entries) is not
    // compared, as Kubernetes' equality skips it.
    let object = json!({"l": [{"n": 1}, {"n": 1.0}, {"m": 1}]});
    assert!(holds("self.l[0] != self.l[1] && self.l[0] == self.l[2]", props, object));
}

#[test]
fn declared_fields_of_no_type_compare_as_data_and_null_is_absent() {
    let props = json!({"l": {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string", "nullable": true}, "any": {"x-kubernetes-preserve-unknown-fields": true}}}}});
    let object = json!({"l": [{"any": {"k": [1, 2]}}, {"any": {"k": [1, 2]}}, {"any": {"k": [2, 1]}},
        {"name": null, "any": 1}, {"any": 1, "name": "x"}, {"any": 1}]});
    assert!(holds("self.l[0] == self.l[1] && self.l[0] != self.l[2]", props.clone(), object.clone()));
    // A null field counts as an entry but compares as absent.
    assert!(holds("self.l[3] != self.l[4] && self.l[3] != self.l[5]", props, object));
}

#[test]
fn prefixes_lose_their_trailing_dash_and_the_character_before_it() {
    // Kubernetes checks `abc.-` as `abca`: a prefix may end in punctuation before its dash.
    assert_eq!(validate("dns1123SubdomainPrefix", "my.sub.-"), Vec::<String>::new());
    assert_eq!(validate("dns1123LabelPrefix", "my-label_-"), Vec::<String>::new());
    assert_eq!(validate("dns1035LabelPrefix", "x--"), Vec::<String>::new());
    // A lone dash is not masked; a plain label may not end in punctuation.
    assert_eq!(validate("dns1123LabelPrefix", "-").len(), 1);
    assert_eq!(validate("dns1123Label", "my-label-").len(), 1);
    assert_eq!(validate("dns1123Subdomain", "example.com.").len(), 1);
}

#[test]
fn a_label_with_dots_is_told_it_has_dots() {
    assert_eq!(validate("dns1123Label", "example.com"), vec!["must not contain dots".to_string()]);
    let spaced = validate("dns1123Label", "has space");
    assert!(spaced[0].starts_with("a lowercase RFC 1123 label must consist of"), "{spaced:?}");
}

#[test]
fn uuids_date_times_and_base64_follow_kube_openapi() {
    assert_eq!(validate("uuid", "123E4567E89B12D3A456426614174000"), Vec::<String>::new());
    assert_eq!(validate("uuid", "123e4567-e89b12d3-a456-426614174000"), Vec::<String>::new());
    assert_eq!(validate("uuid", "123e4567-e89b-12d3-a456-42661417400"), vec!["does not match the UUID format"]);
    assert_eq!(validate("datetime", "2020-01-01t10:00:00.5z"), Vec::<String>::new());
    assert_eq!(validate("datetime", "2020-01-01T10:00:00+02:00"), Vec::<String>::new());
    for bad in ["2020-01-01 10:00:00Z", "2020-01-01T24:00:00Z", "2020-01-01T10:00:60Z", "2020-01-01T10:00:00"] {
        assert_eq!(validate("datetime", bad), vec!["invalid datetime"], "{bad}");
    }
    assert_eq!(validate("byte", "aGVs\nbG8="), Vec::<String>::new());
    assert_eq!(validate("byte", "aGVsbG8"), vec!["invalid base64"]);
}
