//! Both read paths on the same stored objects: whenever `render` accepts an object, its bytes
//! must be exactly what the general path (`present::read_stored`, then serde_json) writes.

use serde_json::{Value, json};

use super::render;
use crate::api::present::read_stored;
use crate::definitions::load::definition_from_value;
use crate::definitions::{Definition, Version};

const REVISION: u64 = 42;

fn widgets() -> Definition {
    widgets_with(widget_schema(), widget_schema())
}

fn widget_schema() -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "image": {"type": "string"},
            "replicas": {"type": "integer", "default": 1},
            "ratio": {"type": "number"},
            "note": {"type": "string", "nullable": true},
            "port": {"x-kubernetes-int-or-string": true},
            "tags": {"type": "array", "items": {"type": "string"}},
            "containers": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"},
                "pull": {"type": "string", "default": "IfNotPresent"},
            }}},
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
            "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                "known": {"type": "object", "properties": {"a": {"type": "string"}}},
            }},
            "plain": {"type": "object"},
            "list": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        }},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    }})
}

/// Widgets in v1 (the storage version) and v2, each with its schema.
fn widgets_with(v1: Value, v2: Value) -> Definition {
    let version = |name: &str, storage: bool, schema: &Value| json!({"name": name, "served": true, "storage": storage, "schema": {"openAPIV3Schema": schema}});
    let raw = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [version("v1", true, &v1), version("v2", false, &v2)]},
    });
    definition_from_value(raw, "test").unwrap()
}

fn version<'a>(definition: &'a Definition, name: &str) -> &'a Version {
    definition.version(name).unwrap()
}

/// Runs both paths; returns whether `render` accepted the object (after checking its bytes).
fn both(definition: &Definition, version: &Version, stored: &[u8]) -> bool {
    let mut fast = b"prefix".to_vec();
    let accepted = render(definition, version, stored, REVISION, &mut fast);
    if !accepted {
        assert_eq!(fast, b"prefix", "a refusal leaves the buffer as it was");
        return false;
    }
    let slow = read_stored(definition, version, stored, REVISION).expect("the general path reads what render accepts");
    let slow = serde_json::to_vec(&slow).unwrap();
    assert_eq!(
        String::from_utf8_lossy(fast.strip_prefix(b"prefix").unwrap()),
        String::from_utf8_lossy(&slow),
        "stored: {}",
        String::from_utf8_lossy(stored)
    );
    true
}

fn widget(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"creationTimestamp": "2024-01-02T03:04:05Z", "generation": 1, "name": "a", "namespace": "ns", "uid": "u"},
        "spec": spec})
}

fn text(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap()
}

#[test]
fn splices_the_resource_version_where_serde_json_sorts_it() {
    let d = widgets();
    let mut out = Vec::new();
    let stored = text(&widget(json!({"replicas": 2})));
    assert!(render(&d, version(&d, "v1"), &stored, 7, &mut out));
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"creationTimestamp":"2024-01-02T03:04:05Z","generation":1,"name":"a","namespace":"ns","resourceVersion":"7","uid":"u"},"spec":{"replicas":2}}"#
    );
    for metadata in [
        json!({"generation": 3}),
        json!({"generation": 3, "resourceVersion": "5"}),
        json!({"annotations": {"a": "b"}, "generation": 3}),
        json!({"generation": 3, "uid": "x", "zzz": 1}),
    ] {
        let mut object = widget(json!({"replicas": 2}));
        object["metadata"] = metadata.clone();
        let accepted = both(&d, version(&d, "v1"), &text(&object));
        assert_eq!(accepted, metadata.get("zzz").is_none(), "{metadata}");
    }
}

