//! The type checker: resolves names, fields and overloads over the crate's parsed AST against
//! the types a schema declares, reports errors as cel-go words them, estimates cost, and
//! lowers the AST to the [`Ir`] the evaluator runs.
//!
//! Owns: static semantics. Must not touch: evaluation, schema walking.

use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::cost::{Cost, Size, call_cost};
use super::ir::{Const, Fold, Func, Ir, Loop, LoopKind, SelectMode};
use super::library::{regex as re, time};
use super::overloads;
use super::types::{Decl, Opaque, Type, join};
use super::value::TypeVal;

/// A variable in scope.
struct Var<'d> {
    name: String,
    ty: Type,
    decl: Option<&'d Decl>,
    visible: bool,
}

/// What checking one expression yields.
pub struct Checked<'d> {
    pub ir: Ir,
    pub ty: Type,
    pub decl: Option<&'d Decl>,
    pub cost: Cost,
    pub size: Option<Size>,
}

impl<'d> Checked<'d> {
    fn new(ir: Ir, ty: Type) -> Self {
        Checked { ir, ty, decl: None, cost: Cost::ZERO, size: None }
    }

    fn error() -> Self {
        Checked::new(Ir::Const(Const::Null), Type::Error)
    }

    fn size_or_unknown(&self) -> Size {
        self.size.unwrap_or_else(|| if super::cost::is_scalar(&self.ty) { Size::exact(1) } else { Size::UNKNOWN })
    }
}

pub struct Checker<'d> {
    scope: Vec<Var<'d>>,
    /// (expression id, message) of every error found.
    pub errors: Vec<(u64, String)>,
    suppress: u32,
    pub uses_old_self: bool,
    pub slots: usize,
    /// Errors found building the program rather than checking it (bad constant patterns).
    pub program_errors: Vec<String>,
    /// Set while checking the list literal of `format`, which may mix types.
    mixed_literal_ok: bool,
    /// How deeply the expression being checked nests, and whether it passed the limit:
    /// the program's depth bounds the evaluator's recursion on a request's stack.
    depth: usize,
    pub too_deep: bool,
    /// Whether this is the environment of MutatingAdmissionPolicy mutations: `Object{...}` and
    /// `JSONPatch{...}` literals and `jsonpatch.escapeKey` are declared only there.
    pub mutation: bool,
}

/// The deepest expression tree checked (cel-go's per-rule recursion limit).
const MAX_EXPRESSION_DEPTH: usize = 250;

impl<'d> Checker<'d> {
    /// A checker with `self` (slot 0) and `oldSelf` (slot 1, usable only when `old_self`).
    pub fn new(self_decl: Option<&'d Decl>, self_ty: Type, old_self: Option<Type>) -> Self {
        let old_visible = old_self.is_some();
        let scope = vec![
            Var { name: "self".into(), ty: self_ty, decl: self_decl, visible: true },
            Var { name: "oldSelf".into(), ty: old_self.unwrap_or(Type::Dyn), decl: self_decl, visible: old_visible },
        ];
        Checker {
            scope,
            errors: Vec::new(),
            suppress: 0,
            uses_old_self: false,
            slots: 2,
            program_errors: Vec::new(),
            mixed_literal_ok: false,
            depth: 0,
            too_deep: false,
            mutation: false,
        }
    }

    /// A checker with the given variables (all `dyn`) in slots 0, 1, ...: the environment of
    /// admission policies (`object`, `oldObject`, `request`, `params`, ...).
    pub fn with_variables(names: &[&str]) -> Self {
        let ty = |n: &str| {
            if n == "authorizer" { Type::Opaque(super::types::Opaque::Authorizer) } else { Type::Dyn }
        };
        let scope = names.iter().map(|n| Var { name: (*n).to_string(), ty: ty(n), decl: None, visible: true });
        let scope: Vec<Var<'d>> = scope.collect();
        let slots = scope.len();
        Checker {
            scope,
            errors: Vec::new(),
            suppress: 0,
            uses_old_self: false,
            slots,
            program_errors: Vec::new(),
            mixed_literal_ok: false,
            depth: 0,
            too_deep: false,
            mutation: false,
        }
    }

    fn err(&mut self, id: u64, msg: impl Into<String>) {
        if self.suppress == 0 {
            self.errors.push((id, msg.into()));
        }
    }

    fn push_var(&mut self, name: &str, ty: Type, decl: Option<&'d Decl>) -> usize {
        let slot = self.scope.len();
        self.scope.push(Var { name: name.to_string(), ty, decl, visible: true });
        self.slots = self.slots.max(self.scope.len());
        slot
    }

    fn pop_var(&mut self) {
        self.scope.pop();
    }

    fn lookup(&mut self, name: &str) -> Option<(usize, Type, Option<&'d Decl>)> {
        let (slot, var) = self.scope.iter().enumerate().rev().find(|(_, v)| v.visible && v.name == name)?;
        if slot == 1 {
            self.uses_old_self = true;
        }
        Some((slot, var.ty.clone(), var.decl))
    }

    fn is_var(&self, name: &str) -> bool {
        self.scope.iter().any(|v| v.visible && v.name == name)
    }

