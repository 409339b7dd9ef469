//! The JSONPath subset printer columns use (`.spec.replicas`, `.status.conditions[0].type`,
//! `.items[*].name`, `.metadata.labels['app\.kubernetes\.io/name']`, and client-go's filters
//! `.status.conditions[?(@.type=="Ready")].status`), and the text form kubectl's JSONPath
//! printer gives a value.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    /// `[?(@.path <op> literal)]`, or `[?(@.path)]` (exists): the array's elements that pass.
    Filter(Box<Filter>),
}

/// A filter's test on each element of an array.
#[derive(Debug, Clone, PartialEq)]
struct Filter {
    left: JsonPath,
    /// The operator and the literal it compares with; `None`: the left side exists.
    compare: Option<(Operator, Value)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Operator {
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

impl Filter {
    /// `@.path`, `@.path <op> <literal>` (a quoted string, a number, `true` or `false`).
    fn parse(text: &str) -> Result<Filter, String> {
        let operators = [
            ("==", Operator::Equal),
            ("!=", Operator::NotEqual),
            ("<=", Operator::LessOrEqual),
            (">=", Operator::GreaterOrEqual),
            ("<", Operator::Less),
            (">", Operator::Greater),
        ];
        let found = operators
            .iter()
            .filter_map(|(symbol, op)| text.find(symbol).map(|at| (at, *symbol, *op)))
            .min_by_key(|f| f.0);
        let (left, compare) = match found {
            Some((at, symbol, op)) => {
                let right = text.get(at + symbol.len()..).unwrap_or_default().trim();
                (text.get(..at).unwrap_or_default(), Some((op, literal(right)?)))
            }
            None => (text, None),
        };
        let left = left.trim().strip_prefix('@').ok_or_else(|| format!("unrecognized filter {text}"))?;
        Ok(Filter { left: JsonPath::parse(left)?, compare })
    }

    fn passes(&self, element: &Value) -> bool {
        let found = self.left.find(element);
        let Some((op, right)) = &self.compare else { return !found.is_empty() };
        // As client-go: an element without the field is left out.
        let [left] = found.as_slice() else { return false };
        let order = match (left, right) {
            (Value::String(l), Value::String(r)) => Some(l.cmp(r)),
            (Value::Number(l), Value::Number(r)) => l.as_f64().zip(r.as_f64()).and_then(|(l, r)| l.partial_cmp(&r)),
            (Value::Bool(l), Value::Bool(r)) => Some(l.cmp(r)),
            _ => None,
        };
        let Some(order) = order else { return false };
        match op {
            Operator::Equal => order.is_eq(),
            Operator::NotEqual => order.is_ne(),
            Operator::Less => order.is_lt(),
            Operator::LessOrEqual => order.is_le(),
            Operator::Greater => order.is_gt(),
            Operator::GreaterOrEqual => order.is_ge(),
        }
    }
}

/// A filter's literal: `"text"` or `'text'`, a number, `true` or `false`.
fn literal(text: &str) -> Result<Value, String> {
    let quoted = text.strip_prefix('"').and_then(|t| t.strip_suffix('"'));
    if let Some(inner) = quoted.or_else(|| text.strip_prefix('\'').and_then(|t| t.strip_suffix('\''))) {
        return Ok(Value::String(inner.to_string()));
    }
    match text {
        "true" => return Ok(Value::Bool(true)),
        "false" => return Ok(Value::Bool(false)),
        _ => {}
    }
    serde_json::from_str::<serde_json::Number>(text)
        .map(Value::Number)
        .map_err(|_| format!("unrecognized literal {text}"))
}

/// A compiled path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

impl JsonPath {
    /// Parses a path, with or without kubectl's surrounding braces.
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let text = text.trim();
        let text = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')).unwrap_or(text).trim();
        let text = text.strip_prefix('$').unwrap_or(text);
        let mut steps = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars.get(i) {
                Some('.') => {
                    i += 1;
                    let mut name = String::new();
                    while let Some(&c) = chars.get(i) {
                        if c == '.' || c == '[' {
                            break;
                        }
                        if c == '\\' {
                            if let Some(&next) = chars.get(i + 1) {
                                name.push(next);
                                i += 2;
                                continue;
                            }
                        }
                        name.push(c);
                        i += 1;
                    }
                    if !name.is_empty() {
                        steps.push(Step::Field(name));
                    }
                }
                Some('[') => {
                    let close = closing_bracket(chars.get(i..).unwrap_or_default()).ok_or("unterminated [")?;
                    let inner: String = chars.get(i + 1..i + close).ok_or("bad [")?.iter().collect();
                    let inner = inner.trim();
                    if let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
                        steps.push(Step::Filter(Box::new(Filter::parse(filter)?)));
                    } else if inner == "*" {
                        steps.push(Step::All);
                    } else if let Some(quoted) = inner.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
                        steps.push(Step::Field(quoted.replace("\\.", ".")));
                    } else if let Ok(n) = inner.parse::<i64>() {
                        steps.push(Step::Index(n));
                    } else {
                        return Err(format!("unsupported array index {inner}"));
                    }
                    i += close + 1;
                }
                Some(c) => return Err(format!("unrecognized character in action: {c}")),
                None => break,
            }
        }
        Ok(JsonPath { steps })
    }

    /// Every value the path reaches.
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut current = vec![root];
        for step in &self.steps {
            let mut next = Vec::new();
            for node in current {
                match (step, node) {
                    (Step::Field(name), Value::Object(map)) => next.extend(map.get(name)),
                    (Step::Index(i), Value::Array(items)) => {
                        let len = items.len() as i64;
                        let index = if *i < 0 { len + i } else { *i };
                        if let Ok(index) = usize::try_from(index) {
                            next.extend(items.get(index));
                        }
                    }
                    (Step::All, Value::Array(items)) => next.extend(items.iter()),
                    (Step::All, Value::Object(map)) => next.extend(map.values()),
                    (Step::Filter(filter), Value::Array(items)) => {
                        next.extend(items.iter().filter(|e| filter.passes(e)))
                    }
                    _ => {}
                }
            }
            current = next;
        }
        current
    }
}