#[test]
fn accepts_only_what_reading_leaves_unchanged() {
    let d = widgets();
    let v1 = version(&d, "v1");
    let cases = [
        (json!({"replicas": 2, "image": "i", "ratio": 1.5, "port": "http", "tags": ["a", "b"]}), true),
        (json!({"replicas": 2, "containers": [{"name": "c", "pull": "Always"}]}), true),
        (
            json!({"replicas": 2, "note": null, "env": {"A": "x"}, "plain": {}, "list": [{"anything": {"goes": null}}]}),
            true,
        ),
        (json!({"replicas": 2, "raw": {"free": [1, {"x": null}], "known": {"a": "b"}}}), true),
        (json!({}), false),
        (json!({"replicas": 2, "containers": [{"name": "c"}]}), false),
        (json!({"replicas": 2, "unknown": 1}), false),
        (json!({"replicas": 2, "raw": {"known": {"b": "c"}}}), false),
        (json!({"replicas": 2, "image": null}), false),
        (json!({"replicas": 2, "env": {"A": null}}), false),
        (json!({"replicas": 2, "plain": {"a": 1}}), false),
        (json!({"replicas": null}), false),
    ];
    for (spec, expected) in cases {
        assert_eq!(both(&d, v1, &text(&widget(spec.clone()))), expected, "{spec}");
    }
}

#[test]
fn refuses_metadata_that_reading_changes() {
    let d = widgets();
    let v1 = version(&d, "v1");
    let good = json!({"annotations": {"a": "b"}, "creationTimestamp": "2024-01-02T03:04:05Z",
        "deletionGracePeriodSeconds": 0, "deletionTimestamp": "2024-01-02T03:04:06Z", "finalizers": ["f"],
        "generateName": "a-", "generation": 2, "labels": {"app": "x", "empty": ""},
        "managedFields": [{"apiVersion": "example.com/v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {".": {}, "f:replicas": {}}}, "manager": "kubectl", "operation": "Update",
            "time": "2024-01-02T03:04:05Z"}],
        "name": "a", "namespace": "ns",
        "ownerReferences": [{"apiVersion": "v1", "blockOwnerDeletion": true, "controller": false, "kind": "K", "name": "o", "uid": "u"}],
        "uid": "u"});
    let mut object = widget(json!({"replicas": 2}));
    object["metadata"] = good.clone();
    assert!(both(&d, v1, &text(&object)), "every field kept");
    for (field, bad) in [
        ("generation", json!(0)),
        ("generation", json!(1.0)),
        ("generation", json!(9_223_372_036_854_775_808u64)),
        ("creationTimestamp", json!("2024-01-02T03:04:05.5Z")),
        ("creationTimestamp", json!("2024-01-02T05:04:05+02:00")),
        ("creationTimestamp", json!("")),
        ("labels", json!({})),
        ("labels", json!({"a": null})),
        ("finalizers", json!([])),
        ("name", json!("")),
        ("uid", json!(null)),
        ("ownerReferences", json!([{"kind": "K"}])),
        ("ownerReferences", json!([{"apiVersion": "v1", "kind": "K", "name": "o", "uid": "u", "x": 1}])),
        ("managedFields", json!([{"manager": ""}])),
        ("managedFields", json!([{"fieldsV1": null}])),
        ("selfLink", json!(5)),
        ("bogus", json!("x")),
    ] {
        let mut object = object.clone();
        object["metadata"][field] = bad.clone();
        assert!(!both(&d, v1, &text(&object)), "{field}: {bad}");
    }
    let mut object = object.clone();
    object["metadata"].as_object_mut().unwrap().remove("generation");
    assert!(!both(&d, v1, &text(&object)), "a missing generation is repaired");
}

