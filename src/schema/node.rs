//! The compiled schema tree: one node per OpenAPI v3 schema object of a definition version,
//! with what validation, pruning, defaulting and list checks need, ready to use (formats
//! resolved, patterns compiled).
//!
//! Built once by `compile`; read-only afterwards. Holds no request state.

use std::collections::BTreeMap;

use serde_json::Value;

use super::formats::Format;
use super::pattern::Pattern;

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

    pub properties: BTreeMap<String, Schema>,
    pub items: Option<Box<Schema>>,
    pub additional_properties: Option<Additional>,

    /// Whether this node or a node of its structural subtree has `x-kubernetes-validations`
    /// (CEL rules are only considered, and only blocked by earlier errors, when some exist).
    pub has_rules: bool,
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

    pub fn is_list_type(&self, name: &str) -> bool {
        self.list_type.as_deref() == Some(name)
    }
}
