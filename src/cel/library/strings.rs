//! cel-go's strings extension (version 2, as Kubernetes' environment has it): `charAt`,
//! `indexOf`, `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`, `split`, `substring`,
//! `trim`, `join`, `strings.quote`, `format`; plus `contains`, `startsWith`, `endsWith`.
//!
//! Owns: string functions. Must not touch: cost, evaluation.

use super::super::ir::Func;
use super::super::value::{EvalError, EvalResult, Value};

fn out_of_range(i: i64) -> EvalError {
    EvalError::new(format!("index out of range: {i}"))
}

fn s<'v>(v: Option<&'v Value<'_>>) -> Result<&'v str, EvalError> {
    match v {
        Some(Value::Str(s)) => Ok(s.as_str()),
        _ => Err(EvalError::no_overload()),
    }
}

fn int(v: Option<&Value<'_>>) -> Result<i64, EvalError> {
    match v {
        Some(Value::Int(i)) => Ok(*i),
        _ => Err(EvalError::no_overload()),
    }
}

pub fn call<'a>(func: Func, args: &[Value<'a>]) -> EvalResult<'a> {
    let a0 = args.first();
    let a1 = args.get(1);
    let a2 = args.get(2);
    match func {
        Func::Contains => Ok(Value::Bool(s(a0)?.contains(s(a1)?))),
        Func::StartsWith => Ok(Value::Bool(s(a0)?.starts_with(s(a1)?))),
        Func::EndsWith => Ok(Value::Bool(s(a0)?.ends_with(s(a1)?))),
        Func::CharAt => {
            let text = s(a0)?;
            let i = int(a1)?;
            let n = text.chars().count() as i64;
            if i < 0 || i > n {
                return Err(out_of_range(i));
            }
            Ok(Value::string(text.chars().nth(i as usize).map(String::from).unwrap_or_default()))
        }
        Func::IndexOf => index_of(s(a0)?, s(a1)?, a2.map(|v| int(Some(v))).transpose()?, false),
        Func::LastIndexOf => index_of(s(a0)?, s(a1)?, a2.map(|v| int(Some(v))).transpose()?, true),
        Func::LowerAscii => Ok(Value::string(s(a0)?.to_ascii_lowercase())),
        Func::UpperAscii => Ok(Value::string(s(a0)?.to_ascii_uppercase())),
        Func::Replace => {
            let text = s(a0)?;
            let (old, new) = (s(a1)?, s(a2)?);
            let n = args.get(3).map(|v| int(Some(v))).transpose()?.unwrap_or(-1);
            Ok(Value::string(if n < 0 { text.replace(old, new) } else { text.replacen(old, new, n as usize) }))
        }
        Func::Split => {
            let text = s(a0)?;
            let sep = s(a1)?;
            let n = a2.map(|v| int(Some(v))).transpose()?.unwrap_or(-1);
            let parts: Vec<String> = match n {
                0 => Vec::new(),
                n if n < 0 => go_split(text, sep, usize::MAX),
                n => go_split(text, sep, n as usize),
            };
            Ok(Value::list(parts.into_iter().map(Value::string).collect()))
        }
        Func::Substring => {
            let text = s(a0)?;
            let chars: Vec<char> = text.chars().collect();
            let n = chars.len() as i64;
            let start = int(a1)?;
            let end = a2.map(|v| int(Some(v))).transpose()?.unwrap_or(n);
            if start < 0 || start > n {
                return Err(out_of_range(start));
            }
            if end < 0 || end > n {
                return Err(out_of_range(end));
            }
            if start > end {
                return Err(EvalError::new(format!("invalid substring range. start: {start}, end: {end}")));
            }
            Ok(Value::string(chars.get(start as usize..end as usize).unwrap_or(&[]).iter().collect()))
        }
        Func::Trim => Ok(Value::string(s(a0)?.trim().to_string())),
        Func::Join => {
            let Some(Value::List(l)) = a0 else { return Err(EvalError::no_overload()) };
            let sep = match a1 {
                Some(v) => s(Some(v))?,
                None => "",
            };
            let mut parts = Vec::with_capacity(l.len());
            for item in l.items()? {
                parts.push(s(Some(&item))?.to_string());
            }
            Ok(Value::string(parts.join(sep)))
        }
        Func::Quote => Ok(Value::string(quote(s(a0)?))),
        Func::JsonPatchEscapeKey => Ok(Value::string(crate::cel::mutation::escape_key(s(a0)?))),
        Func::Format => {
            let Some(Value::List(l)) = a1 else { return Err(EvalError::no_overload()) };
            format(s(a0)?, &l.items()?).map(Value::string)
        }
        _ => Err(EvalError::no_overload()),
    }
}

