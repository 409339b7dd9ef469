//! One schema node against one value, in the order and with the messages of kube-openapi's
//! `SchemaValidator`: type, junctors, string, format, number, array, enum, object.
//!
//! With an old value (updates), a node whose value is unchanged drops its errors (ratcheting);
//! correlation follows properties, `additionalProperties` and `map` list items, never junctors.

use serde_json::{Map, Value};

use super::junctors;
use super::number::{self, Num};
use super::result::{Code, Loc, OaError, Outcome, go_v};
use crate::core::field::go_quote;
use crate::schema::node::{Additional, Cursor, Schema, TypeBits};
use crate::schema::ratchet::{self, MapListIndex};

/// Validates `data` against `s`; `old` is the correlated old value on updates.
pub(super) fn validate(s: &Schema, data: &Value, loc: &Loc<'_>, old: Option<&Value>) -> Outcome {
    let mut res = validate_plain(s, data, loc, old);
    if let Some(old) = old
        && !res.is_valid()
        && ratchet::unchanged(s, data, old)
    {
        res.errors.clear();
    }
    res
}

fn validate_plain(s: &Schema, data: &Value, loc: &Loc<'_>, old: Option<&Value>) -> Outcome {
    let mut res = Outcome::default();
    if data.is_null() {
        res.merge(check_type(s, data, loc));
        res.merge(check_enum(s, data, loc));
        return res;
    }
    if !s.types.is_empty() || s.format.is_some() {
        res.merge(check_type(s, data, loc));
        res.inc();
    }
    res.merge(junctors::validate(s, data, loc));
    res.inc();
    match data {
        Value::String(text) => {
            res.merge(check_string(s, text, loc));
            res.inc();
            if let Some(format) = s.string_format {
                if !format.validates(text) {
                    let name = s.format.as_deref().unwrap_or_default();
                    res.add(invalid_type(loc, name, text));
                }
                res.inc();
            }
        }
        Value::Number(n) => {
            res.merge(number::check(s, n, loc));
            res.inc();
        }
        Value::Array(items) => {
            res.merge(check_array(s, items, loc, old));
            res.inc();
        }
        _ => {}
    }
    res.merge(check_enum(s, data, loc));
    res.inc();
    if let Value::Object(map) = data {
        res.merge(check_object(s, map, loc, old));
        res.inc();
    }
    res.inc();
    res
}

/// `<path> in body must be of type <type>: "<found>"`
fn invalid_type(loc: &Loc<'_>, expected: &str, found: &str) -> OaError {
    let name = loc.render();
    let message = format!("{name} in body must be of type {expected}: {}", go_quote(found));
    OaError::validation(Code::InvalidType, &name, Some(Value::String(found.to_string())), message)
}

fn check_type(s: &Schema, data: &Value, loc: &Loc<'_>) -> Outcome {
    let ok = Outcome { errors: Vec::new(), matches: 1 };
    let (found, found_bit, found_format) = match data {
        Value::Null => {
            if !s.types.is_empty() && !s.has_type_bits(TypeBits::NULL) && !s.nullable {
                return Outcome::error(invalid_type(loc, &s.types.join(","), "null"));
            }
            return ok;
        }
        Value::Bool(_) => ("boolean", TypeBits::BOOLEAN, ""),
        Value::String(_) => ("string", TypeBits::STRING, ""),
        Value::Number(n) => match Num::of(n) {
            Num::Int(_) => ("integer", TypeBits::INTEGER, "int64"),
            Num::Float(_) => ("number", TypeBits::NUMBER, "float64"),
        },
        Value::Array(_) => ("array", TypeBits::ARRAY, ""),
        Value::Object(_) => ("object", TypeBits::OBJECT, ""),
    };
    let format = s.format.as_deref().unwrap_or_default();
    let float_int = found_bit == TypeBits::NUMBER
        && s.has_type_bits(TypeBits::INTEGER)
        && matches!(data, Value::Number(n) if number::is_json_integer(n.as_f64().unwrap_or(0.5)));
    let int_float = found_bit == TypeBits::INTEGER && s.has_type_bits(TypeBits::NUMBER);
    let text_like = matches!(data, Value::String(_) | Value::Array(_));
    let type_fits = s.has_type_bits(found_bit) || float_int || int_float;
    // A format on a non-string value must fit the value's own type or format.
    if !(text_like || format.is_empty() || type_fits || found_format == format) {
        return Outcome::error(invalid_type(loc, format, found_format));
    }
    // Strings and arrays with a format on a non-numeric node pass the type check.
    let numeric = s.has_type_bits(TypeBits::NUMBER | TypeBits::INTEGER);
    if text_like && !(numeric || format.is_empty()) {
        return ok;
    }
    if !type_fits {
        return Outcome::error(invalid_type(loc, &s.types.join(","), found));
    }
    ok
}

fn check_string(s: &Schema, text: &str, loc: &Loc<'_>) -> Outcome {
    let value = || Some(Value::String(text.to_string()));
    let runes = text.chars().count() as i64;
    if let Some(max) = s.max_length
        && runes > max
    {
        let name = loc.render();
        let message = format!("{name} in body should be at most {max} chars long");
        return Outcome::error(OaError::validation(Code::TooLong, &name, value(), message).with_valid(max));
    }
    if let Some(min) = s.min_length
        && runes < min
    {
        let name = loc.render();
        let message = format!("{name} in body should be at least {min} chars long");
        return Outcome::error(OaError::validation(Code::Other, &name, value(), message).with_valid(min));
    }
    if let Some(pattern) = &s.pattern {
        let shown = match &pattern.compiled {
            Ok(re) if re.is_match(text) => return Outcome::default(),
            Ok(_) => pattern.source.clone(),
            Err(e) => format!("{}, but pattern is invalid: {e}", pattern.source),
        };
        let name = loc.render();
        let message = format!("{name} in body should match '{shown}'");
        return Outcome::error(OaError::validation(Code::Other, &name, value(), message));
    }
    Outcome::default()
}

