//! Defaulting: filling in `default`s of a structural schema, and dropping `null`s the schema
//! does not allow before that, as Kubernetes does on every request and on every read.
//!
//! A default applies to a missing field, and to an explicit `null` of a field that is not
//! `nullable`; defaults are copied, then defaulted themselves.

use serde_json::Value;

use super::node::{Cursor, Schema};

fn non_nullable_null(x: &Value, s: Option<&Schema>) -> bool {
    x.is_null() && s.is_some_and(|s| !s.nullable)
}

/// Applies the schema's defaults to `x`, in place.
pub fn apply(x: &mut Value, s: Option<&Schema>) {
    let Some(s) = s else { return };
    match x {
        Value::Object(map) => {
            for (key, property) in &s.properties {
                let Some(default) = &property.default else { continue };
                match map.get_mut(key) {
                    None => {
                        map.insert(key.clone(), default.clone());
                    }
                    Some(value) if non_nullable_null(value, Some(property)) => *value = default.clone(),
                    Some(_) => {}
                }
            }
            let extra = s.additional_schema();
            let mut properties = Cursor::new(&s.properties);
            for (key, value) in map.iter_mut() {
                if let Some(property) = properties.get(key) {
                    apply(value, Some(property));
                } else if s.additional_properties.is_some() {
                    if non_nullable_null(value, extra)
                        && let Some(default) = extra.and_then(|e| e.default.as_ref())
                    {
                        *value = default.clone();
                    }
                    apply(value, extra);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.items();
            for item in items.iter_mut() {
                if non_nullable_null(item, item_schema)
                    && let Some(default) = item_schema.and_then(|i| i.default.as_ref())
                {
                    *item = default.clone();
                }
                apply(item, item_schema);
            }
        }
        _ => {}
    }
}

/// Drops fields whose value is `null` where the schema allows no `null` and has no default
/// (`PruneNonNullableNullsWithoutDefaults`).
pub fn prune_nulls(x: &mut Value, s: Option<&Schema>) {
    match x {
        Value::Object(map) => {
            map.retain(|key, value| {
                let field = s.and_then(|s| s.field_schema(key));
                let drop = value.is_null() && field.is_some_and(|f| !f.nullable && f.default.is_none());
                if !drop {
                    prune_nulls(value, field);
                }
                !drop
            });
        }
        Value::Array(items) => {
            let item_schema = s.and_then(Schema::items);
            for item in items.iter_mut() {
                prune_nulls(item, item_schema);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::compile::compile;
    use serde_json::json;

    fn defaulted(schema: Value, mut object: Value) -> Value {
        let s = compile(&schema);
        prune_nulls(&mut object, Some(&s));
        apply(&mut object, Some(&s));
        object
    }

    #[test]
    fn the_seed_crontab_defaults() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "cronSpec": {"type": "string", "default": "5 0 * * *"},
            "image": {"type": "string"},
            "replicas": {"type": "integer", "default": 1},
        }}}});
        assert_eq!(
            defaulted(schema, json!({"spec": {"image": "my-awesome-cron-image"}})),
            json!({"spec": {"cronSpec": "5 0 * * *", "image": "my-awesome-cron-image", "replicas": 1}})
        );
    }

    #[test]
    fn the_documentation_nullable_example() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "foo": {"type": "string", "nullable": false, "default": "default"},
            "bar": {"type": "string", "nullable": true},
            "baz": {"type": "string"},
        }}}});
        assert_eq!(
            defaulted(schema, json!({"spec": {"foo": null, "bar": null, "baz": null}})),
            json!({"spec": {"foo": "default", "bar": null}})
        );
    }

    #[test]
    fn defaults_reach_items_and_maps_and_are_defaulted_themselves() {
        let schema = json!({"type": "object", "properties": {
            "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string", "default": "A"}}}},
            "map": {"type": "object", "additionalProperties": {"type": "string", "default": "M"}},
            "nested": {"type": "object", "default": {}, "properties": {"n": {"type": "integer", "default": 3}}},
        }});
        assert_eq!(
            defaulted(schema, json!({"list": [{}, {"a": "x"}], "map": {"k": null}})),
            json!({"list": [{"a": "A"}, {"a": "x"}], "map": {"k": "M"}, "nested": {"n": 3}})
        );
    }

    #[test]
    fn unknown_nulls_stay() {
        let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        assert_eq!(defaulted(schema, json!({"a": null})), json!({"a": null}));
    }
}
