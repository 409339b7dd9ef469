//! Compiling a version's `openAPIV3Schema` (as JSON) into the [`Schema`] tree, once, when the
//! definition loads: formats resolved as Kubernetes resolves them, patterns compiled with Go
//! semantics, `x-kubernetes-int-or-string` turned into its two types.
//!
//! Compiling never fails: the definition checks (`schema::check`) refuse what Kubernetes
//! refuses before a schema is compiled for serving, and unknown or ill-typed keywords are
//! ignored here as Go's decoder ignores them.

use serde_json::{Map, Value};

use super::formats::{self, Format};
use super::node::{Additional, Schema, TypeBits};
use super::pattern::Pattern;

/// Compiles a schema object; anything that is not an object compiles to the empty schema.
pub fn compile(raw: &Value) -> Schema {
    match raw {
        Value::Object(map) => compile_map(map),
        _ => Schema::default(),
    }
}

fn compile_map(m: &Map<String, Value>) -> Schema {
    let str_of = |key: &str| m.get(key).and_then(Value::as_str).map(str::to_string);
    let bool_of = |key: &str| m.get(key).and_then(Value::as_bool).unwrap_or(false);
    let f64_of = |key: &str| m.get(key).and_then(Value::as_f64);
    let i64_of = |key: &str| m.get(key).and_then(Value::as_i64);
    let list_of = |key: &str| -> Vec<Schema> {
        m.get(key).and_then(Value::as_array).map(|a| a.iter().map(compile).collect()).unwrap_or_default()
    };
    let strings_of = |key: &str| -> Vec<String> {
        m.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default()
    };

    let type_name = str_of("type").unwrap_or_default();
    let int_or_string = bool_of("x-kubernetes-int-or-string");
    let types: Vec<String> = if int_or_string {
        vec!["integer".to_string(), "string".to_string()]
    } else if type_name.is_empty() {
        Vec::new()
    } else {
        vec![type_name.clone()]
    };
    let single_type = if types.len() == 1 { type_name.as_str() } else { "" };
    let format = formats::supported(single_type, &str_of("format").unwrap_or_default());
    let string_format = format.as_deref().and_then(Format::by_name);

    let type_bits = types.iter().fold(0, |bits, t| bits | TypeBits::of(t));
    let mut schema = Schema {
        type_name,
        types,
        type_bits,
        nullable: bool_of("nullable"),
        default: m.get("default").filter(|d| !d.is_null()).cloned(),
        preserve_unknown_fields: bool_of("x-kubernetes-preserve-unknown-fields"),
        embedded_resource: bool_of("x-kubernetes-embedded-resource"),
        int_or_string,
        list_type: str_of("x-kubernetes-list-type"),
        list_map_keys: strings_of("x-kubernetes-list-map-keys"),
        map_type: str_of("x-kubernetes-map-type"),
        format,
        string_format,
        maximum: f64_of("maximum"),
        exclusive_maximum: bool_of("exclusiveMaximum"),
        minimum: f64_of("minimum"),
        exclusive_minimum: bool_of("exclusiveMinimum"),
        multiple_of: f64_of("multipleOf"),
        max_length: i64_of("maxLength"),
        min_length: i64_of("minLength"),
        pattern: str_of("pattern").filter(|p| !p.is_empty()).map(|p| Pattern::new(&p)),
        max_items: i64_of("maxItems"),
        min_items: i64_of("minItems"),
        unique_items: bool_of("uniqueItems"),
        max_properties: i64_of("maxProperties"),
        min_properties: i64_of("minProperties"),
        enum_values: m.get("enum").and_then(Value::as_array).cloned().unwrap_or_default(),
        required: strings_of("required"),
        all_of: list_of("allOf"),
        any_of: list_of("anyOf"),
        one_of: list_of("oneOf"),
        not: m.get("not").filter(|n| n.is_object()).map(|n| Box::new(compile(n))),
        properties: m
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.iter().map(|(k, v)| (k.clone(), compile(v))).collect())
            .unwrap_or_default(),
        items: m.get("items").filter(|i| i.is_object()).map(|i| Box::new(compile(i))),
        additional_properties: match m.get("additionalProperties") {
            Some(Value::Bool(b)) => Some(Additional::Allows(*b)),
            Some(s @ Value::Object(_)) => Some(Additional::Schema(Box::new(compile(s)))),
            _ => None,
        },
        has_rules: m.get("x-kubernetes-validations").and_then(Value::as_array).is_some_and(|r| !r.is_empty()),
        has_embedded: false,
        has_list_checks: false,
        has_defaults: false,
    };
    let below = |flag: fn(&Schema) -> bool| {
        schema.items().is_some_and(flag)
            || schema.additional_schema().is_some_and(flag)
            || schema.properties.values().any(flag)
    };
    let (rules, embedded, lists) = (below(|c| c.has_rules), below(|c| c.has_embedded), below(|c| c.has_list_checks));
    let defaults = below(|c| c.has_defaults);
    schema.has_rules |= rules;
    schema.has_embedded = schema.embedded_resource || embedded;
    schema.has_list_checks = schema.is_list_type("set") || schema.is_list_type("map") || lists;
    schema.has_defaults = schema.default.is_some() || defaults;
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn int_or_string_has_two_types_and_keeps_string_formats() {
        let s = compile(&json!({"x-kubernetes-int-or-string": true, "format": "date"}));
        assert_eq!(s.types, ["integer", "string"]);
        assert_eq!(s.string_format, Some(Format::Date));
    }

    #[test]
    fn unsupported_formats_are_dropped() {
        let s = compile(&json!({"type": "integer", "format": "uint8"}));
        assert_eq!(s.format, None);
        let s = compile(&json!({"type": "string", "format": "int32"}));
        assert_eq!(s.format, None);
    }

    #[test]
    fn structure() {
        let s = compile(&json!({
            "type": "object",
            "properties": {"a": {"type": "array", "items": {"type": "string", "pattern": "^x"}}},
            "additionalProperties": false,
            "default": null,
        }));
        assert!(s.default.is_none());
        let items = s.properties["a"].items().unwrap();
        assert!(items.pattern.as_ref().unwrap().compiled.is_ok());
        assert!(matches!(s.additional_properties, Some(Additional::Allows(false))));
    }
}
