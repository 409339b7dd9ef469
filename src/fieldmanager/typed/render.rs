//! Values as Go's `fmt` prints structured-merge-diff's values in type errors (`%v`, `%#v`,
//! `%T` of the unstructured value), so the texts of `failed to create typed patch object`
//! errors read as Kubernetes writes them.

use serde_json::Value;

pub use crate::core::field::go_type;
use crate::core::field::{go_float, go_quote};

/// `%v` of a `value.Value`: `&{...}` around the plain value.
pub fn value_v(value: &Value) -> String {
    format!("&{{{}}}", plain_v(value))
}

/// `%#v` of a `value.Value`.
pub fn value_sharp(value: &Value) -> String {
    format!("&value.valueUnstructured{{Value:{}}}", sharp(value))
}

fn number(n: &serde_json::Number) -> String {
    match n.as_i64() {
        Some(i) => i.to_string(),
        None => go_float(n.as_f64().unwrap_or(0.0)),
    }
}

/// `%v` of an unstructured value: `map[a:1 b:x]`, `[1 2]`, strings bare.
fn plain_v(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!("[{}]", items.iter().map(plain_v).collect::<Vec<_>>().join(" ")),
        Value::Object(map) => {
            format!("map[{}]", map.iter().map(|(k, v)| format!("{k}:{}", plain_v(v))).collect::<Vec<_>>().join(" "))
        }
    }
}

/// `%#v` of an unstructured value.
fn sharp(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => go_quote(s),
        Value::Array(items) => {
            format!("[]interface {{}}{{{}}}", items.iter().map(sharp).collect::<Vec<_>>().join(", "))
        }
        Value::Object(map) => format!(
            "map[string]interface {{}}{{{}}}",
            map.iter().map(|(k, v)| format!("{}:{}", go_quote(k), sharp(v))).collect::<Vec<_>>().join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prints_like_go() {
        assert_eq!(go_type(&json!("x")), "string");
        assert_eq!(value_v(&json!({"a": [1, 2]})), "&{map[a:[1 2]]}");
        assert_eq!(value_sharp(&json!(5)), "&value.valueUnstructured{Value:5}");
        assert_eq!(
            value_sharp(&json!({"a": "b"})),
            "&value.valueUnstructured{Value:map[string]interface {}{\"a\":\"b\"}}"
        );
    }
}