    pub fn check(&mut self, e: &IdedExpr) -> Checked<'d> {
        if self.depth >= MAX_EXPRESSION_DEPTH {
            self.too_deep = true;
            return Checked::error();
        }
        self.depth += 1;
        let checked = self.check_node(e);
        self.depth -= 1;
        checked
    }

    fn check_node(&mut self, e: &IdedExpr) -> Checked<'d> {
        match &e.expr {
            Expr::Literal(lit) => literal(lit),
            Expr::Ident(name) => self.ident(e.id, name),
            Expr::Select(sel) => {
                if !sel.test {
                    if let Some(t) = qualified_type(e).filter(|_| !self.root_is_var(e)) {
                        return type_literal(t);
                    }
                }
                let operand = self.check(&sel.operand);
                let mode = if sel.test { SelectMode::Test } else { SelectMode::Field };
                self.select(e.id, operand, &sel.field, mode)
            }
            Expr::Call(call) => self.call(e, &call.func_name, call.target.as_deref(), &call.args),
            Expr::List(list) => self.list(list),
            Expr::Map(map) => self.map(map),
            Expr::Comprehension(c) => self.fold(c),
            Expr::Struct(s) if self.mutation => self.struct_literal(e.id, s),
            Expr::Struct(_) => {
                self.err(e.id, "object creation is not supported");
                Checked::error()
            }
            Expr::Unspecified => Checked::error(),
        }
    }

    fn root_is_var(&self, e: &IdedExpr) -> bool {
        let mut cur = e;
        loop {
            match &cur.expr {
                Expr::Select(s) => cur = &s.operand,
                Expr::Ident(name) => return self.is_var(name),
                _ => return true,
            }
        }
    }

    fn ident(&mut self, id: u64, name: &str) -> Checked<'d> {
        if let Some((slot, ty, decl)) = self.lookup(name) {
            let size = decl.map(|d| Size::upto(d.max_elements));
            return Checked { ir: Ir::Var(slot), ty, decl, cost: Cost::fixed(1), size };
        }
        if let Some(t) = named_type(name) {
            return type_literal(t);
        }
        self.err(id, format!("undeclared reference to '{name}' (in container '')"));
        Checked::error()
    }

    fn select(&mut self, id: u64, operand: Checked<'d>, field: &str, mode: SelectMode) -> Checked<'d> {
        let test = mode == SelectMode::Test;
        // Selecting a field of an optional value yields an optional, as `.?` does.
        let (inner, optional, mode) = match (&operand.ty, mode) {
            (Type::Optional(t), SelectMode::Test) => ((**t).clone(), false, SelectMode::Test),
            (Type::Optional(t), _) => ((**t).clone(), true, SelectMode::Optional),
            (t, SelectMode::Optional) => (t.clone(), true, SelectMode::Optional),
            (t, m) => (t.clone(), false, m),
        };
        if let (Type::Opaque(super::types::Opaque::Authorizer), "requestResource", false) = (&inner, field, test) {
            // `authorizer.requestResource`: a resource check of the request's own resource.
            let cost = operand.cost.add(Cost::fixed(1));
            let ir = Ir::Call { func: super::ir::Func::AuthzRequestResource, args: vec![operand.ir] };
            return Checked { ir, ty: Type::Opaque(super::types::Opaque::ResourceCheck), decl: None, cost, size: None };
        }
        let (ty, decl, json_name) = match &inner {
            Type::Object(_) => {
                match operand.decl.and_then(|d| d.field(field).or_else(|| d.field(&keyword_field(field)))) {
                    Some((json, decl)) => (decl.ty.clone(), Some(decl), json.clone()),
                    None => match inner_field(&inner, field) {
                        Some((json, decl)) => (decl.ty.clone(), None, json),
                        None => {
                            self.err(id, format!("undefined field '{field}'"));
                            return Checked::error();
                        }
                    },
                }
            }
            Type::Map(_, v) => ((**v).clone(), operand.decl.and_then(|d| d.elem.as_deref()), field.to_string()),
            Type::Dyn | Type::Error => (Type::Dyn, None, field.to_string()),
            other => {
                self.err(id, format!("type '{other}' does not support field selection"));
                return Checked::error();
            }
        };
        let ty = if test {
            Type::Bool
        } else if optional {
            Type::optional(ty)
        } else {
            ty
        };
        // has() costs nothing in Kubernetes' environment; a selection costs 1.
        let cost = if test { operand.cost } else { operand.cost.add(Cost::fixed(1)) };
        let size = if test { None } else { decl.map(|d| Size::upto(d.max_elements)) };
        let ir = Ir::Select { operand: Box::new(operand.ir), field: Arc::from(json_name.as_str()), mode };
        Checked { ir, ty, decl: if test { None } else { decl }, cost, size }
    }

    fn list(&mut self, list: &cel::common::ast::ListExpr) -> Checked<'d> {
        let mixed_ok = std::mem::replace(&mut self.mixed_literal_ok, false);
        let checked = self.list_elements(list, mixed_ok);
        if mixed_ok {
            // A mixed list passed to `format` is a list of `dyn`.
            return Checked { ty: Type::list(Type::Dyn), ..checked };
        }
        checked
    }

    fn list_elements(&mut self, list: &cel::common::ast::ListExpr, mixed_ok: bool) -> Checked<'d> {
        let mut elems = Vec::new();
        let mut optional = Vec::new();
        let mut elem_ty: Option<Type> = None;
        let mut cost = Cost::fixed(10);
        let mut item_size: Option<Size> = None;
        for (i, e) in list.elements.iter().enumerate() {
            let is_opt = list.optional_indices.contains(&i);
            let c = self.check(e);
            let mut t = c.ty.clone();
            if is_opt {
                match &t {
                    Type::Optional(inner) => t = (**inner).clone(),
                    Type::Dyn | Type::Error => {}
                    other => {
                        self.err(e.id, format!("expected type 'optional_type' but found '{other}'"));
                    }
                }
            }
            elem_ty = Some(self.homogeneous(e.id, elem_ty, &t, mixed_ok));
            cost = cost.add(c.cost);
            item_size = Some(item_size.map_or(c.size_or_unknown(), |s| s.union(c.size_or_unknown())));
            elems.push(c.ir);
            optional.push(is_opt);
        }
        let n = elems.len() as u64;
        let _ = item_size;
        let ty = Type::list(elem_ty.unwrap_or(Type::Dyn));
        Checked { ir: Ir::List { elems, optional }, ty, decl: None, cost, size: Some(Size::exact(n)) }
    }

    /// The element type of an aggregate literal so far, reporting a mixed one.
    fn homogeneous(&mut self, id: u64, so_far: Option<Type>, next: &Type, mixed_ok: bool) -> Type {
        match so_far {
            None => next.clone(),
            Some(t) if t.is_dyn_or_error() || next.is_dyn_or_error() => join(&t, next),
            Some(t) if mixed_ok => join(&t, next),
            Some(t) => {
                if !same_type(&t, next) {
                    self.err(id, format!("expected type '{t}' but found '{next}'"));
                }
                t
            }
        }
    }

    /// `Object{...}`, `Object.spec{...}` and `JSONPatch{...}` of MutatingAdmissionPolicy
    /// mutations: an object built field by field, evaluated as a map of its fields.
    fn struct_literal(&mut self, id: u64, literal: &cel::common::ast::StructExpr) -> Checked<'d> {
        let Some(kind) = super::mutation::LiteralKind::of(&literal.type_name) else {
            self.err(id, format!("undeclared reference to '{}' (in container '')", literal.type_name));
            return Checked::error();
        };
        let mut entries = Vec::new();
        let mut cost = Cost::fixed(super::mutation::STRUCT_CREATION_COST);
        for entry in &literal.entries {
            let EntryExpr::StructField(field) = &entry.expr else {
                self.err(entry.id, "unexpected map entry in object literal");
                continue;
            };
            let value = self.check(&field.value);
            let value_ty = match (&value.ty, field.optional) {
                (Type::Optional(inner), true) => (**inner).clone(),
                (t, _) => t.clone(),
            };
            if let Some(message) = kind.field_error(&field.field, &value_ty) {
                self.err(entry.id, message);
            }
            cost = cost.add(value.cost);
            entries.push((Ir::Const(Const::Str(Arc::from(field.field.as_str()))), value.ir, field.optional));
        }
        let n = entries.len() as u64;
        Checked { ir: Ir::Map { entries }, ty: kind.ty(), decl: None, cost, size: Some(Size::exact(n)) }
    }

    fn map(&mut self, map: &cel::common::ast::MapExpr) -> Checked<'d> {
        let mut entries = Vec::new();
        let mut key_ty = None;
        let mut val_ty = None;
        let mut cost = Cost::fixed(30);
        for entry in &map.entries {
            let EntryExpr::MapEntry(me) = &entry.expr else {
                self.err(entry.id, "unexpected struct field in map literal");
                continue;
            };
            let k = self.check(&me.key);
            let v = self.check(&me.value);
            key_ty = Some(self.homogeneous(me.key.id, key_ty, &k.ty, false));
            let vt = match (&v.ty, me.optional) {
                (Type::Optional(inner), true) => (**inner).clone(),
                (t, _) => t.clone(),
            };
            val_ty = Some(self.homogeneous(me.value.id, val_ty, &vt, false));
            cost = cost.add(k.cost).add(v.cost);
            entries.push((k.ir, v.ir, me.optional));
        }
        let n = entries.len() as u64;
        let ty = Type::map(key_ty.unwrap_or(Type::Dyn), val_ty.unwrap_or(Type::Dyn));
        Checked { ir: Ir::Map { entries }, ty, decl: None, cost, size: Some(Size::exact(n)) }
    }

    /// The element type and declaration iterating a range yields.
    fn range_elem(&mut self, id: u64, range: &Checked<'d>) -> Option<(Type, Option<&'d Decl>, Type)> {
        let elem_decl = range.decl.and_then(|d| d.elem.as_deref());
        match &range.ty {
            Type::List(t) => Some(((**t).clone(), elem_decl, Type::Int)),
            Type::Map(k, v) => Some(((**k).clone(), None, (**v).clone())),
            Type::Dyn | Type::Error => Some((Type::Dyn, None, Type::Dyn)),
            other => {
                self.err(
                    id,
                    format!("expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"),
                );
                None
            }
        }
    }

    fn fold(&mut self, c: &cel::common::ast::ComprehensionExpr) -> Checked<'d> {
        let range = self.check(&c.iter_range);
        let Some((elem_ty, elem_decl, _)) = self.range_elem(c.iter_range.id, &range) else { return Checked::error() };
        let map_value_decl = range.decl.and_then(|d| d.elem.as_deref());
        let init = self.check(&c.accu_init);
        // The accumulator's type is refined by a first, silent pass over the step.
        self.suppress += 1;
        let accu_ty = {
            self.push_var(&c.accu_var, init.ty.clone(), None);
            self.push_var(&c.iter_var, elem_ty.clone(), elem_decl);
            let step = self.check(&c.loop_step);
            self.pop_var();
            self.pop_var();
            refine(&init.ty, &step.ty)
        };
        self.suppress -= 1;
        let accu = self.push_var(&c.accu_var, accu_ty.clone(), None);
        let (var, var2) = match &c.iter_var2 {
            Some(v2) => {
                let (k_ty, v_ty) = match &range.ty {
                    Type::List(t) => (Type::Int, (**t).clone()),
                    Type::Map(k, v) => ((**k).clone(), (**v).clone()),
                    _ => (Type::Dyn, Type::Dyn),
                };
                let a = self.push_var(&c.iter_var, k_ty, None);
                let b = self.push_var(v2, v_ty, map_value_decl);
                (a, Some(b))
            }
            None => (self.push_var(&c.iter_var, elem_ty, elem_decl), None),
        };
        let cond = self.check(&c.loop_cond);
        let step = self.check(&c.loop_step);
        if var2.is_some() {
            self.pop_var();
        }
        self.pop_var();
        let result = self.check(&c.result);
        self.pop_var();
        let range_size = range.size_or_unknown();
        let cost = range.cost.add(init.cost).add(result.cost).add(range_size.times_cost(step.cost.add(cond.cost)));
        let size = match &c.accu_init.expr {
            Expr::List(_) | Expr::Map(_) => Some(range_size),
            _ => init.size,
        };
        let ty = result.ty.clone();
        // `filter` keeps its range's items, and so their declared sizes.
        let decl = if ty == range.ty { range.decl } else { None };
        let ir = Ir::Fold(Box::new(Fold {
            range: range.ir,
            var,
            var2,
            accu,
            init: init.ir,
            cond: cond.ir,
            step: step.ir,
            result: result.ir,
        }));
        Checked { ir, ty, decl, cost, size }
    }

    fn call(&mut self, e: &IdedExpr, name: &str, target: Option<&IdedExpr>, args: &[IdedExpr]) -> Checked<'d> {
        if let Some(special) = self.special_call(e, name, target, args) {
            return special;
        }
        // `ns.f(x)` where `ns` is no variable names the global function `ns.f`.
        if let Some(t) = target {
            if let Some(ns) = namespace_of(t).filter(|ns| !self.is_var(ns.split('.').next().unwrap_or(""))) {
                let qualified = format!("{ns}.{name}");
                if overloads::declared(&qualified)
                    && (self.mutation || !super::mutation::only_for_mutations(&qualified))
                {
                    return self.resolve_call(e, &qualified, None, args);
                }
            }
        }
        self.resolve_call(e, name, target, args)
    }

    fn resolve_call(&mut self, e: &IdedExpr, name: &str, target: Option<&IdedExpr>, args: &[IdedExpr]) -> Checked<'d> {
        match name {
            "_&&_" | "_||_" => return self.logic(e, name, args),
            "_?_:_" => return self.conditional(e, args),
            "_[_]" | "_[?_]" => return self.index(e, name, args),
            "_?._" => return self.opt_select(e, args),
            "type" if target.is_none() && args.len() == 1 => {
                let arg = args.first().map(|a| self.check(a)).unwrap_or_else(Checked::error);
                let cost = arg.cost.add(Cost::fixed(1));
                let ty = Type::type_of(arg.ty.clone());
                return Checked {
                    ir: Ir::Call { func: Func::TypeOf, args: vec![arg.ir] },
                    ty,
                    decl: None,
                    cost,
                    size: None,
                };
            }
            _ => {}
        }
        let target_checked = target.map(|t| self.check(t));
        let checked_args: Vec<Checked<'d>> = args
            .iter()
            .map(|a| {
                self.mixed_literal_ok = name == "format" && target.is_some() && matches!(a.expr, Expr::List(_));
                let c = self.check(a);
                self.mixed_literal_ok = false;
                c
            })
            .collect();
        if target_checked.as_ref().is_some_and(|t| t.ty == Type::Error)
            || checked_args.iter().any(|a| a.ty == Type::Error)
        {
            return Checked::error();
        }
        let arg_types: Vec<Type> = checked_args.iter().map(|a| a.ty.clone()).collect();
        let receiver_ty = target_checked.as_ref().map(|t| t.ty.clone());
        let Some(resolved) = overloads::resolve(name, receiver_ty.as_ref(), &arg_types) else {
            if !overloads::declared(name) {
                self.err(e.id, format!("undeclared reference to '{name}' (in container '')"));
            } else {
                let shown: Vec<String> = arg_types.iter().map(ToString::to_string).collect();
                let signature = match &receiver_ty {
                    Some(r) => format!("{r}.({})", shown.join(", ")),
                    None => format!("({})", shown.join(", ")),
                };
                self.err(e.id, format!("found no matching overload for '{name}' applied to '{signature}'"));
            }
            return Checked::error();
        };
        let mut all: Vec<Checked<'d>> = Vec::new();
        if let Some(t) = target_checked {
            all.push(t);
        }
        all.extend(checked_args);
        self.validate_literals(resolved.func, args, &all);
        let (fn_cost, size) = call_cost(resolved.func, &all, &resolved.result);
        let cost = all.iter().fold(fn_cost, |c, a| c.add(a.cost));
        let decl = result_decl(resolved.func, &all);
        if resolved.func == Func::Sum {
            let zero = match resolved.result {
                Type::Double => Const::Double(0.0),
                Type::Uint => Const::Uint(0),
                Type::Duration => Const::Duration(time::Duration(0)),
                _ => Const::Int(0),
            };
            all.push(Checked::new(Ir::Const(zero), Type::Dyn));
        }
        let ir = self.lower_call(resolved.func, all, args);
        Checked { ir, ty: resolved.result, decl, cost, size }
    }

    /// Compile-time checks of constant arguments, as Kubernetes' AST validators do.
    fn validate_literals(&mut self, func: Func, args: &[IdedExpr], checked: &[Checked<'d>]) {
        let last_arg = args.last();
        let const_str = |c: &Checked<'d>| match &c.ir {
            Ir::Const(Const::Str(s)) => Some(s.clone()),
            _ => None,
        };
        match func {
            Func::ToDuration => {
                if let (Some(arg), Some(s)) = (last_arg, checked.last().and_then(const_str)) {
                    if time::Duration::parse_go(&s).is_err() {
                        self.err(arg.id, "invalid duration argument");
                    }
                }
            }
            Func::ToTimestamp => {
                if let (Some(arg), Some(c)) = (last_arg, checked.last()) {
                    let bad = match &c.ir {
                        Ir::Const(Const::Str(s)) => time::Timestamp::parse_rfc3339(s).is_err(),
                        Ir::Const(Const::Int(i)) => time::Timestamp::from_seconds(*i).is_err(),
                        _ => false,
                    };
                    if bad {
                        self.err(arg.id, "invalid timestamp");
                    }
                }
            }
            Func::Matches => {
                if let (Some(arg), Some(s)) = (last_arg, checked.last().and_then(const_str)) {
                    if re::compile(&s).is_err() {
                        self.err(arg.id, "invalid matches argument");
                    }
                }
            }
            _ => {}
        }
    }

    /// Builds the call, precompiling constant regular expressions.
    fn lower_call(&mut self, func: Func, all: Vec<Checked<'d>>, args: &[IdedExpr]) -> Ir {
        if matches!(func, Func::Matches | Func::Find | Func::FindAll) {
            if let Some(Ir::Const(Const::Str(pattern))) = all.get(1).map(|c| &c.ir) {
                match re::compile(pattern) {
                    Ok(regex) => {
                        let pattern_len = pattern.chars().count();
                        let args = all.into_iter().map(|c| c.ir).collect();
                        return Ir::Regex { func, args, regex: Arc::new(regex), pattern_len };
                    }
                    Err(err) if func != Func::Matches => {
                        let _ = args;
                        if self.suppress == 0 {
                            self.program_errors.push(format!("program instantiation failed: {err}"));
                        }
                    }
                    Err(_) => {}
                }
            }
        }
        let func = match all.get(1).map(|c| &c.ir) {
            Some(list @ Ir::List { elems, .. })
                if func == Func::In && list.is_constant() && elems.iter().all(is_scalar) =>
            {
                Func::InSet
            }
            _ => func,
        };
        Ir::Call { func, args: all.into_iter().map(|c| c.ir).collect() }
    }

    /// `a || b || c` (and `&&`): the parser nests a chain to the left, one level per
    /// operator; its operands are checked one by one and combined into a balanced tree, as
    /// cel-go's parser balances them, so neither checking nor evaluation recurses once per
    /// operand (a rule may chain thousands).
    fn logic(&mut self, e: &IdedExpr, name: &str, args: &[IdedExpr]) -> Checked<'d> {
        let mut ops = vec![e.id];
        let mut operands = Vec::new();
        let mut here = args;
        loop {
            let (Some(a), Some(b)) = (here.first(), here.get(1)) else { return Checked::error() };
            operands.push(b);
            match &a.expr {
                Expr::Call(c) if c.func_name == name && c.target.is_none() && c.args.len() == 2 => {
                    ops.push(a.id);
                    here = &c.args;
                }
                _ => {
                    operands.push(a);
                    break;
                }
            }
        }
        ops.reverse();
        operands.reverse();
        let mut checked: Vec<Option<Checked<'d>>> = operands.into_iter().map(|o| Some(self.check(o))).collect();
        self.balanced(name, &ops, &mut checked, 0, ops.len().saturating_sub(1))
    }

    /// The tree of `ops[lo..=hi]` over their operands, split in the middle (cel-go's balancer).
    fn balanced(
        &mut self,
        name: &str,
        ops: &[u64],
        operands: &mut [Option<Checked<'d>>],
        lo: usize,
        hi: usize,
    ) -> Checked<'d> {
        let mid = (lo + hi).div_ceil(2);
        let l = if mid == lo {
            operands.get_mut(mid).and_then(Option::take).unwrap_or_else(Checked::error)
        } else {
            self.balanced(name, ops, operands, lo, mid - 1)
        };
        let r = if mid == hi {
            operands.get_mut(mid + 1).and_then(Option::take).unwrap_or_else(Checked::error)
        } else {
            self.balanced(name, ops, operands, mid + 1, hi)
        };
        self.logic_pair(ops.get(mid).copied().unwrap_or_default(), name, l, r)
    }

    fn logic_pair(&mut self, id: u64, name: &str, l: Checked<'d>, r: Checked<'d>) -> Checked<'d> {
        for t in [&l.ty, &r.ty] {
            if !matches!(t, Type::Bool | Type::Dyn | Type::Error) {
                self.err(id, format!("found no matching overload for '{name}' applied to '({}, {})'", l.ty, r.ty));
                return Checked::error();
            }
        }
        let cost = Cost { min: l.cost.min, max: l.cost.add(r.cost).max };
        let ir = if name == "_&&_" {
            Ir::And(Box::new(l.ir), Box::new(r.ir))
        } else {
            Ir::Or(Box::new(l.ir), Box::new(r.ir))
        };
        Checked { ir, ty: Type::Bool, decl: None, cost, size: None }
    }

    fn conditional(&mut self, e: &IdedExpr, args: &[IdedExpr]) -> Checked<'d> {
        let (Some(c), Some(t), Some(f)) = (args.first(), args.get(1), args.get(2)) else { return Checked::error() };
        let c = self.check(c);
        let t = self.check(t);
        let f = self.check(f);
        let types_ok = matches!(c.ty, Type::Bool | Type::Dyn | Type::Error)
            && (t.ty.is_dyn_or_error() || f.ty.is_dyn_or_error() || compatible(&t.ty, &f.ty));
        if !types_ok {
            self.err(
                e.id,
                format!("found no matching overload for '_?_:_' applied to '({}, {}, {})'", c.ty, t.ty, f.ty),
            );
            return Checked::error();
        }
        let ty = join_specific(&t.ty, &f.ty);
        let cost = c.cost.add(t.cost.union(f.cost));
        let size = Some(t.size_or_unknown().union(f.size_or_unknown()));
        let decl = if t.decl == f.decl { t.decl } else { None };
        Checked { ir: Ir::Cond(Box::new(c.ir), Box::new(t.ir), Box::new(f.ir)), ty, decl, cost, size }
    }

    fn index(&mut self, e: &IdedExpr, name: &str, args: &[IdedExpr]) -> Checked<'d> {
        let (Some(a), Some(b)) = (args.first(), args.get(1)) else { return Checked::error() };
        let operand = self.check(a);
        let index = self.check(b);
        let optional = name == "_[?_]";
        let (container, was_optional) = match &operand.ty {
            Type::Optional(t) => ((**t).clone(), true),
            t => (t.clone(), false),
        };
        let optional = optional || was_optional;
        let elem_decl = operand.decl.and_then(|d| d.elem.as_deref());
        let ty = match (&container, &index.ty) {
            (Type::List(t), Type::Int | Type::Uint | Type::Dyn | Type::Error) => (**t).clone(),
            (Type::Map(k, v), i) if compatible(k, i) || i.is_dyn_or_error() || k.is_dyn_or_error() => (**v).clone(),
            (Type::Dyn | Type::Error, _) => Type::Dyn,
            _ => {
                self.err(
                    e.id,
                    format!("found no matching overload for '{name}' applied to '({}, {})'", operand.ty, index.ty),
                );
                return Checked::error();
            }
        };
        let ty = if optional { Type::optional(ty) } else { ty };
        let cost = operand.cost.add(index.cost).add(Cost::fixed(1));
        let size = elem_decl.map(|d| Size::upto(d.max_elements));
        let ir = Ir::Index { operand: Box::new(operand.ir), index: Box::new(index.ir), optional };
        Checked { ir, ty, decl: elem_decl, cost, size }
    }

    fn opt_select(&mut self, e: &IdedExpr, args: &[IdedExpr]) -> Checked<'d> {
        let (Some(a), Some(b)) = (args.first(), args.get(1)) else { return Checked::error() };
        let Expr::Literal(LiteralValue::String(field)) = &b.expr else {
            self.err(e.id, "optional field selection requires a field name");
            return Checked::error();
        };
        let operand = self.check(a);
        let field = field.inner().to_string();
        self.select(e.id, operand, &field, SelectMode::Optional)
    }
}

