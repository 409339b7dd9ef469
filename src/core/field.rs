//! Field errors: the `field.Error` of Kubernetes' apimachinery, with its exact rendering.
//!
//! Every validator of this crate (definitions, schema, CEL, object metadata) reports problems as
//! a list of [`FieldError`]s; the API layer turns such a list into a 422 `Status`.

use std::fmt;

use serde_json::Value;

/// A field path such as `spec.versions[0].schema`. The empty path renders as `<nil>`, as
/// Kubernetes renders a nil `*field.Path`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Path(String);

impl Path {
    /// The nil path.
    pub fn nil() -> Path {
        Path(String::new())
    }

    pub fn new(name: &str) -> Path {
        Path(name.to_string())
    }

    // The three below build paths on every write's hot path (object metadata, schema
    // validation), most of them never rendered: plain appends, not `format!`, which costs
    // several times as much.

    /// `path.name`
    pub fn child(&self, name: &str) -> Path {
        if self.0.is_empty() {
            return Path(name.to_string());
        }
        let mut path = String::with_capacity(self.0.len() + 1 + name.len());
        path.push_str(&self.0);
        path.push('.');
        path.push_str(name);
        Path(path)
    }

    /// `path[i]`
    pub fn index(&self, index: usize) -> Path {
        self.bracketed(&index.to_string())
    }

    /// `path[key]`
    pub fn key(&self, key: &str) -> Path {
        self.bracketed(key)
    }

    fn bracketed(&self, inner: &str) -> Path {
        let mut path = String::with_capacity(self.0.len() + 2 + inner.len());
        path.push_str(&self.0);
        path.push('[');
        path.push_str(inner);
        path.push(']');
        Path(path)
    }

    pub fn is_nil(&self) -> bool {
        self.0.is_empty()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() { f.write_str("<nil>") } else { f.write_str(&self.0) }
    }
}

/// The kinds of field error, with their `reason` codes (`FieldValueInvalid`, …) and the words
/// that start their messages (`Invalid value`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorType {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
    TypeInvalid,
}

impl ErrorType {
    /// The cause reason Kubernetes puts in `Status.details.causes[].reason`.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Internal => "InternalError",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The words that start the rendered error body.
    pub fn words(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
        }
    }
}

/// A field error's offending value.
#[derive(Debug, Clone, PartialEq)]
pub enum BadValue {
    /// A value of an unstructured object (or a scalar or list of strings Kubernetes holds).
    Value(Value),
    /// A typed Go value already written as `encoding/json` writes it.
    Typed(String),
}

/// One validation problem at one field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub kind: ErrorType,
    pub field: Path,
    /// The offending value; `None` omits it from the message (Kubernetes' `OmitValueType`).
    pub bad_value: Option<BadValue>,
    pub detail: String,
}

impl FieldError {
    pub fn new(kind: ErrorType, field: Path, bad_value: Option<Value>, detail: impl Into<String>) -> Self {
        FieldError { kind, field, bad_value: bad_value.map(BadValue::Value), detail: detail.into() }
    }

    /// `Invalid value` of a typed Go value (a struct such as an `OwnerReference`), which
    /// `encoding/json` writes in its fields' declared order: `json` is that text.
    pub fn invalid_typed(field: Path, json: String, detail: impl Into<String>) -> Self {
        FieldError { kind: ErrorType::Invalid, field, bad_value: Some(BadValue::Typed(json)), detail: detail.into() }
    }

    pub fn required(field: Path, detail: impl Into<String>) -> Self {
        FieldError::new(ErrorType::Required, field, None, detail)
    }

    pub fn forbidden(field: Path, detail: impl Into<String>) -> Self {
        FieldError::new(ErrorType::Forbidden, field, None, detail)
    }

    pub fn invalid(field: Path, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        FieldError::new(ErrorType::Invalid, field, Some(value.into()), detail)
    }

    pub fn type_invalid(field: Path, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        FieldError::new(ErrorType::TypeInvalid, field, Some(value.into()), detail)
    }

    pub fn duplicate(field: Path, value: impl Into<Value>) -> Self {
        FieldError::new(ErrorType::Duplicate, field, Some(value.into()), "")
    }

    pub fn not_found(field: Path, value: impl Into<Value>) -> Self {
        FieldError::new(ErrorType::NotFound, field, Some(value.into()), "")
    }

    pub fn internal(field: Path, detail: impl Into<String>) -> Self {
        FieldError::new(ErrorType::Internal, field, None, detail)
    }