/// Go's `strings.SplitN`.
fn go_split(text: &str, sep: &str, n: usize) -> Vec<String> {
    if sep.is_empty() {
        let chars: Vec<String> = text.chars().map(String::from).collect();
        if chars.len() <= n {
            return chars;
        }
        let mut out: Vec<String> = chars.iter().take(n.saturating_sub(1)).cloned().collect();
        out.push(chars.iter().skip(n.saturating_sub(1)).cloned().collect());
        return out;
    }
    text.splitn(n, sep).map(str::to_string).collect()
}

fn index_of<'a>(text: &str, sub: &str, offset: Option<i64>, last: bool) -> EvalResult<'a> {
    let chars: Vec<char> = text.chars().collect();
    let subc: Vec<char> = sub.chars().collect();
    let n = chars.len() as i64;
    let off = offset.unwrap_or(if last { n } else { 0 });
    if off < 0 || off > n {
        return Err(out_of_range(off));
    }
    if subc.is_empty() {
        return Ok(Value::Int(off));
    }
    let m = subc.len() as i64;
    let matches_at = |i: i64| chars.get(i as usize..(i + m) as usize).is_some_and(|w| w == subc.as_slice());
    if last {
        let mut i = off.min(n - m);
        while i >= 0 {
            if matches_at(i) {
                return Ok(Value::Int(i));
            }
            i -= 1;
        }
    } else {
        let mut i = off;
        while i + m <= n {
            if matches_at(i) {
                return Ok(Value::Int(i));
            }
            i += 1;
        }
    }
    Ok(Value::Int(-1))
}

/// A string as a double-quoted CEL string literal.
pub fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A double as CEL's `string()` prints it.
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if d.is_nan() {
        return "NaN".into();
    }
    let abs = d.abs();
    if abs != 0.0 && !(1e-4..1e21).contains(&abs) {
        let s = format!("{d:e}");
        // Go writes the exponent with a sign and at least two digits: 1e+21.
        if let Some((mantissa, exp)) = s.split_once('e') {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            return format!("{mantissa}e{sign}{digits:0>2}");
        }
        return s;
    }
    format!("{d}")
}

fn as_text(v: &Value<'_>) -> Result<String, EvalError> {
    Ok(match v {
        Value::Str(s) => s.as_str().to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => format_double(*d),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Duration(d) => d.to_string(),
        Value::Timestamp(t) => t.to_string(),
        Value::List(l) => {
            let items: Result<Vec<String>, EvalError> = l.items()?.iter().map(as_text).collect();
            format!("[{}]", items?.join(", "))
        }
        _ => return Err(EvalError::new("error during formatting: unsupported type")),
    })
}