/// The declaration a call's result keeps: a list function returning the same list keeps it.
fn result_decl<'d>(func: Func, all: &[Checked<'d>]) -> Option<&'d Decl> {
    match func {
        Func::Dyn | Func::Distinct | Func::Reverse | Func::Sort | Func::Slice => all.first().and_then(|a| a.decl),
        Func::Min | Func::Max | Func::OptValue => all.first().and_then(|a| a.decl).and_then(|d| d.elem.as_deref()),
        _ => None,
    }
}

/// The type of a conditional: where one branch is `dyn` (an accumulator not yet refined),
/// the other branch's type.
fn join_specific(a: &Type, b: &Type) -> Type {
    match (a, b) {
        (Type::Dyn, x) | (x, Type::Dyn) => x.clone(),
        (Type::List(x), Type::List(y)) => Type::list(join_specific(x, y)),
        (Type::Map(xk, xv), Type::Map(yk, yv)) => Type::map(join_specific(xk, yk), join_specific(xv, yv)),
        (x, y) if x == y => x.clone(),
        _ => Type::Dyn,
    }
}

/// The more specific of an accumulator's initial type and its step's type.
fn refine(init: &Type, step: &Type) -> Type {
    match (init, step) {
        (Type::Dyn, s) => s.clone(),
        (Type::List(a), Type::List(b)) => Type::list(refine(a, b)),
        (Type::Map(ak, av), Type::Map(bk, bv)) => Type::map(refine(ak, bk), refine(av, bv)),
        (i, _) => i.clone(),
    }
}