    /// `Unsupported value: "x": supported values: "a", "b"`
    pub fn not_supported<S: AsRef<str>>(field: Path, value: impl Into<Value>, supported: &[S]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| go_quote(s.as_ref())).collect();
        let detail = if quoted.is_empty() { String::new() } else { format!("supported values: {}", quoted.join(", ")) };
        FieldError::new(ErrorType::NotSupported, field, Some(value.into()), detail)
    }

    /// `Too long: may not be more than N bytes` (the value is never printed; `1 byte`).
    pub fn too_long(field: Path, max: i64) -> Self {
        let detail = match max {
            1 => "may not be more than 1 byte".to_string(),
            0.. => format!("may not be more than {max} bytes"),
            _ => "value is too long".to_string(),
        };
        FieldError::new(ErrorType::TooLong, field, None, detail)
    }

    /// `Too many: 3: must have at most 2 items` (`1 item`).
    pub fn too_many(field: Path, actual: Option<i64>, max: i64) -> Self {
        let detail = match max {
            1 => "must have at most 1 item".to_string(),
            0.. => format!("must have at most {max} items"),
            _ => "has too many items".to_string(),
        };
        FieldError::new(ErrorType::TooMany, field, actual.map(Value::from), detail)
    }

    /// The message without the leading `<field>: `, as `Status` causes carry it.
    pub fn body(&self) -> String {
        let mut out = String::from(self.kind.words());
        let prints_value =
            !matches!(self.kind, ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong | ErrorType::Internal);
        match &self.bad_value {
            Some(BadValue::Value(value)) if prints_value => {
                out.push_str(": ");
                out.push_str(&render_value(value));
            }
            Some(BadValue::Typed(json)) if prints_value => {
                out.push_str(": ");
                out.push_str(json);
            }
            _ => {}
        }
        if !self.detail.is_empty() {
            out.push_str(": ");
            out.push_str(&self.detail);
        }
        out
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Renders an error list as Kubernetes' aggregate error does: one error as itself, several as
/// `[e1, e2]`, with repeated texts dropped.
pub fn aggregate(errors: &[FieldError]) -> String {
    let mut seen = std::collections::HashSet::new();
    let texts: Vec<String> = errors.iter().map(|e| e.to_string()).filter(|t| seen.insert(t.clone())).collect();
    match texts.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Renders a bad value as 1.36's `field.Error` does: numbers and booleans bare (`%v`), strings
/// quoted (`%q`), everything else (lists, maps, `null`) as `encoding/json` writes it. (Before
/// 1.36 those printed with `%#v`: `[]string{"a"}`.) A value comes from an unstructured object,
/// where an integer past int64 is a float64.
pub fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => go_quote(s),
        Value::Number(n) if n.is_u64() && n.as_i64().is_none() => go_float(n.as_f64().unwrap_or(0.0)),
        Value::Number(n) => go_number(n),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".to_string(),
        other => go_json(other),
    }
}

/// A JSON number printed with Go's `%v`: integers as they are, floats in Go's shortest form.
pub fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    go_float(n.as_f64().unwrap_or(0.0))
}

/// A float printed as Go's `%v` (`strconv.FormatFloat(f, 'g', -1, 64)`): `1.5`, `10`, `100000`,
/// `1e+06`, `1.234567e+06`, `1e-05`. (Not `encoding/json`'s rule, which keeps `1000000`.)
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".to_string() } else { "-Inf".to_string() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".to_string() } else { "0".to_string() };
    }
    // Shortest round-trip digits, then Go's %g rule for the shortest form: an exponent below
    // -4 or of 6 and more (strconv's `eprec = 6` when the precision is the shortest).
    let sci = format!("{f:e}");
    let (mantissa, exponent) = match sci.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => (sci.clone(), 0),
    };
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        let abs = exponent.unsigned_abs();
        return if abs < 10 { format!("{mantissa}e{sign}0{abs}") } else { format!("{mantissa}e{sign}{abs}") };
    }
    let plain = format!("{f}");
    plain
}

