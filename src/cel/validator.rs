//! Running compiled rules over an object at request time: `self` bound at each rule's node,
//! `oldSelf` from the correlated old value (object properties, map keys, map-list items by
//! key), the per-request cost budget, Kubernetes' message precedence, `reason`, `fieldPath`,
//! and ratcheting (errors of unchanged nodes become warnings for rules without `oldSelf`).
//!
//! Owns: the walk over object and schema. Must not touch: compilation, HTTP.

use std::rc::Rc;

use serde_json::Value as Json;

use super::compile::{CompiledRule, RuleNode};
use super::eval::Evaluator;
use super::schema::{Node, Shape};
use super::value::{EvalError, Value, from_json};
use crate::core::field::{ErrorType, FieldError, Path};

/// Kubernetes' per-call cost limit.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// Kubernetes' cost budget for all rules of one request.
pub const RUNTIME_COST_BUDGET: i64 = 10_000_000;
/// The longest message a messageExpression may produce.
const MAX_MESSAGE_BYTES: usize = 5120;

/// What validating an object found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Outcome {
    pub errors: Vec<FieldError>,
    /// Errors ratcheted away (unchanged nodes), as warning texts.
    pub warnings: Vec<String>,
    /// The cost budget left; negative once it ran out.
    pub remaining_budget: i64,
}

/// A node and the old value it correlates with, for ratcheting.
#[derive(Clone, Copy)]
struct Correlated<'a> {
    new: &'a Json,
    old: Option<&'a Json>,
}

impl Correlated<'_> {
    fn unchanged(&self) -> bool {
        self.old.is_some_and(|o| o == self.new)
    }
}

#[derive(Clone, Copy, Default)]
struct Ratchet<'a> {
    current: Option<Correlated<'a>>,
    parent: Option<Correlated<'a>>,
}

impl<'a> Ratchet<'a> {
    fn should_ratchet(&self) -> bool {
        match (&self.current, &self.parent) {
            (Some(c), _) => c.unchanged(),
            (None, Some(p)) => p.unchanged(),
            _ => false,
        }
    }

    fn key(&self, field: &str) -> Ratchet<'a> {
        let Some(cur) = self.current else { return *self };
        if self.parent.is_none() && (field == "apiVersion" || field == "kind") {
            return Ratchet::default();
        }
        let next = cur.new.get(field).map(|new| Correlated { new, old: cur.old.and_then(|o| o.get(field)) });
        Ratchet { current: next, parent: Some(cur) }
    }

    fn index(&self, new: &'a Json, old: Option<&'a Json>, correlatable: bool) -> Ratchet<'a> {
        let Some(cur) = self.current else { return *self };
        let next = if correlatable { Some(Correlated { new, old }) } else { None };
        Ratchet { current: next, parent: Some(cur) }
    }
}

struct Walk {
    per_call_limit: u64,
    errors: Vec<FieldError>,
    warnings: Vec<String>,
    budget: i64,
}

/// Validates `new` (and `old`, on update) against the compiled rules of `schema`.
pub fn validate(
    tree: &RuleNode,
    schema: &Node,
    root: &Path,
    new: &Json,
    old: Option<&Json>,
    budget: i64,
    per_call_limit: u64,
) -> Outcome {
    let mut w = Walk { per_call_limit, errors: Vec::new(), warnings: Vec::new(), budget };
    let ratchet = match old {
        Some(old) => Ratchet { current: Some(Correlated { new, old: Some(old) }), parent: None },
        None => Ratchet::default(),
    };
    w.node(tree, schema, root, new, old, ratchet);
    Outcome { errors: w.errors, warnings: w.warnings, remaining_budget: w.budget }
}

fn type_name(node: &Node) -> &'static str {
    match node.shape {
        Shape::Object => "object",
        Shape::Array => "array",
        Shape::String => "string",
        Shape::Integer => "integer",
        Shape::Number => "number",
        Shape::Boolean => "boolean",
        Shape::IntOrString | Shape::Unknown | Shape::Any => "",
    }
}

/// The key of a map-list item.
fn item_key<'j>(item: &'j Json, keys: &[String]) -> Vec<Option<&'j Json>> {
    keys.iter().map(|k| item.get(k)).collect()
}