#[test]
fn refuses_other_versions_and_other_forms() {
    let d = widgets();
    let object = widget(json!({"replicas": 2}));
    assert!(!both(&d, version(&d, "v2"), &text(&object)), "stored in v1, read in v2: converted");
    let mut v2 = object.clone();
    v2["apiVersion"] = json!("example.com/v2");
    assert!(!both(&d, version(&d, "v1"), &text(&v2)));
    assert!(both(&d, version(&d, "v2"), &text(&v2)));
    let pretty = serde_json::to_vec_pretty(&object).unwrap();
    assert!(!both(&d, version(&d, "v1"), &pretty));
    let unsorted =
        br#"{"kind":"Widget","apiVersion":"example.com/v1","metadata":{"generation":1},"spec":{"replicas":2}}"#;
    assert!(!both(&d, version(&d, "v1"), unsorted));
    let sorted =
        br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"generation":1},"spec":{"replicas":2}}"#;
    assert!(both(&d, version(&d, "v1"), sorted));
    for broken in [&b""[..], b"[]", b"{\"apiVersion\":\"example.com/v1\"", b"{} "] {
        assert!(!both(&d, version(&d, "v1"), broken));
    }
}

/// A small deterministic generator (xorshift), so that the differential test needs no crate.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize].clone()
    }
}

fn scalar(r: &mut Random) -> Value {
    r.pick(&[
        json!("text"),
        json!("quote \" and \n newline \u{1} é"),
        json!(""),
        json!(0),
        json!(-7),
        json!(18_446_744_073_709_551_615u64),
        json!(2.5),
        json!(1e300),
        json!(true),
        json!(null),
    ])
}

fn spec(r: &mut Random) -> Value {
    let mut spec = serde_json::Map::new();
    let fields =
        ["containers", "env", "image", "list", "note", "plain", "port", "raw", "ratio", "replicas", "tags", "x"];
    for field in fields {
        if !r.chance(if field == "replicas" { 90 } else { 40 }) {
            continue;
        }
        let value = match field {
            "containers" => {
                let n = r.below(3);
                Value::Array(
                    (0..n)
                        .map(|i| {
                            if r.chance(90) {
                                json!({"name": format!("c{i}"), "pull": "Always"})
                            } else {
                                json!({"name": "c"})
                            }
                        })
                        .collect(),
                )
            }
            "env" => json!({"A": if r.chance(90) { json!("a") } else { scalar(r) }}),
            "raw" => json!({"free": scalar(r), "known": {"a": if r.chance(80) { json!("x") } else { scalar(r) }}}),
            "plain" => {
                if r.chance(80) {
                    json!({})
                } else {
                    json!({"a": 1})
                }
            }
            "list" => json!([{"any": scalar(r)}, scalar(r)]),
            "tags" => json!([scalar(r), "b"]),
            _ if r.chance(85) => match field {
                "replicas" => json!(3),
                "ratio" => json!(0.75),
                "port" => json!(8080),
                "note" => json!(null),
                _ => json!("img"),
            },
            _ => scalar(r),
        };
        spec.insert(field.to_string(), value);
    }
    Value::Object(spec)
}

fn metadata(r: &mut Random) -> Value {
    let mut meta = json!({"generation": 1, "name": "n", "namespace": "ns", "uid": "u",
        "creationTimestamp": "2024-01-02T03:04:05Z"});
    let extras = [
        ("labels", json!({"a": "b"})),
        ("annotations", json!({"k": "v\nw"})),
        ("finalizers", json!(["x"])),
        ("resourceVersion", json!("3")),
        ("generation", json!(5)),
        (
            "managedFields",
            json!([{"manager": "m", "operation": "Apply", "time": "2024-01-02T03:04:05Z", "fieldsV1": {"f:spec": {}}}]),
        ),
    ];
    for (field, value) in extras {
        if r.chance(30) {
            meta[field] = if r.chance(85) { value } else { scalar(r) };
        }
    }
    meta
}

#[test]
fn both_paths_agree_on_generated_objects() {
    let d = widgets();
    let mut r = Random(0x9e37_79b9_7f4a_7c15);
    let mut accepted = 0;
    const OBJECTS: usize = 4000;
    for _ in 0..OBJECTS {
        let mut object = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": metadata(&mut r), "spec": spec(&mut r)});
        if r.chance(10) {
            object["status"] = json!({"phase": scalar(&mut r)});
        }
        if r.chance(5) {
            object["apiVersion"] = json!("example.com/v2");
        }
        let read_as = if r.chance(90) { "v1" } else { "v2" };
        if both(&d, version(&d, read_as), &text(&object)) {
            accepted += 1;
        }
    }
    // The generator makes most objects valid: the fast path must take a good share of them.
    assert!(accepted > OBJECTS / 5, "accepted {accepted} of {OBJECTS}");
    assert!(accepted < OBJECTS, "and refuse some");
}