/// JSON as Go's `encoding/json` `Marshal` writes it: map keys sorted, Go's float forms, `<`,
/// `>`, `&`, U+2028 and U+2029 escaped.
pub fn go_json(value: &Value) -> String {
    let bytes = super::json::to_vec(value).unwrap_or_default();
    let text = String::from_utf8(bytes).unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Go's `%T` of a value decoded the way Kubernetes decodes unstructured JSON: integers that fit
/// an int64 are `int64`, every other number `float64`.
pub fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.as_i64().is_some() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A string quoted as Go's `strconv.Quote` quotes it.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0B}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => {
                let code = c as u32;
                if code <= 0xFFFF {
                    out.push_str(&format!("\\u{code:04x}"))
                } else {
                    out.push_str(&format!("\\U{code:08x}"))
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(error: FieldError, expected: &str) {
        assert_eq!(error.to_string(), expected);
    }

    #[test]
    fn renders_like_apimachinery() {
        let replicas = Path::new("spec").child("replicas");
        check(
            FieldError::invalid(replicas.clone(), 15, "spec.replicas in body should be less than or equal to 10"),
            "spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10",
        );
        check(FieldError::required(Path::new("alpha"), ""), "alpha: Required value");
        check(
            FieldError::not_supported(Path::new("gamma"), "qux", &["foo", "bar", "baz"]),
            r#"gamma: Unsupported value: "qux": supported values: "foo", "bar", "baz""#,
        );
        check(FieldError::too_many(Path::new("l"), Some(3), 2), "l: Too many: 3: must have at most 2 items");
        check(FieldError::too_long(Path::new("s"), 5), "s: Too long: may not be more than 5 bytes");
        check(FieldError::invalid(Path::nil(), Value::Null, "x"), "<nil>: Invalid value: null: x");
        check(
            FieldError::duplicate(Path::new("l").index(1), json!({"name": "a"})),
            r#"l[1]: Duplicate value: {"name":"a"}"#,
        );
        check(
            FieldError::new(ErrorType::Invalid, Path::new("spec"), None, "failed rule: x"),
            "spec: Invalid value: failed rule: x",
        );
    }

    #[test]
    fn values_render_as_1_36_does() {
        // Lists and maps as `encoding/json` writes them, not `%#v` (`[]string{"Maybe"}`).
        check(
            FieldError::not_supported(Path::new("dryRun"), json!(["Maybe"]), &["All"]),
            r#"dryRun: Unsupported value: ["Maybe"]: supported values: "All""#,
        );
        check(
            FieldError::invalid(Path::new("m"), json!({"b": [1e-7, 1e21, 0.5], "a": "<&>\u{2028}"}), "x"),
            r#"m: Invalid value: {"a":"\u003c\u0026\u003e\u2028","b":[1e-7,1e+21,0.5]}: x"#,
        );
        // Scalars with `%v`: a float in Go's %g form; an integer past int64 is a float64.
        check(FieldError::invalid(Path::new("f"), 1e-5, ""), "f: Invalid value: 1e-05");
        check(FieldError::invalid(Path::new("u"), u64::MAX, ""), "u: Invalid value: 1.8446744073709552e+19");
        check(FieldError::invalid(Path::new("n"), Value::Null, ""), "n: Invalid value: null");
        // One byte, one item: singular.
        check(FieldError::too_long(Path::new("s"), 1), "s: Too long: may not be more than 1 byte");
        check(FieldError::too_many(Path::new("l"), Some(2), 1), "l: Too many: 2: must have at most 1 item");
        check(FieldError::too_many(Path::new("l"), None, -1), "l: Too many: has too many items");
    }

    #[test]
    fn paths_render_children_indices_and_keys() {
        let p = Path::new("spec").child("versions").index(0).child("schema").key("spec");
        assert_eq!(p.to_string(), "spec.versions[0].schema[spec]");
        assert_eq!(Path::nil().to_string(), "<nil>");
        assert_eq!(Path::nil().child("a").to_string(), "a");
    }

    #[test]
    fn floats_print_as_go_does() {
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(10.0), "10");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(1e20), "1e+20");
        assert_eq!(go_float(100000.0), "100000");
        assert_eq!(go_float(100000.5), "100000.5");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(1234567.0), "1.234567e+06");
        assert_eq!(go_float(123456789.0), "1.23456789e+08");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(-2.25), "-2.25");
    }

    #[test]
    fn aggregates_deduplicate() {
        let a = FieldError::required(Path::new("a"), "");
        let b = FieldError::required(Path::new("b"), "");
        assert_eq!(aggregate(std::slice::from_ref(&a)), "a: Required value");
        assert_eq!(aggregate(&[a.clone(), b, a]), "[a: Required value, b: Required value]");
    }

    #[test]
    fn quotes_like_strconv() {
        assert_eq!(go_quote("a\"b\n"), r#""a\"b\n""#);
        assert_eq!(go_quote("é"), "\"é\"");
    }
}
