//! JSON text as Go's `encoding/json` writes it, for the strings Kubernetes builds from JSON
//! and that clients see verbatim: the keys of FieldsV1 (`k:{"name":"a"}`, `v:5`), manager
//! identifiers and the last-applied annotation. Differences from serde_json: `<`, `>`, `&`,
//! U+2028 and U+2029 are escaped; floats use Go's notation (`1e+21`, `80` for 80.0).

use std::fmt::Write;

use serde_json::Value;

/// `value` as Go's `json.Marshal` renders it (map keys sorted).
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

pub fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            // serde_json maps are ordered by key, as Go sorts map keys.
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

fn write_number(out: &mut String, n: &serde_json::Number) {
    if n.is_f64() {
        out.push_str(&float(n.as_f64().unwrap_or(0.0)));
    } else {
        out.push_str(&n.to_string());
    }
}

/// A float64 as `encoding/json` writes it: plain notation between 1e-6 and 1e21, else
/// exponent notation with a signed, unpadded exponent.
pub fn float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = format!("{f:e}");
        return match text.split_once('e') {
            Some((mantissa, exponent)) if !exponent.starts_with('-') => format!("{mantissa}e+{exponent}"),
            _ => text,
        };
    }
    format!("{f}")
}

/// A JSON string literal with Go's escaping.
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_like_encoding_json() {
        assert_eq!(to_string(&json!({"b": 1, "a": "x<y>&z"})), r#"{"a":"x\u003cy\u003e\u0026z","b":1}"#);
        assert_eq!(to_string(&json!([1.5, 80.0, 1e21, 1e-7, true, null])), "[1.5,80,1e+21,1e-7,true,null]");
        assert_eq!(to_string(&json!("tab\tline\u{1}")), r#""tab\tline\u0001""#);
    }
}
