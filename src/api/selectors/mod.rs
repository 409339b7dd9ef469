//! Label and field selectors, parsed as Kubernetes parses them (`labels.Parse` in
//! `label_syntax`, `fields.ParseSelector` here) and matched against unstructured objects.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::core::status::ApiError;

mod label_syntax;

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A label selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<LabelRequirement>);

impl LabelSelector {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses a label selector as Kubernetes does (`label_syntax`); errors are 400s with its
    /// texts.
    pub fn parse(text: &str) -> Result<LabelSelector, ApiError> {
        label_syntax::parse(text).map(LabelSelector).map_err(ApiError::bad_request)
    }

    pub fn matches(&self, labels: &BTreeMap<&str, &str>) -> bool {
        self.0.iter().all(|r| match r {
            LabelRequirement::Equals(k, v) => labels.get(k.as_str()) == Some(&v.as_str()),
            LabelRequirement::NotEquals(k, v) => labels.get(k.as_str()) != Some(&v.as_str()),
            LabelRequirement::In(k, vs) => labels.get(k.as_str()).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::NotIn(k, vs) => labels.get(k.as_str()).is_none_or(|l| !vs.iter().any(|v| v == l)),
            LabelRequirement::Exists(k) => labels.contains_key(k.as_str()),
            LabelRequirement::NotExists(k) => !labels.contains_key(k.as_str()),
            LabelRequirement::GreaterThan(k, n) => {
                labels.get(k.as_str()).and_then(|l| l.parse::<i64>().ok()).is_some_and(|l| l > *n)
            }
            LabelRequirement::LessThan(k, n) => {
                labels.get(k.as_str()).and_then(|l| l.parse::<i64>().ok()).is_some_and(|l| l < *n)
            }
        })
    }

    pub fn matches_object(&self, object: &Value) -> bool {
        if self.is_empty() {
            return true;
        }
        let labels: BTreeMap<&str, &str> = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v))).collect())
            .unwrap_or_default();
        self.matches(&labels)
    }
}

/// One field selector term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub value: String,
    pub equal: bool,
}

/// A field selector: every term must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldRequirement>);

impl FieldSelector {
    /// Parses `a=b,c!=d` (with `\` escapes), then checks every field against `supported`.
    pub fn parse(text: &str, supported: &[String]) -> Result<FieldSelector, ApiError> {
        let mut terms = Vec::new();
        for term in split_unescaped(text, ',') {
            if term.is_empty() {
                continue;
            }
            let (field, value, equal) = split_field_term(&term).ok_or_else(|| {
                ApiError::bad_request(format!("invalid selector: '{text}'; can't understand '{term}'"))
            })?;
            if !supported.contains(&field) {
                return Err(ApiError::bad_request(format!("field label not supported: {field}")));
            }
            terms.push(FieldRequirement { field, value, equal });
        }
        Ok(FieldSelector(terms))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The name an `metadata.name=X` term pins, if any.
    pub fn exact_name(&self) -> Option<&str> {
        self.0.iter().find(|t| t.equal && t.field == "metadata.name").map(|t| t.value.as_str())
    }

    /// Matches with `value_of(field)` giving an object's field value as text.
    pub fn matches(&self, value_of: impl Fn(&str) -> String) -> bool {
        self.0.iter().all(|t| (value_of(&t.field) == t.value) == t.equal)
    }
}

fn split_unescaped(text: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut escaped = false;
    for c in text.chars() {
        if escaped {
            current.push('\\');
            current.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            out.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    out.push(current);
    out
}

fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut escaped = false;
    for c in text.chars() {
        if escaped || c != '\\' {
            out.push(c);
            escaped = false;
        } else {
            escaped = true;
        }
    }
    out
}

fn split_field_term(term: &str) -> Option<(String, String, bool)> {
    // Find the first unescaped operator.
    let bytes: Vec<char> = term.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        match bytes.get(i) {
            Some('\\') => i += 2,
            Some('!') if bytes.get(i + 1) == Some(&'=') => {
                let field: String = bytes.get(..i)?.iter().collect();
                let value: String = bytes.get(i + 2..)?.iter().collect();
                return Some((field.trim().to_string(), unescape(&value), false));
            }
            Some('=') => {
                let field: String = bytes.get(..i)?.iter().collect();
                let skip = if bytes.get(i + 1) == Some(&'=') { 2 } else { 1 };
                let value: String = bytes.get(i + skip..)?.iter().collect();
                return Some((field.trim().to_string(), unescape(&value), true));
            }
            _ => i += 1,
        }
    }
    None
}

/// A field's value as field selectors compare it: strings as they are, numbers and booleans
/// printed (`fmt.Sprint`), anything missing as "".
pub fn field_text(object: &Value, dotted_path: &str) -> String {
    let mut node = object;
    for part in dotted_path.split('.') {
        match node.get(part) {
            Some(next) => node = next,
            None => return String::new(),
        }
    }
    match node {
        Value::String(s) => s.clone(),
        Value::Number(n) => crate::core::field::go_number(n),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&'static str, &'static str)]) -> BTreeMap<&'static str, &'static str> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn label_selector_syntax() {
        let s = LabelSelector::parse("env in (prod, staging),tier!=db,app,!legacy,n>2").unwrap();
        assert!(s.matches(&labels(&[("env", "prod"), ("tier", "web"), ("app", "x"), ("n", "3")])));
        assert!(!s.matches(&labels(&[("env", "dev"), ("app", "x"), ("n", "3")])));
        assert!(!s.matches(&labels(&[("env", "prod"), ("app", "x"), ("legacy", "1"), ("n", "3")])));
        assert!(!s.matches(&labels(&[("env", "prod"), ("n", "3")])));
        let notin = LabelSelector::parse("env notin (prod)").unwrap();
        assert!(notin.matches(&labels(&[])));
        assert!(LabelSelector::parse("a==b").unwrap().matches(&labels(&[("a", "b")])));
        assert_eq!(LabelSelector::parse("a in prod").unwrap_err().code, 400);
        assert_eq!(LabelSelector::parse("a=b c").unwrap_err().code, 400);
    }

    #[test]
    fn field_selectors_check_supported_labels() {
        let supported = vec!["metadata.name".to_string(), "spec.color".to_string()];
        let s = FieldSelector::parse("spec.color=blue,metadata.name!=x", &supported).unwrap();
        let shirt = json!({"metadata": {"name": "s1"}, "spec": {"color": "blue"}});
        assert!(s.matches(|f| field_text(&shirt, f)));
        let err = FieldSelector::parse("spec.nosuchfield=xyz", &supported).unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (400, "field label not supported: spec.nosuchfield"));
        assert_eq!(FieldSelector::parse("metadata.name==a", &supported).unwrap().exact_name(), Some("a"));
        let escaped = FieldSelector::parse(r"spec.color=a\,b", &supported).unwrap();
        assert_eq!(escaped.0[0].value, "a,b");
    }

    #[test]
    fn field_text_prints_like_go() {
        let o = json!({"spec": {"n": 2, "b": false, "f": 1.5}});
        assert_eq!(field_text(&o, "spec.n"), "2");
        assert_eq!(field_text(&o, "spec.b"), "false");
        assert_eq!(field_text(&o, "spec.f"), "1.5");
        assert_eq!(field_text(&o, "spec.missing"), "");
    }
}