/// cel-go's `format`: `%s %d %f %e %b %o %x %X %%` with an optional precision.
fn format(template: &str, args: &[Value<'_>]) -> Result<String, EvalError> {
    let mut out = String::new();
    let mut chars = template.chars().peekable();
    let mut next = 0usize;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut precision: Option<usize> = None;
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut digits = String::new();
            while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                digits.push(*d);
                chars.next();
            }
            precision = Some(parse_precision(&digits)?);
        }
        let Some(verb) = chars.next() else {
            return Err(EvalError::new("error during formatting: unexpected end of string"));
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        let arg = args
            .get(next)
            .ok_or_else(|| EvalError::new(format!("error during formatting: index {next} out of range")))?;
        next += 1;
        let text = match (verb, arg) {
            ('s', v) => as_text(v)?,
            ('d', Value::Int(i)) => i.to_string(),
            ('d', Value::Uint(u)) => u.to_string(),
            ('f', v) => fixed(number(v)?, precision.unwrap_or(6)),
            ('e', v) => scientific(number(v)?, precision.unwrap_or(6)),
            ('b', Value::Int(i)) => format!("{i:b}"),
            ('b', Value::Uint(u)) => format!("{u:b}"),
            ('o', Value::Int(i)) => format!("{i:o}"),
            ('o', Value::Uint(u)) => format!("{u:o}"),
            ('x', Value::Int(i)) => format!("{i:x}"),
            ('x', Value::Uint(u)) => format!("{u:x}"),
            ('x', Value::Str(s)) => s.as_str().bytes().map(|b| format!("{b:02x}")).collect(),
            ('X', Value::Int(i)) => format!("{i:X}"),
            ('X', Value::Uint(u)) => format!("{u:X}"),
            ('X', Value::Str(s)) => s.as_str().bytes().map(|b| format!("{b:02X}")).collect(),
            (v, _) => {
                return Err(EvalError::new(format!("error during formatting: unrecognized formatting clause \"{v}\"")));
            }
        };
        out.push_str(&text);
    }
    Ok(out)
}

fn number(v: &Value<'_>) -> Result<f64, EvalError> {
    match v {
        Value::Double(d) => Ok(*d),
        Value::Int(i) => Ok(*i as f64),
        Value::Uint(u) => Ok(*u as f64),
        _ => Err(EvalError::new("error during formatting: fixed-point clause can only be used on doubles")),
    }
}

/// cel-go prints `%e` as `3.140000×10⁰⁰`.
/// Digits past which an `f64`'s exact decimal expansion is all zeros (at most 1074 after the
/// point, 767 significant), so longer precisions are the shorter text padded with zeros; Rust's
/// formatter refuses precisions above `u16::MAX`, which Go takes.
const EXACT_DIGITS: usize = 1100;
/// Go's fmt ignores precisions above a million (`tooLarge`); they are refused here.
const MAX_PRECISION: usize = 1_000_000;

/// The precision of a clause (`%.3f`), as cel-go parses it.
fn parse_precision(digits: &str) -> Result<usize, EvalError> {
    let error = |why: String| EvalError::new(format!("error during formatting: error while parsing precision: {why}"));
    let precision: usize = digits.parse().map_err(|_| {
        error(format!(
            "error while converting precision to integer: strconv.Atoi: parsing {digits:?}: value out of range"
        ))
    })?;
    if precision > MAX_PRECISION {
        return Err(error(format!("precision {precision} exceeds maximum allowed precision {MAX_PRECISION}")));
    }
    Ok(precision)
}

/// `%.Nf`: fixed notation with N decimals.
fn fixed(d: f64, precision: usize) -> String {
    if precision <= EXACT_DIGITS || !d.is_finite() {
        return format!("{d:.precision$}");
    }
    let mut text = format!("{d:.EXACT_DIGITS$}");
    text.extend(std::iter::repeat_n('0', precision - EXACT_DIGITS));
    text
}

fn scientific(d: f64, precision: usize) -> String {
    let exact = precision.min(EXACT_DIGITS);
    let mut s = format!("{d:.exact$e}");
    if exact < precision
        && let Some(at) = s.find('e')
    {
        s.insert_str(at, &"0".repeat(precision - exact));
    }
    let Some((mantissa, exp)) = s.split_once('e') else { return s };
    let exp: i32 = exp.parse().unwrap_or(0);
    let sup = |c: char| match c {
        '0' => '⁰',
        '1' => '¹',
        '2' => '²',
        '3' => '³',
        '4' => '⁴',
        '5' => '⁵',
        '6' => '⁶',
        '7' => '⁷',
        '8' => '⁸',
        _ => '⁹',
    };
    let digits: String = format!("{:02}", exp.abs()).chars().map(sup).collect();
    let sign = if exp < 0 { "⁻" } else { "" };
    format!("{mantissa}×10{sign}{digits}")
}
