//! Comparing two values of one type (`TypedValue.Compare`): which fields the right-hand side
//! added, modified or removed. Atomic lists and maps compare as one leaf; granular lists
//! compare item by item through their keys or values; a list item present several times is
//! compared as a group.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::super::path::{Path, PathElement, values_equal};
use super::super::schema::{ListType, MapType, Schema, TypeId};
use super::super::set::Set;
use super::{Facet, INVALID_ATOM, TypeError, TypeErrors, item_element, type_facet, validate_scalar};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comparison {
    pub removed: Set,
    pub modified: Set,
    pub added: Set,
}

impl Comparison {
    /// Drops the fields under `exclude` (and below them) from all three sets.
    pub fn excluding(mut self, exclude: &Set) -> Comparison {
        if exclude.is_empty() {
            return self;
        }
        self.removed.recursive_difference_with(exclude);
        self.modified.recursive_difference_with(exclude);
        self.added.recursive_difference_with(exclude);
        self
    }
}

/// Compares `lhs` (before) with `rhs` (after); both must have passed validation.
pub fn compare(schema: &Schema, t: TypeId, lhs: &Value, rhs: &Value) -> Result<Comparison, TypeErrors> {
    let mut walker = Walker { schema, comparison: Comparison::default(), path: Vec::new() };
    let errors = walker.node(Some(t), Some(lhs), Some(rhs));
    if errors.0.is_empty() { Ok(walker.comparison) } else { Err(errors) }
}

struct Walker<'s> {
    schema: &'s Schema,
    comparison: Comparison,
    path: Path,
}