/// Whether two types are the same, `dyn` matching anything inside containers.
fn compatible(a: &Type, b: &Type) -> bool {
    super::types::assignable(a, b, &mut Default::default()) || super::types::assignable(b, a, &mut Default::default())
}

fn same_type(a: &Type, b: &Type) -> bool {
    match (a, b) {
        (Type::List(x), Type::List(y)) => same_type(x, y) || x.is_dyn_or_error() || y.is_dyn_or_error(),
        (Type::Map(xk, xv), Type::Map(yk, yv)) => {
            (same_type(xk, yk) || xk.is_dyn_or_error() || yk.is_dyn_or_error())
                && (same_type(xv, yv) || xv.is_dyn_or_error() || yv.is_dyn_or_error())
        }
        (Type::Optional(x), Type::Optional(y)) => same_type(x, y) || x.is_dyn_or_error() || y.is_dyn_or_error(),
        (Type::Meta(_), Type::Meta(_)) => true,
        _ => a == b,
    }
}

/// The dotted name a call target spells, when it is only identifiers: `sets`, `format`.
fn namespace_of(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        Expr::Ident(n) => Some(n.clone()),
        Expr::Select(s) if !s.test => namespace_of(&s.operand).map(|ns| format!("{ns}.{}", s.field)),
        _ => None,
    }
}

