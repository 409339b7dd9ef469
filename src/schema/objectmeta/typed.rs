//! `metadata` read as Kubernetes reads it: decoded into the `ObjectMeta` type and encoded
//! again. Unknown fields are dropped and reported (`metadata.foo`,
//! `metadata.ownerReferences[0].bar`); ill-typed fields are errors in Go's words, or dropped
//! one by one when the caller asks for it (objects read from storage); empty fields vanish and
//! times are normalized, as a round trip through the Go type does.

use serde_json::{Map, Value};

use crate::core::field::go_type;
use crate::core::time::{format_rfc3339, parse_rfc3339};

/// Normalized metadata and the unknown fields that were dropped from it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Coerced {
    pub meta: Map<String, Value>,
    pub unknown: Vec<String>,
}

#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    IntPtr,
    Time,
    TimePtr,
    StrMap,
    StrList,
    Owners,
    Managed,
}

fn kind_of(field: &str) -> Option<Kind> {
    Some(match field {
        "name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion" => Kind::Str,
        "generation" => Kind::Int,
        "deletionGracePeriodSeconds" => Kind::IntPtr,
        "creationTimestamp" => Kind::Time,
        "deletionTimestamp" => Kind::TimePtr,
        "labels" | "annotations" => Kind::StrMap,
        "finalizers" => Kind::StrList,
        "ownerReferences" => Kind::Owners,
        "managedFields" => Kind::Managed,
        _ => return None,
    })
}

