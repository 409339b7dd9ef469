//! The part of a structural schema CEL rules see: types, formats, list and map semantics, the
//! size limits cost estimation needs, and the rules themselves, read from the
//! `openAPIV3Schema` JSON of a CustomResourceDefinition version.
//!
//! Owns: reading schema JSON into [`Node`]s. Must not touch: validation of the schema itself
//! (the schema module's job), HTTP, storage.

use serde_json::Value as Json;

use crate::core::sorted_map::SortedMap;

/// What a schema node holds, as CEL sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
    IntOrString,
    /// No type: data CEL cannot reach (preserve-unknown-fields without a type).
    Unknown,
    /// Any JSON, typed as it comes (admission policies' unstructured objects): objects are
    /// maps, integral numbers `int`, others `double`.
    Any,
}

/// The schema node of unstructured data: every value below it is [`Shape::Any`] too.
pub fn any_node() -> &'static Node {
    static ANY: std::sync::LazyLock<Node> = std::sync::LazyLock::new(|| {
        let mut node = Node::read(&Json::Object(serde_json::Map::new()));
        node.shape = Shape::Any;
        node.nullable = true;
        node
    });
    &ANY
}

/// One `x-kubernetes-validations` entry, as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleSpec {
    pub rule: String,
    pub message: String,
    pub message_expression: String,
    pub reason: Option<String>,
    pub field_path: String,
    pub optional_old_self: Option<bool>,
}

/// A schema node.
#[derive(Debug, Clone)]
pub struct Node {
    pub shape: Shape,
    pub format: String,
    pub nullable: bool,
    pub preserve_unknown: bool,
    pub embedded: bool,
    pub properties: SortedMap<Node>,
    pub additional: Option<Box<Node>>,
    pub items: Option<Box<Node>>,
    /// `x-kubernetes-list-type`: atomic (default), set or map.
    pub list_type: String,
    pub map_keys: Vec<String>,
    /// `x-kubernetes-map-type`: granular (default) or atomic.
    pub map_type: String,
    pub required: Vec<String>,
    pub has_default: bool,
    pub max_items: Option<i64>,
    pub max_length: Option<i64>,
    pub max_properties: Option<i64>,
    /// The longest string of a string enum, for size estimates.
    pub enum_max_len: Option<i64>,
    pub rules: Vec<RuleSpec>,
    /// Rules nested in `allOf` branches, which Kubernetes still evaluates at run time.
    pub all_of: Vec<Node>,
}

impl Node {
    /// Reads a schema node. `is_resource` marks the resource root and embedded resources, where
    /// `apiVersion`, `kind`, `metadata.name` and `metadata.generateName` are implicitly declared.
    pub fn from_json(json: &Json, is_resource: bool) -> Node {
        let mut node = Node::read(json);
        if is_resource {
            node.add_type_and_object_meta();
        }
        node
    }

