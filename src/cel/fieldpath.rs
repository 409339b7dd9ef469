//! `fieldPath` of a validation rule: a JSON path of field and map-key accessors (`.spec.x`,
//! `['a.b']`) that must resolve in the schema below the rule, turned into a field path.
//!
//! Owns: fieldPath parsing. Must not touch: evaluation.

use super::schema::{Node, Shape};

fn tokens(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    let mut prev = '\0';
    for c in path.chars() {
        if in_quote {
            cur.push(c);
            if c == '\'' && prev != '\\' {
                in_quote = false;
                out.push(std::mem::take(&mut cur));
            }
        } else if c == '\'' && cur.is_empty() {
            in_quote = true;
            cur.push(c);
        } else if matches!(c, '.' | '[' | ']') {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            out.push(c.to_string());
        } else {
            cur.push(c);
        }
        prev = c;
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn unescape_single_quoted(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let d = chars.next().unwrap_or('\\');
        out.push(match d {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\'' => '\'',
            '\\' => '\\',
            other => return Err(format!("invalid string literal: invalid escape char \\{other}")),
        });
    }
    Ok(out)
}

/// The field path `path` names below `node`, rendered as Kubernetes renders it (`a.b`,
/// `a[key]`), or the reason it is not valid.
pub fn resolve(path: &str, mut node: &Node) -> Result<String, String> {
    let toks = tokens(path);
    let mut out = String::new();
    let mut it = toks.iter();
    let step = |name: &str, out: &mut String, node: &mut &Node| -> Result<(), String> {
        if node.shape == Shape::Object && node.additional.is_none() && !node.properties.is_empty() {
            let child = node.properties.get(name).ok_or("does not refer to a valid field")?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(name);
            *node = child;
            Ok(())
        } else if let Some(values) = node.additional.as_deref() {
            out.push_str(&format!("[{name}]"));
            *node = values;
            Ok(())
        } else {
            Err("does not refer to a valid field".into())
        }
    };
    while let Some(tok) = it.next() {
        match tok.as_str() {
            "[" => {
                let key = it.next().ok_or("unexpected end of JSON path")?;
                if key.len() < 2 || !key.starts_with('\'') || !key.ends_with('\'') {
                    return Err(format!("expected single quoted string but got {key}"));
                }
                let name = unescape_single_quoted(key.get(1..key.len() - 1).unwrap_or(""))?;
                step(&name, &mut out, &mut node)?;
                match it.next().map(String::as_str) {
                    Some("]") => {}
                    Some(other) => return Err(format!("expected ] but got {other}")),
                    None => return Err("unexpected end of JSON path".into()),
                }
            }
            "." => {
                let name = it.next().ok_or("unexpected end of JSON path")?;
                if matches!(name.as_str(), "." | "[" | "]") {
                    return Err("does not refer to a valid field".into());
                }
                step(name, &mut out, &mut node)?;
            }
            other => return Err(format!("expected [ or . but got: {other}")),
        }
    }
    Ok(out)
}
