//! Merging an applied configuration into a live object (`TypedValue.Merge` with the
//! keep-right rule) and removing fields from a value (`RemoveItems`).
//!
//! Merge: scalars, atomic lists and atomic maps take the configuration's value; granular maps
//! merge key by key; granular lists merge item by item, keeping the configuration's order
//! for its items and the live object's items that the configuration does not name where
//! they were.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::super::path::PathElement;
use super::super::schema::{ListType, MapType, Schema, TypeId};
use super::super::set::Set;
use super::{Facet, INVALID_ATOM, TypeError, TypeErrors, item_element, type_facet, validate_scalar};

/// `lhs` with `rhs` merged over it. `None` when the result is empty.
pub fn merge(schema: &Schema, t: TypeId, lhs: &Value, rhs: &Value) -> Result<Option<Value>, TypeErrors> {
    let (out, errors) = node(schema, Some(t), Some(lhs), Some(rhs));
    if errors.0.is_empty() { Ok(out) } else { Err(errors) }
}

fn node(schema: &Schema, t: Option<TypeId>, lhs: Option<&Value>, rhs: Option<&Value>) -> (Option<Value>, TypeErrors) {
    if lhs.is_none() && rhs.is_none() {
        return (None, TypeErrors::one("at least one of lhs and rhs must be provided"));
    }
    let left = type_facet(schema, t, lhs);
    let right = type_facet(schema, t, rhs);
    match (lhs, rhs) {
        (_, None) => facet(schema, left, lhs, rhs),
        (None, _) => facet(schema, right, lhs, rhs),
        _ if left.same(&right) => facet(schema, right, lhs, rhs),
        _ => {
            // The left shape is still checked; the right one decides the result.
            let (_, mut errors) = facet(schema, left, lhs, rhs);
            let (out, more) = facet(schema, right, lhs, rhs);
            errors.extend(more);
            (out, errors)
        }
    }
}

fn keep_right(lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
    rhs.or(lhs).cloned()
}

fn facet(schema: &Schema, facet: Facet<'_>, lhs: Option<&Value>, rhs: Option<&Value>) -> (Option<Value>, TypeErrors) {
    match facet {
        Facet::Scalar(s) => {
            let l = validate_scalar(s, lhs, "lhs: ");
            let r = validate_scalar(s, rhs, "rhs: ");
            if !l.0.is_empty() && !r.0.is_empty() {
                let mut errors = l;
                errors.extend(r);
                return (None, errors);
            }
            (keep_right(lhs, rhs), TypeErrors::default())
        }
        Facet::List(list) => {
            let l = lhs.and_then(Value::as_array);
            let r = rhs.and_then(Value::as_array);
            let empty = l.is_none_or(|l| l.is_empty()) && r.is_none_or(|r| r.is_empty());
            if !list.associative || empty {
                return (keep_right(lhs, rhs), TypeErrors::default());
            }
            list_items(schema, list, l.map(Vec::as_slice).unwrap_or_default(), r.map(Vec::as_slice).unwrap_or_default())
        }
        Facet::Map(map) => {
            let l = lhs.and_then(Value::as_object);
            let r = rhs.and_then(Value::as_object);
            let empty = l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty);
            if map.atomic || empty {
                return (keep_right(lhs, rhs), TypeErrors::default());
            }
            map_items(schema, map, l, r)
        }
        Facet::Invalid => {
            (None, TypeErrors(vec![TypeError { path: String::new(), message: INVALID_ATOM.to_string() }]))
        }
    }
}

fn map_items(
    schema: &Schema,
    map: &MapType,
    lhs: Option<&Map<String, Value>>,
    rhs: Option<&Map<String, Value>>,
) -> (Option<Value>, TypeErrors) {
    let mut out = Map::new();
    let mut errors = TypeErrors::default();
    let keys: BTreeSet<&String> = lhs.into_iter().chain(rhs).flat_map(|m| m.keys()).collect();
    for key in keys {
        let (child, more) = node(schema, map.type_of(key), lhs.and_then(|m| m.get(key)), rhs.and_then(|m| m.get(key)));
        errors.extend(more.prefixed(super::FieldPrefix(key)));
        if let Some(child) = child {
            out.insert(key.clone(), child);
        }
    }
    ((!out.is_empty()).then_some(Value::Object(out)), errors)
}

/// An item as indexed for merging: a duplicated live item merges as if it were null.
#[derive(Clone, Copy)]
enum Observed<'v> {
    One(&'v Value),
    Duplicated,
}

impl<'v> Observed<'v> {
    fn value(self) -> &'v Value {
        static NULL: Value = Value::Null;
        match self {
            Observed::One(v) => v,
            Observed::Duplicated => &NULL,
        }
    }
}

type Indexed<'v> = (Vec<PathElement>, BTreeMap<PathElement, Observed<'v>>);

