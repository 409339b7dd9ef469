//! The type tree server-side apply merges and tracks ownership with (structured-merge-diff's
//! `schema.Schema`), compiled once per definition version from its `openAPIV3Schema`, as
//! kube-openapi's `schemaconv` and the CRD OpenAPI builder derive it:
//!
//! - objects are maps: `properties` become named fields; unknown keys follow
//!   `additionalProperties`, or are deduced under `x-kubernetes-preserve-unknown-fields` (and
//!   in objects without properties); `x-kubernetes-map-type: atomic` makes a map one leaf;
//! - arrays are lists: atomic unless `x-kubernetes-list-type` is `set` (items owned as `v:`)
//!   or `map` (items owned as `k:{...}` by `x-kubernetes-list-map-keys`);
//! - nodes without a type accept any scalar, list or map;
//! - the root and every `x-kubernetes-embedded-resource` get `apiVersion`, `kind` and an
//!   ObjectMeta `metadata` (labels and annotations granular, finalizers a set,
//!   ownerReferences a map-list keyed by uid of atomic items).
//!
//! Invariant: built at load, never per request; lookups are by index into an arena.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion;
use serde_json::Value;

/// An index into a [`Schema`]'s arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TypeId(u32);

/// Any scalar; lists of it and maps of it are atomic (`__untyped_atomic_`).
pub const UNTYPED: TypeId = TypeId(0);
/// A type deduced from the value: any scalar, atomic lists, granular maps of deduced values
/// (`__untyped_deduced_`).
pub const DEDUCED: TypeId = TypeId(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    Numeric,
    String,
    Boolean,
    Untyped,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ListType {
    pub element: TypeId,
    /// `set` and `map` lists; the others are atomic.
    pub associative: bool,
    /// `x-kubernetes-list-map-keys` of a map-list; empty for sets.
    pub keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct MapType {
    /// Declared fields: their type and default value. foldhash: looked up for every field of
    /// every write (schema field names are the definition's own).
    pub fields: HashMap<String, (TypeId, Option<Value>), foldhash::fast::RandomState>,
    /// The type of undeclared keys; `None` when they are not allowed.
    pub element: Option<TypeId>,
    pub atomic: bool,
}

impl MapType {
    /// The type of a key: its declared type, else the element type.
    pub fn type_of(&self, key: &str) -> Option<TypeId> {
        self.fields.get(key).map(|(t, _)| *t).or(self.element)
    }

    pub fn is_declared(&self, key: &str) -> bool {
        self.fields.contains_key(key)
    }
}

/// The possible shapes of a value of one type; a value takes the one matching its JSON kind.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Atom {
    pub scalar: Option<Scalar>,
    pub list: Option<ListType>,
    pub map: Option<MapType>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    atoms: Vec<Atom>,
    root: TypeId,
}

impl Schema {
    pub fn root(&self) -> TypeId {
        self.root
    }

    pub fn atom(&self, id: TypeId) -> &Atom {
        static EMPTY: Atom = Atom { scalar: None, list: None, map: None };
        self.atoms.get(id.0 as usize).unwrap_or(&EMPTY)
    }

    /// A schema whose root is deduced from values: every map granular, every list atomic (the
    /// type of definitions without a schema).
    pub fn deduced() -> Schema {
        Schema { atoms: base_atoms(), root: DEDUCED }
    }

    /// The schema of a custom resource version from its `openAPIV3Schema`.
    pub fn custom_resource(openapi: Option<&Value>) -> Schema {
        let Some(root) = openapi.filter(|v| v.is_object()) else {
            return Schema::deduced();
        };
        let mut builder = Builder { atoms: base_atoms(), object_meta: None };
        let root = builder.node(root, false, true);
        // Kept for the definition's lifetime: without the room left by growth.
        builder.atoms.shrink_to_fit();
        Schema { atoms: builder.atoms, root }
    }

    /// The schema of a definition version, compiled once when the definition loads.
    pub fn of_version(version: &CustomResourceDefinitionVersion) -> Arc<Schema> {
        let openapi = version.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref());
        let json = openapi.and_then(|s| serde_json::to_value(s).ok());
        Arc::new(Schema::custom_resource(json.as_ref()))
    }

    /// The schema of `autoscaling/v1` `Scale`, the body of the scale subresource.
    pub fn scale() -> Schema {
        let mut builder = Builder { atoms: base_atoms(), object_meta: None };
        let numeric = builder.push(Atom { scalar: Some(Scalar::Numeric), ..Atom::default() });
        let string = builder.push(Atom { scalar: Some(Scalar::String), ..Atom::default() });
        let spec = builder.push_map(&[("replicas", numeric)], None, false);
        let status = builder.push_map(&[("replicas", numeric), ("selector", string)], None, false);
        let meta = builder.object_meta();
        let root = builder.push_map(
            &[("apiVersion", string), ("kind", string), ("metadata", meta), ("spec", spec), ("status", status)],
            None,
            false,
        );
        Schema { atoms: builder.atoms, root }
    }
}

