//! Compiling a schema's validation rules once, when a definition loads: every rule and
//! messageExpression parsed, type-checked against the schema's declared types and costed,
//! with Kubernetes' errors (paths under `openAPIV3Schema`, cost budgets, transition-rule and
//! fieldPath checks).
//!
//! Owns: the compiled rule tree and load-time errors. Must not touch: evaluation.

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::common::ast::{IdedExpr, SourceInfo};
use cel::parser::Parser;

use super::check::Checker;
use super::errors;
use super::fieldpath;
use super::ir::Ir;
use super::schema::{Node, RuleSpec, Shape};
use super::types::{Decl, MAX_REQUEST_SIZE_BYTES, Type};
use crate::core::field::{FieldError, Path};

/// Kubernetes' per-expression estimated cost limit.
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// Kubernetes' estimated cost limit for all rules of one schema.
pub const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;
const REASONS: &[&str] = &["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];

/// A checked program.
#[derive(Debug)]
pub struct Program {
    pub ir: Ir,
    pub max_cost: u64,
}

/// One rule, compiled.
#[derive(Debug)]
pub struct CompiledRule {
    pub spec: RuleSpec,
    /// The program, or the compile error Kubernetes reports for it.
    pub program: Result<Program, String>,
    pub message: Option<Result<Program, String>>,
    pub uses_old_self: bool,
    /// The normalized `fieldPath`, appended to the error path.
    pub field_path: Option<String>,
    /// Where the rule sits in the definition (`...x-kubernetes-validations[0]`).
    pub location: Path,
    /// Its estimated cost times the times it may run, as checked against the limit (`None`:
    /// it did not compile).
    pub estimated_cost: Option<u64>,
}

/// The compiled rules of a schema node and its descendants (only branches with rules).
#[derive(Debug, Default)]
pub struct RuleNode {
    pub rules: Vec<CompiledRule>,
    pub properties: BTreeMap<String, RuleNode>,
    pub additional: Option<Box<RuleNode>>,
    pub items: Option<Box<RuleNode>>,
    /// `allOf` branches, each with the schema node their rules see.
    pub all_of: Vec<(Node, RuleNode)>,
}

impl RuleNode {
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
            && self.properties.is_empty()
            && self.additional.is_none()
            && self.items.is_none()
            && self.all_of.is_empty()
    }
}

struct Ctx {
    errors: Vec<FieldError>,
    total: u64,
    expensive: Vec<(Path, u64)>,
}

