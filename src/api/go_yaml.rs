//! YAML bodies read as kube-apiserver reads them (sigs.k8s.io/yaml over go-yaml v2): the first
//! document only, at most 10,000 levels deep, and refusals in go-yaml's words — `yaml: line 2:
//! mapping values are not allowed in this context` — rather than our parser's (serde-saphyr,
//! whose messages come from a port of the same libyaml scanner, with other wording, columns
//! and source excerpts).
//!
//! The wording is libyaml's `problem` for every error the two parsers share; the line follows
//! go-yaml's rule (`parser.fail`): a scanner error names its 1-based line, a parser error the
//! 0-based one, and neither is named on the first line. Where our parser stops elsewhere than
//! libyaml would, the line can differ; an error libyaml does not have keeps our parser's text.
//!
//! Owns the YAML reading options and the wording; `api::strict` builds the values.

use std::borrow::Cow;

use serde_saphyr::{DefaultMessageFormatter, MessageFormatter};

use super::strict::{TOO_DEEP, Tracked};
use crate::core::nesting::MAX_DEPTH;

/// The most scalar bytes one YAML request body may decode to. Anchors and aliases let a
/// small document repeat a large string many times (a "billion laughs"); without aliases a
/// body decodes to no more scalar bytes than it holds, so twice the body limit refuses only
/// the amplifying documents. (The parser's own default is 64 MiB per request.)
const MAX_YAML_SCALAR_BYTES: usize = 2 * super::body::MAX_REQUEST_BYTES;

/// How many numbers too large for a float one YAML body may hold: each one found costs a
/// parse of the whole body again (a body with more is refused, as an infinite number is).
const MAX_OVERFLOWING_NUMBERS: usize = 16;

/// Reads the first document of a YAML body (go-yaml does not look past it), noting duplicate
/// fields (the last value wins). An empty body is `null`. Errors are go-yaml's texts
/// (`yaml: line 2: ...`).
///
/// A plain number too large for a float (`1e400`) is a string to go-yaml, whose resolver keeps
/// a scalar it cannot parse as written: our parser refuses it, so it is quoted where our parser
/// found it and the body read again. `.inf` and `.nan` are floats to both, which JSON cannot
/// hold (`json: unsupported value: +Inf`).
pub fn first_document(text: &str) -> Result<Tracked, String> {
    let mut text = Cow::Borrowed(text);
    let mut quoted = 0;
    loop {
        let error = match read_first(&text) {
            Ok(tracked) => return Ok(tracked),
            Err(error) => error,
        };
        if let serde_saphyr::Error::NonFiniteFloat { value, location, .. } = &error {
            if let Some(unsupported) = json_unsupported(value) {
                return Err(unsupported);
            }
            if quoted < MAX_OVERFLOWING_NUMBERS
                && let Some(requoted) = quote_scalar_at(&text, value, location.span().offset())
            {
                text = Cow::Owned(requoted);
                quoted += 1;
                continue;
            }
        }
        return Err(go_text(&error, &text));
    }
}

fn read_first(text: &str) -> Result<Tracked, serde_saphyr::Error> {
    let mut options = serde_saphyr::Options::default();
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
    // `017` is 15, as YAML 1.1 (go-yaml) reads it.
    options.legacy_octal_numbers = true;
    options.with_snippet = false;
    let mut budget = serde_saphyr::budget::Budget::default();
    budget.max_total_scalar_bytes = MAX_YAML_SCALAR_BYTES;
    budget.max_recorded_anchor_bytes = super::body::MAX_REQUEST_BYTES;
    // The values' own limit (`strict::TOO_DEEP`) is the one that speaks.
    budget.max_depth = MAX_DEPTH + 1;
    budget.flow_nesting_limit = MAX_DEPTH + 1;
    // go-yaml counts no events; a body within the size limit is never refused for its count.
    budget.max_events = 2 * super::body::MAX_REQUEST_BYTES;
    options.budget = Some(budget);
    let mut reader = text.as_bytes();
    let first = serde_saphyr::read_with_options::<_, Tracked>(&mut reader, options).next();
    first.unwrap_or_else(|| Ok(Tracked::default()))
}

/// The JSON encoder's refusal of a YAML infinity or NaN (`.inf`, `-.Inf`, `.NaN`): None for a
/// number that only overflowed.
fn json_unsupported(scalar: &str) -> Option<String> {
    let lower = scalar.to_ascii_lowercase();
    let value = match lower.as_str() {
        ".inf" | "+.inf" => "+Inf",
        "-.inf" => "-Inf",
        ".nan" => "NaN",
        _ => return None,
    };
    Some(format!("json: unsupported value: {value}"))
}

/// `text` with the plain scalar `scalar` that starts `chars` characters in put in double
/// quotes (a number needs no escapes), or None when it is not there as written.
fn quote_scalar_at(text: &str, scalar: &str, chars: u64) -> Option<String> {
    let chars = usize::try_from(chars).ok()?;
    let start = text.char_indices().nth(chars).map(|(byte, _)| byte)?;
    let end = start.checked_add(scalar.len())?;
    if text.get(start..end)? != scalar || !scalar.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-._".contains(&b)) {
        return None;
    }
    Some(format!("{}\"{scalar}\"{}", text.get(..start)?, text.get(end..)?))
}