/// A qualified type name such as `google.protobuf.Duration` or `net.IP`.
fn qualified_type(e: &IdedExpr) -> Option<Type> {
    named_type(&namespace_of(e)?)
}

fn named_type(name: &str) -> Option<Type> {
    Some(match name {
        "int" => Type::Int,
        "uint" => Type::Uint,
        "double" => Type::Double,
        "bool" => Type::Bool,
        "string" => Type::String,
        "bytes" => Type::Bytes,
        "null_type" => Type::Null,
        "list" => Type::list(Type::Dyn),
        "map" => Type::map(Type::Dyn, Type::Dyn),
        "type" => Type::Meta(None),
        "optional_type" => Type::optional(Type::Dyn),
        "google.protobuf.Duration" => Type::Duration,
        "google.protobuf.Timestamp" => Type::Timestamp,
        "net.IP" => Type::Opaque(Opaque::Ip),
        "net.CIDR" => Type::Opaque(Opaque::Cidr),
        "kubernetes.Quantity" => Type::Opaque(Opaque::Quantity),
        "kubernetes.URL" => Type::Opaque(Opaque::Url),
        "kubernetes.Semver" => Type::Opaque(Opaque::Semver),
        _ => return None,
    })
}

fn type_literal<'d>(t: Type) -> Checked<'d> {
    let val = match &t {
        Type::Int => TypeVal::Int,
        Type::Uint => TypeVal::Uint,
        Type::Double => TypeVal::Double,
        Type::Bool => TypeVal::Bool,
        Type::String => TypeVal::String,
        Type::Bytes => TypeVal::Bytes,
        Type::Null => TypeVal::Null,
        Type::List(_) => TypeVal::List,
        Type::Map(_, _) => TypeVal::Map,
        Type::Optional(_) => TypeVal::Optional,
        Type::Duration => TypeVal::Duration,
        Type::Timestamp => TypeVal::Timestamp,
        Type::Opaque(o) => TypeVal::Opaque(*o),
        _ => TypeVal::Type,
    };
    Checked::new(Ir::Const(Const::Type(val)), Type::type_of(t))
}

