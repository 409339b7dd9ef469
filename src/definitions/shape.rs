//! The JSON types of a CustomResourceDefinition manifest's fields, checked before it is decoded
//! into the typed CustomResourceDefinition: every field of the wrong type (`minimum: "a"`, an
//! `x-kubernetes-validations` list among a schema's `properties`) is named by its path as
//! Kubernetes' field errors name it (`spec.versions[0].schema.openAPIV3Schema.properties[spec]
//! .minimum`), all of them rather than the first, and then left out so that the rest of the
//! manifest is decoded and checked too (a `type: strng` beside them is reported as well).
//! kube-apiserver stops at the first such field, with Go's decoding message.
//!
//! Owns the table of field types; unknown fields are `strict`'s, values' meaning `validate`'s.

use serde_json::Value;

use crate::core::field::{FieldError, Path};

/// What a field holds.
#[derive(Clone, Copy)]
enum Kind {
    String,
    Boolean,
    /// A whole number that fits 64 bits (`int64`).
    Integer,
    /// A whole number that fits 32 bits (`int32`).
    Integer32,
    Number,
    /// Any JSON value (defaults, examples, enum members).
    Any,
    List(&'static Kind),
    /// An object of arbitrary keys, each holding the kind.
    Map(&'static Kind),
    /// An object of known fields (others are `strict`'s to report).
    Fields(&'static [(&'static str, Kind)]),
    /// A JSONSchemaProps.
    Schema,
    /// A schema, or a boolean (`additionalProperties`, `additionalItems`).
    SchemaOrBool,
    /// A schema, or a list of schemas (`items`).
    SchemaOrList,
    /// A schema, or a list of strings (`dependencies`' values).
    SchemaOrStrings,
}

const STRINGS: Kind = Kind::List(&Kind::String);

const RULE: &[(&str, Kind)] = &[
    ("rule", Kind::String),
    ("message", Kind::String),
    ("messageExpression", Kind::String),
    ("reason", Kind::String),
    ("fieldPath", Kind::String),
    ("optionalOldSelf", Kind::Boolean),
];

const SCHEMA: &[(&str, Kind)] = &[
    ("id", Kind::String),
    ("$schema", Kind::String),
    ("$ref", Kind::String),
    ("description", Kind::String),
    ("type", Kind::String),
    ("format", Kind::String),
    ("title", Kind::String),
    ("default", Kind::Any),
    ("maximum", Kind::Number),
    ("exclusiveMaximum", Kind::Boolean),
    ("minimum", Kind::Number),
    ("exclusiveMinimum", Kind::Boolean),
    ("maxLength", Kind::Integer),
    ("minLength", Kind::Integer),
    ("pattern", Kind::String),
    ("maxItems", Kind::Integer),
    ("minItems", Kind::Integer),
    ("uniqueItems", Kind::Boolean),
    ("multipleOf", Kind::Number),
    ("enum", Kind::List(&Kind::Any)),
    ("maxProperties", Kind::Integer),
    ("minProperties", Kind::Integer),
    ("required", STRINGS),
    ("items", Kind::SchemaOrList),
    ("allOf", Kind::List(&Kind::Schema)),
    ("oneOf", Kind::List(&Kind::Schema)),
    ("anyOf", Kind::List(&Kind::Schema)),
    ("not", Kind::Schema),
    ("properties", Kind::Map(&Kind::Schema)),
    ("additionalProperties", Kind::SchemaOrBool),
    ("patternProperties", Kind::Map(&Kind::Schema)),
    ("dependencies", Kind::Map(&Kind::SchemaOrStrings)),
    ("additionalItems", Kind::SchemaOrBool),
    ("definitions", Kind::Map(&Kind::Schema)),
    ("externalDocs", Kind::Fields(&[("description", Kind::String), ("url", Kind::String)])),
    ("example", Kind::Any),
    ("nullable", Kind::Boolean),
    ("x-kubernetes-preserve-unknown-fields", Kind::Boolean),
    ("x-kubernetes-embedded-resource", Kind::Boolean),
    ("x-kubernetes-int-or-string", Kind::Boolean),
    ("x-kubernetes-list-map-keys", STRINGS),
    ("x-kubernetes-list-type", Kind::String),
    ("x-kubernetes-map-type", Kind::String),
    ("x-kubernetes-validations", Kind::List(&Kind::Fields(RULE))),
];