    fn read(json: &Json) -> Node {
        let get = |k: &str| json.get(k);
        let int_or_string = get("x-kubernetes-int-or-string").and_then(Json::as_bool).unwrap_or(false);
        let ty = get("type").and_then(Json::as_str).unwrap_or("");
        let shape = if int_or_string {
            Shape::IntOrString
        } else {
            match ty {
                "object" => Shape::Object,
                "array" => Shape::Array,
                "string" => Shape::String,
                "integer" => Shape::Integer,
                "number" => Shape::Number,
                "boolean" => Shape::Boolean,
                _ => Shape::Unknown,
            }
        };
        let properties: SortedMap<Node> = get("properties")
            .and_then(Json::as_object)
            .into_iter()
            .flatten()
            .map(|(name, prop)| {
                let embedded = prop.get("x-kubernetes-embedded-resource").and_then(Json::as_bool).unwrap_or(false);
                (name.clone(), Node::from_json(prop, embedded))
            })
            .collect();
        let child = |k: &str| -> Option<Box<Node>> {
            let sub = get(k)?;
            if !sub.is_object() {
                return None;
            }
            let embedded = sub.get("x-kubernetes-embedded-resource").and_then(Json::as_bool).unwrap_or(false);
            Some(Box::new(Node::from_json(sub, embedded)))
        };
        let strings = |k: &str| -> Vec<String> {
            get(k)
                .and_then(Json::as_array)
                .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        let enum_max_len = get("enum")
            .and_then(Json::as_array)
            .and_then(|values| values.iter().filter_map(|v| v.as_str().map(|s| s.len() as i64)).max());
        let rules = get("x-kubernetes-validations")
            .and_then(Json::as_array)
            .map(|rules| rules.iter().map(read_rule).collect())
            .unwrap_or_default();
        let all_of = get("allOf")
            .and_then(Json::as_array)
            .map(|branches| branches.iter().map(Node::read).collect())
            .unwrap_or_default();
        Node {
            shape,
            format: get("format").and_then(Json::as_str).unwrap_or("").to_string(),
            nullable: get("nullable").and_then(Json::as_bool).unwrap_or(false),
            preserve_unknown: get("x-kubernetes-preserve-unknown-fields").and_then(Json::as_bool).unwrap_or(false),
            embedded: get("x-kubernetes-embedded-resource").and_then(Json::as_bool).unwrap_or(false),
            properties,
            additional: child("additionalProperties"),
            items: child("items"),
            list_type: get("x-kubernetes-list-type").and_then(Json::as_str).unwrap_or("atomic").to_string(),
            map_keys: strings("x-kubernetes-list-map-keys"),
            map_type: get("x-kubernetes-map-type").and_then(Json::as_str).unwrap_or("granular").to_string(),
            required: strings("required"),
            has_default: get("default").is_some_and(|d| !d.is_null()),
            max_items: get("maxItems").and_then(Json::as_i64),
            max_length: get("maxLength").and_then(Json::as_i64),
            max_properties: get("maxProperties").and_then(Json::as_i64),
            enum_max_len,
            rules,
            all_of,
        }
    }

    /// Kubernetes' `WithTypeAndObjectMeta`: unless the schema already declares them all as
    /// strings, `kind`, `apiVersion` and `metadata` (with `name` and `generateName`) are
    /// declared, replacing whatever was there.
    fn add_type_and_object_meta(&mut self) {
        let is_string = |n: Option<&Node>| n.is_some_and(|n| n.shape == Shape::String);
        let meta = self.properties.get("metadata");
        let complete = is_string(self.properties.get("kind"))
            && is_string(self.properties.get("apiVersion"))
            && meta.is_some_and(|m| {
                m.shape == Shape::Object
                    && is_string(m.properties.get("name"))
                    && is_string(m.properties.get("generateName"))
            });
        if complete {
            return;
        }
        self.properties.insert("kind".into(), Node::scalar(Shape::String));
        self.properties.insert("apiVersion".into(), Node::scalar(Shape::String));
        let mut metadata = Node::scalar(Shape::Object);
        metadata.properties.insert("name".into(), Node::scalar(Shape::String));
        metadata.properties.insert("generateName".into(), Node::scalar(Shape::String));
        self.properties.insert("metadata".into(), metadata);
    }

    pub fn scalar(shape: Shape) -> Node {
        Node {
            shape,
            format: String::new(),
            nullable: false,
            preserve_unknown: false,
            embedded: false,
            properties: SortedMap::default(),
            additional: None,
            items: None,
            list_type: "atomic".into(),
            map_keys: Vec::new(),
            map_type: "granular".into(),
            required: Vec::new(),
            has_default: false,
            max_items: None,
            max_length: None,
            max_properties: None,
            enum_max_len: None,
            rules: Vec::new(),
            all_of: Vec::new(),
        }
    }

    /// Whether this object node is a map (`additionalProperties` with a schema).
    pub fn is_map(&self) -> bool {
        self.shape == Shape::Object && self.additional.is_some()
    }

    /// Whether a rule on this node or below has anything to evaluate.
    pub fn has_rules_below(&self) -> bool {
        !self.rules.is_empty()
            || self.properties.values().any(Node::has_rules_below)
            || self.additional.as_deref().is_some_and(Node::has_rules_below)
            || self.items.as_deref().is_some_and(Node::has_rules_below)
            || self.all_of.iter().any(Node::has_rules_below)
    }
}

fn read_rule(json: &Json) -> RuleSpec {
    let text = |k: &str| json.get(k).and_then(Json::as_str).unwrap_or("").to_string();
    RuleSpec {
        rule: text("rule"),
        message: text("message"),
        message_expression: text("messageExpression"),
        reason: json.get("reason").and_then(Json::as_str).map(str::to_string),
        field_path: text("fieldPath"),
        optional_old_self: json.get("optionalOldSelf").and_then(Json::as_bool),
    }
}
