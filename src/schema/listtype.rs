//! `x-kubernetes-list-type`: `set` lists hold no item twice, `map` lists hold objects with
//! distinct key fields (`spec.ports[1]: Duplicate value: {"name":"http"}`).
//!
//! Only the second occurrence of a value is reported, as Kubernetes reports it.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::node::{Cursor, Schema};
use crate::core::field::{FieldError, Path};

/// Checks every `set` and `map` list of an object. Paths start at `path` (nil for objects).
pub fn validate(path: &Path, s: Option<&Schema>, object: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let (Some(s), Value::Object(map)) = (s, object) {
        walk_object(path, s, map, &mut errs);
    }
    errs
}

fn walk_object(path: &Path, s: &Schema, map: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    if let Some(extra) = s.additional_schema().filter(|e| e.has_list_checks) {
        for (key, value) in map {
            walk(&path.key(key), extra, value, errs);
        }
    }
    let mut properties = Cursor::new(&s.properties);
    for (key, value) in map {
        if let Some(property) = properties.get(key).filter(|p| p.has_list_checks) {
            walk(&path.child(key), property, value, errs);
        }
    }
}

fn walk(path: &Path, s: &Schema, value: &Value, errs: &mut Vec<FieldError>) {
    if !s.has_list_checks {
        return;
    }
    match value {
        Value::Array(items) => walk_array(path, s, items, errs),
        Value::Object(map) => walk_object(path, s, map, errs),
        _ => {}
    }
}

fn walk_array(path: &Path, s: &Schema, items: &[Value], errs: &mut Vec<FieldError>) {
    match s.list_type.as_deref() {
        Some("set") => {
            for i in repeated(items.iter()) {
                if let Some(item) = items.get(i) {
                    errs.push(FieldError::duplicate(path.index(i), item.clone()));
                }
            }
        }
        Some("map") => errs.extend(validate_map(path, s, items)),
        _ => {}
    }
    if let Some(item_schema) = s.items().filter(|i| i.has_list_checks) {
        for (i, item) in items.iter().enumerate() {
            walk(&path.index(i), item_schema, item, errs);
        }
    }
}

/// How set items compare: scalars by value (an integer and a float differ), compound values
/// by their JSON text.
#[derive(PartialEq, Eq, Hash)]
enum ItemKey<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(u64),
    Str(&'a str),
    Json(String),
}

fn item_key(value: &Value) -> ItemKey<'_> {
    match value {
        Value::Null => ItemKey::Null,
        Value::Bool(b) => ItemKey::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => ItemKey::Int(i),
            None => ItemKey::Float(n.as_f64().unwrap_or(0.0).to_bits()),
        },
        Value::String(s) => ItemKey::Str(s),
        other => ItemKey::Json(other.to_string()),
    }
}

/// Indices of second occurrences of values.
fn repeated<'a>(values: impl Iterator<Item = &'a Value>) -> Vec<usize> {
    let mut seen: HashMap<ItemKey<'a>, u32> = HashMap::new();
    let mut out = Vec::new();
    for (i, value) in values.enumerate() {
        let times = seen.entry(item_key(value)).or_insert(0);
        *times += 1;
        if *times == 2 {
            out.push(i);
        }
    }
    out
}

fn validate_map(path: &Path, s: &Schema, items: &[Value]) -> Vec<FieldError> {
    for (i, item) in items.iter().enumerate() {
        if !item.is_null() && !item.is_object() {
            return vec![FieldError::invalid(
                path.index(i),
                item.clone(),
                "must be an object for an array of list-type map",
            )];
        }
    }
    if items.len() <= 1 {
        return Vec::new();
    }
    // Each item's key: its key fields that are present (a missing item has none).
    let keys: Vec<Map<String, Value>> = items
        .iter()
        .map(|item| {
            let fields = item.as_object();
            s.list_map_keys
                .iter()
                .filter_map(|k| fields.and_then(|f| f.get(k)).map(|v| (k.clone(), v.clone())))
                .collect()
        })
        .collect();
    if let [single] = s.list_map_keys.as_slice() {
        // One key: compared by the key's value (a missing key is its own value).
        let values: Vec<Value> = keys
            .iter()
            .map(|k| k.get(single).cloned().unwrap_or_else(|| Value::String("\u{0}missing".into())))
            .collect();
        return repeated(values.iter())
            .into_iter()
            .filter_map(|i| keys.get(i).map(|k| FieldError::duplicate(path.index(i), Value::Object(k.clone()))))
            .collect();
    }
    let as_values: Vec<Value> = keys.into_iter().map(Value::Object).collect();
    repeated(as_values.iter())
        .into_iter()
        .filter_map(|i| as_values.get(i).map(|k| FieldError::duplicate(path.index(i), k.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::compile::compile;
    use serde_json::json;

    fn errors(schema: Value, object: Value) -> Vec<String> {
        validate(&Path::new("root"), Some(&compile(&schema)), &object).iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn sets_report_each_repeated_value_once() {
        let schema = json!({"type": "object", "properties": {"s": {"type": "array", "x-kubernetes-list-type": "set"}}});
        assert_eq!(
            errors(schema.clone(), json!({"s": ["a", "a", "b", "a", [1], [1], 1, 1.0]})),
            [r#"root.s[1]: Duplicate value: "a""#, "root.s[5]: Duplicate value: [1]"]
        );
        assert!(errors(schema, json!({"s": ["a"]})).is_empty());
    }

    #[test]
    fn maps_compare_key_fields() {
        let schema = json!({"type": "object", "properties": {"m": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object"}}}});
        assert_eq!(
            errors(schema.clone(), json!({"m": [{"name": "a", "v": 1}, {"name": "a", "v": 2}]})),
            [r#"root.m[1]: Duplicate value: {"name":"a"}"#]
        );
        assert_eq!(errors(schema.clone(), json!({"m": [{}, {}]})), ["root.m[1]: Duplicate value: {}"]);
        assert_eq!(
            errors(schema, json!({"m": ["x"]})),
            [r#"root.m[0]: Invalid value: "x": must be an object for an array of list-type map"#]
        );
        let two = json!({"type": "object", "properties": {"m": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["a", "b"], "items": {"type": "object"}}}});
        assert_eq!(
            errors(two, json!({"m": [{"a": 1, "b": 2}, {"a": 1, "b": 3}, {"b": 2, "a": 1}]})),
            [r#"root.m[2]: Duplicate value: {"a":1,"b":2}"#]
        );
    }

    #[test]
    fn nested_lists_and_maps() {
        let schema =
            json!({"type": "object", "additionalProperties": {"type": "array", "x-kubernetes-list-type": "set"}});
        assert_eq!(errors(schema, json!({"k": [1, 1]})), ["root[k][1]: Duplicate value: 1"]);
    }
}
