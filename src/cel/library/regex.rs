//! Regular expressions with Go RE2 semantics on the `regex` crate: `matches`, and
//! Kubernetes' `find` and `findAll`. Perl classes (`\d`, `\w`, `\s`) are ASCII as in Go.
//!
//! Owns: pattern translation and matching. Must not touch: cost, evaluation.

use regex::Regex;

use super::super::ir::Func;
use super::super::value::{EvalError, EvalResult, Value};

/// Rewrites Go's ASCII Perl classes, which the `regex` crate reads as Unicode.
fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut in_class = false;
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(n) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let replacement = match (n, in_class) {
                    ('d', false) => Some("[0-9]"),
                    ('d', true) => Some("0-9"),
                    ('w', false) => Some("[0-9A-Za-z_]"),
                    ('w', true) => Some("0-9A-Za-z_"),
                    ('s', false) => Some("[\\t\\n\\f\\r ]"),
                    ('s', true) => Some("\\t\\n\\f\\r "),
                    ('D', false) => Some("[^0-9]"),
                    ('W', false) => Some("[^0-9A-Za-z_]"),
                    ('S', false) => Some("[^\\t\\n\\f\\r ]"),
                    _ => None,
                };
                match replacement {
                    Some(r) => out.push_str(r),
                    None => {
                        out.push('\\');
                        out.push(n);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                // A `]` right after `[` or `[^` is a literal.
                let rest = chars.as_str();
                if let Some(stripped) = rest.strip_prefix("^]") {
                    out.push_str("^\\]");
                    chars = stripped.chars();
                } else if let Some(stripped) = rest.strip_prefix(']') {
                    out.push_str("\\]");
                    chars = stripped.chars();
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// RE2 refuses a repetition of a repetition (`x++`, `x*{2}`), which the `regex` crate allows.
fn nested_repetition(pattern: &str) -> Option<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    let mut in_class = false;
    let mut after_repeat = false;
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => {
                i += 2;
                after_repeat = false;
                continue;
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            _ if in_class => {}
            '*' | '+' | '?' | '{' => {
                let end = if c == '{' { chars.iter().skip(i).position(|&d| d == '}').map(|p| i + p) } else { Some(i) };
                let Some(end) = end else {
                    i += 1;
                    after_repeat = false;
                    continue;
                };
                if after_repeat {
                    let op: String = chars.get(i.saturating_sub(1)..=end).unwrap_or(&[]).iter().collect();
                    return Some(format!("error parsing regexp: invalid nested repetition operator: `{op}`"));
                }
                i = end + 1;
                // A `?` right after a repetition makes it lazy, not nested.
                if chars.get(i) == Some(&'?') {
                    i += 1;
                }
                after_repeat = true;
                continue;
            }
            _ => {}
        }
        after_repeat = false;
        i += 1;
    }
    None
}

/// Compiles a pattern, with Go's error wording for the common mistakes.
pub fn compile(pattern: &str) -> Result<Regex, String> {
    if let Some(e) = nested_repetition(pattern) {
        return Err(e);
    }
    Regex::new(&translate(pattern)).map_err(|e| go_error(pattern, &e.to_string()))
}

fn go_error(pattern: &str, rust: &str) -> String {
    let reason = if rust.contains("unopened group") {
        "unexpected ): `)`".to_string()
    } else if rust.contains("unclosed group") {
        format!("missing closing ): `{pattern}`")
    } else if rust.contains("repetition operator missing expression") || rust.contains("repetition quantifier") {
        format!("missing argument to repetition operator: `{pattern}`")
    } else if rust.contains("unclosed character class") {
        format!("missing closing ]: `{pattern}`")
    } else {
        format!("invalid regular expression: `{pattern}`")
    };
    format!("error parsing regexp: {reason}")
}

fn text<'v>(v: Option<&'v Value<'_>>) -> Result<&'v str, EvalError> {
    match v {
        Some(Value::Str(s)) => Ok(s.as_str()),
        _ => Err(EvalError::no_overload()),
    }
}

/// Runs `matches`, `find` or `findAll` with a pattern known only at run time.
pub fn call<'a>(func: Func, args: &[Value<'a>]) -> EvalResult<'a> {
    let pattern = text(args.get(1))?;
    let regex = compile(pattern).map_err(EvalError::new)?;
    call_compiled(func, &regex, args)
}

pub fn call_compiled<'a>(func: Func, regex: &Regex, args: &[Value<'a>]) -> EvalResult<'a> {
    let s = text(args.first())?;
    match func {
        Func::Matches => Ok(Value::Bool(regex.is_match(s))),
        Func::Find => Ok(Value::str(regex.find(s).map_or("", |m| m.as_str()))),
        _ => {
            let limit = match args.get(2) {
                Some(Value::Int(n)) if *n >= 0 => *n as usize,
                Some(Value::Int(_)) | None => usize::MAX,
                Some(_) => return Err(EvalError::no_overload()),
            };
            Ok(Value::list(regex.find_iter(s).take(limit).map(|m| Value::str(m.as_str())).collect()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_classes_are_ascii_and_errors_read_like_go() {
        assert!(compile(r"^\d+$").unwrap().is_match("123"));
        assert!(!compile(r"^\d+$").unwrap().is_match("١٢٣"));
        assert!(compile(r"[\d.]+").unwrap().is_match("1.5"));
        assert_eq!(compile(")").unwrap_err(), "error parsing regexp: unexpected ): `)`");
        assert!(compile("x++").is_err());
        assert!(compile("x+?").is_ok());
        assert!(compile("a{2}b*").is_ok());
    }
}
