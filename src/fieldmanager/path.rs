//! Field paths as structured-merge-diff names them: a path is a list of elements, each a field
//! name (`.spec`), the key of an item of a map-list (`[name="a"]`), the value of an item of a
//! set (`[=5]`) or a list index (`[0]`). Owns their total order (the order FieldsV1 and
//! conflict messages use) and their human-readable rendering.
//!
//! Values are compared as structured-merge-diff compares them: numbers numerically (an integer
//! and a float of the same value are equal), then strings, booleans, lists, maps and null.

use std::cmp::Ordering;
use std::fmt;

use serde_json::{Map, Value};

use crate::core::field::{go_float, go_quote};

/// One step of a path.
#[derive(Debug, Clone)]
pub enum PathElement {
    /// A field of an object (`f:name`).
    Field(String),
    /// The item of a map-list with these key fields, sorted by name (`k:{...}`).
    Key(Vec<(String, Value)>),
    /// The item of a set with this value (`v:...`).
    Value(Value),
    /// An index into an atomic list (`i:N`); never produced for ownership, kept when read.
    Index(i64),
}

/// A path from the root of an object.
pub type Path = Vec<PathElement>;

impl PathElement {
    pub fn field(name: &str) -> PathElement {
        PathElement::Field(name.to_string())
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.as_bytes().cmp(b.as_bytes()),
            (PathElement::Key(a), PathElement::Key(b)) => compare_keys(a, b),
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl fmt::Display for PathElement {
    /// `.name`, `[k=v,...]`, `[=v]` or `[i]`, as `PathElement.String` renders them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                f.write_str("[")?;
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{name}={}", value_to_string(value))?;
                }
                f.write_str("]")
            }
            PathElement::Value(value) => write!(f, "[={}]", value_to_string(value)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path rendered as structured-merge-diff renders it (`.spec.ports[name="http"].port`).
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// Key fields compared name by name, then value by value; a shorter list sorts first.
fn compare_keys(a: &[(String, Value)], b: &[(String, Value)]) -> Ordering {
    for ((an, av), (bn, bv)) in a.iter().zip(b) {
        let order = an.as_bytes().cmp(bn.as_bytes()).then_with(|| compare_values(av, bv));
        if order != Ordering::Equal {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

/// A number as structured-merge-diff sees it: integers that fit an int64, everything else a
/// float.
#[derive(Clone, Copy)]
enum Number {
    Int(i64),
    Float(f64),
}

fn number(n: &serde_json::Number) -> Number {
    match n.as_i64() {
        Some(i) => Number::Int(i),
        None => Number::Float(n.as_f64().unwrap_or(0.0)),
    }
}

fn float_order(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// The total order of values (`value.Compare`): numbers < strings < booleans < lists < maps <
/// null.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (number(x), number(y)) {
            (Number::Int(i), Number::Int(j)) => i.cmp(&j),
            (Number::Int(i), Number::Float(g)) => float_order(i as f64, g),
            (Number::Float(f), Number::Int(j)) => float_order(f, j as f64),
            (Number::Float(f), Number::Float(g)) => float_order(f, g),
        },
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (i, j) in x.iter().zip(y) {
                let order = compare_values(i, j);
                if order != Ordering::Equal {
                    return order;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => compare_maps(x, y),
        _ => rank(a).cmp(&rank(b)),
    }
}

fn compare_maps(x: &Map<String, Value>, y: &Map<String, Value>) -> Ordering {
    for ((xk, xv), (yk, yv)) in x.iter().zip(y) {
        let order = xk.as_bytes().cmp(yk.as_bytes()).then_with(|| compare_values(xv, yv));
        if order != Ordering::Equal {
            return order;
        }
    }
    x.len().cmp(&y.len())
}

/// Value equality as structured-merge-diff defines it (`value.Equals`): numbers compare
/// numerically, containers deeply.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => compare_values(a, b) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(i, j)| values_equal(i, j)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// A value as `value.ToString` prints it: strings quoted, numbers with `%v`, lists in
/// brackets.
pub fn value_to_string(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Number(n) => match number(n) {
            Number::Int(i) => i.to_string(),
            Number::Float(f) => go_float(f),
        },
        Value::String(s) => go_quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Array(items) => format!("[{}]", items.iter().map(value_to_string).collect::<Vec<_>>().join(",")),
        Value::Object(map) => map.iter().map(|(k, v)| format!("{k}={}", value_to_string(v))).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn elements_order_by_kind_then_content() {
        let mut elements = [
            PathElement::Index(1),
            PathElement::Value(json!("b")),
            PathElement::Key(vec![("name".into(), json!("a"))]),
            PathElement::field("z"),
            PathElement::field("a"),
            PathElement::Value(json!(2)),
        ];
        elements.sort();
        let rendered: Vec<String> = elements.iter().map(ToString::to_string).collect();
        assert_eq!(rendered, [".a", ".z", "[name=\"a\"]", "[=2]", "[=\"b\"]", "[1]"]);
    }

    #[test]
    fn numbers_compare_numerically() {
        assert_eq!(compare_values(&json!(1), &json!(1.0)), Ordering::Equal);
        assert_eq!(compare_values(&json!(2), &json!(10)), Ordering::Less);
        assert_eq!(compare_values(&json!(1.5), &json!("a")), Ordering::Less);
        assert!(values_equal(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!values_equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }

    #[test]
    fn paths_render_like_structured_merge_diff() {
        let path = vec![
            PathElement::field("spec"),
            PathElement::field("ports"),
            PathElement::Key(vec![("port".into(), json!(80)), ("protocol".into(), json!("TCP"))]),
            PathElement::field("name"),
        ];
        assert_eq!(path_string(&path), ".spec.ports[port=80,protocol=\"TCP\"].name");
        assert_eq!(path_string(&[PathElement::field("f"), PathElement::Value(json!(1.5))]), ".f[=1.5]");
    }
}
