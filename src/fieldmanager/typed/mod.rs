//! Values walked together with their [`Schema`] (structured-merge-diff's `typed` package):
//! validation against the type tree, the set of fields a value sets, comparison of two
//! values, merging an applied configuration into a live object, and removing fields.
//!
//! Values are plain `serde_json::Value` trees; the walkers never re-parse anything. A value
//! takes the facet of its type that matches its JSON kind (scalar, list or map), as
//! `deduceAtom` picks it, so untyped and deduced nodes accept anything.

mod compare;
mod created;
mod fieldset;
mod merge;
mod render;

pub use compare::{Comparison, compare};
pub use created::created_fields;
pub use fieldset::{ensure_named_fields_are_members, reconcile_with_schema, to_field_set};
pub use merge::{merge, remove_items};

use std::fmt;

use serde_json::Value;

use super::path::PathElement;
use super::schema::{Atom, ListType, MapType, Scalar, Schema, TypeId};

/// A value that does not fit its type, with the path where it does not.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeError {
    pub path: String,
    pub message: String,
}

/// Every problem found, rendered as structured-merge-diff renders `ValidationErrors`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TypeErrors(pub Vec<TypeError>);

impl fmt::Display for TypeErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one =
            |e: &TypeError| if e.path.is_empty() { e.message.clone() } else { format!("{}: {}", e.path, e.message) };
        match self.0.as_slice() {
            [single] => f.write_str(&one(single)),
            many => {
                f.write_str("errors:")?;
                for e in many {
                    write!(f, "\n  {}", one(e))?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for TypeErrors {}

impl TypeErrors {
    fn one(message: impl Into<String>) -> TypeErrors {
        TypeErrors(vec![TypeError { path: String::new(), message: message.into() }])
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn extend(&mut self, other: TypeErrors) {
        self.0.extend(other.0);
    }

    /// Prefixes every path with `prefix` (errors come back up the walk); the prefix is only
    /// rendered when there is an error.
    fn prefixed(mut self, prefix: impl fmt::Display) -> TypeErrors {
        if self.0.is_empty() {
            return self;
        }
        let prefix = prefix.to_string();
        for e in &mut self.0 {
            e.path.insert_str(0, &prefix);
        }
        self
    }
}

/// The path prefix of a field (`.name`), rendered lazily.
struct FieldPrefix<'a>(&'a str);

impl fmt::Display for FieldPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, ".{}", self.0)
    }
}

/// The facet of a type a value takes.
#[derive(Clone, Copy)]
enum Facet<'s> {
    Scalar(Scalar),
    List(&'s ListType),
    Map(&'s MapType),
    /// The type allows nothing (a field without a type).
    Invalid,
}

impl Facet<'_> {
    fn same(&self, other: &Facet<'_>) -> bool {
        matches!(
            (self, other),
            (Facet::Scalar(_), Facet::Scalar(_))
                | (Facet::List(_), Facet::List(_))
                | (Facet::Map(_), Facet::Map(_))
                | (Facet::Invalid, Facet::Invalid)
        )
    }
}

/// `deduceAtom` then `handleAtom`: the facet matching the value's kind, else the first of
/// map, scalar, list the type has.
fn facet<'s>(atom: &'s Atom, value: Option<&Value>) -> Facet<'s> {
    match (value, &atom.scalar, &atom.list, &atom.map) {
        (Some(Value::Number(_) | Value::String(_) | Value::Bool(_)), Some(s), _, _) => Facet::Scalar(*s),
        (Some(Value::Array(_)), _, Some(l), _) => Facet::List(l),
        (Some(Value::Object(_)), _, _, Some(m)) => Facet::Map(m),
        (_, _, _, Some(m)) => Facet::Map(m),
        (_, Some(s), _, _) => Facet::Scalar(*s),
        (_, _, Some(l), _) => Facet::List(l),
        _ => Facet::Invalid,
    }
}

fn type_facet<'s>(schema: &'s Schema, t: Option<TypeId>, value: Option<&Value>) -> Facet<'s> {
    match t {
        Some(t) => facet(schema.atom(t), value),
        None => Facet::Invalid,
    }
}

const INVALID_ATOM: &str = "schema error: invalid atom: inlined";

