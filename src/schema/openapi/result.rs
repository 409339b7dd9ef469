//! What kube-openapi's validator produces, kept in its own terms until the end: errors with a
//! code, a dotted name and a message, de-duplicated by message, and the "match count" that
//! picks the closest failing branch of `anyOf`/`oneOf`. Then the mapping Kubernetes applies to
//! turn them into field errors (`kubeOpenAPIResultToFieldErrors`).

use serde_json::Value;

use crate::core::field::{FieldError, Path, go_json};

/// The error codes that decide how an error becomes a field error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Code {
    InvalidType,
    Required,
    TooLong,
    Enum,
    MaxItems,
    TooManyProperties,
    /// Every other validation (pattern, minimum, ...): rendered as `Invalid value`.
    Other,
}

/// One kube-openapi error.
#[derive(Debug, Clone)]
pub(super) enum OaError {
    Validation {
        code: Code,
        /// The dotted path kube-openapi built (`spec.replicas`, `.alpha` for root fields).
        name: String,
        value: Option<Value>,
        /// The limit, for `maxLength`, `maxItems` and `maxProperties`.
        valid: Option<i64>,
        /// The allowed values, for `enum`.
        values: Vec<Value>,
        message: String,
    },
    /// Errors that are not validation errors (junctors, numeric ranges): they land on the
    /// root path with an empty value.
    Plain(String),
}

impl OaError {
    pub fn validation(code: Code, name: &str, value: Option<Value>, message: String) -> OaError {
        OaError::Validation { code, name: name.to_string(), value, valid: None, values: Vec::new(), message }
    }

    pub fn with_valid(mut self, limit: i64) -> OaError {
        if let OaError::Validation { valid, .. } = &mut self {
            *valid = Some(limit);
        }
        self
    }

    pub fn message(&self) -> &str {
        match self {
            OaError::Validation { message, .. } | OaError::Plain(message) => message,
        }
    }

    /// The field error Kubernetes makes of it, under `prefix` (the nil path for objects).
    pub fn to_field_error(&self, prefix: &Path) -> FieldError {
        let OaError::Validation { code, name, value, valid, values, message } = self else {
            return FieldError::invalid(prefix.clone(), "", self.message());
        };
        let path = if name.is_empty() || name == "." {
            prefix.clone()
        } else {
            prefix.child(name.strip_prefix('.').unwrap_or(name))
        };
        let value_or_empty = || value.clone().unwrap_or_else(|| Value::String(String::new()));
        match code {
            Code::Required => FieldError::required(path, ""),
            Code::Enum => {
                let allowed: Vec<String> =
                    values.iter().map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| go_json(v))).collect();
                FieldError::not_supported(path, value.clone().unwrap_or(Value::Null), &allowed)
            }
            Code::TooLong => FieldError::too_long(path, valid.unwrap_or(-1)),
            Code::MaxItems | Code::TooManyProperties => {
                FieldError::too_many(path, value.as_ref().and_then(Value::as_i64), valid.unwrap_or(-1))
            }
            Code::InvalidType => FieldError::type_invalid(path, value_or_empty(), message.clone()),
            Code::Other => FieldError::invalid(path, value_or_empty(), message.clone()),
        }
    }
}

/// A validation result: errors and the match count.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    pub errors: Vec<OaError>,
    pub matches: usize,
}

impl Outcome {
    pub fn error(e: OaError) -> Outcome {
        Outcome { errors: vec![e], matches: 0 }
    }

    /// Adds an error unless one with the same message is there already.
    pub fn add(&mut self, e: OaError) {
        if !self.errors.iter().any(|have| have.message() == e.message()) {
            self.errors.push(e);
        }
    }

    pub fn merge(&mut self, other: Outcome) {
        for e in other.errors {
            self.add(e);
        }
        self.matches += other.matches;
    }

    pub fn inc(&mut self) {
        self.matches += 1;
    }

    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// A path in kube-openapi's notation, built only when an error needs it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Loc<'a> {
    parent: Option<&'a Loc<'a>>,
    seg: Seg<'a>,
}

#[derive(Debug, Clone, Copy)]
enum Seg<'a> {
    Root,
    /// A property: `name` at the root, `parent.name` below.
    Field(&'a str),
    /// An `additionalProperties` key: always `parent.key`, even at the root.
    Key(&'a str),
    Index(usize),
}

impl<'a> Loc<'a> {
    pub fn root() -> Loc<'static> {
        Loc { parent: None, seg: Seg::Root }
    }

    pub fn field(&'a self, name: &'a str) -> Loc<'a> {
        Loc { parent: Some(self), seg: Seg::Field(name) }
    }

    pub fn key(&'a self, key: &'a str) -> Loc<'a> {
        Loc { parent: Some(self), seg: Seg::Key(key) }
    }

    pub fn index(&'a self, index: usize) -> Loc<'a> {
        Loc { parent: Some(self), seg: Seg::Index(index) }
    }

    pub fn is_root(&self) -> bool {
        matches!(self.seg, Seg::Root)
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_into(&mut out);
        out
    }

    fn render_into(&self, out: &mut String) {
        if let Some(parent) = self.parent {
            parent.render_into(out);
        }
        match self.seg {
            Seg::Root => {}
            Seg::Field(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Seg::Key(key) => {
                out.push('.');
                out.push_str(key);
            }
            Seg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
}

/// A Go `%v` of a JSON value: strings bare, lists `[a b]`, maps `map[k:v]`, null `<nil>`.
pub(super) fn go_v(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => crate::core::field::go_number(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!("[{}]", items.iter().map(go_v).collect::<Vec<_>>().join(" ")),
        Value::Object(map) => {
            format!("map[{}]", map.iter().map(|(k, v)| format!("{k}:{}", go_v(v))).collect::<Vec<_>>().join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_kube_openapi() {
        let root = Loc::root();
        let spec = root.field("spec");
        let replicas = spec.field("replicas");
        assert_eq!(replicas.render(), "spec.replicas");
        let item = replicas.index(2);
        assert_eq!(item.render(), "spec.replicas[2]");
        assert_eq!(root.key("a").render(), ".a");
        assert_eq!(root.index(0).render(), "[0]");
    }

    #[test]
    fn errors_become_field_errors_as_kubernetes_maps_them() {
        let required = OaError::validation(Code::Required, ".alpha", None, ".alpha in body is required".into());
        assert_eq!(required.to_field_error(&Path::nil()).to_string(), "alpha: Required value");
        let plain = OaError::Plain("\"field\" must validate at least one schema (anyOf)".into());
        assert_eq!(
            plain.to_field_error(&Path::nil()).to_string(),
            "<nil>: Invalid value: \"\": \"field\" must validate at least one schema (anyOf)"
        );
        let enumerated = OaError::Validation {
            code: Code::Enum,
            name: "n".into(),
            value: Some(Value::from("x")),
            valid: None,
            values: vec![Value::from(1), Value::from("b")],
            message: String::new(),
        };
        assert_eq!(
            enumerated.to_field_error(&Path::new("status")).to_string(),
            r#"status.n: Unsupported value: "x": supported values: "1", "b""#
        );
    }

    #[test]
    fn go_formatting_of_values() {
        assert_eq!(go_v(&serde_json::json!(["foo", 1, null, {"a": true}])), "[foo 1 <nil> map[a:true]]");
    }
}
