//! A reader of the PromQL the dashboard writes: which metrics each query selects, with which
//! label matchers, inside which functions, and which labels it groups by. It checks names, not
//! syntax (promtool parses the queries for that); it refuses what it does not know, so that
//! an unexpected construct fails the test instead of slipping past the name checks.

/// One metric selector: `name{label op "value", ...}`, and the functions around it.
#[derive(Debug)]
pub struct Selector {
    pub metric: String,
    pub matchers: Vec<(String, String, String)>,
    pub enclosing: Vec<String>,
}

/// What a query reads and how it groups.
#[derive(Debug, Default)]
pub struct Query {
    pub selectors: Vec<Selector>,
    /// Labels named by `by (...)`, `without (...)`, `on (...)`, `ignoring (...)`, `group_left (...)`.
    pub grouping: Vec<String>,
    /// Whether an aggregation (`sum`, `max`, ...) is applied.
    pub aggregated: bool,
}

const AGGREGATIONS: &[&str] = &["sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile", "stddev"];
const FUNCTIONS: &[&str] =
    &["rate", "irate", "increase", "histogram_quantile", "time", "vector", "clamp_min", "clamp_max", "abs", "scalar"];
const GROUPING: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset"];

struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    text: &'a str,
}

impl Lexer<'_> {
    fn skip_space(&mut self) {
        while self.chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
    }

    fn peek(&mut self) -> Option<char> {
        self.chars.peek().map(|(_, c)| *c)
    }

    fn identifier(&mut self) -> String {
        let mut out = String::new();
        while let Some((_, c)) = self.chars.next_if(|(_, c)| c.is_ascii_alphanumeric() || *c == '_' || *c == ':') {
            out.push(c);
        }
        out
    }

    /// A quoted string, its quotes included in the input, returned without them.
    fn string(&mut self) -> Result<String, String> {
        let Some((_, quote)) = self.chars.next() else { return Err("a string was expected".into()) };
        let mut out = String::new();
        loop {
            match self.chars.next() {
                Some((_, '\\')) => out.extend(self.chars.next().map(|(_, c)| c)),
                Some((_, c)) if c == quote => return Ok(out),
                Some((_, c)) => out.push(c),
                None => return Err(format!("unterminated string in {}", self.text)),
            }
        }
    }

    /// Skips to the character that closes what `open` opened (a range `[...]`).
    fn skip_past(&mut self, close: char) -> Result<(), String> {
        for (_, c) in self.chars.by_ref() {
            if c == close {
                return Ok(());
            }
        }
        Err(format!("no closing {close} in {}", self.text))
    }

    /// `(label, label, ...)` after a grouping keyword.
    fn label_list(&mut self) -> Result<Vec<String>, String> {
        self.skip_space();
        if self.peek() != Some('(') {
            return Ok(Vec::new()); // group_left without labels.
        }
        self.chars.next();
        let mut labels = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                Some(')') => {
                    self.chars.next();
                    return Ok(labels);
                }
                Some(',') => {
                    self.chars.next();
                }
                _ => {
                    let label = self.identifier();
                    if label.is_empty() {
                        return Err(format!("a label was expected in a grouping of {}", self.text));
                    }
                    labels.push(label);
                }
            }
        }
    }

    /// `{label op "value", ...}` after a metric name.
    fn matchers(&mut self) -> Result<Vec<(String, String, String)>, String> {
        self.chars.next();
        let mut out = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                Some('}') => {
                    self.chars.next();
                    return Ok(out);
                }
                Some(',') => {
                    self.chars.next();
                }
                _ => {
                    let label = self.identifier();
                    self.skip_space();
                    let mut op = String::new();
                    while let Some((_, c)) = self.chars.next_if(|(_, c)| matches!(c, '=' | '!' | '~')) {
                        op.push(c);
                    }
                    self.skip_space();
                    if label.is_empty() || !["=", "!=", "=~", "!~"].contains(&op.as_str()) {
                        return Err(format!("a matcher was expected in {}", self.text));
                    }
                    out.push((label, op, self.string()?));
                }
            }
        }
    }
}

/// Reads one query.
pub fn read(text: &str) -> Result<Query, String> {
    let mut lexer = Lexer { chars: text.char_indices().peekable(), text };
    let mut query = Query::default();
    // The function each open parenthesis belongs to ("" for plain grouping).
    let mut open: Vec<String> = Vec::new();
    let mut pending_function: Option<String> = None;
    loop {
        lexer.skip_space();
        let Some(c) = lexer.peek() else { break };
        match c {
            '"' | '\'' | '`' => {
                lexer.string()?;
            }
            '[' => lexer.skip_past(']')?,
            '{' => return Err(format!("a selector without a metric name in {text}")),
            '(' => {
                lexer.chars.next();
                open.push(pending_function.take().unwrap_or_default());
            }
            ')' => {
                lexer.chars.next();
                open.pop().ok_or_else(|| format!("unbalanced ) in {text}"))?;
            }
            '$' => return Err(format!("a variable outside a string or a range in {text}")),
            c if c.is_ascii_digit() || c == '.' => {
                while lexer.chars.next_if(|(_, c)| c.is_ascii_alphanumeric() || *c == '.').is_some() {}
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let word = lexer.identifier();
                lexer.skip_space();
                if GROUPING.contains(&word.as_str()) {
                    query.grouping.extend(lexer.label_list()?);
                } else if KEYWORDS.contains(&word.as_str()) {
                } else if AGGREGATIONS.contains(&word.as_str()) {
                    query.aggregated = true;
                    pending_function = Some(word);
                } else if lexer.peek() == Some('(') {
                    if !FUNCTIONS.contains(&word.as_str()) {
                        return Err(format!("unknown function {word} in {text}"));
                    }
                    pending_function = Some(word);
                } else {
                    let matchers = if lexer.peek() == Some('{') { lexer.matchers()? } else { Vec::new() };
                    let enclosing = open.iter().filter(|f| !f.is_empty()).cloned().collect();
                    query.selectors.push(Selector { metric: word, matchers, enclosing });
                }
            }
            _ => {
                lexer.chars.next();
            }
        }
    }
    if !open.is_empty() {
        return Err(format!("unbalanced ( in {text}"));
    }
    Ok(query)
}

#[test]
fn reads_selectors_functions_and_groupings() {
    let query = read(
        r#"histogram_quantile(0.99, sum by (le, resource) (rate(a_bucket{job="$job", verb!~"WATCH|CONNECT"}[$__rate_interval]))) / on() group_left b"#,
    )
    .unwrap();
    assert_eq!(query.grouping, ["le", "resource"]);
    assert!(query.aggregated);
    let [a, b] = &query.selectors[..] else { panic!("{query:?}") };
    assert_eq!(a.metric, "a_bucket");
    assert_eq!(a.enclosing, ["histogram_quantile", "sum", "rate"]);
    assert_eq!(a.matchers[1], ("verb".to_string(), "!~".to_string(), "WATCH|CONNECT".to_string()));
    assert_eq!((b.metric.as_str(), b.enclosing.len()), ("b", 0));
    assert!(read("frobnicate(a)").unwrap_err().contains("unknown function frobnicate"));
    assert!(read(r#"{__name__="a"}"#).is_err());
    assert!(read("sum(rate(a[5m])").is_err());
}
