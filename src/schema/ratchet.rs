//! Correlation of a new object with the old one on update, for validation ratcheting: which
//! old value a node of the new object corresponds to (object properties, `additionalProperties`
//! keys, items of `x-kubernetes-list-type: map` lists by their keys), and whether a node is
//! unchanged in Kubernetes' sense (`CorrelatedObject.CachedDeepEqual`).
//!
//! An error on an unchanged node is dropped. Atomic and set lists correlate only as a whole.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::node::Schema;

/// The old value of field `key` of a new object, when the node's schema specifies the field
/// and both objects have it.
pub fn old_field<'o>(s: &Schema, new: &Map<String, Value>, old: &'o Value, key: &str) -> Option<&'o Value> {
    let old = old.as_object()?;
    if !new.contains_key(key) || s.field_schema(key).is_none() {
        return None;
    }
    old.get(key)
}

/// The old items of a `map` list, by their key fields; the first item with a key wins.
#[derive(Debug, Default)]
pub struct MapListIndex<'o> {
    by_key: HashMap<String, &'o Value>,
}

impl<'o> MapListIndex<'o> {
    /// The index of an old list, when the node is a `map` list that correlates by key.
    pub fn new(s: &Schema, old: &'o Value) -> Option<MapListIndex<'o>> {
        let old = old.as_array()?;
        if !s.is_list_type("map") || s.type_name != "array" || s.list_map_keys.is_empty() {
            return None;
        }
        let mut by_key = HashMap::with_capacity(old.len());
        for item in old {
            if let Some(key) = composite_key(s, item) {
                by_key.entry(key).or_insert(item);
            }
        }
        Some(MapListIndex { by_key })
    }

    /// The old item with the same keys as `item`.
    pub fn get(&self, s: &Schema, item: &Value) -> Option<&'o Value> {
        self.by_key.get(&composite_key(s, item)?).copied()
    }
}

/// The key of a `map` list item: its key fields, which must all be present and scalar.
fn composite_key(s: &Schema, item: &Value) -> Option<String> {
    let item = item.as_object()?;
    let mut key = String::new();
    for name in &s.list_map_keys {
        key.push('\0');
        match item.get(name)? {
            Value::Bool(b) => key.push_str(if *b { "b:true" } else { "b:false" }),
            Value::Number(n) => match n.as_i64() {
                Some(i) => key.push_str(&format!("i:{i}")),
                None => key.push_str(&format!("f:{}", n.as_f64().unwrap_or(0.0))),
            },
            Value::String(text) => {
                key.push_str("s:");
                key.push_str(text);
            }
            _ => return None,
        }
    }
    Some(key)
}

/// Whether a node is unchanged from its correlated old value: objects key by key (every key
/// must correlate), `map` lists item by item, everything else by plain equality.
pub fn unchanged(s: &Schema, new: &Value, old: &Value) -> bool {
    match (new, old) {
        (Value::Null, Value::Null) => true,
        (Value::Null, _) | (_, Value::Null) => false,
        (Value::Array(new_items), Value::Array(old_items)) => {
            if new_items.len() != old_items.len() {
                return false;
            }
            if !s.is_list_type("map") {
                return new_items == old_items;
            }
            if new_items.is_empty() {
                return true;
            }
            let (Some(index), Some(item_schema)) = (MapListIndex::new(s, old), s.items()) else {
                return false;
            };
            new_items
                .iter()
                .all(|item| index.get(s, item).is_some_and(|old_item| unchanged(item_schema, item, old_item)))
        }
        (Value::Object(new_map), Value::Object(old_map)) => {
            new_map.len() == old_map.len()
                && new_map.iter().all(|(k, v)| match (old_map.get(k), s.field_schema(k)) {
                    (Some(old_value), Some(field)) => unchanged(field, v, old_value),
                    _ => false,
                })
        }
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => false,
        _ => new == old,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::compile::compile;
    use serde_json::json;

    #[test]
    fn objects_correlate_through_their_specified_fields() {
        let s = compile(&json!({"type": "object", "properties": {"a": {"type": "integer"}}}));
        assert!(unchanged(&s, &json!({"a": 1}), &json!({"a": 1})));
        assert!(!unchanged(&s, &json!({"a": 1}), &json!({"a": 1.0})), "int and float differ");
        assert!(!unchanged(&s, &json!({"a": 1, "x": 2}), &json!({"a": 1, "x": 2})), "unspecified keys never correlate");
    }

    #[test]
    fn map_lists_correlate_by_key_other_lists_as_a_whole() {
        let map_list = compile(&json!({
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
            "items": {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "integer"}}},
        }));
        let old = json!([{"k": "a", "v": 1}, {"k": "b", "v": 2}]);
        assert!(unchanged(&map_list, &json!([{"k": "b", "v": 2}, {"k": "a", "v": 1}]), &old));
        let index = MapListIndex::new(&map_list, &old).unwrap();
        assert_eq!(index.get(&map_list, &json!({"k": "b"})), Some(&json!({"k": "b", "v": 2})));
        let atomic = compile(&json!({"type": "array", "items": {"type": "integer"}}));
        assert!(!unchanged(&atomic, &json!([2, 1]), &json!([1, 2])));
        assert!(MapListIndex::new(&atomic, &json!([1])).is_none());
    }
}