/// The path element naming an item of an associative list (`listItemToPathElement`).
fn item_element(schema: &Schema, list: &ListType, item: &Value) -> Result<PathElement, String> {
    if !list.associative {
        return Err("invalid indexing of non-associative list".to_string());
    }
    if list.keys.is_empty() {
        return match item {
            Value::Object(_) => Err("associative list without keys has an element that's a map type".to_string()),
            Value::Array(_) => Err("not supported: associative list with lists as elements".to_string()),
            Value::Null => Err("associative list without keys has an element that's an explicit null".to_string()),
            scalar => Ok(PathElement::Value(scalar.clone())),
        };
    }
    let map = match item {
        Value::Null => return Err("associative list with keys may not have a null element".to_string()),
        Value::Object(map) => map,
        _ => return Err("associative list with keys may not have non-map elements".to_string()),
    };
    let mut fields = Vec::with_capacity(list.keys.len());
    for key in &list.keys {
        if let Some(value) = map.get(key) {
            fields.push((key.clone(), value.clone()));
            continue;
        }
        let Some(element_map) = schema.atom(list.element).map.as_ref() else {
            return Err(format!("couldn't find default value for {key}: associative list may not have non-map types"));
        };
        if let Some((_, Some(default))) = element_map.fields.get(key) {
            fields.push((key.clone(), default.clone()));
        }
    }
    if fields.is_empty() {
        let quoted: Vec<String> = list.keys.iter().map(|k| crate::core::field::go_quote(k)).collect();
        return Err(format!(
            "associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)",
            quoted.join(" ")
        ));
    }
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(PathElement::Key(fields))
}

/// Checks a scalar against its scalar type; `null` fits every type.
fn validate_scalar(scalar: Scalar, value: Option<&Value>, prefix: &str) -> TypeErrors {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return TypeErrors::default();
    };
    let message = match (scalar, value) {
        (Scalar::Numeric, Value::Number(_))
        | (Scalar::String, Value::String(_))
        | (Scalar::Boolean, Value::Bool(_))
        | (Scalar::Untyped, Value::Number(_) | Value::String(_) | Value::Bool(_)) => return TypeErrors::default(),
        (Scalar::Numeric, v) => format!("expected numeric (int or float), got {}", render::go_type(v)),
        (Scalar::String, v) => format!("expected string, got {}", render::value_sharp(v)),
        (Scalar::Boolean, v) => format!("expected boolean, got {}", render::value_v(v)),
        (Scalar::Untyped, v) => format!("expected any scalar, got {}", render::value_v(v)),
    };
    TypeErrors::one(format!("{prefix}{message}"))
}

/// Validates a value against a type (`TypedValue.Validate`); the live object is read with
/// `allow_duplicates` (it may already hold duplicate set or map-list items).
pub fn validate(schema: &Schema, t: TypeId, value: &Value, allow_duplicates: bool) -> Result<(), TypeErrors> {
    let errors = validate_node(schema, Some(t), value, allow_duplicates);
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

fn validate_node(schema: &Schema, t: Option<TypeId>, value: &Value, allow_duplicates: bool) -> TypeErrors {
    match type_facet(schema, t, Some(value)) {
        Facet::Scalar(s) => validate_scalar(s, Some(value), ""),
        Facet::List(list) => {
            let items = match value {
                Value::Null => return TypeErrors::default(),
                Value::Array(items) => items,
                other => return TypeErrors::one(format!("expected list, got {}", render::value_v(other))),
            };
            let mut errors = TypeErrors::default();
            let mut seen = std::collections::BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let element = if list.associative {
                    match item_element(schema, list, item) {
                        Ok(element) => element,
                        Err(e) => {
                            errors.0.push(TypeError { path: String::new(), message: format!("element {i}: {e}") });
                            return errors;
                        }
                    }
                } else {
                    PathElement::Index(i as i64)
                };
                if list.associative && !seen.insert(element.clone()) && !allow_duplicates {
                    errors.0.push(TypeError {
                        path: String::new(),
                        message: format!("duplicate entries for key {element}"),
                    });
                }
                errors.extend(validate_node(schema, Some(list.element), item, allow_duplicates).prefixed(&element));
            }
            errors
        }
        Facet::Map(map) => {
            let fields = match value {
                Value::Null => return TypeErrors::default(),
                Value::Object(fields) => fields,
                other => return TypeErrors::one(format!("expected map, got {}", render::value_v(other))),
            };
            let mut errors = TypeErrors::default();
            for (key, item) in fields {
                let prefix = FieldPrefix(key);
                let Some(item_type) = map.type_of(key) else {
                    errors.extend(TypeErrors::one("field not declared in schema").prefixed(&prefix));
                    break;
                };
                errors.extend(validate_node(schema, Some(item_type), item, allow_duplicates).prefixed(&prefix));
            }
            errors
        }
        Facet::Invalid => TypeErrors::one(INVALID_ATOM),
    }
}

#[cfg(test)]
mod tests;
