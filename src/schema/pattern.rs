//! `pattern` with Go RE2 semantics on Rust's `regex` crate.
//!
//! Both engines share RE2's syntax, but Go's `\d`, `\w`, `\s` and `\b` are ASCII-only where
//! Rust's are Unicode, Go reads `[` inside a class literally, and Go accepts a stray `{` and
//! octal escapes. Patterns are rewritten once, at compile time, so that matches agree; compile
//! errors are reported in Go's words (`error parsing regexp: ...`), as Kubernetes prints them.

use regex::Regex;

const DIGIT: &str = "0-9";
const WORD: &str = "0-9A-Za-z_";
// Go's \s is [\t\n\f\r ] (no vertical tab).
const SPACE: &str = "\\t\\n\\f\\r ";

/// A compiled `pattern`, or the reason it does not compile.
#[derive(Debug, Clone)]
pub struct Pattern {
    pub source: String,
    pub compiled: Result<Regex, String>,
}

impl Pattern {
    pub fn new(source: &str) -> Pattern {
        Pattern { source: source.to_string(), compiled: compile(source) }
    }
}

/// Patterns compiled, by their Go text: definitions repeat the same ones by the thousand, and a
/// compiled `Regex` is shared by cloning (its automata behind an `Arc`).
static COMPILED: crate::core::recall::Recall<Result<Regex, String>> = crate::core::recall::Recall::new(8192);

/// Compiles a Go regular expression; the error is Go's message.
pub fn compile(go: &str) -> Result<Regex, String> {
    COMPILED.get_or(go, compile_now, |_| true)
}

fn compile_now(go: &str) -> Result<Regex, String> {
    let rust = translate(go);
    Regex::new(&rust).map_err(|_| go_error(&rust))
}