/// Compiles every rule under `root` (the resource root); `path` is where the schema sits in
/// the definition (`spec.versions[0].schema.openAPIV3Schema`).
pub fn compile_tree(root: &Node, path: &Path) -> (RuleNode, Vec<FieldError>) {
    let mut ctx = Ctx { errors: Vec::new(), total: 0, expensive: Vec::new() };
    let tree = compile_node(root, path, true, Some(1), None, &mut ctx);
    if ctx.total > STATIC_ESTIMATED_CRD_COST_LIMIT {
        for (p, _) in &ctx.expensive {
            ctx.errors.push(FieldError::forbidden(
                p.clone(),
                "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        ctx.errors.push(FieldError::forbidden(
            path.clone(),
            errors::cost_message(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                ctx.total,
                STATIC_ESTIMATED_CRD_COST_LIMIT,
            ),
        ));
    }
    (tree, ctx.errors)
}

/// How many values of a node's children a request can hold, given the node's bound.
fn child_cardinality(parent: Option<u64>, node: &Node) -> Option<u64> {
    let parent = parent?;
    let factor = match node.shape {
        Shape::Array => node.max_items.map(|m| m.max(0) as u64)?,
        Shape::Object if node.additional.is_some() => node.max_properties.map(|m| m.max(0) as u64)?,
        _ => 1,
    };
    Some(parent.saturating_mul(factor))
}

fn compile_node(
    node: &Node,
    path: &Path,
    is_resource: bool,
    cardinality: Option<u64>,
    uncorrelatable: Option<&Path>,
    ctx: &mut Ctx,
) -> RuleNode {
    let mut out = RuleNode::default();
    if !node.rules.is_empty() {
        let decl = Decl::of(node, "self");
        for (i, spec) in node.rules.iter().enumerate() {
            let rule_path = path.child("x-kubernetes-validations").index(i);
            if let Some(compiled) =
                compile_rule(node, decl.as_ref(), spec, &rule_path, cardinality, uncorrelatable, ctx)
            {
                out.rules.push(compiled);
            }
        }
    }
    let _ = is_resource;
    for (name, prop) in &node.properties {
        let child_path = path.child("properties").key(name);
        let map_uncorrelatable = match node.map_type.as_str() {
            "granular" | "atomic" => uncorrelatable.cloned(),
            _ => Some(uncorrelatable.cloned().unwrap_or_else(|| child_path.clone())),
        };
        let sub = compile_node(
            prop,
            &child_path,
            prop.embedded,
            child_cardinality(cardinality, node),
            map_uncorrelatable.as_ref(),
            ctx,
        );
        if !sub.is_empty() {
            out.properties.insert(name.clone(), sub);
        }
    }
    if let Some(values) = node.additional.as_deref() {
        let sub = compile_node(
            values,
            &path.child("additionalProperties"),
            values.embedded,
            child_cardinality(cardinality, node),
            uncorrelatable,
            ctx,
        );
        if !sub.is_empty() {
            out.additional = Some(Box::new(sub));
        }
    }
    if let Some(items) = node.items.as_deref() {
        let items_path = path.child("items");
        let unc = if node.list_type == "map" {
            uncorrelatable.cloned()
        } else {
            Some(uncorrelatable.cloned().unwrap_or_else(|| items_path.clone()))
        };
        let sub =
            compile_node(items, &items_path, items.embedded, child_cardinality(cardinality, node), unc.as_ref(), ctx);
        if !sub.is_empty() {
            out.items = Some(Box::new(sub));
        }
    }
    for (i, branch) in node.all_of.iter().enumerate() {
        let mut merged = without_rules(node);
        overlay(&mut merged, branch);
        let sub = compile_node(&merged, &path.child("allOf").index(i), is_resource, cardinality, uncorrelatable, ctx);
        if !sub.is_empty() {
            out.all_of.push((merged, sub));
        }
    }
    out
}

/// The structural node with no rules anywhere below it.
fn without_rules(node: &Node) -> Node {
    let mut out = node.clone();
    strip(&mut out);
    out
}

fn strip(node: &mut Node) {
    node.rules.clear();
    node.all_of.clear();
    node.properties.values_mut().for_each(strip);
    if let Some(a) = node.additional.as_deref_mut() {
        strip(a);
    }
    if let Some(i) = node.items.as_deref_mut() {
        strip(i);
    }
}

/// Puts the rules of an `allOf` branch (a value validation without types) onto the
/// structural node they apply to.
fn overlay(target: &mut Node, branch: &Node) {
    target.rules.clone_from(&branch.rules);
    target.all_of.clone_from(&branch.all_of);
    for (k, b) in &branch.properties {
        if let Some(t) = target.properties.get_mut(k) {
            overlay(t, b);
        }
    }
    if let (Some(t), Some(b)) = (target.additional.as_deref_mut(), branch.additional.as_deref()) {
        overlay(t, b);
    }
    if let (Some(t), Some(b)) = (target.items.as_deref_mut(), branch.items.as_deref()) {
        overlay(t, b);
    }
}

fn has_line_breaks(s: &str) -> bool {
    s.contains('\n') || s.contains('\r')
}

/// Checks the rule's fields, then compiles it. `None` when the rule is empty.
fn compile_rule(
    node: &Node,
    decl: Option<&Decl>,
    spec: &RuleSpec,
    rule_path: &Path,
    cardinality: Option<u64>,
    uncorrelatable: Option<&Path>,
    ctx: &mut Ctx,
) -> Option<CompiledRule> {
    let rule = spec.rule.trim();
    let message = spec.message.trim();
    let mut shape_errors = Vec::new();
    if rule.is_empty() {
        shape_errors.push(FieldError::required(rule_path.child("rule"), "rule is not specified"));
    } else if !spec.message.is_empty() && message.is_empty() {
        shape_errors.push(FieldError::invalid(
            rule_path.child("message"),
            spec.message.as_str(),
            "must be non-empty if specified",
        ));
    } else if has_line_breaks(message) {
        shape_errors.push(FieldError::invalid(
            rule_path.child("message"),
            spec.message.as_str(),
            "must not contain line breaks",
        ));
    } else if has_line_breaks(rule) && message.is_empty() {
        shape_errors.push(FieldError::required(
            rule_path.child("message"),
            "message must be specified if rule contains line breaks",
        ));
    }
    if !spec.message_expression.is_empty() && spec.message_expression.trim().is_empty() {
        shape_errors.push(FieldError::required(
            rule_path.child("messageExpression"),
            "messageExpression must be non-empty if specified",
        ));
    }
    if let Some(reason) = &spec.reason {
        if !REASONS.contains(&reason.as_str()) {
            shape_errors.push(FieldError::not_supported(rule_path.child("reason"), reason.as_str(), REASONS));
        }
    }
    let mut field_path = None;
    if !spec.field_path.is_empty() {
        if spec.field_path.trim().is_empty() {
            shape_errors.push(FieldError::invalid(
                rule_path.child("fieldPath"),
                spec.field_path.as_str(),
                "must be non-empty if specified",
            ));
        } else if has_line_breaks(&spec.field_path) {
            shape_errors.push(FieldError::invalid(
                rule_path.child("fieldPath"),
                spec.field_path.as_str(),
                "must not contain line breaks",
            ));
        }
        match fieldpath::resolve(&spec.field_path, node) {
            Ok(p) => field_path = Some(p),
            Err(_) => shape_errors.push(FieldError::invalid(
                rule_path.child("fieldPath"),
                spec.field_path.as_str(),
                "must be a valid path",
            )),
        }
    }
    let had_shape_errors = !shape_errors.is_empty();
    ctx.errors.extend(shape_errors);
    if rule.is_empty() {
        return None;
    }
    let bad_value = errors::rule_json(spec);
    let optional_old_self = spec.optional_old_self.unwrap_or(false);
    let (program, uses_old_self) = compile_expr(&spec.rule, decl, optional_old_self, Type::Bool);
    let mut program = program;
    let mut estimated_cost = None;
    if let Ok(p) = &program {
        let cost = expression_cost(p.max_cost, cardinality, decl);
        estimated_cost = Some(cost);
        if cost > STATIC_ESTIMATED_COST_LIMIT {
            ctx.errors.push(FieldError::forbidden(
                rule_path.child("rule"),
                errors::cost_message("estimated rule cost", cost, STATIC_ESTIMATED_COST_LIMIT),
            ));
        }
        observe(ctx, rule_path.child("rule"), cost);
    }
    if let Err(detail) = &program {
        if !had_shape_errors {
            ctx.errors.push(FieldError::invalid_typed(rule_path.child("rule"), bad_value.clone(), detail.clone()));
        }
    }
    let message_program = if spec.message_expression.trim().is_empty() {
        None
    } else {
        let (m, _) = compile_expr(&spec.message_expression, decl, optional_old_self, Type::String);
        let m = m.map_err(|e| {
            e.replacen("compilation failed", "messageExpression compilation failed", 1)
                .replace("cel expression must evaluate to a bool", "messageExpression must evaluate to a string")
        });
        match &m {
            Ok(p) => {
                // Unlike the rule's, Kubernetes checks and totals a message expression's
                // estimate as it is, not times the number of values it may run for.
                let cost = p.max_cost;
                if cost > STATIC_ESTIMATED_COST_LIMIT {
                    ctx.errors.push(FieldError::forbidden(
                        rule_path.child("messageExpression"),
                        errors::cost_message("estimated messageExpression cost", cost, STATIC_ESTIMATED_COST_LIMIT),
                    ));
                }
                observe(ctx, rule_path.child("messageExpression"), cost);
            }
            Err(detail) => {
                ctx.errors.push(FieldError::invalid_typed(
                    rule_path.child("messageExpression"),
                    bad_value.clone(),
                    detail.clone(),
                ));
            }
        }
        Some(m)
    };
    if program.is_ok() {
        if uses_old_self {
            if let Some(unc) = uncorrelatable {
                ctx.errors.push(FieldError::invalid(
                    rule_path.child("rule"),
                    spec.rule.as_str(),
                    format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {unc}"),
                ));
            }
        } else if let Some(v) = spec.optional_old_self {
            ctx.errors.push(FieldError::invalid(
                rule_path.child("optionalOldSelf"),
                v,
                "may not be set if oldSelf is not used in rule",
            ));
        }
    }
    if decl.is_none() {
        program = Err("compilation failed: rule is placed on a schema node CEL cannot see".into());
    }
    Some(CompiledRule {
        spec: spec.clone(),
        program,
        message: message_program,
        uses_old_self,
        field_path,
        location: rule_path.clone(),
        estimated_cost,
    })
}

fn observe(ctx: &mut Ctx, path: Path, cost: u64) {
    ctx.total = ctx.total.saturating_add(cost);
    if cost < STATIC_ESTIMATED_CRD_COST_LIMIT / 100 {
        return;
    }
    ctx.expensive.push((path, cost));
    ctx.expensive.sort_by_key(|e| std::cmp::Reverse(e.1));
    ctx.expensive.truncate(4);
}

/// A rule's cost times the times it may run (Kubernetes' `getExpressionCost`).
fn expression_cost(max_cost: u64, cardinality: Option<u64>, decl: Option<&Decl>) -> u64 {
    let times = cardinality.unwrap_or_else(|| {
        let min_size = decl.map_or(1, |d| d.min_size);
        (MAX_REQUEST_SIZE_BYTES / (min_size + 1)) as u64
    });
    if max_cost == 0 {
        return 0;
    }
    max_cost.saturating_mul(times)
}

/// cel-go's parser limits: the size of an expression in code points, and how deeply its
/// grammar rules may nest (`expression recursion limit exceeded: 250`).
const MAX_EXPRESSION_CODE_POINTS: usize = 100_000;
const MAX_RECURSION_DEPTH: u16 = 250;
/// Parsing and checking recurse once per nesting level, with the generated parser's large
/// frames; they run on a thread whose stack holds the deepest expression the limits allow,
/// never on the caller's (a runtime worker's 2 MiB). Only touched pages are committed.
const COMPILE_STACK_BYTES: usize = 256 << 20;

/// Parses and checks one expression against `self`'s declaration; the result must have type
/// `want`. Returns the program (or Kubernetes' error text) and whether it uses `oldSelf`.
pub fn compile_expr(
    source: &str,
    decl: Option<&Decl>,
    optional_old_self: bool,
    want: Type,
) -> (Result<Program, String>, bool) {
    let size = source.chars().count();
    if size > MAX_EXPRESSION_CODE_POINTS {
        return (
            Err(limit_error(&format!(
                "expression code point size exceeds limit: size: {size}, limit {MAX_EXPRESSION_CODE_POINTS}"
            ))),
            false,
        );
    }
    let compiled = on_compile_stack(|| compile_here(source, decl, optional_old_self, want));
    compiled.unwrap_or_else(|| (Err("compilation failed: the expression could not be compiled".into()), false))
}

thread_local! {
    /// Whether this thread is one [`on_compile_stack`] started.
    static ON_COMPILE_STACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` on a thread with the compile stack ([`COMPILE_STACK_BYTES`]), where every
/// expression `f` compiles is compiled without a thread of its own: a definition's rules are
/// compiled on one thread, not one each (starting a thread and unmapping its stack cost more
/// than compiling a short rule). Already on such a thread, `f` runs there. `None` when `f`
/// panicked or no thread could be started.
pub fn on_compile_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Option<T> {
    if ON_COMPILE_STACK.with(std::cell::Cell::get) {
        // As on a thread of its own, a panic fails this expression only.
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok();
    }
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel-compile".into())
            .stack_size(COMPILE_STACK_BYTES)
            .spawn_scoped(scope, || {
                ON_COMPILE_STACK.with(|on| on.set(true));
                f()
            })
            .ok()
            .and_then(|thread| thread.join().ok())
    })
}

/// `work` applied to every item on one thread per core with the compile stack, in item order:
/// everything `work` compiles is compiled on its worker (loading many definitions starts no
/// thread per definition). A panicking item fails alone (`None`), as on a thread of its own;
/// `None` for every item when no thread could be started.
pub fn map_on_compile_stack<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<Option<R>> {
    let on_stack = |item: &T| {
        ON_COMPILE_STACK.with(|on| on.set(true));
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(item))).ok()
    };
    crate::core::parallel::map_with_stack(items, COMPILE_STACK_BYTES, on_stack)
        .unwrap_or_else(|| items.iter().map(|_| None).collect())
}

/// An admission expression compiled, with what mutations need besides the program.
pub struct AdmissionProgram {
    pub program: Program,
    /// The checked result type.
    pub ty: Type,
    /// Apply-configuration literals whose type names do not follow their field paths.
    pub type_mismatches: Vec<String>,
}

/// Compiles an admission policy expression over `variables` (all `dyn`), wanting a result of
/// type `want` (`None`: any), with the same parser limits and error texts as rules; in the
/// environment of mutations when `mutation` (object literals, `jsonpatch`).
pub fn compile_admission(
    source: &str,
    variables: &[&str],
    want: Option<Type>,
    mutation: bool,
) -> Result<AdmissionProgram, String> {
    let size = source.chars().count();
    if size > MAX_EXPRESSION_CODE_POINTS {
        return Err(limit_error(&format!(
            "expression code point size exceeds limit: size: {size}, limit {MAX_EXPRESSION_CODE_POINTS}"
        )));
    }
    let compiled = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel-compile".into())
            .stack_size(COMPILE_STACK_BYTES)
            .spawn_scoped(scope, || {
                let parsed = Parser::new()
                    .enable_optional_syntax(true)
                    .max_recursion_depth(MAX_RECURSION_DEPTH)
                    .parse_with_source_info(source);
                let (expr, info) = match parsed {
                    Ok(p) => p,
                    Err(errs) => return Err(format!("compilation failed: {}", errors::parse_errors(source, &errs))),
                };
                let mut checker = Checker::with_variables(variables);
                checker.mutation = mutation;
                let checked = checker.check(&expr);
                if checker.too_deep {
                    return Err(limit_error(&format!("expression recursion limit exceeded: {MAX_RECURSION_DEPTH}")));
                }
                if !checker.errors.is_empty() {
                    return Err(format!(
                        "compilation failed: {}",
                        errors::check_errors(source, &info, &checker.errors)
                    ));
                }
                match &want {
                    Some(want) if checked.ty != *want && checked.ty != Type::Dyn && checked.ty != Type::Error => {
                        return Err(if *want == Type::Bool {
                            "cel expression must evaluate to a bool".to_string()
                        } else {
                            "messageExpression must evaluate to a string".to_string()
                        });
                    }
                    _ => {}
                }
                if let Some(e) = checker.program_errors.first() {
                    return Err(e.clone());
                }
                let type_mismatches = if mutation { super::mutation::type_name_mismatches(&expr) } else { Vec::new() };
                Ok(AdmissionProgram {
                    program: Program { ir: checked.ir, max_cost: checked.cost.max },
                    ty: checked.ty,
                    type_mismatches,
                })
            })
            .ok()
            .and_then(|thread| thread.join().ok())
    });
    compiled.unwrap_or_else(|| Err("compilation failed: the expression could not be compiled".into()))
}

/// CEL rules parsed, by their text: definitions repeat the same rules by the thousand (the
/// parser's options never change, so a text always parses the same).
static PARSED: crate::core::recall::Recall<Option<Arc<IdedExpr>>> = crate::core::recall::Recall::new(16384);

/// Parses a rule as Kubernetes' CEL environment does.
fn parse(source: &str) -> Result<(IdedExpr, SourceInfo), cel::parser::ParseErrors> {
    Parser::new().enable_optional_syntax(true).max_recursion_depth(MAX_RECURSION_DEPTH).parse_with_source_info(source)
}

/// The positions of `source`'s parts: those of the parse just made, or of a new one.
fn positions(info: Option<SourceInfo>, source: &str) -> SourceInfo {
    info.unwrap_or_else(|| parse(source).map(|(_, info)| info).unwrap_or_default())
}

/// A compile error without a position, as cel-go renders one (`<input>:-1:0`).
fn limit_error(message: &str) -> String {
    format!("compilation failed: ERROR: <input>:-1:0: {message}")
}

fn compile_here(
    source: &str,
    decl: Option<&Decl>,
    optional_old_self: bool,
    want: Type,
) -> (Result<Program, String>, bool) {
    // The parse of a text seen before is the one remembered; only this parse's positions are
    // needed, and only to word an error (the text is parsed again for them then).
    let (mut info, mut refused) = (None, None);
    let parsed = PARSED.get_or(
        source,
        |source| match parse(source) {
            Ok((expr, positions)) => {
                info = Some(positions);
                Some(Arc::new(expr))
            }
            Err(errs) => {
                refused = Some(errs);
                None
            }
        },
        Option::is_some,
    );
    let expr = match (parsed, refused) {
        (Some(expr), _) => expr,
        (None, Some(errs)) if errs.errors.iter().any(|e| e.msg.contains("Recursion limit of")) => {
            return (Err(limit_error(&format!("expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"))), false);
        }
        (None, Some(errs)) => {
            return (Err(format!("compilation failed: {}", errors::parse_errors(source, &errs))), false);
        }
        (None, None) => return (Err("compilation failed: the expression could not be parsed".into()), false),
    };
    let self_ty = decl.map_or(Type::Dyn, |d| d.ty.clone());
    let old_ty = if optional_old_self { Type::optional(self_ty.clone()) } else { self_ty.clone() };
    let mut checker = Checker::new(decl, self_ty, Some(old_ty));
    let checked = checker.check(&expr);
    if checker.too_deep {
        // Chains of one operator (`1 + 1 + ...`) nest a grammar rule once per operator too.
        return (
            Err(limit_error(&format!("expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"))),
            checker.uses_old_self,
        );
    }
    if !checker.errors.is_empty() {
        return (
            Err(format!(
                "compilation failed: {}",
                errors::check_errors(source, &positions(info, source), &checker.errors)
            )),
            checker.uses_old_self,
        );
    }
    if checked.ty != want && checked.ty != Type::Error {
        let what = if want == Type::Bool {
            "cel expression must evaluate to a bool"
        } else {
            "messageExpression must evaluate to a string"
        };
        return (Err(what.into()), checker.uses_old_self);
    }
    if let Some(e) = checker.program_errors.first() {
        return (Err(e.clone()), checker.uses_old_self);
    }
    (Ok(Program { ir: checked.ir, max_cost: checked.cost.max }), checker.uses_old_self)
}
