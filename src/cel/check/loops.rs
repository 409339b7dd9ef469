//! Comprehensions and what cel-go expands into them: the folds the parser builds for the
//! standard macros, and the forms the crate's parser leaves as calls (two-variable
//! comprehensions, `cel.bind`, `optMap`/`optFlatMap`, `sortBy`), each costed as its cel-go
//! expansion is: the range, the accumulator's initial value and the result once, the loop
//! condition and step once per element.
//!
//! Owns: comprehension checking and estimates. Must not touch: evaluation.

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr};

use super::super::cost::{Cost, EntrySize, LIST_CREATE_COST, MAP_CREATE_COST, Size, sort_estimate};
use super::super::ir::{Fold, Ir, Loop, LoopKind};
use super::super::types::Type;
use super::{Checked, Checker, SchemaPath, Step, scalar_size};

/// How iterating a range binds a variable: its path, and its size when the path gives none.
struct IterVar<'d> {
    ty: Type,
    path: SchemaPath<'d>,
    size: Option<Size>,
}

impl<'d> Checker<'d> {
    /// The element type iterating a range yields, or an error for a range that is no list,
    /// map or `dyn`.
    fn range_types(&mut self, id: u64, range: &Checked<'d>) -> Option<(Type, Type)> {
        match &range.ty {
            Type::List(t) => Some((Type::Int, (**t).clone())),
            Type::Map(k, v) => Some(((**k).clone(), (**v).clone())),
            Type::Dyn | Type::Error => Some((Type::Dyn, Type::Dyn)),
            other => {
                self.err(
                    id,
                    format!("expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"),
                );
                None
            }
        }
    }

    /// Whether a range iterates as a list: by its literal entries when known, else its type.
    fn iterates_list(range: &Checked<'d>) -> bool {
        range.entry.map_or(matches!(range.ty, Type::List(_)), |e| e.is_list)
    }