fn check_enum(s: &Schema, data: &Value, loc: &Loc<'_>) -> Outcome {
    if s.enum_values.is_empty() || s.enum_values.iter().any(|allowed| enum_matches(data, allowed)) {
        return Outcome::default();
    }
    let name = loc.render();
    let list = format!("[{}]", s.enum_values.iter().map(go_v).collect::<Vec<_>>().join(" "));
    let message = format!("{name} in body should be one of {list}");
    Outcome::error(OaError::Validation {
        code: Code::Enum,
        name,
        value: Some(data.clone()),
        valid: None,
        values: s.enum_values.clone(),
        message,
    })
}

/// Whether `data` equals an allowed value once converted to the allowed value's Go type, as
/// kube-openapi compares them (an integer converts to a float, a float to an integer by
/// truncation, and an integer to the string of that code point).
fn enum_matches(data: &Value, allowed: &Value) -> bool {
    match (data, allowed) {
        (Value::Null, _) | (_, Value::Null) => false,
        (Value::Number(d), Value::Number(a)) => match (Num::of(d), Num::of(a)) {
            (Num::Int(x), Num::Int(y)) => x == y,
            (Num::Int(x), Num::Float(y)) => x as f64 == y,
            (Num::Float(x), Num::Int(y)) => x as i64 == y,
            (Num::Float(x), Num::Float(y)) => x == y,
        },
        (Value::Number(d), Value::String(a)) => match Num::of(d) {
            Num::Int(x) => {
                let c = u32::try_from(x).ok().and_then(char::from_u32).unwrap_or('\u{FFFD}');
                a.chars().eq(std::iter::once(c))
            }
            Num::Float(_) => false,
        },
        (Value::Bool(_), Value::Bool(_))
        | (Value::String(_), Value::String(_))
        | (Value::Array(_), Value::Array(_))
        | (Value::Object(_), Value::Object(_)) => data == allowed,
        _ => false,
    }
}

fn check_array(s: &Schema, items: &[Value], loc: &Loc<'_>, old: Option<&Value>) -> Outcome {
    let mut res = Outcome::default();
    if let Some(item_schema) = s.items() {
        let index = old.and_then(|o| MapListIndex::new(s, o));
        for (i, item) in items.iter().enumerate() {
            let old_item = index.as_ref().and_then(|idx| idx.get(s, item));
            res.merge(validate(item_schema, item, &loc.index(i), old_item));
        }
    }
    let size = items.len() as i64;
    if let Some(min) = s.min_items
        && size < min
    {
        let name = loc.render();
        let message = format!("{name} in body should have at least {min} items");
        res.add(OaError::validation(Code::Other, &name, Some(Value::from(size)), message).with_valid(min));
    }
    if let Some(max) = s.max_items
        && size > max
    {
        let name = loc.render();
        let message = format!("{name} in body should have at most {max} items");
        res.add(OaError::validation(Code::MaxItems, &name, Some(Value::from(size)), message).with_valid(max));
    }
    if s.unique_items && items.iter().enumerate().any(|(i, a)| items.iter().take(i).any(|b| a == b)) {
        let name = loc.render();
        let message = format!("{name} in body shouldn't contain duplicates");
        res.add(OaError::validation(Code::Other, &name, None, message));
    }
    res.inc();
    res
}

fn check_object(s: &Schema, map: &Map<String, Value>, loc: &Loc<'_>, old: Option<&Value>) -> Outcome {
    let mut res = Outcome::default();
    let size = map.len() as i64;
    if let Some(min) = s.min_properties
        && size < min
    {
        let name = loc.render();
        let message = format!("{name} in body should have at least {min} properties");
        res.add(OaError::validation(Code::Other, &name, Some(Value::from(size)), message).with_valid(min));
    }
    if let Some(max) = s.max_properties
        && size > max
    {
        let name = loc.render();
        let message = format!("{name} in body should have at most {max} properties");
        res.add(OaError::validation(Code::TooManyProperties, &name, Some(Value::from(size)), message).with_valid(max));
    }
    let old_child = |key: &str| {
        if loc.is_root() && (key == "kind" || key == "apiVersion") {
            return None;
        }
        old.and_then(|o| ratchet::old_field(s, map, o, key))
    };
    // One pass over the object's fields, in order, each with its property if it has one.
    let mut properties = Cursor::new(&s.properties);
    for (key, value) in map {
        match (properties.get(key), &s.additional_properties) {
            (Some(property), _) => res.merge(validate(property, value, &loc.field(key), old_child(key))),
            (None, Some(Additional::Schema(extra))) => res.merge(validate(extra, value, &loc.key(key), old_child(key))),
            (None, Some(Additional::Allows(false))) => {
                let name = loc.render();
                let message = format!("{name}.{key} in body is a forbidden property");
                res.add(OaError::validation(Code::Other, &name, Some(Value::String(key.clone())), message));
            }
            (None, _) => {}
        }
    }
    for key in s.required.iter().filter(|k| !map.contains_key(*k)) {
        let name = format!("{}.{key}", loc.render());
        let message = format!("{name} in body is required");
        res.add(OaError::validation(Code::Required, &name, None, message));
    }
    res
}