impl Walker<'_> {
    fn node(&mut self, t: Option<TypeId>, lhs: Option<&Value>, rhs: Option<&Value>) -> TypeErrors {
        let left = type_facet(self.schema, t, lhs);
        let right = type_facet(self.schema, t, rhs);
        let mut errors = TypeErrors::default();
        let in_leaf = match (lhs, rhs) {
            (_, None) => self.facet(left, lhs, rhs, &mut errors),
            (None, _) => self.facet(right, lhs, rhs, &mut errors),
            _ if left.same(&right) => self.facet(right, lhs, rhs, &mut errors),
            _ => {
                // Both shapes are walked, as Kubernetes does when a value changes kind.
                self.facet(left, lhs, rhs, &mut errors);
                self.facet(right, lhs, rhs, &mut errors)
            }
        };
        if !in_leaf {
            if lhs.is_none() {
                self.comparison.added.insert(&self.path);
            } else if rhs.is_none() {
                self.comparison.removed.insert(&self.path);
            }
        }
        errors
    }

    /// Handles one facet; returns whether the node was compared as a leaf.
    fn facet(&mut self, facet: Facet<'_>, lhs: Option<&Value>, rhs: Option<&Value>, errors: &mut TypeErrors) -> bool {
        match facet {
            Facet::Scalar(s) => {
                let l = validate_scalar(s, lhs, "lhs: ");
                let r = validate_scalar(s, rhs, "rhs: ");
                if !l.0.is_empty() && !r.0.is_empty() {
                    errors.extend(l);
                    errors.extend(r);
                    return false;
                }
                self.leaf(lhs, rhs);
                true
            }
            Facet::List(list) => {
                let l = lhs.and_then(Value::as_array);
                let r = rhs.and_then(Value::as_array);
                let empty = l.is_none_or(|l| l.is_empty()) && r.is_none_or(|r| r.is_empty());
                if !list.associative || empty {
                    self.leaf(lhs, rhs);
                    return true;
                }
                errors.extend(self.list_items(
                    list,
                    l.map(Vec::as_slice).unwrap_or_default(),
                    r.map(Vec::as_slice).unwrap_or_default(),
                ));
                false
            }
            Facet::Map(map) => {
                let l = lhs.and_then(Value::as_object);
                let r = rhs.and_then(Value::as_object);
                let empty = l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty);
                if map.atomic || empty {
                    self.leaf(lhs, rhs);
                    return true;
                }
                errors.extend(self.map_items(map, l, r));
                false
            }
            Facet::Invalid => {
                errors.0.push(TypeError { path: String::new(), message: INVALID_ATOM.to_string() });
                false
            }
        }
    }

    fn leaf(&mut self, lhs: Option<&Value>, rhs: Option<&Value>) {
        match (lhs, rhs) {
            (None, _) => self.comparison.added.insert(&self.path),
            (_, None) => self.comparison.removed.insert(&self.path),
            (Some(l), Some(r)) if !values_equal(l, r) => self.comparison.modified.insert(&self.path),
            _ => {}
        }
    }

    fn child(
        &mut self,
        element: PathElement,
        t: Option<TypeId>,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
    ) -> TypeErrors {
        self.path.push(element);
        let errors = self.node(t, lhs, rhs);
        let element = self.path.pop();
        match element {
            Some(element) => errors.prefixed(element),
            None => errors,
        }
    }

    fn map_items(
        &mut self,
        map: &MapType,
        lhs: Option<&Map<String, Value>>,
        rhs: Option<&Map<String, Value>>,
    ) -> TypeErrors {
        let mut errors = TypeErrors::default();
        let mut keys: Vec<&String> = lhs.into_iter().flat_map(|m| m.keys()).collect();
        keys.extend(rhs.into_iter().flat_map(|m| m.keys()).filter(|k| lhs.is_none_or(|l| !l.contains_key(*k))));
        for key in keys {
            let (l, r) = (lhs.and_then(|m| m.get(key)), rhs.and_then(|m| m.get(key)));
            errors.extend(self.child(PathElement::Field(key.clone()), map.type_of(key), l, r));
        }
        errors
    }

    fn list_items(&mut self, list: &ListType, lhs: &[Value], rhs: &[Value]) -> TypeErrors {
        let mut errors = TypeErrors::default();
        // Every item identity once, left items first; each with its items on both sides.
        let mut order: Vec<PathElement> = Vec::new();
        let mut groups: BTreeMap<PathElement, (Vec<&Value>, Vec<&Value>)> = BTreeMap::new();
        for (side, items) in [(0, lhs), (1, rhs)] {
            for (i, item) in items.iter().enumerate() {
                let element = match item_element(self.schema, list, item) {
                    Ok(element) => element,
                    Err(e) => {
                        errors.0.push(TypeError { path: String::new(), message: format!("element {i}: {e}") });
                        continue;
                    }
                };
                let group = groups.entry(element.clone()).or_insert_with(|| {
                    order.push(element);
                    (Vec::new(), Vec::new())
                });
                if side == 0 { group.0.push(item) } else { group.1.push(item) }
            }
        }
        for element in order {
            let Some((l, r)) = groups.get(&element) else { continue };
            match (l.len(), r.len()) {
                (0..=1, 0..=1) => {
                    errors.extend(self.child(element, Some(list.element), l.first().copied(), r.first().copied()))
                }
                (2.., 2..) => {
                    let equal = l.len() == r.len() && l.iter().zip(r).all(|(a, b)| values_equal(a, b));
                    if !equal {
                        self.insert_item(element, Which::Modified);
                    }
                }
                (2.., _) => {
                    if let Some(first) = r.first() {
                        errors.extend(self.child(element.clone(), Some(list.element), None, Some(first)));
                    }
                    self.insert_item(element, Which::Removed);
                }
                (_, _) => {
                    if let Some(first) = l.first() {
                        errors.extend(self.child(element.clone(), Some(list.element), Some(first), None));
                    }
                    self.insert_item(element, Which::Added);
                }
            }
        }
        errors
    }

    fn insert_item(&mut self, element: PathElement, which: Which) {
        self.path.push(element);
        match which {
            Which::Added => self.comparison.added.insert(&self.path),
            Which::Modified => self.comparison.modified.insert(&self.path),
            Which::Removed => self.comparison.removed.insert(&self.path),
        }
        self.path.pop();
    }
}

enum Which {
    Added,
    Modified,
    Removed,
}