    /// The single variable of a comprehension: a list's items, a map's keys.
    fn iter_single(&self, range: &Checked<'d>, index_ty: Type, value_ty: Type) -> IterVar<'d> {
        if Self::iterates_list(range) {
            let path = range.path.step(self.root, Step::Items);
            IterVar { ty: value_ty, path, size: range.entry.map(|e| e.value) }
        } else {
            let path = range.path.step(self.root, Step::Keys);
            IterVar { ty: index_ty, path, size: range.entry.map(|e| e.key) }
        }
    }

    /// The first variable of a two-variable comprehension: a list's indexes, a map's keys.
    fn iter_key(&self, range: &Checked<'d>, ty: Type) -> IterVar<'d> {
        let step = if Self::iterates_list(range) { Step::Indices } else { Step::Keys };
        IterVar { ty, path: range.path.step(self.root, step), size: range.entry.map(|e| e.key) }
    }

    /// The second variable of a two-variable comprehension: the items or values.
    fn iter_value(&self, range: &Checked<'d>, ty: Type) -> IterVar<'d> {
        IterVar { ty, path: range.path.step(self.root, Step::Items), size: range.entry.map(|e| e.value) }
    }

    fn push_iter(&mut self, name: &str, v: IterVar<'d>) -> usize {
        self.push_var(name, v.ty, v.path, v.size, None)
    }

    /// A comprehension the parser built (the standard macros).
    pub(super) fn fold(&mut self, c: &ComprehensionExpr) -> Checked<'d> {
        let range = self.check(&c.iter_range);
        let Some((index_ty, value_ty)) = self.range_types(c.iter_range.id, &range) else { return Checked::error() };
        let init = self.check(&c.accu_init);
        let single = self.iter_single(&range, index_ty.clone(), value_ty.clone());
        // The accumulator's type is refined by a first, silent pass over the step.
        self.suppress += 1;
        let accu_ty = {
            self.push_bound(&c.accu_var, init.ty.clone(), &init);
            self.push_var(&c.iter_var, single.ty.clone(), single.path, single.size, None);
            let step = self.check(&c.loop_step);
            self.pop_var();
            self.pop_var();
            refine(&init.ty, &step.ty)
        };
        self.suppress -= 1;
        let accu = self.push_bound(&c.accu_var, accu_ty, &init);
        let (var, var2) = match &c.iter_var2 {
            Some(v2) => {
                let key = self.iter_key(&range, index_ty);
                let value = self.iter_value(&range, value_ty);
                (self.push_iter(&c.iter_var, key), Some(self.push_iter(v2, value)))
            }
            None => (self.push_iter(&c.iter_var, single), None),
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
        let (size, entry) = match &c.accu_init.expr {
            Expr::Literal(_) => (init.size, None),
            Expr::List(_) | Expr::Map(_) => (Some(range_size), step.entry),
            _ => (scalar_size(&result.ty), None),
        };
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
        Checked { ir, ty: result.ty, path: SchemaPath::None, cost, size, entry }
    }

    /// Calls the crate's parser leaves unexpanded: two-variable comprehensions, `cel.bind`,
    /// `optMap`/`optFlatMap` and `sortBy`.
    pub(super) fn special_call(
        &mut self,
        e: &IdedExpr,
        name: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Option<Checked<'d>> {
        let target = target?;
        if name == "bind"
            && matches!(&target.expr, Expr::Ident(n) if n == "cel")
            && !self.is_var("cel")
            && args.len() == 3
        {
            return self.bind(args);
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
        Some(self.two_var_loop(e, kind, target, args))
    }

    /// `cel.bind(v, init, body)`, a comprehension over an empty list literal (which the
    /// estimate charges for building).
    fn bind(&mut self, args: &[IdedExpr]) -> Option<Checked<'d>> {
        let var = ident(args.first())?;
        let init = self.check(args.get(1)?);
        let slot = self.push_bound(&var, init.ty.clone(), &init);
        let body = self.check(args.get(2)?);
        self.pop_var();
        let cost = Cost::fixed(LIST_CREATE_COST).add(init.cost).add(body.cost);
        let ir = Ir::Bind { slot, init: Box::new(init.ir), body: Box::new(body.ir) };
        Some(Checked { ir, ty: body.ty, path: SchemaPath::None, cost, size: body.size, entry: body.entry })
    }

    fn two_var_loop(&mut self, e: &IdedExpr, kind: LoopKind, target: &IdedExpr, args: &[IdedExpr]) -> Checked<'d> {
        let (Some(v1), Some(v2)) = (ident(args.first()), ident(args.get(1))) else {
            self.err(e.id, "argument must be a simple name");
            return Checked::error();
        };
        let range = self.check(target);
        let Some((key_ty, value_ty)) = self.range_types(target.id, &range) else { return Checked::error() };
        let key = self.iter_key(&range, key_ty);
        let value = self.iter_value(&range, value_ty);
        let var = self.push_iter(&v1, key);
        let var2 = self.push_iter(&v2, value);
        let (filter, body) = match args.get(2..).unwrap_or(&[]) {
            [b] => (None, self.check(b)),
            [f, b]
                if matches!(kind, LoopKind::TransformList | LoopKind::TransformMap | LoopKind::TransformMapEntry) =>
            {
                (Some(self.check(f)), self.check(b))
            }
            _ => (None, Checked::error()),
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
        let (cost, size, entry) = loop_estimate(kind, &range, filter.as_ref(), &body);
        let ir =
            Ir::Loop(Box::new(Loop { kind, range: range.ir, var, var2, filter: filter.map(|f| f.ir), body: body.ir }));
        Checked { ir, ty, path: SchemaPath::None, cost, size, entry }
    }

    /// `opt.optMap(v, body)`: `opt.hasValue() ? optional.of(cel.bind(v, opt.value(), body))
    /// : optional.none()` (`optFlatMap` without `optional.of`), so the target is costed twice.
    fn opt_map(&mut self, e: &IdedExpr, flat: bool, target: &IdedExpr, args: &[IdedExpr]) -> Checked<'d> {
        let Some(var) = ident(args.first()) else {
            self.err(e.id, "argument must be a simple name");
            return Checked::error();
        };
        let t = self.check(target);
        let inner = match &t.ty {
            Type::Optional(i) => (**i).clone(),
            _ => Type::Dyn,
        };
        // The variable is bound to `opt.value()`, a call: no path, a scalar's size at most.
        let size = scalar_size(&inner);
        let slot = self.push_var(&var, inner, SchemaPath::None, size, None);
        let body = match args.get(1) {
            Some(b) => self.check(b),
            None => Checked::error(),
        };
        self.pop_var();
        let ty = if flat { body.ty.clone() } else { Type::optional(body.ty.clone()) };
        let has_value = t.cost.add(Cost::fixed(1));
        let bound = Cost::fixed(LIST_CREATE_COST).add(t.cost).add(Cost::fixed(1)).add(body.cost);
        let (present, present_size) = if flat {
            (bound, body.size_or_unknown())
        } else {
            (bound.add(Cost::fixed(1)), scalar_size(&ty).unwrap_or(Size::UNKNOWN))
        };
        let cost = has_value.add(present.union(Cost::fixed(1)));
        let size = Some(present_size.union(Size::UNKNOWN));
        let ir = Ir::OptMap { target: Box::new(t.ir), slot, body: Box::new(body.ir), flat };
        Checked { ir, ty, path: SchemaPath::None, cost, size, entry: None }
    }

    /// `list.sortBy(e, key)`: `cel.bind(l, list, l.@sortByAssociatedKeys(l.map(e, key)))`.
    fn sort_by(&mut self, e: &IdedExpr, target: &IdedExpr, args: &[IdedExpr]) -> Checked<'d> {
        let Some(var) = ident(args.first()) else {
            self.err(e.id, "argument must be a simple name");
            return Checked::error();
        };
        let t = self.check(target);
        let elem = match &t.ty {
            Type::List(i) => (**i).clone(),
            _ => Type::Dyn,
        };
        // The bound list, as the `map` ranges over it: its path's size first, then its own.
        let list_size = t.path.size().or_else(|| scalar_size(&t.ty)).or(t.size).unwrap_or(Size::UNKNOWN);
        let item = if t.entry.is_none_or(|en| en.is_list) {
            IterVar { ty: elem, path: t.path.step(self.root, Step::Items), size: t.entry.map(|en| en.value) }
        } else {
            IterVar { ty: elem, path: t.path.step(self.root, Step::Keys), size: t.entry.map(|en| en.key) }
        };
        let slot = self.push_iter(&var, item);
        let key = match args.get(1) {
            Some(b) => self.check(b),
            None => Checked::error(),
        };
        self.pop_var();
        // The keys: one `map` step per item, building a one-item list and appending it.
        let per_key = Cost::fixed(1 + LIST_CREATE_COST + 1).add(key.cost);
        let keys = Cost::fixed(1 + LIST_CREATE_COST + 1).add(list_size.times_cost(per_key));
        let sorted = if matches!(key.ty, Type::Dyn | Type::Error) {
            let (a, b) = (sort_estimate(list_size, &Type::Int), sort_estimate(list_size, &Type::String));
            (a.cost.union(b.cost), a.size)
        } else {
            let s = sort_estimate(list_size, &key.ty);
            (s.cost, s.size)
        };
        let cost = Cost::fixed(LIST_CREATE_COST).add(t.cost).add(Cost::fixed(1)).add(keys).add(sorted.0);
        let ty = t.ty.clone();
        let ir = Ir::SortBy { target: Box::new(t.ir), slot, key: Box::new(key.ir) };
        Checked { ir, ty, path: SchemaPath::None, cost, size: sorted.1, entry: None }
    }
}

fn ident(a: Option<&IdedExpr>) -> Option<String> {
    match a.map(|a| &a.expr) {
        Some(Expr::Ident(n)) => Some(n.clone()),
        _ => None,
    }
}

/// The estimate of a two-variable comprehension, from the expansion of cel-go's `ext`
/// macros: (accumulator init, loop condition, the step around the predicate or transform,
/// result) costs, the range's size times the per-item cost, and the result's sizes.
fn loop_estimate(
    kind: LoopKind,
    range: &Checked<'_>,
    filter: Option<&Checked<'_>>,
    body: &Checked<'_>,
) -> (Cost, Option<Size>, Option<EntrySize>) {
    let n = range.size_or_unknown();
    let accu = Cost::fixed(1);
    // `accu && p` and `accu || p` may skip the predicate.
    let either = Cost { min: 1, max: 1u64.saturating_add(body.cost.max) };
    let (init, cond, step, result) = match kind {
        LoopKind::All => (Cost::ZERO, Cost::fixed(2), either, accu),
        LoopKind::Exists => (Cost::ZERO, Cost::fixed(3), either, accu),
        // `p ? accu + 1 : accu`, then `accu == 1`.
        LoopKind::ExistsOne => (Cost::ZERO, Cost::ZERO, body.cost.add(Cost { min: 1, max: 2 }), Cost::fixed(2)),
        // `accu + [f]`; `cel.@mapInsert(accu, k, f)`; `cel.@mapInsert(accu, f)`.
        LoopKind::TransformList => (Cost::fixed(LIST_CREATE_COST), Cost::ZERO, body.cost.add(Cost::fixed(12)), accu),
        LoopKind::TransformMap => (Cost::fixed(MAP_CREATE_COST), Cost::ZERO, body.cost.add(Cost::fixed(3)), accu),
        LoopKind::TransformMapEntry => (Cost::fixed(MAP_CREATE_COST), Cost::ZERO, body.cost.add(Cost::fixed(2)), accu),
    };
    // A filter guards the step: `f ? step : accu`.
    let step = match filter {
        Some(f) => f.cost.add(step.union(accu)),
        None => step,
    };
    let cost = range.cost.add(init).add(result).add(n.times_cost(step.add(cond)));
    match kind {
        LoopKind::All | LoopKind::Exists | LoopKind::ExistsOne => (cost, Some(Size::exact(1)), None),
        LoopKind::TransformList => {
            let accu_entry = EntrySize { is_list: true, key: Size::exact(1), value: Size::exact(0) };
            let item = EntrySize { is_list: true, key: Size::exact(1), value: body.size_or_unknown() };
            (cost, Some(n), EntrySize::union(Some(accu_entry), Some(item)))
        }
        LoopKind::TransformMap | LoopKind::TransformMapEntry => (cost, Some(n), None),
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