fn inner_field(ty: &Type, field: &str) -> Option<(String, Decl)> {
    match ty {
        Type::Object(o) => o.fields.get(field).or_else(|| o.fields.get(&keyword_field(field))).cloned(),
        _ => None,
    }
}

/// Since Kubernetes 1.30 a CEL keyword may name its escaped field: `self.if` is `self.__if__`.
fn keyword_field(field: &str) -> String {
    if super::escaping::escape(field).is_some_and(|e| e != field)
        && !field.contains(['.', '-', '/'])
        && !field.contains("__")
    {
        format!("__{field}__")
    } else {
        field.to_string()
    }
}

fn literal<'d>(lit: &LiteralValue) -> Checked<'d> {
    let (c, ty, size) = match lit {
        LiteralValue::Boolean(b) => (Const::Bool(*b.inner()), Type::Bool, None),
        LiteralValue::Int(i) => (Const::Int(*i.inner()), Type::Int, None),
        LiteralValue::UInt(u) => (Const::Uint(*u.inner()), Type::Uint, None),
        LiteralValue::Double(d) => (Const::Double(*d.inner()), Type::Double, None),
        LiteralValue::Null => (Const::Null, Type::Null, None),
        LiteralValue::String(s) => {
            let text: &str = s.inner();
            (Const::Str(Arc::from(text)), Type::String, Some(Size::exact(text.chars().count() as u64)))
        }
        LiteralValue::Bytes(b) => {
            let bytes: &[u8] = b.inner();
            (Const::Bytes(Arc::from(bytes)), Type::Bytes, Some(Size::exact(bytes.len() as u64)))
        }
    };
    Checked { ir: Ir::Const(c), ty, decl: None, cost: Cost::ZERO, size }
}