fn index<'v>(
    schema: &Schema,
    list: &ListType,
    items: &'v [Value],
    allow_duplicates: bool,
) -> Result<Indexed<'v>, TypeErrors> {
    let mut errors = TypeErrors::default();
    let mut elements = Vec::with_capacity(items.len());
    let mut observed = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let element = match item_element(schema, list, item) {
            Ok(element) => element,
            Err(e) => {
                errors.0.push(TypeError { path: String::new(), message: format!("element {i}: {e}") });
                continue;
            }
        };
        match observed.get(&element) {
            Some(_) if !allow_duplicates => {
                errors
                    .0
                    .push(TypeError { path: String::new(), message: format!("duplicate entries for key {element}") });
                continue;
            }
            Some(_) => {
                observed.insert(element.clone(), Observed::Duplicated);
            }
            None => {
                observed.insert(element.clone(), Observed::One(item));
            }
        }
        elements.push(element);
    }
    if errors.0.is_empty() { Ok((elements, observed)) } else { Err(errors) }
}

fn list_items(schema: &Schema, list: &ListType, lhs: &[Value], rhs: &[Value]) -> (Option<Value>, TypeErrors) {
    let mut errors = TypeErrors::default();
    let right = index(schema, list, rhs, false);
    let left = index(schema, list, lhs, true);
    let ((r_elements, r_observed), (l_elements, l_observed)) = match (right, left) {
        (Ok(r), Ok(l)) => (r, l),
        (r, l) => {
            if let Err(e) = r {
                errors.extend(e);
            }
            if let Err(e) = l {
                errors.extend(e);
            }
            return (None, errors);
        }
    };
    // The items both sides name, in the configuration's order.
    let mut shared = r_elements.iter().filter(|e| l_observed.contains_key(*e));
    let mut next_shared = shared.next();
    let mut merged_right = BTreeSet::new();
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    let mut merge_item = |element: &PathElement, l: Option<&Value>, r: Option<&Value>, out: &mut Vec<Value>| {
        let (child, more) = node(schema, Some(list.element), l, r);
        errors.extend(more.prefixed(element));
        if let Some(child) = child {
            out.push(child);
        }
    };
    let (mut li, mut ri) = (0, 0);
    while li < l_elements.len() || ri < r_elements.len() {
        if let (Some(le), Some(re)) = (l_elements.get(li), r_elements.get(ri)) {
            if le == re {
                merged_right.insert(le.clone());
                let l = l_observed.get(le).map(|o| o.value());
                let r = r_observed.get(re).map(|o| o.value());
                merge_item(le, l, r, &mut out);
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if r_observed.contains_key(le) && next_shared.is_some_and(|n| n != le) {
                // A shared item the configuration places later: it is merged there.
                li += 1;
                continue;
            }
        }
        if let Some(le) = l_elements.get(li) {
            if !r_observed.contains_key(le) {
                merge_item(le, lhs.get(li), None, &mut out);
                li += 1;
                continue;
            } else if merged_right.contains(le) {
                li += 1;
            }
        }
        if let Some(re) = r_elements.get(ri) {
            merged_right.insert(re.clone());
            let l = l_observed.get(re).map(|o| o.value());
            let r = r_observed.get(re).map(|o| o.value());
            merge_item(re, l, r, &mut out);
            ri += 1;
            if next_shared == Some(re) {
                next_shared = shared.next();
            }
        }
    }
    ((!out.is_empty()).then_some(Value::Array(out)), errors)
}

/// `value` without the fields of `set`: members go with everything below them; an atomic
/// part named below its root is dropped whole; a map or list left empty becomes null.
pub fn remove_items(schema: &Schema, t: TypeId, value: &Value, set: &Set) -> Value {
    remove(schema, Some(t), value, set).unwrap_or(Value::Null)
}

fn remove(schema: &Schema, t: Option<TypeId>, value: &Value, set: &Set) -> Option<Value> {
    match type_facet(schema, t, Some(value)) {
        Facet::Scalar(_) => Some(value.clone()),
        Facet::List(list) => {
            let items = value.as_array().filter(|items| !items.is_empty() && list.associative)?;
            let mut kept = Vec::with_capacity(items.len());
            for item in items {
                let Ok(element) = item_element(schema, list, item) else {
                    kept.push(item.clone());
                    continue;
                };
                if set.has_member(&element) {
                    continue;
                }
                match set.child(&element).filter(|s| !s.is_empty()) {
                    Some(sub) => kept.push(remove(schema, Some(list.element), item, sub).unwrap_or(Value::Null)),
                    None => kept.push(item.clone()),
                }
            }
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Facet::Map(map) => {
            let fields = value.as_object().filter(|m| !m.is_empty() && !map.atomic)?;
            let mut kept = Map::new();
            for (key, item) in fields {
                let element = PathElement::Field(key.clone());
                if set.has_member(&element) {
                    continue;
                }
                let item = match set.child(&element).filter(|s| !s.is_empty()) {
                    Some(sub) => remove(schema, map.type_of(key), item, sub).unwrap_or(Value::Null),
                    None => item.clone(),
                };
                kept.insert(key.clone(), item);
            }
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        Facet::Invalid => None,
    }
}
