//! The fields a create sets, straight in their FieldsV1 form: what [`super::compare`] of the
//! placeholder (apiVersion and kind) with the new object reports as added, less the ignored fields (and all
//! below them) and the stripped members, encoded as [`super::super::fieldsv1::encode`] would
//! encode that set, in one walk of the new object, without building sets.
//!
//! Every node the walk reaches is a member: scalars, atomic lists and maps, empty or null
//! values and duplicated list items as leaves; granular maps and associative lists with their
//! insides as well. The walk validates the new object as it goes (what it does not descend
//! into through [`super::validate`]); anything the general path reports as an error (a value
//! that does not fit its type, a list item without an identity) ends the walk with
//! [`Fallback`], and the caller then takes the general path, which reports it.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::super::fieldsv1::element_key;
use super::super::path::PathElement;
use super::super::schema::{ListType, MapType, Schema, TypeId};
use super::super::set::Set;
use super::{Facet, item_element, type_facet, validate_node};

/// The walk met something only the general path handles.
#[derive(Debug)]
pub struct Fallback;

/// The FieldsV1 object of the fields `new` sets, less `ignored` (recursively, as
/// `recursive_difference`) and the members of `stripped` (as `difference`), when `new` is
/// valid (as [`super::validate`] with duplicates allowed, checked on the way) and holds the
/// `type_meta` fields (apiVersion and kind: the placeholder a create compares with) with
/// these values.
pub fn created_fields(
    schema: &Schema,
    t: TypeId,
    type_meta: &[(&str, &str)],
    new: &Value,
    ignored: &Set,
    stripped: &Set,
) -> Result<Map<String, Value>, Fallback> {
    let (Facet::Map(map), Some(fields)) = (type_facet(schema, Some(t), Some(new)), new.as_object()) else {
        return Err(Fallback);
    };
    if map.atomic || !type_meta.iter().all(|(k, v)| fields.get(*k).and_then(Value::as_str) == Some(*v)) {
        return Err(Fallback);
    }
    let walk = Walk { schema };
    let mut out = Map::new();
    for (key, value) in fields {
        // Equal in the placeholder: neither added nor changed, only checked.
        if type_meta.iter().any(|(k, _)| k == key) {
            walk.check(map.type_of(key), value)?;
            continue;
        }
        walk.field(map, key, value, Some(ignored), Some(stripped), &mut out)?;
    }
    Ok(out)
}

/// The member of `set` that is the field `name`; sets here are a few paths, so a scan.
fn field_member(set: Option<&Set>, name: &str) -> bool {
    set.is_some_and(|s| s.members().any(|m| matches!(m, PathElement::Field(f) if f == name)))
}

/// The child of `set` under the field `name`.
fn field_child<'a>(set: Option<&'a Set>, name: &str) -> Option<&'a Set> {
    set?.children().find(|(e, _)| matches!(e, PathElement::Field(f) if f == name)).map(|(_, s)| s)
}

struct Walk<'s> {
    schema: &'s Schema,
}

/// The node of a member without anything below it (`{}`), or nothing.
fn leaf(member: bool) -> Option<Value> {
    member.then(|| Value::Object(Map::new()))
}

/// The node of a container with `children` below it: `"."` marks it a member.
fn container(mut children: Map<String, Value>, member: bool) -> Option<Value> {
    if children.is_empty() {
        return leaf(member);
    }
    if member {
        children.insert(".".into(), Value::Object(Map::new()));
    }
    Some(Value::Object(children))
}

impl Walk<'_> {
    /// Validates what the walk does not descend into (leaves, ignored fields).
    fn check(&self, t: Option<TypeId>, value: &Value) -> Result<(), Fallback> {
        if validate_node(self.schema, t, value, true).is_empty() { Ok(()) } else { Err(Fallback) }
    }

    fn field(
        &self,
        map: &MapType,
        key: &str,
        value: &Value,
        ignored: Option<&Set>,
        stripped: Option<&Set>,
        out: &mut Map<String, Value>,
    ) -> Result<(), Fallback> {
        if field_member(ignored, key) {
            return self.check(map.type_of(key), value);
        }
        let member = !field_member(stripped, key);
        let node = self.node(map.type_of(key), value, field_child(ignored, key), field_child(stripped, key), member)?;
        if let Some(node) = node {
            let mut name = String::with_capacity(key.len() + 2);
            name.push_str("f:");
            name.push_str(key);
            out.insert(name, node);
        }
        Ok(())
    }

    fn node(
        &self,
        t: Option<TypeId>,
        value: &Value,
        ignored: Option<&Set>,
        stripped: Option<&Set>,
        member: bool,
    ) -> Result<Option<Value>, Fallback> {
        match type_facet(self.schema, t, Some(value)) {
            Facet::List(list) => match value.as_array() {
                Some(items) if list.associative && !items.is_empty() => {
                    Ok(container(self.items(list, items, ignored, stripped)?, member))
                }
                _ => self.check(t, value).map(|()| leaf(member)),
            },
            Facet::Map(map) => match value.as_object() {
                Some(fields) if !map.atomic && !fields.is_empty() => {
                    let mut out = Map::new();
                    for (key, item) in fields {
                        self.field(map, key, item, ignored, stripped, &mut out)?;
                    }
                    Ok(container(out, member))
                }
                _ => self.check(t, value).map(|()| leaf(member)),
            },
            Facet::Scalar(_) => self.check(t, value).map(|()| leaf(member)),
            Facet::Invalid => Err(Fallback),
        }
    }

    /// The items of an associative list: an item there once with its insides, an item there
    /// several times as a leaf (its insides cannot be told apart).
    fn items(
        &self,
        list: &ListType,
        items: &[Value],
        ignored: Option<&Set>,
        stripped: Option<&Set>,
    ) -> Result<Map<String, Value>, Fallback> {
        // The first item of each identity names the group, as the general compare keeps it.
        let mut groups: BTreeMap<PathElement, (usize, &Value)> = BTreeMap::new();
        for item in items {
            let element = item_element(self.schema, list, item).map_err(|_| Fallback)?;
            groups.entry(element).and_modify(|g| g.0 += 1).or_insert((1, item));
        }
        if groups.values().any(|(count, _)| *count > 1) {
            // Items there several times are not walked: checked, as validation reads them.
            for item in items {
                self.check(Some(list.element), item)?;
            }
        }
        let mut out = Map::new();
        for (element, (count, item)) in &groups {
            if ignored.is_some_and(|s| s.has_member(element)) {
                self.check(Some(list.element), item)?;
                continue;
            }
            let member = !stripped.is_some_and(|s| s.has_member(element));
            let node = if *count > 1 {
                leaf(member)
            } else {
                let (ignored, stripped) =
                    (ignored.and_then(|s| s.child(element)), stripped.and_then(|s| s.child(element)));
                self.node(Some(list.element), item, ignored, stripped, member)?
            };
            if let Some(node) = node {
                out.insert(element_key(element), node);
            }
        }
        Ok(out)
    }
}