impl<'d> Checker<'d> {
    /// Calls the crate's parser leaves unexpanded: two-variable comprehensions, `cel.bind`,
    /// `optMap`/`optFlatMap` and `sortBy`.
    fn special_call(
        &mut self,
        e: &IdedExpr,
        name: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Option<Checked<'d>> {
        let target = target?;
        let ident = |a: Option<&IdedExpr>| match a.map(|a| &a.expr) {
            Some(Expr::Ident(n)) => Some(n.clone()),
            _ => None,
        };
        if name == "bind"
            && matches!(&target.expr, Expr::Ident(n) if n == "cel")
            && !self.is_var("cel")
            && args.len() == 3
        {
            let var = ident(args.first())?;
            let init = self.check(args.get(1)?);
            let slot = self.push_var(&var, init.ty.clone(), init.decl);
            let body = self.check(args.get(2)?);
            self.pop_var();
            let cost = init.cost.add(body.cost);
            let ir = Ir::Bind { slot, init: Box::new(init.ir), body: Box::new(body.ir) };
            return Some(Checked { ir, ty: body.ty, decl: body.decl, cost, size: body.size });
        }
        let kind = match (name, args.len()) {
            ("all", 3) => LoopKind::All,
            ("exists", 3) => LoopKind::Exists,
            ("existsOne" | "exists_one", 3) => LoopKind::ExistsOne,
            ("transformList", 3 | 4) => LoopKind::TransformList,
            ("transformMap", 3 | 4) => LoopKind::TransformMap,
            ("transformMapEntry", 3 | 4) => LoopKind::TransformMapEntry,
            ("optMap" | "optFlatMap", 2) => return Some(self.opt_map(e, name == "optFlatMap", target, args)),
            ("sortBy", 2) => return Some(self.sort_by(e, target, args)),
            _ => return None,
        };
        let (Some(v1), Some(v2)) = (ident(args.first()), ident(args.get(1))) else {
            self.err(e.id, "argument must be a simple name");
            return Some(Checked::error());
        };
        let range = self.check(target);
        let (k_ty, v_ty, v_decl) = match &range.ty {
            Type::List(t) => (Type::Int, (**t).clone(), range.decl.and_then(|d| d.elem.as_deref())),
            Type::Map(k, v) => ((**k).clone(), (**v).clone(), range.decl.and_then(|d| d.elem.as_deref())),
            Type::Dyn | Type::Error => (Type::Dyn, Type::Dyn, None),
            other => {
                self.err(
                    target.id,
                    format!("expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"),
                );
                return Some(Checked::error());
            }
        };
        let var = self.push_var(&v1, k_ty, None);
        let var2 = self.push_var(&v2, v_ty, v_decl);
        let rest = args.get(2..).unwrap_or(&[]);
        let (filter, body, _) = match (kind, rest) {
            (LoopKind::TransformMapEntry, [b]) | (LoopKind::TransformList | LoopKind::TransformMap, [b]) => {
                (None, self.check(b), None)
            }
            (LoopKind::TransformList | LoopKind::TransformMap | LoopKind::TransformMapEntry, [f, b]) => {
                (Some(self.check(f)), self.check(b), None)
            }
            (_, [b]) => (None, self.check(b), None),
            _ => (None, Checked::error(), None::<Checked<'d>>),
        };
        self.pop_var();
        self.pop_var();
        let ty = match kind {
            LoopKind::All | LoopKind::Exists | LoopKind::ExistsOne => Type::Bool,
            LoopKind::TransformList => Type::list(body.ty.clone()),
            LoopKind::TransformMap => match &range.ty {
                Type::Map(k, _) => Type::map((**k).clone(), body.ty.clone()),
                Type::List(_) => Type::map(Type::Int, body.ty.clone()),
                _ => Type::map(Type::Dyn, body.ty.clone()),
            },
            LoopKind::TransformMapEntry => match &body.ty {
                Type::Map(k, v) => Type::map((**k).clone(), (**v).clone()),
                _ => Type::map(Type::Dyn, Type::Dyn),
            },
        };
        let range_size = range.size_or_unknown();
        let per_item = body.cost.add(filter.as_ref().map_or(Cost::ZERO, |f| f.cost)).add(Cost::fixed(2));
        let cost = range.cost.add(range_size.times_cost(per_item));
        let ir =
            Ir::Loop(Box::new(Loop { kind, range: range.ir, var, var2, filter: filter.map(|f| f.ir), body: body.ir }));
        Some(Checked { ir, ty, decl: None, cost, size: Some(range_size) })
    }

    fn opt_map(&mut self, e: &IdedExpr, flat: bool, target: &IdedExpr, args: &[IdedExpr]) -> Checked<'d> {
        let Some(Expr::Ident(var)) = args.first().map(|a| &a.expr) else {
            self.err(e.id, "argument must be a simple name");
            return Checked::error();
        };
        let t = self.check(target);
        let inner = match &t.ty {
            Type::Optional(i) => (**i).clone(),
            _ => Type::Dyn,
        };
        let slot = self.push_var(var, inner, None);
        let body = match args.get(1) {
            Some(b) => self.check(b),
            None => Checked::error(),
        };
        self.pop_var();
        let ty = if flat { body.ty.clone() } else { Type::optional(body.ty.clone()) };
        let cost = t.cost.add(body.cost).add(Cost::fixed(1));
        let ir = Ir::OptMap { target: Box::new(t.ir), slot, body: Box::new(body.ir), flat };
        Checked { ir, ty, decl: None, cost, size: None }
    }

