//! What one log event says, collected for the formatters: its message, its error (klog's
//! `err`) and its other fields in order, each string, number or boolean.

use std::fmt::{self, Write};

use tracing::field::{Field, Visit};

/// A field's value, kept as its kind so that formats can quote strings and not numbers.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    Text(String),
    Int(i64),
    Uint(u64),
    Float(f64),
    Bool(bool),
}

/// The message, error and fields of an event.
#[derive(Debug, Default)]
pub struct EventFields {
    pub message: String,
    /// An `error` (or `err`) field: klog and component-base's JSON call it `err`.
    pub error: Option<String>,
    pub fields: Vec<(&'static str, FieldValue)>,
}

impl EventFields {
    pub fn of(event: &tracing::Event<'_>) -> EventFields {
        let mut fields = EventFields::default();
        event.record(&mut fields);
        fields
    }

    fn push(&mut self, field: &Field, value: FieldValue) {
        match field.name() {
            // Fields `tracing-log` adds to records of the `log` crate; its metadata says them.
            name if name.starts_with("log.") => {}
            name => self.fields.push((name, value)),
        }
    }

    fn text(&mut self, field: &Field, text: String) {
        match field.name() {
            "message" => self.message = text,
            "error" | "err" => self.error = Some(text),
            _ => self.push(field, FieldValue::Text(text)),
        }
    }
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        self.text(field, text);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.text(field, value.to_string());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, FieldValue::Int(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, FieldValue::Uint(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, FieldValue::Float(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, FieldValue::Bool(value));
    }
}

/// Writes `text` as a quoted string with JSON's escapes (which Go's `%q` shares for the
/// characters logs carry).
pub fn write_quoted(out: &mut impl Write, text: &str) -> fmt::Result {
    out.write_char('"')?;
    for c in text.chars() {
        match c {
            '"' => out.write_str("\\\"")?,
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            c if u32::from(c) < 0x20 || c == '\u{7f}' => write!(out, "\\u{:04x}", u32::from(c))?,
            c => out.write_char(c)?,
        }
    }
    out.write_char('"')
}

/// Writes a value: strings quoted, numbers and booleans bare (non-finite floats quoted, as
/// JSON has no literal for them).
pub fn write_value(out: &mut impl Write, value: &FieldValue) -> fmt::Result {
    match value {
        FieldValue::Text(text) => write_quoted(out, text),
        FieldValue::Int(n) => write!(out, "{n}"),
        FieldValue::Uint(n) => write!(out, "{n}"),
        FieldValue::Float(x) if x.is_finite() => write!(out, "{x}"),
        FieldValue::Float(x) => write_quoted(out, &x.to_string()),
        FieldValue::Bool(b) => write!(out, "{b}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_escapes_what_would_break_a_line() {
        let mut out = String::new();
        write_quoted(&mut out, "a \"b\"\\\n\t\u{1}é").unwrap();
        assert_eq!(out, r#""a \"b\"\\\n\t\u0001é""#);
        let parsed: String = serde_json::from_str(&out).unwrap();
        assert_eq!(parsed, "a \"b\"\\\n\t\u{1}é");
    }

    #[test]
    fn values_keep_their_kind() {
        let render = |v: FieldValue| {
            let mut out = String::new();
            write_value(&mut out, &v).unwrap();
            out
        };
        assert_eq!(render(FieldValue::Text("x".into())), "\"x\"");
        assert_eq!(render(FieldValue::Uint(200)), "200");
        assert_eq!(render(FieldValue::Int(-1)), "-1");
        assert_eq!(render(FieldValue::Bool(true)), "true");
        assert_eq!(render(FieldValue::Float(0.5)), "0.5");
        assert_eq!(render(FieldValue::Float(f64::NAN)), "\"NaN\"");
    }
}