/// Where the `[` at the start of `chars` closes: its `]`, brackets inside quotes or nested
/// brackets (a filter's own paths) left aside.
fn closing_bracket(chars: &[char]) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, &c) in chars.iter().enumerate() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// A value as kubectl's JSONPath printer writes it: strings raw, other scalars as text,
/// arrays and maps as JSON.
pub fn print_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => crate::core::field::go_number(n),
        Value::Bool(b) => b.to_string(),
        Value::Null => "<nil>".to_string(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_values() {
        let obj = json!({"spec": {"replicas": 3, "items": [{"n": "a"}, {"n": "b"}]}, "metadata": {"labels": {"app.kubernetes.io/name": "x"}}});
        let find = |p: &str| JsonPath::parse(p).unwrap().find(&obj).into_iter().cloned().collect::<Vec<_>>();
        assert_eq!(find(".spec.replicas"), vec![json!(3)]);
        assert_eq!(find("{.spec.items[1].n}"), vec![json!("b")]);
        assert_eq!(find(".spec.items[-1].n"), vec![json!("b")]);
        assert_eq!(find(".spec.items[*].n"), vec![json!("a"), json!("b")]);
        assert_eq!(find(".metadata.labels['app.kubernetes.io/name']"), vec![json!("x")]);
        assert_eq!(find(r".metadata.labels.app\.kubernetes\.io/name"), vec![json!("x")]);
        assert!(find(".spec.missing").is_empty());
    }

    #[test]
    fn filters_as_client_go() {
        let obj = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "n": 1},
            {"type": "Odd]Type", "status": "False", "n": 2, "reason": "Because"},
        ]}});
        let find = |p: &str| JsonPath::parse(p).unwrap().find(&obj).into_iter().cloned().collect::<Vec<_>>();
        assert_eq!(find(r#".status.conditions[?(@.type=="Ready")].status"#), vec![json!("True")]);
        assert_eq!(find(".status.conditions[?(@.type=='Odd]Type')].status"), vec![json!("False")]);
        assert_eq!(find(r#".status.conditions[?(@.type!="Ready")].n"#), vec![json!(2)]);
        assert_eq!(find(".status.conditions[?(@.n >= 2)].type"), vec![json!("Odd]Type")]);
        assert_eq!(find(".status.conditions[?(@.n < 2)].type"), vec![json!("Ready")]);
        assert_eq!(find(".status.conditions[?(@.reason)].type"), vec![json!("Odd]Type")]);
        assert!(find(r#".status.conditions[?(@.type=="Gone")].status"#).is_empty());
        // A string compared with a number passes nothing.
        assert!(find(r#".status.conditions[?(@.n=="1")].type"#).is_empty());
        assert!(JsonPath::parse(".a[?(type==1)]").is_err());
    }

    #[test]
    fn prints_like_kubectl() {
        assert_eq!(print_value(&json!([1, 2, 3])), "[1,2,3]");
        assert_eq!(print_value(&json!("s")), "s");
        assert_eq!(print_value(&json!(1.5)), "1.5");
    }
}