impl Default for Schema {
    fn default() -> Schema {
        Schema::deduced()
    }
}

fn base_atoms() -> Vec<Atom> {
    vec![
        Atom {
            scalar: Some(Scalar::Untyped),
            list: Some(ListType { element: UNTYPED, associative: false, keys: Vec::new() }),
            map: Some(MapType { element: Some(UNTYPED), atomic: true, ..MapType::default() }),
        },
        Atom {
            scalar: Some(Scalar::Untyped),
            list: Some(ListType { element: UNTYPED, associative: false, keys: Vec::new() }),
            map: Some(MapType { element: Some(DEDUCED), atomic: false, ..MapType::default() }),
        },
    ]
}

struct Builder {
    atoms: Vec<Atom>,
    object_meta: Option<TypeId>,
}

impl Builder {
    fn push(&mut self, atom: Atom) -> TypeId {
        self.atoms.push(atom);
        TypeId((self.atoms.len() - 1) as u32)
    }

    fn push_map(&mut self, fields: &[(&str, TypeId)], element: Option<TypeId>, atomic: bool) -> TypeId {
        let fields = fields.iter().map(|(name, t)| (name.to_string(), (*t, None))).collect();
        self.push(Atom { map: Some(MapType { fields, element, atomic }), ..Atom::default() })
    }

    /// ObjectMeta, shared by the root and embedded resources.
    fn object_meta(&mut self) -> TypeId {
        if let Some(id) = self.object_meta {
            return id;
        }
        let string = self.push(Atom { scalar: Some(Scalar::String), ..Atom::default() });
        let numeric = self.push(Atom { scalar: Some(Scalar::Numeric), ..Atom::default() });
        let boolean = self.push(Atom { scalar: Some(Scalar::Boolean), ..Atom::default() });
        let time = self.push(Atom { scalar: Some(Scalar::Untyped), ..Atom::default() });
        let string_map = self.push_map(&[], Some(string), false);
        let finalizers = self.push(Atom {
            list: Some(ListType { element: string, associative: true, keys: Vec::new() }),
            ..Atom::default()
        });
        let owner = self.push_map(
            &[
                ("apiVersion", string),
                ("kind", string),
                ("name", string),
                ("uid", string),
                ("controller", boolean),
                ("blockOwnerDeletion", boolean),
            ],
            None,
            true,
        );
        let owners = self.push(Atom {
            list: Some(ListType { element: owner, associative: true, keys: vec!["uid".to_string()] }),
            ..Atom::default()
        });
        // managedFields never reach the merge (they are removed first); atomic either way.
        let managed = self.push(Atom {
            list: Some(ListType { element: DEDUCED, associative: false, keys: Vec::new() }),
            ..Atom::default()
        });
        let fields: &[(&str, TypeId)] = &[
            ("annotations", string_map),
            ("creationTimestamp", time),
            ("deletionGracePeriodSeconds", numeric),
            ("deletionTimestamp", time),
            ("finalizers", finalizers),
            ("generateName", string),
            ("generation", numeric),
            ("labels", string_map),
            ("managedFields", managed),
            ("name", string),
            ("namespace", string),
            ("ownerReferences", owners),
            ("resourceVersion", string),
            ("selfLink", string),
            ("uid", string),
        ];
        let id = self.push_map(fields, None, false);
        self.object_meta = Some(id);
        id
    }