const NAMES: Kind = Kind::Fields(&[
    ("plural", Kind::String),
    ("singular", Kind::String),
    ("shortNames", STRINGS),
    ("kind", Kind::String),
    ("listKind", Kind::String),
    ("categories", STRINGS),
]);

const VERSION: &[(&str, Kind)] = &[
    ("name", Kind::String),
    ("served", Kind::Boolean),
    ("storage", Kind::Boolean),
    ("deprecated", Kind::Boolean),
    ("deprecationWarning", Kind::String),
    ("schema", Kind::Fields(&[("openAPIV3Schema", Kind::Schema)])),
    (
        "subresources",
        Kind::Fields(&[
            ("status", Kind::Fields(&[])),
            (
                "scale",
                Kind::Fields(&[
                    ("specReplicasPath", Kind::String),
                    ("statusReplicasPath", Kind::String),
                    ("labelSelectorPath", Kind::String),
                ]),
            ),
        ]),
    ),
    (
        "additionalPrinterColumns",
        Kind::List(&Kind::Fields(&[
            ("name", Kind::String),
            ("type", Kind::String),
            ("format", Kind::String),
            ("description", Kind::String),
            ("priority", Kind::Integer32),
            ("jsonPath", Kind::String),
        ])),
    ),
    ("selectableFields", Kind::List(&Kind::Fields(&[("jsonPath", Kind::String)]))),
];

const CONVERSION: Kind = Kind::Fields(&[
    ("strategy", Kind::String),
    (
        "webhook",
        Kind::Fields(&[
            (
                "clientConfig",
                Kind::Fields(&[
                    ("url", Kind::String),
                    ("caBundle", Kind::String),
                    (
                        "service",
                        Kind::Fields(&[
                            ("namespace", Kind::String),
                            ("name", Kind::String),
                            ("path", Kind::String),
                            ("port", Kind::Integer32),
                        ]),
                    ),
                ]),
            ),
            ("conversionReviewVersions", STRINGS),
        ]),
    ),
]);

const MANIFEST: Kind = Kind::Fields(&[
    ("apiVersion", Kind::String),
    ("kind", Kind::String),
    (
        "metadata",
        Kind::Fields(&[
            ("name", Kind::String),
            ("generateName", Kind::String),
            ("namespace", Kind::String),
            ("labels", Kind::Map(&Kind::String)),
            ("annotations", Kind::Map(&Kind::String)),
        ]),
    ),
    (
        "spec",
        Kind::Fields(&[
            ("group", Kind::String),
            ("names", NAMES),
            ("scope", Kind::String),
            ("versions", Kind::List(&Kind::Fields(VERSION))),
            ("conversion", CONVERSION),
            ("preserveUnknownFields", Kind::Boolean),
        ]),
    ),
    (
        "status",
        Kind::Fields(&[
            (
                "conditions",
                Kind::List(&Kind::Fields(&[
                    ("type", Kind::String),
                    ("status", Kind::String),
                    ("lastTransitionTime", Kind::String),
                    ("reason", Kind::String),
                    ("message", Kind::String),
                    ("observedGeneration", Kind::Integer),
                ])),
            ),
            ("acceptedNames", NAMES),
            ("storedVersions", STRINGS),
        ]),
    ),
]);

/// A field of the wrong type, and where it is in the document (a JSON pointer).
struct Misfit {
    error: FieldError,
    pointer: String,
}

/// One step down from a value to a field, a map's entry or a list's element.
#[derive(Clone, Copy)]
enum Step<'a> {
    Field(&'a str),
    Key(&'a str),
    Index(usize),
}

/// Where the walk is, from the manifest's root: kept on the stack as the walk goes down, and
/// rendered as a field path and a JSON pointer only for a misfit (issue 32: building both at
/// every node of upjet's deep schemas was most of this check's time).
#[derive(Clone, Copy)]
struct Trail<'a> {
    up: Option<(&'a Trail<'a>, Step<'a>)>,
}

/// The manifest's root.
const ROOT: Trail<'static> = Trail { up: None };

impl<'a> Trail<'a> {
    fn down(&'a self, step: Step<'a>) -> Trail<'a> {
        Trail { up: Some((self, step)) }
    }

    /// The field path and the JSON pointer of where the walk is.
    fn render(&self) -> (Path, String) {
        let mut steps = Vec::new();
        let mut at = self;
        while let Some((up, step)) = &at.up {
            steps.push(*step);
            at = up;
        }
        let (mut path, mut pointer) = (Path::nil(), String::new());
        for step in steps.iter().rev() {
            match step {
                Step::Field(name) => {
                    path = path.child(name);
                    pointer = format!("{pointer}/{}", token(name));
                }
                Step::Key(key) => {
                    path = path.key(key);
                    pointer = format!("{pointer}/{}", token(key));
                }
                Step::Index(i) => {
                    path = path.index(*i);
                    pointer = format!("{pointer}/{i}");
                }
            }
        }
        (path, pointer)
    }
}

