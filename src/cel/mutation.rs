//! What the environment of MutatingAdmissionPolicy mutations adds to CEL: object literals
//! (`Object{spec: Object.spec{replicas: 3}}` for apply configurations, `JSONPatch{op: "add",
//! path: "/spec/x", value: 1}` for JSON patches), the `jsonpatch.escapeKey` function, and the
//! check Kubernetes makes of an apply configuration's type names (a nested `Object.spec.x{}`
//! must sit at the field path `spec.x`).
//!
//! Owns those declarations and the type-name check; checking and evaluating the literals is
//! the checker's and evaluator's (a literal evaluates to the map of its fields).

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use super::types::{ObjectType, Type};

/// What cel-go charges for creating a struct, before its fields.
pub const STRUCT_CREATION_COST: u64 = 40;

/// The name of the root type of apply configurations.
pub const OBJECT: &str = "Object";
/// The type of one JSON patch operation.
pub const JSON_PATCH: &str = "JSONPatch";

/// Functions declared only for mutations.
pub fn only_for_mutations(qualified: &str) -> bool {
    qualified == "jsonpatch.escapeKey"
}

/// `jsonpatch.escapeKey`: a key as one JSON pointer segment (RFC 6901: `~` then `/`).
pub fn escape_key(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The kind of an object literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiteralKind {
    /// `Object` or `Object.<field path>`.
    Object(String),
    JsonPatch,
}

impl LiteralKind {
    pub fn of(type_name: &str) -> Option<LiteralKind> {
        let name = type_name.strip_prefix('.').unwrap_or(type_name);
        if name == JSON_PATCH {
            return Some(LiteralKind::JsonPatch);
        }
        let is_object = name == OBJECT || name.strip_prefix(OBJECT).is_some_and(|rest| rest.starts_with('.'));
        is_object.then(|| LiteralKind::Object(name.to_string()))
    }

    /// The literal's CEL type.
    pub fn ty(&self) -> Type {
        let name = match self {
            LiteralKind::Object(name) => name.clone(),
            LiteralKind::JsonPatch => JSON_PATCH.to_string(),
        };
        Type::Object(Arc::new(ObjectType { name, fields: BTreeMap::new() }))
    }

    /// Why a field may not be set to a value of this type (cel-go's checker wording).
    pub fn field_error(&self, field: &str, ty: &Type) -> Option<String> {
        let LiteralKind::JsonPatch = self else { return None };
        match field {
            "value" => None,
            "op" | "path" | "from" => (!matches!(ty, Type::String | Type::Dyn | Type::Error))
                .then(|| format!("expected type of field '{field}' is 'string' but provided type is '{ty}'")),
            other => Some(format!("undefined field '{other}'")),
        }
    }
}

/// The type-name mismatches of the apply-configuration literals in an expression, as
/// Kubernetes reports them: a literal nested in another's field must be named by the field
/// path from its root literal (`Object.spec{selector: Object.spec.selector{}}`).
pub fn type_name_mismatches(expr: &IdedExpr) -> Vec<String> {
    let mut found = Vec::new();
    walk(expr, &mut found);
    found
}

/// Looks for root literals anywhere in `expr`.
fn walk(expr: &IdedExpr, found: &mut Vec<String>) {
    match &expr.expr {
        Expr::Struct(literal) => {
            if let Some(LiteralKind::Object(name)) = LiteralKind::of(&literal.type_name) {
                check_path(expr, &name, found);
            } else {
                children(expr).into_iter().for_each(|c| walk(c, found));
            }
        }
        _ => children(expr).into_iter().for_each(|c| walk(c, found)),
    }
}

/// Checks the literal at `expr` against the expected path, then its fields, list items and
/// map values below it.
fn check_path(expr: &IdedExpr, expected: &str, found: &mut Vec<String>) {
    match &expr.expr {
        Expr::Struct(literal) => {
            let name = literal.type_name.strip_prefix('.').unwrap_or(&literal.type_name);
            if LiteralKind::of(name) == Some(LiteralKind::JsonPatch) {
                return walk(expr, found);
            }
            if name != expected {
                found.push(format!(
                    "unexpected type name {name:?}, expected {expected:?}, which matches field name path from root Object type"
                ));
            }
            for entry in &literal.entries {
                if let EntryExpr::StructField(field) = &entry.expr {
                    check_path(&field.value, &format!("{expected}.{}", field.field), found);
                }
            }
        }
        Expr::List(list) => list.elements.iter().for_each(|e| check_path(e, expected, found)),
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(e) = &entry.expr {
                    walk(&e.key, found);
                    check_path(&e.value, expected, found);
                }
            }
        }
        _ => walk(expr, found),
    }
}

fn children(expr: &IdedExpr) -> Vec<&IdedExpr> {
    match &expr.expr {
        Expr::Call(call) => call.target.as_deref().into_iter().chain(call.args.iter()).collect(),
        Expr::Select(select) => vec![&select.operand],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => map
            .entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Struct(literal) => literal
            .entries
            .iter()
            .filter_map(|entry| match &entry.expr {
                EntryExpr::StructField(f) => Some(&f.value),
                EntryExpr::MapEntry(_) => None,
            })
            .collect(),
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(source: &str) -> IdedExpr {
        cel::parser::Parser::new().parse(source).unwrap()
    }

    #[test]
    fn literal_kinds() {
        assert_eq!(LiteralKind::of("Object"), Some(LiteralKind::Object("Object".into())));
        assert_eq!(LiteralKind::of("Object.spec.x"), Some(LiteralKind::Object("Object.spec.x".into())));
        assert_eq!(LiteralKind::of("JSONPatch"), Some(LiteralKind::JsonPatch));
        assert_eq!(LiteralKind::of("Objects"), None);
        assert_eq!(LiteralKind::of("google.protobuf.Struct"), None);
    }

    #[test]
    fn escaping_keys() {
        assert_eq!(escape_key("example.com/a~b"), "example.com~1a~0b");
        assert_eq!(escape_key("~1"), "~01");
    }

    #[test]
    fn type_names_follow_field_paths() {
        assert!(type_name_mismatches(&parse("Object{spec: Object.spec{selector: Object.spec.selector{}}}")).is_empty());
        assert!(
            type_name_mismatches(&parse("Object{spec: Object.spec{containers: [Object.spec.containers{name: 'a'}]}}"))
                .is_empty()
        );
        assert_eq!(
            type_name_mismatches(&parse("Object{spec: Object.spec{selector: Object.spec.wrong{}}}")),
            vec![
                "unexpected type name \"Object.spec.wrong\", expected \"Object.spec.selector\", which matches field name path from root Object type"
            ]
        );
        assert_eq!(type_name_mismatches(&parse("true ? Object{metadata: Object.spec{}} : Object{}")).len(), 1);
    }
}
