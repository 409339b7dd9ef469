//! Property names as CEL expressions spell them: Kubernetes' escaping of names that are CEL
//! keywords or contain `__`, `.`, `-` or `/`.
//!
//! Owns: the escaping rules. Must not touch: anything else.

/// Words CEL reserves; a property named exactly so is spelled `__word__`.
pub(super) const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL spelling of a property name, or `None` when CEL cannot reach the property.
pub fn escape(name: &str) -> Option<String> {
    let first = name.chars().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_as_the_docs_table_says() {
        for (name, spelled) in [
            ("namespace", Some("__namespace__")),
            ("x-prop", Some("x__dash__prop")),
            ("redact__d", Some("redact__underscores__d")),
            ("a.b", Some("a__dot__b")),
            ("a/b", Some("a__slash__b")),
            ("sprint", Some("sprint")),
            ("_true", Some("_true")),
            ("f@2", None),
            ("1a", None),
            ("", None),
        ] {
            assert_eq!(escape(name).as_deref(), spelled, "{name}");
        }
    }
}