/// Every field of `raw` whose JSON type is not its field's, as field errors; and `raw` without
/// them, for the typed decoding and the checks that follow.
pub fn check(raw: Value) -> (Vec<FieldError>, Value) {
    let mut misfits = Vec::new();
    walk(&raw, MANIFEST, &ROOT, &mut misfits);
    if misfits.is_empty() {
        return (Vec::new(), raw);
    }
    let mut kept = raw;
    // Last first, so that removing a list's element leaves the pointers before it as they are.
    for misfit in misfits.iter().rev() {
        remove(&mut kept, &misfit.pointer);
    }
    (misfits.into_iter().map(|m| m.error).collect(), kept)
}

/// The name of a JSON value's type, as the errors say it.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A JSON pointer's token for `name` (RFC 6901 escapes).
fn token(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

fn walk(value: &Value, kind: Kind, trail: &Trail<'_>, misfits: &mut Vec<Misfit>) {
    // A null is a field not set, as Go's decoding takes it.
    if value.is_null() {
        return;
    }
    let misfit = |expected: &str, misfits: &mut Vec<Misfit>| {
        let shown = match value {
            Value::Array(_) | Value::Object(_) => Value::String(type_name(value).to_string()),
            other => other.clone(),
        };
        let (path, pointer) = trail.render();
        misfits.push(Misfit {
            error: FieldError::type_invalid(path, shown, format!("must be of type {expected}")),
            pointer,
        });
    };
    match kind {
        Kind::Any => {}
        Kind::String if !value.is_string() => misfit("string", misfits),
        Kind::Boolean if !value.is_boolean() => misfit("boolean", misfits),
        Kind::Number if !value.is_number() => misfit("number", misfits),
        Kind::Integer if value.as_i64().is_none() => misfit("integer", misfits),
        Kind::Integer32 if value.as_i64().and_then(|n| i32::try_from(n).ok()).is_none() => {
            misfit("integer (32 bits)", misfits)
        }
        Kind::String | Kind::Boolean | Kind::Number | Kind::Integer | Kind::Integer32 => {}
        Kind::List(item) => match value {
            Value::Array(items) => {
                for (i, element) in items.iter().enumerate() {
                    walk(element, *item, &trail.down(Step::Index(i)), misfits);
                }
            }
            _ => misfit("array", misfits),
        },
        Kind::Map(item) => match value {
            Value::Object(map) => {
                for (key, element) in map {
                    walk_entry(element, *item, &trail.down(Step::Key(key)), key, misfits);
                }
            }
            _ => misfit("object", misfits),
        },
        Kind::Fields(fields) => match value {
            Value::Object(map) => {
                // The object's few fields found in the table, walked in the table's order (the
                // order of the errors): a lookup of each of a schema's 45 keywords in every
                // schema node was most of this walk (issue 32).
                let mut present: Vec<(usize, &Value)> = map
                    .iter()
                    .filter_map(|(name, element)| Some((fields.iter().position(|(known, _)| known == name)?, element)))
                    .collect();
                present.sort_unstable_by_key(|(at, _)| *at);
                for (at, element) in present {
                    if let Some((name, field)) = fields.get(at) {
                        walk(element, *field, &trail.down(Step::Field(name)), misfits);
                    }
                }
            }
            _ => misfit("object", misfits),
        },
        Kind::Schema => walk(value, Kind::Fields(SCHEMA), trail, misfits),
        Kind::SchemaOrBool if value.is_boolean() => {}
        Kind::SchemaOrBool => walk(value, Kind::Schema, trail, misfits),
        Kind::SchemaOrList if value.is_array() => walk(value, Kind::List(&Kind::Schema), trail, misfits),
        Kind::SchemaOrList => walk(value, Kind::Schema, trail, misfits),
        Kind::SchemaOrStrings if value.is_array() => walk(value, STRINGS, trail, misfits),
        Kind::SchemaOrStrings => walk(value, Kind::Schema, trail, misfits),
    }
}

/// An entry of a map: a schema under `properties` that is not an object is most likely one of
/// the schema's own keywords put one level too deep, which the error says.
fn walk_entry(value: &Value, kind: Kind, trail: &Trail<'_>, key: &str, misfits: &mut Vec<Misfit>) {
    let before = misfits.len();
    walk(value, kind, trail, misfits);
    let keyword = SCHEMA.iter().any(|(name, _)| *name == key);
    if matches!(kind, Kind::Schema) && keyword && misfits.len() > before && !value.is_object() {
        if let Some(misfit) = misfits.last_mut() {
            misfit.error.detail = format!(
                "must be of type object (a property's schema; {key} is a keyword of the schema holding properties, \
                 beside them)"
            );
        }
    }
}

/// Removes what `pointer` names from `value` (a list's element, an object's field).
fn remove(value: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else { return };
    let last = last.replace("~1", "/").replace("~0", "~");
    match value.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.remove(&last);
        }
        Some(Value::Array(items)) => {
            if let Ok(i) = last.parse::<usize>()
                && i < items.len()
            {
                items.remove(i);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(properties: Value) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "bads.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "bads", "kind": "Bad"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                        "properties": properties}}}}}]}})
    }

    fn messages(raw: &Value) -> Vec<String> {
        check(raw.clone()).0.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn every_misfit_is_named_where_it_is_and_left_out() {
        let raw = schema(json!({"size": {"type": "integer", "minimum": "a", "maxLength": 1.5},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", 1]}, "x-kubernetes-list-type": 3}}));
        let at = "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties";
        assert_eq!(
            messages(&raw),
            [
                format!("{at}[size].minimum: Invalid value: \"a\": must be of type number"),
                format!("{at}[size].maxLength: Invalid value: 1.5: must be of type integer"),
                format!("{at}[tags].x-kubernetes-list-type: Invalid value: 3: must be of type string"),
            ]
        );
        let (_, kept) = check(raw.clone());
        let size = kept.pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size").unwrap();
        assert_eq!(size, &json!({"type": "integer"}));
    }

    #[test]
    fn a_keyword_among_properties_is_named_with_a_hint() {
        let raw = schema(json!({"x-kubernetes-validations": [{"rule": "self.a > 0"}], "a": {"type": "integer"}}));
        assert_eq!(
            messages(&raw),
            ["spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[x-kubernetes-validations]: Invalid \
              value: \"array\": must be of type object (a property's schema; x-kubernetes-validations is a keyword \
              of the schema holding properties, beside them)"]
        );
    }

    #[test]
    fn list_elements_and_the_spec_outside_schemas() {
        let mut raw = schema(json!({}));
        raw["spec"]["versions"][0]["served"] = json!("yes");
        raw["spec"]["names"]["shortNames"] = json!(["b", 2]);
        raw["spec"]["versions"][0]["additionalPrinterColumns"] =
            json!([{"name": "A", "type": "string", "jsonPath": ".a", "priority": 4_294_967_296_u64}]);
        assert_eq!(
            messages(&raw),
            [
                "spec.names.shortNames[1]: Invalid value: 2: must be of type string",
                "spec.versions[0].served: Invalid value: \"yes\": must be of type boolean",
                "spec.versions[0].additionalPrinterColumns[0].priority: Invalid value: 4294967296: must be of type integer (32 bits)",
            ]
        );
        let (_, kept) = check(raw.clone());
        assert_eq!(kept["spec"]["names"]["shortNames"], json!(["b"]));
        assert!(kept["spec"]["versions"][0].get("served").is_none());
    }

    #[test]
    fn a_well_typed_manifest_is_kept_as_it_is() {
        let raw = schema(json!({"a": {"type": "integer", "default": "anything", "items": [{"type": "string"}],
            "additionalProperties": false, "dependencies": {"b": ["c"], "d": {"type": "object"}}}}));
        let (errors, kept) = check(raw.clone());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(kept, raw);
    }
}
