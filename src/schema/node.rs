//! The compiled schema tree: one node per OpenAPI v3 schema object of a definition version,
//! with what validation, pruning, defaulting and list checks need, ready to use (formats
//! resolved, patterns compiled).
//!
//! Built once by `compile`; read-only afterwards. Holds no request state.

use serde_json::Value;

use super::formats::Format;
use super::pattern::Pattern;

/// The `properties` of a node, by name.
pub type Properties = crate::core::sorted_map::SortedMap<Schema>;

/// A schema node.
///
/// The structural part (`properties`, `items`, `additional_properties`, the extensions) is
/// what pruning, defaulting and list checks walk; the value validations include the logical
/// junctors (`all_of`, ...), whose nodes only ever validate.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// `type` as written ("" when absent).
    pub type_name: String,
    /// The types a value may have, as kube-openapi sees them: `type`, or `integer` and
    /// `string` for `x-kubernetes-int-or-string`.
    pub types: Vec<String>,
    /// `types` as a set of [`TypeBits`], for the checks run on every value.
    pub type_bits: u8,
    pub nullable: bool,
    /// `default`; a `null` default counts as none, as Kubernetes treats it.
    pub default: Option<Value>,

    pub preserve_unknown_fields: bool,
    pub embedded_resource: bool,
    pub int_or_string: bool,
    /// `x-kubernetes-list-type` as written.
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type` as written.
    pub map_type: Option<String>,

    /// `format` after Kubernetes drops the formats it does not support for the node's type.
    pub format: Option<String>,
    /// The string format checked against string values, when it is one Kubernetes knows.
    pub string_format: Option<Format>,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub multiple_of: Option<f64>,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    pub pattern: Option<Pattern>,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    /// `enum`; an empty list checks nothing.
    pub enum_values: Vec<Value>,
    pub required: Vec<String>,
    pub all_of: Vec<Schema>,
    pub any_of: Vec<Schema>,
    pub one_of: Vec<Schema>,
    pub not: Option<Box<Schema>>,

    pub properties: Properties,
    pub items: Option<Box<Schema>>,
    pub additional_properties: Option<Additional>,

    /// Whether this node or a node of its structural subtree has `x-kubernetes-validations`
    /// (CEL rules are only considered, and only blocked by earlier errors, when some exist).
    pub has_rules: bool,
    /// Whether this node or a node below is an embedded resource (walks skip the rest).
    pub has_embedded: bool,
    /// Whether this node or a node below is a `set` or `map` list (walks skip the rest).
    pub has_list_checks: bool,
    /// Whether this node or a node of its structural subtree has a `default` (reads that
    /// prove defaulting changes nothing skip the rest).
    pub has_defaults: bool,
}

/// JSON types as bits of [`Schema::type_bits`].
pub struct TypeBits;

impl TypeBits {
    pub const ARRAY: u8 = 1;
    pub const BOOLEAN: u8 = 2;
    pub const INTEGER: u8 = 4;
    pub const NUMBER: u8 = 8;
    pub const OBJECT: u8 = 16;
    pub const STRING: u8 = 32;
    pub const NULL: u8 = 64;

    /// The bit of a type name (0 for names that are no type).
    pub fn of(name: &str) -> u8 {
        match name {
            "array" => Self::ARRAY,
            "boolean" => Self::BOOLEAN,
            "integer" => Self::INTEGER,
            "number" => Self::NUMBER,
            "object" => Self::OBJECT,
            "string" => Self::STRING,
            "null" => Self::NULL,
            _ => 0,
        }
    }
}

/// `additionalProperties`: a boolean or a schema.
#[derive(Debug, Clone)]
pub enum Additional {
    Allows(bool),
    Schema(Box<Schema>),
}

impl Schema {
    /// The schema of `additionalProperties`, when it is one.
    pub fn additional_schema(&self) -> Option<&Schema> {
        match &self.additional_properties {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// The schema that applies to field `name` of an object: its property, else the
    /// `additionalProperties` schema.
    pub fn field_schema(&self, name: &str) -> Option<&Schema> {
        self.properties.get(name).or_else(|| self.additional_schema())
    }

    pub fn items(&self) -> Option<&Schema> {
        self.items.as_deref()
    }

    pub fn has_type(&self, name: &str) -> bool {
        self.types.iter().any(|t| t == name)
    }

    /// Whether `types` holds any of `bits`.
    pub fn has_type_bits(&self, bits: u8) -> bool {
        self.type_bits & bits != 0
    }

    pub fn is_list_type(&self, name: &str) -> bool {
        self.list_type.as_deref() == Some(name)
    }
}

/// Looks up properties for keys visited in ascending order (JSON objects iterate sorted here):
/// one comparison per step instead of a search per key. Keys out of order still work.
pub struct Cursor<'a> {
    properties: &'a Properties,
    /// Entries not passed yet.
    rest: &'a [(String, Schema)],
    last: Option<&'a str>,
}

impl<'a> Cursor<'a> {
    pub fn new(properties: &'a Properties) -> Cursor<'a> {
        Cursor { properties, rest: properties.as_slice(), last: None }
    }

    /// The property named `key`.
    pub fn get(&mut self, key: &str) -> Option<&'a Schema> {
        if self.last.is_some_and(|last| key <= last) {
            return self.properties.get(key);
        }
        while let Some(((name, schema), rest)) = self.rest.split_first() {
            match name.as_str().cmp(key) {
                std::cmp::Ordering::Less => self.rest = rest,
                std::cmp::Ordering::Equal => {
                    self.last = Some(name);
                    self.rest = rest;
                    return Some(schema);
                }
                std::cmp::Ordering::Greater => return None,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_find_properties_in_any_order() {
        let properties: Properties = ["a", "c", "e"].iter().map(|k| (k.to_string(), Schema::default())).collect();
        let mut cursor = Cursor::new(&properties);
        let found: Vec<bool> = ["a", "b", "c", "d", "e", "f"].iter().map(|k| cursor.get(k).is_some()).collect();
        assert_eq!(found, [true, false, true, false, true, false]);
        let mut cursor = Cursor::new(&properties);
        assert!(cursor.get("e").is_some());
        assert!(cursor.get("a").is_some(), "a key out of order falls back to a search");
    }
}