/// Where go-yaml places an error, which decides the line it names.
#[derive(Clone, Copy)]
enum Mark {
    /// A scanner error where our parser found it.
    Scanner,
    /// A parser error where our parser found it.
    Parser,
    /// A scanner error at the end of the input.
    ScannerAtEnd,
    /// A parser error at the end of the stream (after the line break go-yaml adds).
    ParserAtEnd,
    /// go-yaml names no line.
    None,
}

/// `yaml: [line N: ]<problem>` for one of our parser's errors.
fn go_text(error: &serde_saphyr::Error, text: &str) -> String {
    let ours = DefaultMessageFormatter.format_message(error);
    let (problem, mark) = libyaml_problem(&ours, error, text);
    // 0-based, as libyaml counts.
    let line = match mark {
        Mark::Scanner | Mark::Parser => error.location().map_or(0, |l| l.line().saturating_sub(1)),
        Mark::ScannerAtEnd => text.matches('\n').count() as u64,
        Mark::ParserAtEnd => text.lines().count() as u64,
        Mark::None => 0,
    };
    let shown = match mark {
        Mark::Scanner | Mark::ScannerAtEnd => line + 1,
        _ => line,
    };
    if line == 0 { format!("yaml: {problem}") } else { format!("yaml: line {shown}: {problem}") }
}

/// libyaml's words for what our parser found, and where go-yaml puts it.
fn libyaml_problem<'a>(ours: &'a str, error: &serde_saphyr::Error, text: &str) -> (Cow<'a, str>, Mark) {
    let fixed = |problem: &'static str, mark| (Cow::Borrowed(problem), mark);
    if ours.contains(TOO_DEEP) {
        return (Cow::Owned(format!("exceeded max depth of {MAX_DEPTH}")), Mark::Scanner);
    }
    if ours.contains("surrogate") || ours.contains("invalid Unicode") {
        return fixed("found invalid Unicode character escape code", Mark::Scanner);
    }
    if ours.contains("unknown anchor") {
        let name = anchor_at(error, text);
        return (Cow::Owned(format!("unknown anchor '{name}' referenced")), Mark::None);
    }
    if ours.contains("budget breached") || ours.contains("alias") {
        return fixed("document contains excessive aliasing", Mark::None);
    }
    if ours.contains("unclosed bracket") && text.trim_end().ends_with(['[', '{', ',', ':']) {
        // The stream ended where a value was due.
        return fixed("did not find expected node content", Mark::ParserAtEnd);
    }
    let known: &[(&str, &'static str, Mark)] = &[
        ("invalid indentation in multiline quoted scalar", "found unexpected end of stream", Mark::ScannerAtEnd),
        ("unclosed bracket '['", "did not find expected ',' or ']'", Mark::ParserAtEnd),
        ("unclosed bracket '{'", "did not find expected ',' or '}'", Mark::ParserAtEnd),
        ("unclosed quote", "found unexpected end of stream", Mark::ScannerAtEnd),
        ("mapping values are not allowed", "mapping values are not allowed in this context", Mark::Scanner),
        ("did not find expected key", "did not find expected key", Mark::Parser),
        ("did not find expected ',' or '}'", "did not find expected ',' or '}'", Mark::Parser),
        ("expected ',' or ']'", "did not find expected ',' or ']'", Mark::Parser),
        ("did not find expected node content", "did not find expected node content", Mark::Parser),
        ("did not find expected '-' indicator", "did not find expected '-' indicator", Mark::Parser),
        ("unexpected character", "found character that cannot start any token", Mark::Scanner),
        ("tab", "found character that cannot start any token", Mark::Scanner),
        ("simple key expected ':'", "could not find expected ':'", Mark::Scanner),
        ("invalid indentation", "did not find expected key", Mark::Parser),
        ("invalid !!binary base64", "!!binary value contains invalid base64 data", Mark::None),
        ("unexpected end", "found unexpected end of stream", Mark::ScannerAtEnd),
    ];
    for (found, problem, mark) in known {
        if ours.contains(found) {
            return fixed(problem, *mark);
        }
    }
    // Our parser's words, without the context it puts first ("while parsing ..., ").
    let plain = ours.rsplit_once(", ").filter(|(context, _)| context.starts_with("while ")).map_or(ours, |(_, p)| p);
    (Cow::Borrowed(plain), Mark::Scanner)
}

/// The anchor name an alias at the error's place refers to (`*name`).
fn anchor_at(error: &serde_saphyr::Error, text: &str) -> String {
    let Some(location) = error.location() else { return String::new() };
    let line = text.lines().nth(usize::try_from(location.line().saturating_sub(1)).unwrap_or(usize::MAX));
    let column = usize::try_from(location.column().saturating_sub(1)).unwrap_or(usize::MAX);
    let rest: String = line.unwrap_or_default().chars().skip(column).collect();
    let name = rest.strip_prefix('*').unwrap_or(&rest);
    name.chars().take_while(|c| !c.is_whitespace() && !matches!(c, ',' | ']' | '}')).collect()
}

#[cfg(test)]
mod tests;