impl Walk {
    fn node<'a>(
        &mut self,
        rn: &RuleNode,
        node: &Node,
        path: &Path,
        new: &'a Json,
        old: Option<&'a Json>,
        r: Ratchet<'a>,
    ) {
        if new.is_null() {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        self.expressions(&rn.rules, node, path, new, old, r);
        if self.budget < 0 {
            return;
        }
        for (branch_node, branch) in &rn.all_of {
            let parent_only = Ratchet { current: None, parent: r.parent };
            self.node(branch, branch_node, path, new, old, parent_only);
            if self.budget < 0 {
                return;
            }
        }
        match new {
            Json::Object(map) => {
                let correlatable = matches!(node.map_type.as_str(), "granular" | "atomic");
                for (k, v) in map {
                    let old_v = if correlatable { old.and_then(|o| o.get(k)) } else { None };
                    if let (Some(sub), Some(values)) = (rn.additional.as_deref(), node.additional.as_deref()) {
                        self.node(sub, values, &path.key(k), v, old_v, r.key(k));
                    }
                    if let (Some(sub), Some(prop)) = (rn.properties.get(k), node.properties.get(k)) {
                        self.node(sub, prop, &path.child(k), v, old_v, r.key(k));
                    }
                    if self.budget < 0 {
                        return;
                    }
                }
            }
            Json::Array(items) => {
                let (Some(sub), Some(item_node)) = (rn.items.as_deref(), node.items.as_deref()) else { return };
                let is_map = node.list_type == "map";
                let old_items = old.and_then(Json::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item = if is_map {
                        let key = item_key(item, &node.map_keys);
                        old_items.and_then(|olds| olds.iter().find(|o| item_key(o, &node.map_keys) == key))
                    } else {
                        None
                    };
                    self.node(sub, item_node, &path.index(i), item, old_item, r.index(item, old_item, is_map));
                    if self.budget < 0 {
                        return;
                    }
                }
            }
            _ => {}
        }
    }

    fn invalid(path: &Path, node: &Node, detail: String) -> FieldError {
        FieldError::invalid(path.clone(), type_name(node), detail)
    }

    fn expressions<'a>(
        &mut self,
        rules: &[CompiledRule],
        node: &Node,
        path: &Path,
        new: &'a Json,
        old: Option<&'a Json>,
        r: Ratchet<'a>,
    ) {
        if rules.is_empty() {
            return;
        }
        if self.budget <= 0 {
            self.errors.push(Self::invalid(path, node, BUDGET_MESSAGE.into()));
            self.budget = -1;
            return;
        }
        for rule in rules {
            let Ok(program) = &rule.program else {
                let detail = rule.program.as_ref().err().cloned().unwrap_or_default();
                self.errors.push(Self::invalid(path, node, format!("rule compile error: {detail}")));
                continue;
            };
            let optional = rule.spec.optional_old_self.unwrap_or(false);
            if rule.uses_old_self && old.is_none() && !optional {
                continue;
            }
            let this = from_json(new, node);
            let old_value = old.map(|o| from_json(o, node)).transpose();
            let (result, cost) = match (this, old_value) {
                (Ok(this), Ok(old_value)) => {
                    let old_bound = if optional {
                        Value::Optional(old_value.map(Rc::new))
                    } else {
                        old_value.unwrap_or(Value::Null)
                    };
                    let mut ev = Evaluator::new(this, old_bound, self.per_call_limit);
                    let result = ev.eval(&program.ir);
                    (result.map(|v| matches!(v, Value::Bool(true))), ev.cost)
                }
                (Err(e), _) | (_, Err(e)) => (Err(e), 0),
            };
            if cost as i64 > self.budget {
                self.errors.push(Self::invalid(path, node, BUDGET_MESSAGE.into()));
                self.budget = -1;
                return;
            }
            self.budget -= cost as i64;
            let rule_text = rule_error_string(rule);
            match result {
                Ok(true) => continue,
                Ok(false) => {}
                Err(EvalError { message, cost_exceeded: true }) => {
                    self.errors.push(Self::invalid(
                        path,
                        node,
                        format!("'{message}': no further validation rules will be run due to call cost exceeds limit for rule: {rule_text}"),
                    ));
                    self.budget = -1;
                    return;
                }
                Err(e) if e.message.starts_with("no such overload") => {
                    self.errors.push(Self::invalid(
                        path,
                        node,
                        format!("'{}': call arguments did not match a supported operator, function or macro signature for rule: {rule_text}", e.message),
                    ));
                    continue;
                }
                Err(e) => {
                    self.errors.push(Self::invalid(path, node, format!("{} evaluating rule: {rule_text}", e.message)));
                    continue;
                }
            }
            let err_path = match &rule.field_path {
                Some(fp) if fp.starts_with('[') => Path::new(&format!("{}{fp}", path.as_str())),
                Some(fp) if !fp.is_empty() => path.child(fp),
                _ => path.clone(),
            };
            let ratchet = !rule.uses_old_self && r.should_ratchet();
            let detail = match &rule.message {
                Some(Ok(m)) => match self.message(m, &rule.spec.message_expression, new, old, node, optional) {
                    Ok(Some(text)) => text,
                    Ok(None) => default_message(rule),
                    Err(e) => {
                        let fe = Self::invalid(&err_path, node, e);
                        self.add(fe, ratchet);
                        self.budget = -1;
                        return;
                    }
                },
                _ => default_message(rule),
            };
            let value = match node.shape {
                Shape::Object | Shape::Array => None,
                _ => Some(new.clone()),
            };
            let fe = match rule.spec.reason.as_deref() {
                Some("FieldValueForbidden") => FieldError::forbidden(err_path, detail),
                Some("FieldValueRequired") => FieldError::required(err_path, detail),
                Some("FieldValueDuplicate") => FieldError::new(ErrorType::Duplicate, err_path, value, ""),
                _ => FieldError::new(ErrorType::Invalid, err_path, value, detail),
            };
            self.add(fe, ratchet);
        }
    }

    fn add(&mut self, fe: FieldError, ratchet: bool) {
        if ratchet {
            self.warnings.push(fe.to_string());
        } else {
            self.errors.push(fe);
        }
    }

    /// Evaluates a messageExpression: `Ok(None)` falls back to the static message; `Err`
    /// stops validation with that detail.
    fn message<'a>(
        &mut self,
        program: &super::compile::Program,
        source: &str,
        new: &'a Json,
        old: Option<&'a Json>,
        node: &'a Node,
        optional: bool,
    ) -> Result<Option<String>, String> {
        let this = from_json(new, node).ok().unwrap_or(Value::Null);
        let old_value = old.and_then(|o| from_json(o, node).ok());
        let old_bound =
            if optional { Value::Optional(old_value.map(Rc::new)) } else { old_value.unwrap_or(Value::Null) };
        let mut ev = Evaluator::new(this, old_bound, self.per_call_limit);
        let result = ev.eval(&program.ir);
        if ev.cost as i64 > self.budget {
            return Err("messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".into());
        }
        match result {
            Err(e) if e.cost_exceeded => Err(format!(
                "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
                crate::core::field::go_quote(source)
            )),
            Err(_) => {
                self.budget -= ev.cost as i64;
                Ok(None)
            }
            Ok(v) => {
                self.budget -= ev.cost as i64;
                let Value::Str(s) = v else { return Ok(None) };
                let text = s.as_str();
                if text.trim().is_empty()
                    || text.contains('\n')
                    || text.contains('\r')
                    || text.len() > MAX_MESSAGE_BYTES
                {
                    return Ok(None);
                }
                Ok(Some(text.to_string()))
            }
        }
    }
}

const BUDGET_MESSAGE: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

fn rule_error_string(rule: &CompiledRule) -> String {
    if !rule.spec.message.is_empty() { rule.spec.message.trim().to_string() } else { rule.spec.rule.trim().to_string() }
}

fn default_message(rule: &CompiledRule) -> String {
    if rule.spec.message.is_empty() {
        format!("failed rule: {}", rule_error_string(rule))
    } else {
        rule.spec.message.trim().to_string()
    }
}
