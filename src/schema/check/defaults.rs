//! Defaults of a definition's schema must be pruned already and must validate against their
//! own node (`ValidateDefaults`); defaults inside resource metadata must make valid metadata
//! once placed in a surrounding object.

use serde_json::{Map, Value};

use crate::core::field::{FieldError, Path, aggregate};
use crate::schema::node::Schema;
use crate::schema::objectmeta::embedded;
use crate::schema::{openapi, prune};

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// A step from the nearest resource root down to a node.
#[derive(Debug, Clone)]
enum Step<'a> {
    Field(&'a str),
    Index,
}

struct Walk<'a> {
    /// `...openAPIV3Schema`, where errors about the walk itself go.
    schema_path: &'a Path,
    require_pruned: bool,
    errs: Vec<FieldError>,
}

/// Checks every default of a compiled schema; `path` is `...openAPIV3Schema`.
pub fn validate(s: &Schema, path: &Path, require_pruned: bool) -> Vec<FieldError> {
    let mut walk = Walk { schema_path: path, require_pruned, errs: Vec::new() };
    // The schema's root is a resource root.
    walk.node(s, path, true, &[], false);
    walk.errs
}

impl Walk<'_> {
    fn node(&mut self, s: &Schema, path: &Path, resource_root: bool, around: &[Step<'_>], inside_meta: bool) {
        let resource = resource_root || s.embedded_resource;
        let (around, inside_meta): (&[Step<'_>], bool) = if resource { (&[], false) } else { (around, inside_meta) };
        if let Some(default) = &s.default {
            if inside_meta {
                self.meta_default(s, default, path, around);
            } else {
                self.plain_default(s, default, path, resource);
            }
        }
        if let Some(items) = s.items() {
            let mut next = around.to_vec();
            next.push(Step::Index);
            self.node(items, &path.child("items"), false, &next, inside_meta);
        }
        for (name, property) in &s.properties {
            let mut next = around.to_vec();
            next.push(Step::Field(name));
            let sub_inside_meta = inside_meta || (resource && META_FIELDS.contains(&name.as_str()));
            self.node(property, &path.child("properties").key(name), false, &next, sub_inside_meta);
        }
    }

    fn plain_default(&mut self, s: &Schema, default: &Value, path: &Path, resource: bool) {
        let at = path.child("default");
        let mut pruned = default.clone();
        prune::prune(&mut pruned, Some(s), resource);
        if self.require_pruned && &pruned != default {
            self.errs.push(FieldError::invalid(at.clone(), default.clone(), "must not have unknown fields"));
        }
        let mut coerced = default.clone();
        if let Err(e) = embedded::coerce(&at, &mut coerced, Some(s), resource, false) {
            self.errs.push(e);
            return;
        }
        let meta_errs = embedded::validate(&at, default, Some(s), resource);
        if !meta_errs.is_empty() {
            self.errs.extend(meta_errs);
            return;
        }
        self.errs.extend(openapi::validate(s, default, &at));
    }

    /// A default inside metadata: placed in a surrounding object, it must make valid metadata.
    fn meta_default(&mut self, s: &Schema, default: &Value, path: &Path, around: &[Step<'_>]) {
        let at = path.child("default");
        let mut object = default.clone();
        for step in around.iter().rev() {
            object = match step {
                Step::Field(name) => {
                    let mut map = Map::new();
                    map.insert((*name).to_string(), object);
                    Value::Object(map)
                }
                Step::Index => Value::Array(vec![object]),
            };
        }
        let Value::Object(root) = &mut object else {
            self.errs.push(FieldError::invalid(
                self.schema_path.clone(),
                "",
                "failed to validate default value inside metadata: object root default value must be of object type",
            ));
            return;
        };
        root.entry("kind").or_insert_with(|| Value::String("Validation".into()));
        root.entry("apiVersion").or_insert_with(|| Value::String("validation/v1".into()));
        // The resource root's schema is not at hand here; metadata rules do not need it.
        if let Err(e) = embedded::coerce(&Path::nil(), &mut object, None, true, false) {
            self.errs.push(FieldError::invalid(at, default.clone(), format!("must result in valid metadata: {e}")));
            return;
        }
        let meta_errs = embedded::validate(&Path::nil(), &object, None, true);
        if !meta_errs.is_empty() {
            let detail = format!("must result in valid metadata: {}", aggregate(&meta_errs));
            self.errs.push(FieldError::invalid(at, default.clone(), detail));
            return;
        }
        self.errs.extend(openapi::validate(s, default, &at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::compile::compile;
    use serde_json::json;

    fn errors(schema: Value) -> Vec<String> {
        validate(&compile(&schema), &Path::new("s"), true).iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn defaults_must_be_pruned_and_valid() {
        assert!(errors(json!({"type": "object", "properties": {"a": {"type": "integer", "default": 1}}})).is_empty());
        assert_eq!(
            errors(json!({"type": "object", "properties": {"a": {"type": "integer", "default": "x"}}})),
            // The default is validated on its own, so kube-openapi's path in the message is empty.
            [r#"s.properties[a].default: Invalid value: "string":  in body must be of type integer: "string""#]
        );
        assert_eq!(
            errors(json!({"type": "object", "properties": {"o": {"type": "object", "default": {"b": 1},
                "properties": {"a": {"type": "integer"}}}}})),
            [r#"s.properties[o].default: Invalid value: {"b":1}: must not have unknown fields"#]
        );
    }

    #[test]
    fn metadata_defaults_must_make_valid_metadata() {
        let schema = json!({"type": "object", "properties": {"e": {"type": "object", "x-kubernetes-embedded-resource": true,
            "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "a/b"}}}}}}});
        assert_eq!(
            errors(schema),
            [
                r#"s.properties[e].properties[metadata].properties[name].default: Invalid value: "a/b": must result in valid metadata: metadata.name: Invalid value: "a/b": may not contain '/'"#
            ]
        );
    }
}
