//! The JSONPath subset printer columns use (`.spec.replicas`, `.status.conditions[0].type`,
//! `.items[*].name`, `.metadata.labels['app\.kubernetes\.io/name']`), and the text form
//! kubectl's JSONPath printer gives a value.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
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
                    let close =
                        chars.get(i..).and_then(|rest| rest.iter().position(|&c| c == ']')).ok_or("unterminated [")?;
                    let inner: String = chars.get(i + 1..i + close).ok_or("bad [")?.iter().collect();
                    let inner = inner.trim();
                    if inner == "*" {
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
                    _ => {}
                }
            }
            current = next;
        }
        current
    }
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
    fn prints_like_kubectl() {
        assert_eq!(print_value(&json!([1, 2, 3])), "[1,2,3]");
        assert_eq!(print_value(&json!("s")), "s");
        assert_eq!(print_value(&json!(1.5)), "1.5");
    }
}
