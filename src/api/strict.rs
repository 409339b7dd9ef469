//! Decoding that notices duplicate fields (`{"a":1,"a":2}`), as Kubernetes' strict JSON
//! decoder does for `fieldValidation=Strict|Warn`: the last value wins and the field's path is
//! reported (`spec.replicas`, `spec.containers[0].name`).
//!
//! Works with any serde deserializer (JSON, YAML): each node returns its value and the
//! duplicate paths below it, relative to itself; parents prefix them on the way up.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A decoded value and the duplicate fields found in it.
#[derive(Debug, Default)]
pub struct Tracked {
    pub value: Value,
    pub duplicates: Vec<String>,
}

/// `key` joined with a path below it.
fn under(key: &str, below: &str) -> String {
    if below.starts_with('[') { format!("{key}{below}") } else { format!("{key}.{below}") }
}

impl<'de> Deserialize<'de> for Tracked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Tracked, D::Error> {
        deserializer.deserialize_any(TrackedVisitor)
    }
}

struct TrackedVisitor;

fn plain(value: Value) -> Tracked {
    Tracked { value, duplicates: Vec::new() }
}

impl<'de> Visitor<'de> for TrackedVisitor {
    type Value = Tracked;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Tracked, E> {
        Ok(plain(Value::Bool(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Tracked, E> {
        Ok(plain(Value::from(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Tracked, E> {
        Ok(plain(Value::from(v)))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Tracked, E> {
        Ok(plain(serde_json::Number::from_f64(v).map(Value::Number).unwrap_or(Value::Null)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Tracked, E> {
        Ok(plain(Value::String(v.to_string())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Tracked, E> {
        Ok(plain(Value::String(v)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Tracked, E> {
        Ok(plain(Value::Null))
    }

    fn visit_none<E: de::Error>(self) -> Result<Tracked, E> {
        Ok(plain(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Tracked, D::Error> {
        Tracked::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tracked, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        let mut duplicates = Vec::new();
        while let Some(item) = seq.next_element::<Tracked>()? {
            let index = format!("[{}]", items.len());
            duplicates.extend(item.duplicates.iter().map(|d| under(&index, d)));
            items.push(item.value);
        }
        Ok(Tracked { value: Value::Array(items), duplicates })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Tracked, A::Error> {
        let mut map = Map::new();
        let mut duplicates = Vec::new();
        while let Some(key) = access.next_key::<String>()? {
            let item: Tracked = access.next_value()?;
            duplicates.extend(item.duplicates.iter().map(|d| under(&key, d)));
            if map.insert(key.clone(), item.value).is_some() {
                duplicates.push(key);
            }
        }
        Ok(Tracked { value: Value::Object(map), duplicates })
    }
}

/// Decodes JSON, noting duplicate fields.
pub fn from_json(bytes: &[u8]) -> Result<Tracked, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// The most scalar bytes one YAML request body may decode to. Anchors and aliases let a
/// small document repeat a large string many times (a "billion laughs"); without aliases a
/// body decodes to no more scalar bytes than it holds, so twice the body limit refuses only
/// the amplifying documents. (The parser's own default is 64 MiB per request.)
const MAX_YAML_SCALAR_BYTES: usize = 2 * super::body::MAX_REQUEST_BYTES;

/// Decodes a YAML request body (last duplicate key wins), noting duplicate fields.
pub fn from_yaml(text: &str) -> Result<Tracked, serde_saphyr::Error> {
    let mut options = serde_saphyr::Options::default();
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
    let mut budget = serde_saphyr::budget::Budget::default();
    budget.max_total_scalar_bytes = MAX_YAML_SCALAR_BYTES;
    budget.max_recorded_anchor_bytes = super::body::MAX_REQUEST_BYTES;
    options.budget = Some(budget);
    serde_saphyr::from_str_with_options(text, options)
}

/// Decodes every document of a YAML stream (last duplicate key wins), noting duplicate fields.
pub fn from_yaml_documents(text: &str) -> Result<Vec<Tracked>, serde_saphyr::Error> {
    let mut options = serde_saphyr::Options::default();
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
    serde_saphyr::from_multiple_with_options(text, options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn duplicates_are_reported_with_kubernetes_paths() {
        let tracked =
            from_json(br#"{"spec":{"replicas":1,"replicas":2,"c":[{"name":"a","name":"b"}]},"kind":"K","kind":"K"}"#)
                .unwrap();
        assert_eq!(tracked.value, json!({"spec": {"replicas": 2, "c": [{"name": "b"}]}, "kind": "K"}));
        assert_eq!(tracked.duplicates, ["spec.replicas", "spec.c[0].name", "kind"]);
        assert!(from_json(br#"[1,[2]]"#).unwrap().duplicates.is_empty());
    }

    #[test]
    fn yaml_duplicates_too() {
        let tracked = from_yaml("spec:\n  a: 1\n  a: 2\n").unwrap();
        assert_eq!(tracked.value, json!({"spec": {"a": 2}}));
        assert_eq!(tracked.duplicates, ["spec.a"]);
    }

    #[test]
    fn aliases_cannot_amplify_a_yaml_body() {
        // One megabyte repeated a thousand times through aliases would decode to a gigabyte.
        let mut text = format!("a: &a \"{}\"\n", "x".repeat(1_000_000));
        for (name, from) in [("b", "a"), ("c", "b"), ("d", "c")] {
            text.push_str(&format!("{name}: &{name} [{}]\n", vec![format!("*{from}"); 10].join(",")));
        }
        assert!(from_yaml(&text).unwrap_err().to_string().contains("budget breached"));
        // A plain body of the same size decodes.
        let plain = format!("a: \"{}\"\nb: [1, 2]\n", "x".repeat(2_500_000));
        assert_eq!(from_yaml(&plain).unwrap().value["b"], json!([1, 2]));
    }
}
