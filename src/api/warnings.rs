//! `Warning` response headers as k8s.io/apiserver's warning recorder writes them: in the order
//! the request's steps added them (the version's deprecation first, then decoding, admission,
//! validation with its ratcheted CEL errors, finalizer names), each text once, texts with
//! control characters dropped (the header could not carry them), every text whole while all
//! of them come to at most 4096 characters; past that every text, the earlier ones included,
//! cut to 256 characters, and none added once 4096 characters are written.
//!
//! Owns the headers' form only; what warns is decided by the steps that add the texts.

use std::collections::HashSet;

use http::{HeaderValue, Response, header};

use super::body::RespBody;

/// Characters of warning text written in all before texts are cut.
const TRUNCATE_AT_TOTAL: usize = 4 * 1024;
/// Characters each text keeps once texts are cut.
const TRUNCATE_ITEM: usize = 256;

/// The texts behind a response's `Warning` headers, kept so that a step that warns before the
/// handler's (the version's deprecation) can still come first.
#[derive(Debug, Clone, Default)]
struct Texts(Vec<String>);

/// Adds warnings after those the response has.
pub fn add(response: &mut Response<RespBody>, warnings: &[String]) {
    if warnings.is_empty() {
        return;
    }
    let mut all = response.extensions_mut().remove::<Texts>().unwrap_or_default().0;
    all.extend(warnings.iter().cloned());
    render(response, all);
}

/// Adds warnings before those the response has.
pub fn add_first(response: &mut Response<RespBody>, warnings: &[String]) {
    if warnings.is_empty() {
        return;
    }
    let mut all = warnings.to_vec();
    all.extend(response.extensions_mut().remove::<Texts>().unwrap_or_default().0);
    render(response, all);
}

fn render(response: &mut Response<RespBody>, texts: Vec<String>) {
    let headers = response.headers_mut();
    headers.remove(header::WARNING);
    for value in header_values(&texts) {
        if let Ok(value) = HeaderValue::from_bytes(value.as_bytes()) {
            headers.append(header::WARNING, value);
        }
    }
    response.extensions_mut().insert(Texts(texts));
}

/// The header values the recorder ends with after being given `texts` in order.
pub fn header_values(texts: &[String]) -> Vec<String> {
    let mut recorded: HashSet<&str> = HashSet::new();
    let mut ordered: Vec<&str> = Vec::new();
    let mut written = 0;
    let mut truncating = false;
    let mut values = Vec::new();
    for text in texts {
        if text.is_empty() || !recorded.insert(text) {
            continue;
        }
        if written >= TRUNCATE_AT_TOTAL && truncating {
            break;
        }
        ordered.push(text);
        let (text, length) = if truncating { cut(text) } else { (text.as_str(), text.chars().count()) };
        let Some(value) = header_value(text) else { continue };
        if written + length <= TRUNCATE_AT_TOTAL || truncating {
            written += length;
            values.push(value);
            continue;
        }
        // Over the limit: start again with every text so far cut short.
        truncating = true;
        written = 0;
        values.clear();
        for earlier in &ordered {
            let (text, length) = cut(earlier);
            if let Some(value) = header_value(text) {
                written += length;
                values.push(value);
            }
        }
    }
    values
}

/// `text` cut to its first 256 characters, and its length in characters.
fn cut(text: &str) -> (&str, usize) {
    match text.char_indices().nth(TRUNCATE_ITEM) {
        Some((end, _)) => (text.get(..end).unwrap_or(text), TRUNCATE_ITEM),
        None => (text, text.chars().count()),
    }
}

/// `299 - "<text>"` with `"` and `\` escaped and everything else as it is (UTF-8 included), or
/// nothing for a text with control characters, which Kubernetes refuses to write.
fn header_value(text: &str) -> Option<String> {
    if text.chars().any(char::is_control) {
        return None;
    }
    let mut value = String::with_capacity(text.len() + 8);
    value.push_str("299 - \"");
    for c in text.chars() {
        if c == '"' || c == '\\' {
            value.push('\\');
        }
        value.push(c);
    }
    value.push('"');
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn texts_are_quoted_and_written_once_in_order() {
        let values = header_values(&texts(&["b \"quoted\" \\", "a", "b \"quoted\" \\", "", "ünïcode"]));
        assert_eq!(values, [r#"299 - "b \"quoted\" \\""#, r#"299 - "a""#, "299 - \"ünïcode\""]);
    }

    #[test]
    fn texts_with_control_characters_are_dropped() {
        assert_eq!(header_values(&texts(&["line\nbreak", "ok", "tab\there"])), [r#"299 - "ok""#]);
    }

    #[test]
    fn long_warnings_are_whole_until_the_total_passes_4096_characters() {
        let long = "x".repeat(1000);
        let four: Vec<String> = (0..4).map(|i| format!("{i}{long}")).collect();
        // 4 × 1001 characters fit: every text is whole.
        assert!(header_values(&four).iter().all(|v| v.len() == 1001 + 8));
        // A fifth passes the total: every text, the earlier ones too, is cut to 256.
        let mut five = four.clone();
        five.push(format!("4{long}"));
        let values = header_values(&five);
        assert_eq!(values.len(), 5);
        assert!(values.iter().all(|v| v.chars().count() == 256 + 8), "{values:?}");
        // Cut texts are added until 4096 characters are written, then no more.
        let many: Vec<String> = (0..40).map(|i| format!("{i:02}{long}")).collect();
        let values = header_values(&many);
        assert_eq!(values.len(), 16, "{}", values.len());
    }

    #[test]
    fn a_deprecation_warning_comes_before_the_handlers_warnings() {
        let mut response = super::super::body::bytes_response(http::StatusCode::OK, "application/json", "{}");
        add(&mut response, &texts(&["validation", "finalizer"]));
        add_first(&mut response, &texts(&["deprecated"]));
        let values: Vec<&str> =
            response.headers().get_all(header::WARNING).iter().map(|v| v.to_str().unwrap()).collect();
        assert_eq!(values, [r#"299 - "deprecated""#, r#"299 - "validation""#, r#"299 - "finalizer""#]);
    }
}
