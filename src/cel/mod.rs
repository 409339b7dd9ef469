//! CEL validation rules (`x-kubernetes-validations`) with Kubernetes' semantics.
//!
//! A definition version's schema is compiled once ([`Rules::compile`]): every rule is parsed
//! (by the `cel` crate), type-checked against the types the structural schema declares,
//! costed against Kubernetes' limits, and lowered to a program. At request time
//! [`Rules::validate`] runs the programs over the object (and the old object on update) with
//! a cost budget, and returns field errors and ratcheting warnings.
//!
//! Owns: CEL checking, cost, evaluation and the Kubernetes libraries. Must not touch: HTTP,
//! storage, the API layer; it reads the schema JSON itself rather than the schema module.

mod check;
mod compile;
mod cost;
mod errors;
mod escaping;
mod eval;
mod fieldpath;
mod ir;
pub mod library;
mod mutation;
mod overloads;
pub mod policy;
mod schema;
mod types;
mod validator;
mod value;

use serde_json::Value as Json;

use crate::core::field::{FieldError, Path};
pub use compile::{STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT, on_compile_stack};
pub use validator::{Outcome, PER_CALL_LIMIT, RUNTIME_COST_BUDGET};

/// The compiled validation rules of one schema.
#[derive(Debug)]
pub struct Rules {
    schema: schema::Node,
    tree: compile::RuleNode,
}

impl Rules {
    /// Compiles the rules of a resource's `openAPIV3Schema`. `path` is where the schema sits
    /// in the definition, for error paths. Returns the rules (which keep any rule that failed
    /// to compile, reported at run time as Kubernetes does) and the load-time errors; a
    /// definition with errors must be refused.
    pub fn compile(schema_json: &Json, path: &Path) -> (Rules, Vec<FieldError>) {
        Rules::compile_node(schema_json, path, true)
    }

    /// As [`Rules::compile`], for a schema that is not a resource root when `is_root` is false.
    pub fn compile_node(schema_json: &Json, path: &Path, is_root: bool) -> (Rules, Vec<FieldError>) {
        let started = std::time::Instant::now();
        let schema = schema::Node::from_json(schema_json, is_root);
        let (tree, errs) = compile::compile_tree(&schema, path);
        if !tree.is_empty() {
            crate::metrics::global().cel.compilation.observe_duration(started.elapsed());
        }
        (Rules { schema, tree }, errs)
    }

    /// The estimated maximum cost of each rule on the schema's root (`None`: did not compile),
    /// before multiplying by cardinality.
    pub fn root_rule_costs(&self) -> Vec<Option<u64>> {
        self.tree.rules.iter().map(|r| r.program.as_ref().ok().map(|p| p.max_cost)).collect()
    }

    /// What compiling each rule on the schema's root gave, in order; a rule with no text
    /// compiles to nothing and is left out, as Kubernetes leaves its program out.
    pub fn root_rule_outcomes(&self) -> Vec<RuleOutcome> {
        let outcome = |r: &compile::CompiledRule| RuleOutcome {
            rule: r.spec.rule.clone(),
            error: r.program.as_ref().err().cloned(),
            uses_old_self: r.uses_old_self,
        };
        self.tree.rules.iter().map(outcome).collect()
    }

    /// Whether there is any rule to run.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// Every rule of the schema, in the order of the tree (a node's own rules, then its
    /// properties by name, additional properties, items, `allOf` branches).
    pub fn summaries(&self) -> Vec<RuleSummary> {
        let mut out = Vec::new();
        summarize(&self.tree, &mut out);
        out
    }

    /// Whether some rule reads `oldSelf` (a transition rule, which only updates run).
    pub fn has_transition_rules(&self) -> bool {
        fn any(node: &compile::RuleNode) -> bool {
            node.rules.iter().any(|r| r.uses_old_self)
                || node.properties.values().any(any)
                || node.additional.as_deref().is_some_and(any)
                || node.items.as_deref().is_some_and(any)
                || node.all_of.iter().any(|(_, branch)| any(branch))
        }
        any(&self.tree)
    }

    /// Validates an object (create: `old` is `None`) with Kubernetes' per-request budget.
    /// Error paths start at the object root (`spec.replicas`; the root itself is `<nil>`).
    pub fn validate(&self, new: &Json, old: Option<&Json>) -> Outcome {
        self.validate_at(&Path::nil(), new, old, RUNTIME_COST_BUDGET)
    }

    /// Validates with an explicit root path and cost budget.
    pub fn validate_at(&self, root: &Path, new: &Json, old: Option<&Json>, budget: i64) -> Outcome {
        self.validate_with_limits(root, new, old, budget, PER_CALL_LIMIT)
    }

    /// Validates with an explicit root path, cost budget and per-call cost limit.
    pub fn validate_with_limits(
        &self,
        root: &Path,
        new: &Json,
        old: Option<&Json>,
        budget: i64,
        per_call: u64,
    ) -> Outcome {
        if self.tree.is_empty() {
            return validator::validate(&self.tree, &self.schema, root, new, old, budget, per_call);
        }
        let started = std::time::Instant::now();
        let outcome = validator::validate(&self.tree, &self.schema, root, new, old, budget, per_call);
        crate::metrics::global().cel.evaluation.observe_duration(started.elapsed());
        outcome
    }
}

/// What compiling one rule gave: the compile error Kubernetes would report for it (`None`:
/// it compiled) and whether it is a transition rule (uses `oldSelf`).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleOutcome {
    pub rule: String,
    pub error: Option<String>,
    pub uses_old_self: bool,
}

/// One rule of a schema: where it sits, its text and its estimated cost.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSummary {
    /// Where the rule sits in the definition (`spec.versions[0].schema.openAPIV3Schema.
    /// properties[spec].x-kubernetes-validations[0]`).
    pub location: Path,
    pub rule: String,
    /// The estimated cost times the times it may run, as Kubernetes checks it against
    /// [`STATIC_ESTIMATED_COST_LIMIT`] (`None`: the rule did not compile).
    pub estimated_cost: Option<u64>,
    pub uses_old_self: bool,
}

fn summarize(node: &compile::RuleNode, out: &mut Vec<RuleSummary>) {
    out.extend(node.rules.iter().map(|r| RuleSummary {
        location: r.location.clone(),
        rule: r.spec.rule.clone(),
        estimated_cost: r.estimated_cost,
        uses_old_self: r.uses_old_self,
    }));
    node.properties.values().for_each(|child| summarize(child, out));
    if let Some(additional) = node.additional.as_deref() {
        summarize(additional, out);
    }
    if let Some(items) = node.items.as_deref() {
        summarize(items, out);
    }
    node.all_of.iter().for_each(|(_, branch)| summarize(branch, out));
}

/// The field path a rule's `fieldPath` names below a schema node, or why it is invalid.
pub fn resolve_field_path(schema_json: &Json, field_path: &str) -> Result<String, String> {
    let node = schema::Node::from_json(schema_json, false);
    fieldpath::resolve(field_path, &node)
}

#[cfg(test)]
mod corner_tests;
#[cfg(test)]
mod cost_tests;
#[cfg(test)]
mod limits_tests;
#[cfg(test)]
mod tests;