/// Go's name for a JSON value's kind, as `encoding/json` errors print it.
fn json_kind(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

fn type_error(found: &str, field: &str, go_type: &str) -> String {
    format!("json: cannot unmarshal {found} into Go struct field ObjectMeta.{field} of type {go_type}")
}

/// Decodes `metadata`. `prefix` is where unknown fields are reported (`metadata`,
/// `spec.template.metadata`). With `drop_malformed`, ill-typed fields are left out instead of
/// failing the whole decode.
pub fn coerce(raw: &Value, prefix: &str, drop_malformed: bool) -> Result<Coerced, String> {
    let map = match raw {
        Value::Null => return Ok(Coerced::default()),
        Value::Object(map) => map,
        other if drop_malformed => {
            return Err(format!("invalid metadata: expected object, got {}", go_type(other)));
        }
        other => {
            return Err(format!("json: cannot unmarshal {} into Go value of type v1.ObjectMeta", json_kind(other)));
        }
    };
    let mut out = Coerced::default();
    for (field, value) in map {
        let Some(kind) = kind_of(field) else {
            out.unknown.push(format!("{prefix}.{field}"));
            continue;
        };
        let mut unknown = Vec::new();
        match decode(kind, field, value, prefix, &mut unknown) {
            Ok(Some(v)) => {
                out.meta.insert(field.clone(), v);
                out.unknown.extend(unknown);
            }
            Ok(None) => out.unknown.extend(unknown),
            Err(e) if drop_malformed => drop(e),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Whether `raw` is already what [`coerce`] makes of it, field for field, so that a reader may
/// keep it as it is: every field known, of its type, not empty, times in their normal form (as
/// the server writes them). Owner references and managed fields are not looked into: metadata
/// with them is never taken as normal.
pub fn is_normal(raw: &Value) -> bool {
    let Value::Object(map) = raw else { return false };
    map.iter().all(|(field, value)| match kind_of(field) {
        Some(Kind::Str) => value.as_str().is_some_and(|s| !s.is_empty()),
        Some(Kind::Int) => value.as_i64().is_some_and(|i| i != 0),
        Some(Kind::IntPtr) => value.as_i64().is_some(),
        Some(Kind::Time | Kind::TimePtr) => {
            value.as_str().is_some_and(|text| parse_rfc3339(text).is_some_and(|ts| format_rfc3339(ts) == text))
        }
        Some(Kind::StrMap) => value.as_object().is_some_and(|m| !m.is_empty() && m.values().all(Value::is_string)),
        Some(Kind::StrList) => value.as_array().is_some_and(|l| !l.is_empty() && l.iter().all(Value::is_string)),
        Some(Kind::Owners | Kind::Managed) | None => false,
    })
}

/// One field; `None` when it encodes as absent (empty, or null).
fn decode(
    kind: Kind,
    field: &str,
    v: &Value,
    prefix: &str,
    unknown: &mut Vec<String>,
) -> Result<Option<Value>, String> {
    if v.is_null() {
        return Ok(None);
    }
    match kind {
        Kind::Str => string(v, field).map(|s| (!s.is_empty()).then_some(Value::String(s))),
        Kind::Int => int(v, field).map(|i| (i != 0).then_some(Value::from(i))),
        Kind::IntPtr => int(v, field).map(|i| Some(Value::from(i))),
        Kind::Time | Kind::TimePtr => time(v, field).map(|t| t.map(Value::String)),
        Kind::StrMap => {
            let Value::Object(entries) = v else {
                return Err(type_error(&json_kind(v), field, "map[string]string"));
            };
            let mut out = Map::new();
            for (k, item) in entries {
                let text = if item.is_null() { String::new() } else { string(item, field)? };
                out.insert(k.clone(), Value::String(text));
            }
            Ok((!out.is_empty()).then_some(Value::Object(out)))
        }
        Kind::StrList => {
            let Value::Array(items) = v else {
                return Err(type_error(&json_kind(v), field, "[]string"));
            };
            let out: Result<Vec<Value>, String> = items
                .iter()
                .map(|i| if i.is_null() { Ok(String::new()) } else { string(i, field) }.map(Value::String))
                .collect();
            let out = out?;
            Ok((!out.is_empty()).then_some(Value::Array(out)))
        }
        Kind::Owners => structs(v, field, "v1.OwnerReference", prefix, unknown, owner_reference),
        Kind::Managed => structs(v, field, "v1.ManagedFieldsEntry", prefix, unknown, managed_fields_entry),
    }
}

fn string(v: &Value, field: &str) -> Result<String, String> {
    v.as_str().map(str::to_string).ok_or_else(|| type_error(&json_kind(v), field, "string"))
}

fn int(v: &Value, field: &str) -> Result<i64, String> {
    match v {
        Value::Number(n) => n.as_i64().ok_or_else(|| type_error(&format!("number {n}"), field, "int64")),
        other => Err(type_error(&json_kind(other), field, "int64")),
    }
}

fn boolean(v: &Value, field: &str) -> Result<bool, String> {
    v.as_bool().ok_or_else(|| type_error(&json_kind(v), field, "bool"))
}

/// `metav1.Time`: an RFC 3339 string, encoded again in UTC with whole seconds.
fn time(v: &Value, field: &str) -> Result<Option<String>, String> {
    let text = string(v, field)?;
    match parse_rfc3339(&text) {
        Some(ts) => Ok(Some(format_rfc3339(ts))),
        None => {
            Err(format!("parsing time {text:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {text:?} as \"2006\""))
        }
    }
}

type StructDecoder = fn(&Map<String, Value>, &str, &str, &mut Vec<String>) -> Result<Map<String, Value>, String>;

/// A list of structs; `None` when empty.
fn structs(
    v: &Value,
    field: &str,
    go_type: &str,
    prefix: &str,
    unknown: &mut Vec<String>,
    each: StructDecoder,
) -> Result<Option<Value>, String> {
    let Value::Array(items) = v else {
        return Err(type_error(&json_kind(v), field, &format!("[]{go_type}")));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let empty = Map::new();
        let fields = match item {
            Value::Null => &empty,
            Value::Object(fields) => fields,
            other => return Err(type_error(&json_kind(other), field, go_type)),
        };
        let at = format!("{prefix}.{field}[{i}]");
        out.push(Value::Object(each(fields, field, &at, unknown)?));
    }
    Ok((!out.is_empty()).then_some(Value::Array(out)))
}

fn owner_reference(
    fields: &Map<String, Value>,
    parent: &str,
    at: &str,
    unknown: &mut Vec<String>,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for name in ["apiVersion", "kind", "name", "uid"] {
        out.insert(name.into(), Value::String(String::new()));
    }
    for (name, value) in fields {
        let field = format!("{parent}.{name}");
        match name.as_str() {
            "apiVersion" | "kind" | "name" | "uid" => {
                let text = if value.is_null() { String::new() } else { string(value, &field)? };
                out.insert(name.clone(), Value::String(text));
            }
            "controller" | "blockOwnerDeletion" => {
                if !value.is_null() {
                    out.insert(name.clone(), Value::Bool(boolean(value, &field)?));
                }
            }
            _ => unknown.push(format!("{at}.{name}")),
        }
    }
    Ok(out)
}

fn managed_fields_entry(
    fields: &Map<String, Value>,
    parent: &str,
    at: &str,
    unknown: &mut Vec<String>,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (name, value) in fields {
        let field = format!("{parent}.{name}");
        if value.is_null() {
            continue;
        }
        match name.as_str() {
            "manager" | "operation" | "apiVersion" | "fieldsType" | "subresource" => {
                let text = string(value, &field)?;
                if !text.is_empty() {
                    out.insert(name.clone(), Value::String(text));
                }
            }
            "time" => {
                if let Some(t) = time(value, &field)? {
                    out.insert(name.clone(), Value::String(t));
                }
            }
            "fieldsV1" => {
                out.insert(name.clone(), value.clone());
            }
            _ => unknown.push(format!("{at}.{name}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_dropped_and_reported() {
        let got = coerce(
            &json!({"name": "a", "foo": 1, "labels": {}, "ownerReferences": [{"kind": "K", "bar": 2}], "generation": 0}),
            "metadata",
            false,
        )
        .unwrap();
        assert_eq!(got.unknown, ["metadata.foo", "metadata.ownerReferences[0].bar"]);
        assert_eq!(
            Value::Object(got.meta),
            json!({"name": "a", "ownerReferences": [{"apiVersion": "", "kind": "K", "name": "", "uid": ""}]})
        );
    }

    #[test]
    fn ill_typed_fields_fail_or_are_dropped() {
        let raw = json!({"name": "a", "labels": {"x": 42}, "generation": 1.5});
        assert_eq!(
            coerce(&raw, "metadata", false).unwrap_err(),
            "json: cannot unmarshal number 1.5 into Go struct field ObjectMeta.generation of type int64"
        );
        assert_eq!(Value::Object(coerce(&raw, "metadata", true).unwrap().meta), json!({"name": "a"}));
        assert_eq!(
            coerce(&json!({"labels": {"x": 42}}), "metadata", false).unwrap_err(),
            "json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string"
        );
        assert_eq!(
            coerce(&json!(5), "metadata", false).unwrap_err(),
            "json: cannot unmarshal number into Go value of type v1.ObjectMeta"
        );
    }

    #[test]
    fn times_are_normalized() {
        let got = coerce(&json!({"creationTimestamp": "2017-05-31T14:56:35.123+02:00"}), "metadata", false).unwrap();
        assert_eq!(got.meta["creationTimestamp"], "2017-05-31T12:56:35Z");
    }

    #[test]
    fn normal_metadata_is_what_coerce_makes_of_it() {
        let normal = [
            json!({"name": "a", "namespace": "ns", "uid": "u", "generation": 3, "resourceVersion": "7",
                "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": "x"}, "annotations": {"k": ""},
                "finalizers": ["f"], "deletionGracePeriodSeconds": 0, "deletionTimestamp": "2026-01-02T03:04:05Z"}),
            json!({}),
        ];
        for raw in normal {
            assert!(is_normal(&raw), "{raw}");
            let coerced = coerce(&raw, "metadata", true).unwrap();
            assert_eq!(Value::Object(coerced.meta), raw);
            assert!(coerced.unknown.is_empty());
        }
        let not_normal = [
            json!({"name": ""}),
            json!({"generation": 0}),
            json!({"generation": 1.5}),
            json!({"creationTimestamp": "2017-05-31T14:56:35.123+02:00"}),
            json!({"creationTimestamp": "yesterday"}),
            json!({"labels": {}}),
            json!({"labels": {"x": 42}}),
            json!({"finalizers": []}),
            json!({"name": null}),
            json!({"foo": "bar"}),
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u"}]}),
            json!({"managedFields": [{"manager": "m"}]}),
            json!("metadata"),
        ];
        for raw in not_normal {
            assert!(!is_normal(&raw), "{raw}");
        }
    }
}
