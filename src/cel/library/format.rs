//! Kubernetes' format library: `format.named(name)`, `format.dns1123Label()` and the other
//! named formats, and `<format>.validate(s)` returning the problems found, if any.
//!
//! Owns: the named formats and the pattern lengths their costs follow. Must not touch:
//! cost arithmetic, evaluation.

use std::rc::Rc;

use super::super::ir::Func;
use super::super::value::{EvalError, EvalResult, Value};
use crate::core::names;

/// The names `format.<name>()` and `format.named("<name>")` accept.
pub const NAMES: &[&str] = &[
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// How Kubernetes checks a name prefix (`maskTrailingDash`): a trailing dash and the
/// character before it are replaced by one letter, so `abc.-` is checked as `abca`.
fn mask_trailing_dash(s: &str) -> String {
    match s.as_bytes().split_last() {
        Some((b'-', rest)) if !rest.is_empty() => {
            let mut kept = rest.get(..rest.len() - 1).unwrap_or_default().to_vec();
            kept.push(b'a');
            String::from_utf8_lossy(&kept).into_owned()
        }
        _ => s.to_string(),
    }
}

/// Kubernetes' `IsDNS1123Label`: a valid subdomain that is no label has dots, and is told so.
fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = names::dns1123_label(s);
    let subdomain_shape = names::dns1123_subdomain(s).iter().all(|m| m.starts_with("must be no more than"));
    if subdomain_shape {
        if let Some(shape) = errs.iter_mut().find(|m| !m.starts_with("must be no more than")) {
            *shape = "must not contain dots".into();
        }
    }
    errs
}

fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) if !n.contains('/') => (Some(p), n),
        Some(_) => {
            errs.push("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into());
            return errs;
        }
        None => (None, s),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            errs.push("prefix part must be non-empty".into());
        } else {
            errs.extend(names::dns1123_subdomain(p).into_iter().map(|m| format!("prefix part {m}")));
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".into());
    }
    if !name.is_empty() && !is_name_part(name) {
        errs.push(QUALIFIED_NAME_MSG.into());
    }
    errs
}

fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".into());
    }
    if !s.is_empty() && !is_name_part(s) {
        errs.push(LABEL_VALUE_MSG.into());
    }
    errs
}

/// kube-openapi's UUID pattern: 32 hex digits of either case, with or without the dashes
/// after the 8th, 12th, 16th and 20th.
fn is_uuid(s: &str) -> bool {
    let mut digits = 0;
    let mut bytes = s.bytes().peekable();
    while let Some(c) = bytes.next() {
        if !c.is_ascii_hexdigit() {
            return false;
        }
        digits += 1;
        if matches!(digits, 8 | 12 | 16 | 20) && bytes.peek() == Some(&b'-') {
            bytes.next();
        }
    }
    digits == 32
}

/// kube-openapi's `IsDateTime`: a full date, `t` (either case), then `hh:mm:ss`, an optional
/// fraction after any one character, and `z` or an offset; hours to 23, minutes and seconds
/// to 59, compared as text.
fn is_date_time(s: &str) -> bool {
    static TIME: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$").ok()
    });
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else { return false };
    if !is_full_date(date) {
        return false;
    }
    let Some(caps) = TIME.as_ref().and_then(|re| re.captures(time)) else { return false };
    let field = |i: usize| caps.get(i).map_or("", |m| m.as_str());
    field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
}

/// Go's `time.Parse("2006-01-02", s)`.
fn is_full_date(s: &str) -> bool {
    s.len() == 10 && s.parse::<jiff::civil::Date>().is_ok()
}

/// The length of the longest pattern Kubernetes assumes a format's check matches, which its
/// cost is charged by (`MaxRegexSize`).
pub fn max_regex_size(name: &str) -> u64 {
    match name {
        "dns1123Subdomain" | "dns1123SubdomainPrefix" | "qualifiedName" => 60,
        "labelValue" => 40,
        "uri" => 1103,
        // The lengths of kube-openapi's UUID and date-time patterns, and of a base64 pattern.
        "uuid" => 70,
        "date" | "datetime" => 71,
        "byte" => 84,
        _ => 30,
    }
}

/// The problems with `s` in the named format (empty: valid).
pub fn validate(name: &str, s: &str) -> Vec<String> {
    use base64::Engine;
    match name {
        "dns1123Label" => dns1123_label(s),
        "dns1123LabelPrefix" => dns1123_label(&mask_trailing_dash(s)),
        "dns1123Subdomain" => names::dns1123_subdomain(s),
        "dns1123SubdomainPrefix" => names::dns1123_subdomain(&mask_trailing_dash(s)),
        "dns1035Label" => names::dns1035_label(s),
        "dns1035LabelPrefix" => names::dns1035_label(&mask_trailing_dash(s)),
        "qualifiedName" => qualified_name(s),
        "labelValue" => label_value(s),
        "uri" => match super::urls::parse_request_uri(s) {
            Ok(_) => Vec::new(),
            Err(e) => vec![e],
        },
        "uuid" => {
            if is_uuid(s) {
                Vec::new()
            } else {
                vec!["does not match the UUID format".into()]
            }
        }
        "byte" => {
            // Go's decoder skips line breaks.
            let text: String = s.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
            if base64::engine::general_purpose::STANDARD.decode(text).is_ok() {
                Vec::new()
            } else {
                vec!["invalid base64".into()]
            }
        }
        "date" => {
            if is_full_date(s) {
                Vec::new()
            } else {
                vec!["invalid date".into()]
            }
        }
        "datetime" => {
            if is_date_time(s) {
                Vec::new()
            } else {
                vec!["invalid datetime".into()]
            }
        }
        _ => Vec::new(),
    }
}

pub fn call<'a>(func: Func, args: &[Value<'a>]) -> EvalResult<'a> {
    match (func, args.first(), args.get(1)) {
        (Func::FormatBuiltin(name), _, _) => Ok(Value::Format(name)),
        (Func::FormatNamed, Some(Value::Str(s)), _) => {
            let found = NAMES.iter().find(|n| **n == s.as_str());
            Ok(Value::Optional(found.map(|n| Rc::new(Value::Format(n)))))
        }
        (Func::Validate, Some(Value::Format(name)), Some(Value::Str(s))) => {
            let problems = validate(name, s.as_str());
            if problems.is_empty() {
                Ok(Value::Optional(None))
            } else {
                Ok(Value::Optional(Some(Rc::new(Value::list(problems.into_iter().map(Value::string).collect())))))
            }
        }
        _ => Err(EvalError::no_overload()),
    }
}
