//! A read-only view of a schema object as written in the manifest, for the definition checks
//! (which must see keywords the typed `JSONSchemaProps` drops, such as `xml` or `readOnly`).

use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy)]
pub struct Raw<'a>(pub &'a Map<String, Value>);

static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();

impl<'a> Raw<'a> {
    /// The view of a JSON value; anything but an object reads as the empty schema.
    pub fn of(value: &'a Value) -> Raw<'a> {
        match value {
            Value::Object(map) => Raw(map),
            _ => Raw(EMPTY.get_or_init(Map::new)),
        }
    }

    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key)
    }

    /// Present and not `null`.
    pub fn present(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| !v.is_null())
    }

    pub fn str(&self, key: &str) -> &'a str {
        self.get(key).and_then(Value::as_str).unwrap_or_default()
    }

    pub fn flag(&self, key: &str) -> bool {
        self.get(key).and_then(Value::as_bool).unwrap_or(false)
    }

    pub fn object(&self, key: &str) -> Option<Raw<'a>> {
        self.get(key).and_then(Value::as_object).map(Raw)
    }

    /// The schemas of a list keyword (`allOf`, ...); non-objects are skipped.
    pub fn list(&self, key: &str) -> Vec<Raw<'a>> {
        self.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_object).map(Raw).collect())
            .unwrap_or_default()
    }

    /// `properties`, in name order.
    pub fn properties(&self) -> Vec<(&'a str, Raw<'a>)> {
        self.get("properties")
            .and_then(Value::as_object)
            .map(|p| p.iter().map(|(k, v)| (k.as_str(), Raw::of(v))).collect())
            .unwrap_or_default()
    }

    pub fn keys(&self) -> Vec<&'a str> {
        self.0.keys().map(String::as_str).collect()
    }

    /// Absent or the zero value of its Go field (null, false, ""). Numbers are pointers in
    /// Go's schema type, so any number is set.
    pub fn is_zero(&self, key: &str) -> bool {
        match self.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => true,
            Some(Value::String(s)) => s.is_empty(),
            Some(_) => false,
        }
    }

    /// Every schema directly below this one (items, properties, additionalProperties, the
    /// junctors), with the keyword that holds it.
    pub fn children(&self) -> Vec<(&'static str, Raw<'a>)> {
        let mut out = Vec::new();
        if let Some(items) = self.object("items") {
            out.push(("items", items));
        }
        for (_, p) in self.properties() {
            out.push(("properties", p));
        }
        if let Some(extra) = self.object("additionalProperties") {
            out.push(("additionalProperties", extra));
        }
        if let Some(not) = self.object("not") {
            out.push(("not", not));
        }
        for key in ["allOf", "anyOf", "oneOf"] {
            for branch in self.list(key) {
                out.push((key, branch));
            }
        }
        out
    }
}
