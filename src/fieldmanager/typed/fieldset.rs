//! Field sets from values and schemas: the fields a value sets (`ToFieldSet`), adding the
//! named parents of a set's paths (`EnsureNamedFieldsAreMembers`), and reconciling a set
//! written under an older schema with the current one (`ReconcileFieldSetWithSchema`).
//!
//! Who owns what: a scalar is owned where it is; an atomic list or map is owned whole, not its
//! insides; a granular list owns its items (`v:` or `k:{...}`) and their insides; a map's
//! undeclared keys and any empty or null field are owned as members too.

use std::collections::BTreeSet;

use serde_json::Value;

use super::super::path::{Path, PathElement};
use super::super::schema::{Schema, TypeId};
use super::super::set::Set;
use super::{Facet, item_element, type_facet};

/// The set of fields `value` sets. The value must have passed [`super::validate`]; items
/// whose identity cannot be computed are skipped.
pub fn to_field_set(schema: &Schema, t: TypeId, value: &Value) -> Set {
    let mut set = Set::new();
    let mut path = Vec::new();
    walk(schema, Some(t), value, &mut path, &mut set);
    set
}

fn walk(schema: &Schema, t: Option<TypeId>, value: &Value, path: &mut Path, set: &mut Set) {
    match type_facet(schema, t, Some(value)) {
        Facet::Scalar(_) => set.insert(path),
        Facet::List(list) => {
            if !list.associative {
                set.insert(path);
                return;
            }
            let Value::Array(items) = value else {
                return;
            };
            let elements: Vec<Option<PathElement>> = items.iter().map(|i| item_element(schema, list, i).ok()).collect();
            let mut seen = BTreeSet::new();
            let mut duplicates = BTreeSet::new();
            for element in elements.iter().flatten() {
                if !seen.insert(element) && duplicates.insert(element) {
                    // A duplicated item is owned as a whole: its insides cannot be told apart.
                    path.push(element.clone());
                    set.insert(path);
                    path.pop();
                }
            }
            for (item, element) in items.iter().zip(&elements) {
                let Some(element) = element else { continue };
                if duplicates.contains(element) {
                    continue;
                }
                path.push(element.clone());
                walk(schema, Some(list.element), item, path, set);
                set.insert(path);
                path.pop();
            }
        }
        Facet::Map(map) => {
            if map.atomic {
                set.insert(path);
                return;
            }
            let Value::Object(fields) = value else {
                return;
            };
            for (key, item) in fields {
                path.push(PathElement::Field(key.clone()));
                walk(schema, map.type_of(key), item, path, set);
                let empty = item.is_null() || item.as_object().is_some_and(|m| m.is_empty());
                if empty || !map.is_declared(key) {
                    set.insert(path);
                }
                path.pop();
            }
        }
        Facet::Invalid => {}
    }
}

/// `set` plus, as members, every declared field that is a parent of one of its paths (a set
/// with `.spec.a` then also owns `.spec`, but not a map key above `a`).
pub fn ensure_named_fields_are_members(schema: &Schema, t: TypeId, set: &Set) -> Set {
    ensure_named(schema, Some(t), set)
}

fn ensure_named(schema: &Schema, t: Option<TypeId>, set: &Set) -> Set {
    let atom = t.map(|t| schema.atom(t));
    let map = atom.and_then(|a| a.map.as_ref());
    let list = atom.and_then(|a| a.list.as_ref());
    let mut out = Set::new();
    for member in set.members() {
        out.insert_member(member.clone());
    }
    for (element, child) in set.children() {
        let child_type = match element {
            PathElement::Field(name) => {
                if map.is_some_and(|m| m.is_declared(name)) {
                    out.insert_member(element.clone());
                }
                map.and_then(|m| m.type_of(name))
            }
            PathElement::Key(_) => list.map(|l| l.element),
            _ => None,
        };
        let named = ensure_named(schema, child_type, child);
        if !named.is_empty() {
            out.descend(element).union_with(&named);
        }
    }
    out
}

/// Adjusts a set written when parts of the schema were granular and are now atomic: the
/// owner of anything inside such a part now owns the part whole. `None` when nothing
/// changes.
pub fn reconcile_with_schema(schema: &Schema, t: TypeId, set: &Set) -> Option<Set> {
    let mut changes = Changes::default();
    let mut path = Vec::new();
    reconcile_node(schema, Some(t), Some(set), false, &mut path, &mut changes);
    if changes.collapse.is_empty() {
        return None;
    }
    let mut out = set.clone();
    for path in &changes.collapse {
        out = out.recursive_difference(&Set::of(std::slice::from_ref(path)));
    }
    for path in &changes.collapse {
        out.insert(path);
    }
    Some(out)
}

#[derive(Default)]
struct Changes {
    /// Atomic parts owned piecewise: their paths are replaced by the part itself.
    collapse: Vec<Path>,
}

/// `path` borrows the set's elements: they are copied only into a change.
fn reconcile_node<'a>(
    schema: &Schema,
    t: Option<TypeId>,
    set: Option<&'a Set>,
    is_atomic: bool,
    path: &mut Vec<&'a PathElement>,
    changes: &mut Changes,
) {
    let Some(atom) = t.map(|t| schema.atom(t)) else {
        return;
    };
    // handleAtom's order: a type with a map facet is visited as a map.
    if let Some(map) = &atom.map {
        // Deduced maps without declared fields carry no list or map types to reconcile.
        if map.fields.is_empty() && map.element.is_some_and(|e| is_untyped(schema, e)) {
            return;
        }
        if !is_atomic && map.atomic {
            if set.is_some_and(|s| !s.is_empty()) {
                changes.collapse.push(owned(path));
            }
            return;
        }
        if let Some(set) = set {
            visit_children(
                set,
                path,
                changes,
                |element| match element {
                    PathElement::Field(name) => map.type_of(name),
                    _ => map.element,
                },
                schema,
            );
        }
    } else if atom.scalar.is_some() {
    } else if let Some(list) = &atom.list {
        if !is_atomic && !list.associative {
            changes.collapse.push(owned(path));
            return;
        }
        if let Some(set) = set {
            visit_children(set, path, changes, |_| Some(list.element), schema);
        }
    }
}

/// Visits the children that are not members, then the members, as the Go walker does.
fn owned(path: &[&PathElement]) -> Path {
    path.iter().map(|e| (*e).clone()).collect()
}

fn visit_children<'a>(
    set: &'a Set,
    path: &mut Vec<&'a PathElement>,
    changes: &mut Changes,
    type_of: impl Fn(&PathElement) -> Option<TypeId>,
    schema: &Schema,
) {
    let mut visit = |element: &'a PathElement, is_member: bool| {
        let Some(t) = type_of(element) else { return };
        let child = set.child(element);
        path.push(element);
        reconcile_node(schema, Some(t), child, is_member && child.is_none(), path, changes);
        path.pop();
    };
    for (element, _) in set.children() {
        if !set.has_member(element) {
            visit(element, false);
        }
    }
    for member in set.members() {
        visit(member, true);
    }
}

/// Whether a type is the deduced type or an untyped scalar (`isUntypedDeducedRef`).
fn is_untyped(schema: &Schema, t: TypeId) -> bool {
    t == super::super::schema::DEDUCED || schema.atom(t).scalar == Some(super::super::schema::Scalar::Untyped)
}