/// Rewrites a Go RE2 pattern into a Rust pattern that matches the same strings.
pub fn translate(go: &str) -> String {
    let chars: Vec<char> = go.chars().collect();
    let mut out = String::with_capacity(go.len() + 8);
    let mut i = 0;
    let mut in_class = false;
    while let Some(&c) = chars.get(i) {
        i += 1;
        match c {
            '\\' => i = escape(&chars, i, in_class, &mut out),
            '[' if in_class => {
                if chars.get(i) == Some(&':')
                    && let Some(end) = posix_class_end(&chars, i)
                {
                    out.push('[');
                    out.extend(chars.get(i..end).unwrap_or_default());
                    i = end;
                } else {
                    out.push_str("\\[");
                }
            }
            '[' => {
                in_class = true;
                out.push('[');
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    out.push_str("\\]");
                    i += 1;
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            '{' if !in_class && !is_repetition(&chars, i) => out.push_str("\\{"),
            c => out.push(c),
        }
    }
    out
}

/// Where a POSIX class (`[:alpha:]`, starting after its `[`) ends, past its `:]`.
fn posix_class_end(chars: &[char], start: usize) -> Option<usize> {
    let rest = chars.get(start + 1..)?;
    let close = rest.windows(2).position(|w| w == [':', ']'])?;
    Some(start + 1 + close + 2)
}

/// Whether `{` (just consumed; `i` is past it) starts `{n}`, `{n,}` or `{n,m}`. Looks only at
/// the digits and comma that follow, so a pattern of many braces is read in linear time.
fn is_repetition(chars: &[char], i: usize) -> bool {
    let rest = chars.get(i..).unwrap_or_default();
    let Some(end) = rest.iter().position(|c| !(c.is_ascii_digit() || *c == ',')) else {
        return false;
    };
    if rest.get(end) != Some(&'}') {
        return false;
    }
    let body: String = rest.get(..end).unwrap_or_default().iter().collect();
    let mut parts = body.splitn(2, ',');
    let min = parts.next().unwrap_or_default();
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    digits(min) && parts.next().is_none_or(|max| max.is_empty() || digits(max))
}

/// Rewrites the escape whose backslash was just consumed; returns the next index.
fn escape(chars: &[char], mut i: usize, in_class: bool, out: &mut String) -> usize {
    let Some(&c) = chars.get(i) else {
        out.push('\\');
        return i;
    };
    i += 1;
    let (set, negated) = match c {
        'd' => (Some(DIGIT), false),
        'D' => (Some(DIGIT), true),
        'w' => (Some(WORD), false),
        'W' => (Some(WORD), true),
        's' => (Some(SPACE), false),
        'S' => (Some(SPACE), true),
        _ => (None, false),
    };
    if let Some(set) = set {
        match (in_class, negated) {
            (true, false) => out.push_str(set),
            _ => {
                out.push_str(if negated { "[^" } else { "[" });
                out.push_str(set);
                out.push(']');
            }
        }
        return i;
    }
    match c {
        'b' | 'B' if !in_class => {
            out.push_str("(?-u:\\");
            out.push(c);
            out.push(')');
        }
        'Q' => {
            while let Some(&q) = chars.get(i) {
                if q == '\\' && chars.get(i + 1) == Some(&'E') {
                    i += 2;
                    break;
                }
                out.push_str(&regex::escape(&q.to_string()));
                i += 1;
            }
        }
        '0'..='7' if c == '0' || chars.get(i).is_some_and(|d| ('0'..='7').contains(d)) => {
            let mut code = c.to_digit(8).unwrap_or(0);
            for _ in 0..2 {
                match chars.get(i).and_then(|d| d.to_digit(8)) {
                    Some(d) => {
                        code = code * 8 + d;
                        i += 1;
                    }
                    None => break,
                }
            }
            out.push_str(&format!("\\x{{{code:x}}}"));
        }
        c => {
            out.push('\\');
            out.push(c);
        }
    }
    i
}

/// Go's compile error for a pattern Rust refused, worded as Go's `regexp/syntax` words it.
fn go_error(rust: &str) -> String {
    use regex_syntax::ast::ErrorKind as K;
    let parsed = regex_syntax::ast::parse::Parser::new().parse(rust);
    let Err(error) = parsed else {
        return "error parsing regexp: expression too large".to_string();
    };
    let span = error.span();
    // An empty span points at the offending character.
    let end = if span.end.offset > span.start.offset {
        span.end.offset
    } else {
        rust.get(span.start.offset..)
            .and_then(|rest| rest.chars().next())
            .map_or(span.start.offset, |c| span.start.offset + c.len_utf8())
    };
    let fragment = rust.get(span.start.offset..end).unwrap_or(rust);
    let (code, expr) = match error.kind() {
        K::RepetitionMissing => ("missing argument to repetition operator", fragment),
        K::GroupUnclosed => ("missing closing )", rust),
        K::GroupUnopened => ("unexpected )", rust),
        K::ClassUnclosed => ("missing closing ]", rust.get(span.start.offset..).unwrap_or(rust)),
        K::EscapeUnexpectedEof => ("trailing backslash at end of expression", ""),
        K::EscapeUnrecognized | K::EscapeHexInvalid | K::EscapeHexInvalidDigit | K::EscapeHexEmpty => {
            ("invalid escape sequence", fragment)
        }
        K::ClassRangeInvalid | K::ClassRangeLiteral => ("invalid character class range", fragment),
        K::ClassEscapeInvalid | K::UnicodeClassInvalid => ("invalid character class", fragment),
        K::RepetitionCountInvalid
        | K::RepetitionCountUnclosed
        | K::RepetitionCountDecimalEmpty
        | K::DecimalEmpty
        | K::DecimalInvalid => ("invalid repeat count", fragment),
        K::GroupNameInvalid | K::GroupNameDuplicate { .. } | K::GroupNameEmpty | K::GroupNameUnexpectedEof => {
            ("invalid named capture", fragment)
        }
        K::NestLimitExceeded(_) => ("expression nests too deeply", rust),
        _ => ("invalid or unsupported Perl syntax", fragment),
    };
    format!("error parsing regexp: {code}: `{expr}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, text: &str) -> bool {
        compile(pattern).unwrap().is_match(text)
    }

    #[test]
    fn a_pattern_of_many_braces_is_read_in_linear_time() {
        // Each `{` used to scan to the next `}`: quadratic in the pattern's length.
        assert_eq!(translate(&"{".repeat(200_000)), "\\{".repeat(200_000));
        let commas = format!("a{}1}}", "{1,".repeat(50_000));
        // Every brace is literal but the last, which repeats `,` once: `{1,1}`.
        assert_eq!(translate(&commas), format!("a{}{{1,1}}", "\\{1,".repeat(49_999)));
        assert!(matches("^a{2,3}$", "aaa") && matches("^a{,2}$", "a{,2}"));
    }

    #[test]
    fn shorthand_classes_are_ascii_as_in_go() {
        assert!(matches(r"^\d+$", "123"));
        assert!(!matches(r"^\d+$", "١٢٣"), "Arabic-Indic digits are not \\d in Go");
        assert!(!matches(r"^\w+$", "é"));
        assert!(matches(r"^[\w-]+$", "a-b_c"));
        assert!(matches(r"^[^\d]+$", "abc"));
        assert!(!matches(r"^\s$", "\u{0B}"), "Go's \\s has no vertical tab");
        assert!(matches(r"^[\D]$", "x"));
        assert!(matches(r"\bcat\b", "a cat here"));
    }

    #[test]
    fn the_seed_cron_pattern() {
        let cron = r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$";
        assert!(matches(cron, "* * * * */5"));
        assert!(!matches(cron, "* * * *"));
    }

    #[test]
    fn go_literals_rust_would_refuse() {
        assert!(matches(r"^[a[]+$", "a[a"), "[ inside a class is literal in Go");
        assert!(matches(r"^{x}$", "{x}"), "a brace that starts no repetition is literal");
        assert!(matches(r"^a{2}$", "aa"));
        assert!(matches(r"^\101$", "A"), "octal escape");
        assert!(matches(r"^\Q.*\E$", ".*"));
        assert!(matches(r"^[[:alpha:]]+$", "abc"));
        assert!(matches(r"^[a&&b]+$", "&"));
        assert!(matches(r"^[]a]+$", "]a"));
    }

    #[test]
    fn errors_are_worded_as_go_words_them() {
        assert_eq!(compile("+").unwrap_err(), "error parsing regexp: missing argument to repetition operator: `+`");
        assert_eq!(compile("(a").unwrap_err(), "error parsing regexp: missing closing ): `(a`");
        assert_eq!(compile("a)").unwrap_err(), "error parsing regexp: unexpected ): `a)`");
        assert_eq!(compile("a\\").unwrap_err(), "error parsing regexp: trailing backslash at end of expression: ``");
        assert!(compile(r"(?=a)").unwrap_err().starts_with("error parsing regexp: invalid or unsupported Perl syntax"));
    }
}
