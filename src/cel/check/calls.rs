//! Calls: overload resolution, the estimate of each call (its own cost from the estimators in
//! `cost`, plus its arguments'), the operators cel-go treats apart (`&&`, `||`, `?:`, indexing,
//! `.?`), and lowering, where conversions of constants are folded and constant regular
//! expressions compiled, as cel-go's planner does with the options Kubernetes sets.
//!
//! Owns: call checking and lowering. Must not touch: evaluation.

use std::sync::Arc;

use cel::common::ast::{Expr, IdedExpr, LiteralValue};

use super::super::cost::{CallCost, Cost, EntrySize, estimate_call};
use super::super::eval::Evaluator;
use super::super::ir::{Const, Func, Ir, SelectMode};
use super::super::library::{regex as re, time};
use super::super::overloads;
use super::super::types::Type;
use super::super::value::Value;
use super::{Checked, Checker, SchemaPath, Step, namespace_of, scalar_size};

impl<'d> Checker<'d> {
    pub(super) fn call(
        &mut self,
        e: &IdedExpr,
        name: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Checked<'d> {
        if let Some(special) = self.special_call(e, name, target, args) {
            return special;
        }
        // `ns.f(x)` where `ns` is no variable names the global function `ns.f`.
        if let Some(t) = target {
            if let Some(ns) = namespace_of(t).filter(|ns| !self.is_var(ns.split('.').next().unwrap_or(""))) {
                let qualified = format!("{ns}.{name}");
                if overloads::declared(&qualified)
                    && (self.mutation || !super::super::mutation::only_for_mutations(&qualified))
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
                let ir = self.lower_call(Func::TypeOf, CallCost::Fixed(1), vec![arg], args);
                return Checked { cost, ..Checked::new(ir, ty) };
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
        let mut resolved = resolved;
        if all.iter().any(|a| is_empty_literal(&a.ir)) {
            // cel-go types `[]` and `{}` with fresh type variables, which the first overload
            // matched binds: later overloads no longer match them.
            resolved.overloads.truncate(1);
        }
        self.validate_literals(resolved.func, args, &all);
        let func = resolved.func;
        let args_cost = all.iter().fold(Cost::ZERO, |c, a| c.add(a.cost));
        if func == Func::Dyn {
            // `dyn` only turns type checking off: one for the call, and its argument's sizes.
            let (size, entry) = all.first().map_or((None, None), |a| (a.size, a.entry));
            let cost = args_cost.add(Cost::fixed(1));
            let ir = self.lower_call(func, CallCost::Fixed(1), all, args);
            return Checked { ir, ty: resolved.result, path: SchemaPath::None, cost, size, entry };
        }
        let estimate = estimate_call(func, &resolved.overloads, &all, self.root);
        let size = estimate.size.or_else(|| scalar_size(&resolved.result));
        let entry = match (func, all.first(), all.get(1)) {
            (Func::Add, Some(a), Some(b)) => EntrySize::union(a.entry, b.entry),
            _ => None,
        };
        let cost = args_cost.add(estimate.cost);
        if func == Func::Sum {
            let zero = match resolved.result {
                Type::Double => Const::Double(0.0),
                Type::Uint => Const::Uint(0),
                Type::Duration => Const::Duration(time::Duration(0)),
                _ => Const::Int(0),
            };
            all.push(Checked::new(Ir::Const(zero), Type::Dyn));
        }
        let runtime_cost = CallCost::for_call(func, &resolved.overloads);
        let ir = self.lower_call(func, runtime_cost, all, args);
        Checked { ir, ty: resolved.result, path: SchemaPath::None, cost, size, entry }
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

    /// Builds the call as cel-go's planner does with `OptOptimize`: a type conversion of a
    /// constant is evaluated once (it then costs nothing), constant regular expressions are
    /// compiled, `in` a literal list of scalars becomes a set lookup, and the optional `or` and
    /// `orValue` evaluate their alternative only when needed.
    fn lower_call(&mut self, func: Func, cost: CallCost, all: Vec<Checked<'d>>, args: &[IdedExpr]) -> Ir {
        if is_conversion(func) {
            if let [only] = all.as_slice() {
                if only.ir.is_constant() {
                    return self.fold_conversion(func, all);
                }
            }
        }
        if matches!(func, Func::Matches | Func::Find | Func::FindAll) {
            if let Some(Ir::Const(Const::Str(pattern))) = all.get(1).map(|c| &c.ir) {
                match re::compile(pattern) {
                    Ok(regex) => {
                        let args = all.into_iter().map(|c| c.ir).collect();
                        return Ir::Regex { func, args, regex: Arc::new(regex), cost };
                    }
                    Err(err) if func != Func::Matches => {
                        let _ = args;
                        self.program_error(format!("program instantiation failed: {err}"));
                    }
                    Err(_) => {}
                }
            }
        }
        if matches!(func, Func::Or | Func::OrValue) && all.len() == 2 {
            // cel-go's optional library plans these to evaluate the alternative lazily.
            let mut operands = all.into_iter().map(|c| Box::new(c.ir));
            if let (Some(lhs), Some(rhs)) = (operands.next(), operands.next()) {
                return Ir::OrElse { lhs, rhs, unwrap: func == Func::OrValue };
            }
            return Ir::Const(Const::Null);
        }
        match all.get(1).map(|c| &c.ir) {
            Some(list @ Ir::List { elems, .. })
                if func == Func::In && list.is_constant() && elems.iter().all(is_scalar) =>
            {
                let args = all.into_iter().map(|c| c.ir).collect();
                Ir::Call { func: Func::InSet, args, cost: CallCost::Fixed(0) }
            }
            _ => Ir::Call { func, args: all.into_iter().map(|c| c.ir).collect(), cost },
        }
    }

    /// Evaluates a conversion of a constant now; a failure fails the program, as cel-go's
    /// planner reports it.
    fn fold_conversion(&mut self, func: Func, all: Vec<Checked<'d>>) -> Ir {
        let call = Ir::Call { func, args: all.into_iter().map(|c| c.ir).collect(), cost: CallCost::Fixed(0) };
        if func == Func::Dyn {
            // `dyn` of a constant is the constant itself.
            if let Ir::Call { mut args, .. } = call {
                return args.pop().unwrap_or(Ir::Const(Const::Null));
            }
            return Ir::Const(Const::Null);
        }
        let folded = match Evaluator::with_slots(Vec::new(), u64::MAX).eval(&call) {
            Ok(v) => Ok(constant_of(&v)),
            Err(e) => Err(e.message),
        };
        match folded {
            Ok(Some(c)) => Ir::Const(c),
            Ok(None) => call,
            Err(message) => {
                self.program_error(format!("program instantiation failed: {message}"));
                call
            }
        }
    }

    fn program_error(&mut self, message: String) {
        if self.suppress == 0 {
            self.program_errors.push(message);
        }
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
        // The right-hand side may be skipped: at least the left's cost, at most both.
        let cost = Cost { min: l.cost.min, max: l.cost.add(r.cost).max };
        let ir = if name == "_&&_" {
            Ir::And(Box::new(l.ir), Box::new(r.ir))
        } else {
            Ir::Or(Box::new(l.ir), Box::new(r.ir))
        };
        Checked { cost, size: scalar_size(&Type::Bool), ..Checked::new(ir, Type::Bool) }
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
        let entry = EntrySize::union(t.entry, f.entry);
        let ir = Ir::Cond(Box::new(c.ir), Box::new(t.ir), Box::new(f.ir));
        Checked { ir, ty, path: SchemaPath::None, cost, size, entry }
    }

    fn index(&mut self, e: &IdedExpr, name: &str, args: &[IdedExpr]) -> Checked<'d> {
        let (Some(a), Some(b)) = (args.first(), args.get(1)) else { return Checked::error() };
        let operand = self.check(a);
        let index = self.check(b);
        let (container, was_optional) = match &operand.ty {
            Type::Optional(t) => ((**t).clone(), true),
            t => (t.clone(), false),
        };
        let optional = name == "_[?_]" || was_optional;
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
        // Only plain indexing of a list or map keeps a path (to its items); its result is
        // sized by a literal's entries first, then by that path.
        let (path, size) = if optional {
            (SchemaPath::None, scalar_size(&ty))
        } else {
            let path = operand.path.step(self.root, Step::Items);
            let size = operand.entry.map(|en| en.value).or_else(|| path.size()).or_else(|| scalar_size(&ty));
            (path, size)
        };
        let ir = Ir::Index { operand: Box::new(operand.ir), index: Box::new(index.ir), optional };
        Checked { ir, ty, path, cost, size, entry: None }
    }

    /// `a.?b`: a call to cel-go's checker, costing one and keeping no path.
    fn opt_select(&mut self, e: &IdedExpr, args: &[IdedExpr]) -> Checked<'d> {
        let (Some(a), Some(b)) = (args.first(), args.get(1)) else { return Checked::error() };
        let Expr::Literal(LiteralValue::String(field)) = &b.expr else {
            self.err(e.id, "optional field selection requires a field name");
            return Checked::error();
        };
        let operand = self.check(a);
        let cost = operand.cost.add(Cost::fixed(1));
        let field = field.inner().to_string();
        let selected = self.select(e.id, operand, &field, SelectMode::Optional);
        let size = scalar_size(&selected.ty);
        Checked { path: SchemaPath::None, cost, size, entry: None, ..selected }
    }
}

/// The functions cel-go folds when their argument is a constant.
fn is_conversion(func: Func) -> bool {
    matches!(
        func,
        Func::ToInt
            | Func::ToUint
            | Func::ToDouble
            | Func::ToString
            | Func::ToBytes
            | Func::ToBool
            | Func::ToDuration
            | Func::ToTimestamp
            | Func::Dyn
            | Func::TypeOf
    )
}

/// The constant a folded value is, when it is a scalar.
fn constant_of(v: &Value<'_>) -> Option<Const> {
    Some(match v {
        Value::Null => Const::Null,
        Value::Bool(b) => Const::Bool(*b),
        Value::Int(i) => Const::Int(*i),
        Value::Uint(u) => Const::Uint(*u),
        Value::Double(d) => Const::Double(*d),
        Value::Str(s) => Const::Str(Arc::from(s.as_str())),
        Value::Bytes(b) => Const::Bytes(Arc::from(b.as_ref())),
        Value::Duration(d) => Const::Duration(*d),
        Value::Timestamp(t) => Const::Timestamp(*t),
        Value::Type(t) => Const::Type(t.clone()),
        _ => return None,
    })
}

/// The type of a conditional: where one branch is `dyn` (an accumulator not yet refined),
/// the other branch's type.
pub(super) fn join_specific(a: &Type, b: &Type) -> Type {
    match (a, b) {
        (Type::Dyn, x) | (x, Type::Dyn) => x.clone(),
        (Type::List(x), Type::List(y)) => Type::list(join_specific(x, y)),
        (Type::Map(xk, xv), Type::Map(yk, yv)) => Type::map(join_specific(xk, yk), join_specific(xv, yv)),
        (x, y) if x == y => x.clone(),
        _ => Type::Dyn,
    }
}

/// Whether two types are the same, `dyn` matching anything inside containers.
pub(super) fn compatible(a: &Type, b: &Type) -> bool {
    super::super::types::assignable(a, b, &mut Default::default())
        || super::super::types::assignable(b, a, &mut Default::default())
}

fn is_empty_literal(ir: &Ir) -> bool {
    match ir {
        Ir::List { elems, .. } => elems.is_empty(),
        Ir::Map { entries } => entries.is_empty(),
        _ => false,
    }
}

/// A literal of the kinds cel-go keeps in a set for `in`.
fn is_scalar(ir: &Ir) -> bool {
    matches!(ir, Ir::Const(Const::Bool(_) | Const::Int(_) | Const::Uint(_) | Const::Double(_) | Const::Str(_)))
}
