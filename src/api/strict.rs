//! Decoding that notices duplicate fields (`{"a":1,"a":2}`), as Kubernetes' strict JSON
//! decoder does for `fieldValidation=Strict|Warn`: the last value wins and the field's path is
//! reported (`spec.replicas`, `spec.containers[0].name`).
//!
//! Works with any serde deserializer (JSON, YAML): each node returns its value and the
//! duplicate paths below it, relative to itself; parents prefix them on the way up.

use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::core::json_syntax::{self, MAX_NESTING_DEPTH};

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
        Seed { depth: 0 }.deserialize(deserializer)
    }
}

/// Decodes one value at `depth` (the containers around it), refusing containers nested deeper
/// than [`MAX_NESTING_DEPTH`] as Go's decoders do.
#[derive(Clone, Copy)]
struct Seed {
    depth: usize,
}

/// The error a too deeply nested body gets from the deserializer; callers word it.
pub const TOO_DEEP: &str = "nested too deeply";

impl<'de> DeserializeSeed<'de> for Seed {
    type Value = Tracked;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Tracked, D::Error> {
        deserializer.deserialize_any(TrackedVisitor { depth: self.depth })
    }
}

struct TrackedVisitor {
    depth: usize,
}

impl TrackedVisitor {
    /// The seed of the values inside the container this visitor is at.
    fn inner<E: de::Error>(&self) -> Result<Seed, E> {
        if self.depth >= MAX_NESTING_DEPTH {
            return Err(E::custom(TOO_DEEP));
        }
        Ok(Seed { depth: self.depth + 1 })
    }
}

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
        // Kubernetes decodes an integer that does not fit an int64 as a float64.
        match i64::try_from(v) {
            Ok(i) => Ok(plain(Value::from(i))),
            Err(_) => self.visit_f64(v as f64),
        }
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
        Seed { depth: self.depth }.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tracked, A::Error> {
        let seed = self.inner()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        let mut duplicates = Vec::new();
        while let Some(item) = seq.next_element_seed(seed)? {
            if !item.duplicates.is_empty() {
                let index = format!("[{}]", items.len());
                duplicates.extend(item.duplicates.iter().map(|d| under(&index, d)));
            }
            items.push(item.value);
        }
        Ok(Tracked { value: Value::Array(items), duplicates })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Tracked, A::Error> {
        let seed = self.inner()?;
        let mut map = Map::new();
        let mut duplicates = Vec::new();
        while let Some(key) = access.next_key::<String>()? {
            let item: Tracked = access.next_value_seed(seed)?;
            duplicates.extend(item.duplicates.iter().map(|d| under(&key, d)));
            if map.contains_key(&key) {
                duplicates.push(key.clone());
            }
            map.insert(key, item.value);
        }
        Ok(Tracked { value: Value::Object(map), duplicates })
    }
}

/// How a JSON body failed to decode, in Go's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON (`encoding/json`'s syntax error: `unexpected end of JSON input`, ...).
    Syntax(String),
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Syntax(text) => f.write_str(text),
        }
    }
}

/// Go's refusal of a number too large for a float64.
pub fn number_error(literal: &str) -> String {
    format!("json: cannot unmarshal number {literal} into Go value of type float64")
}

/// A decoded JSON body: the value, its duplicate fields, and the first number too large for a
/// float64, which Go's decoder refuses (`json: cannot unmarshal number 1e999 ...`) after it
/// has read the body's kind (the value holds 0 in its place).
#[derive(Debug, Default)]
pub struct ParsedJson {
    pub tracked: Tracked,
    pub overflowing_number: Option<String>,
}

/// Decodes JSON as kube-apiserver's decoders do, noting duplicate fields: serde_json where it
/// agrees with Go (nearly always), and where it refuses, what Go would do: Go's syntax error,
/// or the text Go reads the same way (strings repaired, overflowing numbers set aside).
pub fn from_json(bytes: &[u8]) -> Result<ParsedJson, JsonError> {
    if let Ok(tracked) = parse_json(bytes) {
        return Ok(ParsedJson { tracked, overflowing_number: None });
    }
    let checked = json_syntax::check(bytes).map_err(|e| JsonError::Syntax(e.0))?;
    let repaired = json_syntax::repair(bytes, &checked);
    let overflowing_number = checked.overflowing_numbers.first().and_then(|at| bytes.get(at.clone()));
    let overflowing_number = overflowing_number.map(|n| String::from_utf8_lossy(n).into_owned());
    match parse_json(&repaired) {
        Ok(tracked) => Ok(ParsedJson { tracked, overflowing_number }),
        // The checked text is JSON within Go's limits; serde_json cannot refuse it.
        Err(e) => Err(JsonError::Syntax(e.to_string())),
    }
}

fn parse_json(bytes: &[u8]) -> serde_json::Result<Tracked> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    deserializer.disable_recursion_limit();
    let tracked = Seed { depth: 0 }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(tracked)
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
                .unwrap()
                .tracked;
        assert_eq!(tracked.value, json!({"spec": {"replicas": 2, "c": [{"name": "b"}]}, "kind": "K"}));
        assert_eq!(tracked.duplicates, ["spec.replicas", "spec.c[0].name", "kind"]);
        assert!(from_json(br#"[1,[2]]"#).unwrap().tracked.duplicates.is_empty());
    }
}
