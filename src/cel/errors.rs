//! Error texts as Kubernetes and cel-go print them: `ERROR: <input>:1:6: ...` with the source
//! line and a caret, cost-budget messages, and the rule as an error's value.
//!
//! Owns: error wording. Must not touch: checking or evaluation.

use cel::ParseErrors;
use cel::common::ast::SourceInfo;
use serde_json::Value as Json;

use super::schema::RuleSpec;

/// One error in cel-go's display form; `col` is 0-based, counted in characters.
fn display(source: &str, line: usize, col: usize, msg: &str) -> String {
    let mut out = format!("ERROR: <input>:{line}:{}: {msg}", col + 1);
    if let Some(snippet) = source.split('\n').nth(line.saturating_sub(1)) {
        let snippet = snippet.replace('\t', " ");
        out.push_str("\n | ");
        out.push_str(&snippet);
        out.push_str("\n | ");
        for c in snippet.chars().take(col) {
            out.push(if c.len_utf8() > 1 { '．' } else { '.' });
        }
        let wide = snippet.chars().nth(col).is_some_and(|c| c.len_utf8() > 1);
        out.push(if wide { '＾' } else { '^' });
    }
    out
}

/// Line (1-based) and column (0-based) of a character offset.
fn position(source: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut col = 0;
    for c in source.chars().take(offset) {
        if c == '\n' {
            line += 1;
            col = 0;
        } else {
            col += 1;
        }
    }
    (line, col)
}

pub fn parse_errors(source: &str, errs: &ParseErrors) -> String {
    let shown: Vec<String> = errs
        .errors
        .iter()
        .map(|e| {
            let line = usize::try_from(e.pos.0).unwrap_or(1).max(1);
            let mut col = usize::try_from(e.pos.1).unwrap_or(0);
            // cel-go places macro errors at the call's parenthesis.
            if e.msg.contains("has() macro") {
                let text: Vec<char> = source.split('\n').nth(line - 1).unwrap_or("").chars().collect();
                let mut i = col.min(text.len());
                while i > 0 && text.get(i) != Some(&'(') {
                    i -= 1;
                }
                col = i;
            }
            match reserved_member(&e.msg) {
                // cel-go's parser stops at the keyword itself where the Rust one reports the
                // whole `.keyword`: say what cel-go says, where it says it.
                Some(word) => {
                    let text: Vec<char> = source.split('\n').nth(line - 1).unwrap_or("").chars().collect();
                    let dotted: Vec<char> = format!(".{word}").chars().collect();
                    let at = (0..=col.min(text.len()))
                        .rev()
                        .find(|i| text.get(*i..i + dotted.len()) == Some(dotted.as_slice()))
                        .map_or(col, |i| i + 1);
                    display(source, line, at, &format!("Syntax error: mismatched input '{word}' expecting IDENTIFIER"))
                }
                None => display(source, line, col, &e.msg),
            }
        })
        .collect();
    shown.join("\n")
}

/// The reserved word of a `no viable alternative at input '.word'` error.
fn reserved_member(msg: &str) -> Option<&str> {
    let word = msg.strip_prefix("Syntax error: no viable alternative at input '.")?.strip_suffix('\'')?;
    super::escaping::RESERVED.contains(&word).then_some(word)
}

pub fn check_errors(source: &str, info: &SourceInfo, errs: &[(u64, String)]) -> String {
    let shown: Vec<String> = errs
        .iter()
        .map(|(id, msg)| {
            let mut offset = info.offset_for(*id).map_or(0, |(start, _)| start as usize);
            // cel-go places a negative number at its sign; the crate's parser at its digits.
            let before = source.chars().nth(offset.wrapping_sub(1));
            if offset > 0 && before == Some('-') && source.chars().nth(offset).is_some_and(|c| c.is_ascii_digit()) {
                offset -= 1;
            }
            let (line, col) = position(source, offset);
            display(source, line, col, msg)
        })
        .collect();
    shown.join("\n")
}

/// Kubernetes' cost-budget message.
pub fn cost_message(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let shown = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {shown} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// The rule as the value of its compile error: its set fields in the order of Kubernetes'
/// `ValidationRule`, the strings as written (not with Go's `\u003c` for `<`, which a rule's
/// comparisons and `&&` would be full of; kube-apiserver 1.36 prints its internal struct,
/// `{"Rule":"self.a \u003c 1","Message":"",...}`, which reads worse still).
pub fn rule_json(spec: &RuleSpec) -> String {
    let mut fields = vec![("rule", Json::String(spec.rule.clone()))];
    if !spec.message.is_empty() {
        fields.push(("message", Json::String(spec.message.clone())));
    }
    if !spec.message_expression.is_empty() {
        fields.push(("messageExpression", Json::String(spec.message_expression.clone())));
    }
    if let Some(r) = &spec.reason {
        fields.push(("reason", Json::String(r.clone())));
    }
    if !spec.field_path.is_empty() {
        fields.push(("fieldPath", Json::String(spec.field_path.clone())));
    }
    if let Some(o) = spec.optional_old_self {
        fields.push(("optionalOldSelf", Json::Bool(o)));
    }
    let members: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("\"{name}\":{}", serde_json::to_string(value).unwrap_or_default()))
        .collect();
    format!("{{{}}}", members.join(","))
}