/// The storage-version migrator's general path for the `None` conversion of one stored object
/// into `to` (`lifecycle::migrate::rewrite`).
fn migrated(definition: &Definition, to: &Version, stored: &[u8]) -> Vec<u8> {
    let mut object: Value = serde_json::from_slice(stored).unwrap();
    crate::api::present::read_coerce(definition, &mut object);
    let mut converted = crate::api::write::convert_all_to(definition, vec![object], to).unwrap();
    let mut object = converted.pop().unwrap();
    object["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    crate::core::json::to_vec(&object).unwrap()
}

#[test]
fn a_none_conversion_of_stored_bytes_is_what_the_migrator_writes() {
    // v2 knows no `ratio` (pruned on the way into it) and defaults `image` (not applied by the
    // migrator's pruning, only when reading v2 objects).
    let mut v2 = widget_schema();
    v2["properties"]["spec"]["properties"].as_object_mut().unwrap().remove("ratio");
    v2["properties"]["spec"]["properties"]["image"]["default"] = json!("default");
    let d = widgets_with(widget_schema(), v2);
    // And versions with the same schema (one proof is enough there).
    let same = widgets();
    let mut r = Random(0x2545_f491_4f6c_dd1d);
    let mut accepted = 0;
    const OBJECTS: usize = 4000;
    for _ in 0..OBJECTS {
        let d = if r.chance(50) { &d } else { &same };
        let (from, to) = if r.chance(50) { ("v1", "v2") } else { ("v2", "v1") };
        let mut object = json!({"apiVersion": format!("example.com/{from}"), "kind": "Widget", "metadata": metadata(&mut r), "spec": spec(&mut r)});
        if r.chance(5) {
            object["apiVersion"] = json!("other.com/v1");
        }
        let stored = text(&object);
        let (from, to) = (version(d, from), version(d, to));
        let Some(fast) = super::with_api_version(d, from, to, &stored) else { continue };
        assert_eq!(
            String::from_utf8_lossy(&fast),
            String::from_utf8_lossy(&migrated(d, to, &stored)),
            "stored: {}",
            String::from_utf8_lossy(&stored)
        );
        accepted += 1;
    }
    // Most generated objects miss a default or hold a field some version prunes.
    assert!(accepted > OBJECTS / 40, "accepted {accepted} of {OBJECTS}");
    assert!(accepted < OBJECTS / 2, "and refuse many");
    // What each pruning would change is refused: a field `to` does not know, a stored
    // resourceVersion, a default `from` would add.
    let v1 = version(&d, "v1");
    let v2 = version(&d, "v2");
    let plain = text(&widget(json!({"image": "i", "replicas": 2})));
    let moved = super::with_api_version(&d, v1, v2, &plain).unwrap();
    assert_eq!(
        String::from_utf8(moved).unwrap(),
        String::from_utf8_lossy(&plain).replace("example.com/v1", "example.com/v2")
    );
    assert!(
        super::with_api_version(&d, v1, v2, &text(&widget(json!({"image": "i", "ratio": 0.5, "replicas": 2}))))
            .is_none()
    );
    assert!(super::with_api_version(&d, v1, v2, &text(&widget(json!({"image": "i"})))).is_none());
    let mut versioned = widget(json!({"image": "i", "replicas": 2}));
    versioned["metadata"]["resourceVersion"] = json!("5");
    assert!(super::with_api_version(&d, v1, v2, &text(&versioned)).is_none());
    // The stored object must name `from`.
    assert!(super::with_api_version(&d, v2, v1, &plain).is_none());
}