    fn sort_by(&mut self, e: &IdedExpr, target: &IdedExpr, args: &[IdedExpr]) -> Checked<'d> {
        let Some(Expr::Ident(var)) = args.first().map(|a| &a.expr) else {
            self.err(e.id, "argument must be a simple name");
            return Checked::error();
        };
        let t = self.check(target);
        let elem = match &t.ty {
            Type::List(i) => (**i).clone(),
            _ => Type::Dyn,
        };
        let slot = self.push_var(var, elem, t.decl.and_then(|d| d.elem.as_deref()));
        let key = match args.get(1) {
            Some(b) => self.check(b),
            None => Checked::error(),
        };
        self.pop_var();
        let size = t.size_or_unknown();
        let cost = t.cost.add(size.times_cost(key.cost.add(Cost::fixed(1))));
        let ty = t.ty.clone();
        let decl = t.decl;
        Checked {
            ir: Ir::SortBy { target: Box::new(t.ir), slot, key: Box::new(key.ir) },
            ty,
            decl,
            cost,
            size: Some(size),
        }
    }
}

/// A literal of the kinds cel-go keeps in a set for `in`.
fn is_scalar(ir: &Ir) -> bool {
    matches!(ir, Ir::Const(Const::Bool(_) | Const::Int(_) | Const::Uint(_) | Const::Double(_) | Const::Str(_)))
}