    /// Compiles one schema node. `preserve` carries `x-kubernetes-preserve-unknown-fields`
    /// down to descendants; `resource` marks the root (which gets TypeMeta and ObjectMeta).
    fn node(&mut self, node: &Value, preserve: bool, resource: bool) -> TypeId {
        let preserve = preserve || flag(node, "x-kubernetes-preserve-unknown-fields");
        let kind = node.get("type").and_then(Value::as_str).unwrap_or_default();
        let atom = match kind {
            "" => Atom {
                scalar: Some(Scalar::Untyped),
                list: Some(self.list(node, preserve)),
                map: Some(self.object(node, preserve, resource)),
            },
            "object" => Atom { map: Some(self.object(node, preserve, resource)), ..Atom::default() },
            "array" => Atom { list: Some(self.list(node, preserve)), ..Atom::default() },
            "integer" | "number" => Atom { scalar: Some(Scalar::Numeric), ..Atom::default() },
            "boolean" => Atom { scalar: Some(Scalar::Boolean), ..Atom::default() },
            "string" => {
                let format = node.get("format").and_then(Value::as_str).unwrap_or_default();
                let scalar = if matches!(format, "" | "byte") { Scalar::String } else { Scalar::Untyped };
                Atom { scalar: Some(scalar), ..Atom::default() }
            }
            _ => Atom { scalar: Some(Scalar::Untyped), ..Atom::default() },
        };
        self.push(atom)
    }

    fn object(&mut self, node: &Value, preserve: bool, resource: bool) -> MapType {
        let mut fields = HashMap::default();
        let properties = node.get("properties").and_then(Value::as_object);
        for (name, property) in properties.into_iter().flatten() {
            let t = self.node(property, preserve, false);
            fields.insert(name.clone(), (t, property.get("default").cloned()));
        }
        let element = match node.get("additionalProperties") {
            None | Some(Value::Null) => (preserve || fields.is_empty()).then_some(DEDUCED),
            Some(Value::Bool(true)) => Some(DEDUCED),
            Some(Value::Bool(_)) => None,
            Some(schema) => Some(self.node(schema, preserve, false)),
        };
        if resource || flag(node, "x-kubernetes-embedded-resource") {
            let string = self.push(Atom { scalar: Some(Scalar::String), ..Atom::default() });
            let meta = self.object_meta();
            fields.insert("apiVersion".into(), (string, None));
            fields.insert("kind".into(), (string, None));
            fields.insert("metadata".into(), (meta, None));
        }
        let atomic = node.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
        MapType { fields, element, atomic }
    }

    fn list(&mut self, node: &Value, preserve: bool) -> ListType {
        let element = match node.get("items") {
            Some(items) if items.is_object() => self.node(items, preserve, false),
            _ => UNTYPED,
        };
        match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListType { element, associative: true, keys: Vec::new() },
            Some("map") => {
                let keys = node
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|k| k.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .unwrap_or_default();
                ListType { element, associative: true, keys }
            }
            _ => ListType { element, associative: false, keys: Vec::new() },
        }
    }
}

fn flag(node: &Value, name: &str) -> bool {
    node.get(name).and_then(Value::as_bool).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compiles_list_and_map_types() {
        let schema = Schema::custom_resource(Some(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                              "items": {"type": "object", "properties": {"port": {"type": "integer"}, "proto": {"type": "string", "default": "TCP"}}}},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                }},
            },
        })));
        let root = schema.atom(schema.root()).map.as_ref().unwrap();
        assert!(root.is_declared("metadata") && root.is_declared("apiVersion") && root.element.is_none());
        let spec = schema.atom(root.type_of("spec").unwrap()).map.as_ref().unwrap();
        let list = |name: &str| schema.atom(spec.type_of(name).unwrap()).list.clone().unwrap();
        assert!(list("tags").associative && list("tags").keys.is_empty());
        assert_eq!(list("ports").keys, ["port"]);
        assert!(!list("args").associative);
        let port = schema.atom(list("ports").element).map.as_ref().unwrap();
        assert_eq!(port.fields.get("proto").unwrap().1, Some(json!("TCP")));
        assert!(schema.atom(spec.type_of("selector").unwrap()).map.as_ref().unwrap().atomic);
        let free = schema.atom(spec.type_of("free").unwrap()).map.as_ref().unwrap();
        assert_eq!(free.element, Some(DEDUCED));
    }

    #[test]
    fn no_schema_means_deduced() {
        let schema = Schema::custom_resource(None);
        assert_eq!(schema.root(), DEDUCED);
        assert!(!schema.atom(DEDUCED).map.as_ref().unwrap().atomic);
    }
}
