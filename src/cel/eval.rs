//! The evaluator: runs a checked program over values, charging cel-go's runtime cost and
//! stopping with Kubernetes' error once the per-call limit is passed. Logical operators
//! absorb errors the way CEL specifies (`false && error` is `false`).
//!
//! Owns: evaluation order, variables, cost tracking. Must not touch: function semantics
//! (`library`), schema walking (`validator`).

use std::rc::Rc;

use super::cost::{self, CallCost};
use super::ir::{Const, Fold, Func, Ir, Loop, LoopKind, SelectMode};
use super::library;
use super::value::{EvalError, EvalResult, MapData, Str, Value, equals, map_get, map_keys, object_field};

pub struct Evaluator<'a> {
    stack: Vec<Value<'a>>,
    pub cost: u64,
    limit: u64,
}

const COST_LIMIT_MESSAGE: &str = "operation cancelled: actual cost limit exceeded";

impl<'a> Evaluator<'a> {
    /// An evaluator with `self` and `oldSelf` bound (slots 0 and 1) and a per-call cost limit.
    pub fn new(this: Value<'a>, old: Value<'a>, limit: u64) -> Self {
        Evaluator { stack: vec![this, old], cost: 0, limit }
    }

    /// An evaluator with the given values bound to slots 0, 1, ... (admission policies'
    /// variables).
    pub fn with_slots(values: Vec<Value<'a>>, limit: u64) -> Self {
        Evaluator { stack: values, cost: 0, limit }
    }

    #[inline]
    fn charge(&mut self, n: u64) -> Result<(), EvalError> {
        self.cost = self.cost.saturating_add(n);
        if self.cost > self.limit {
            return Err(EvalError { message: COST_LIMIT_MESSAGE.into(), cost_exceeded: true });
        }
        Ok(())
    }

    fn bind(&mut self, slot: usize, v: Value<'a>) {
        self.stack.truncate(slot);
        self.stack.push(v);
    }

    pub fn eval(&mut self, ir: &'a Ir) -> EvalResult<'a> {
        match ir {
            Ir::Const(c) => Ok(constant(c)),
            Ir::Var(slot) => {
                self.charge(1)?;
                match self.stack.get(*slot) {
                    Some(Value::Error(e)) => Err((**e).clone()),
                    Some(v) => Ok(v.clone()),
                    None => Err(EvalError::new("no such attribute")),
                }
            }
            Ir::Select { operand, field, mode } => {
                let v = self.eval(operand)?;
                match mode {
                    SelectMode::Field => {
                        self.charge(1)?;
                        select(v, field, *mode)
                    }
                    SelectMode::Test => select(v, field, *mode),
                    SelectMode::Optional => self.optional_select(v, field),
                }
            }
            Ir::Index { operand, index, optional: true } => self.optional_index(operand, index),
            Ir::Index { operand, index, optional: false } => {
                let v = self.eval(operand)?;
                let i = self.eval(index)?;
                // cel-go observes a constant index as a qualifier; a computed one is charged
                // only for computing it.
                self.charge(u64::from(matches!(**index, Ir::Const(_))) + Ir::relative_attribute_cost(operand))?;
                index_value(v, &i, false)
            }
            Ir::OrElse { lhs, rhs, unwrap } => self.eval_or(lhs, rhs, *unwrap),
            Ir::Call { func: Func::NotStrictlyFalse, args, .. } => {
                let v = match args.first() {
                    Some(a) => self.eval(a),
                    None => Ok(Value::Null),
                };
                self.charge(1)?;
                match v {
                    Ok(Value::Bool(false)) => Ok(Value::Bool(false)),
                    Err(e) if e.cost_exceeded => Err(e),
                    _ => Ok(Value::Bool(true)),
                }
            }
            Ir::Call { func, args, cost } => {
                let mut values = Vec::with_capacity(args.len());
                for (i, a) in args.iter().enumerate() {
                    match self.eval(a) {
                        Ok(v) => values.push(v),
                        Err(e) => return self.failed_call(*cost, args, i, values, e),
                    }
                }
                self.call(*func, *cost, values)
            }
            Ir::Regex { func, args, regex, cost } => self.eval_regex(*func, args, regex, *cost),
            Ir::And(a, b) => self.logic(a, b, false),
            Ir::Or(a, b) => self.logic(a, b, true),
            Ir::Cond(c, t, f) => self.eval_cond(c, t, f),
            Ir::List { elems, optional } => self.eval_list(ir, elems, optional),
            Ir::Map { entries } => self.eval_map(ir, entries),
            Ir::Fold(f) => self.fold(f),
            Ir::Loop(l) => self.two_var_loop(l),
            Ir::Bind { slot, init, body } => {
                let v = self.eval(init)?;
                self.bind(*slot, v);
                let r = self.eval(body);
                self.stack.truncate(*slot);
                r
            }
            Ir::OptMap { target, slot, body, flat } => self.eval_opt_map(target, *slot, body, *flat),
            Ir::SortBy { target, slot, key } => self.eval_sort_by(target, *slot, key),
        }
    }

    /// A call whose argument `failed` (at `at`) failed: cel-go evaluates both operands of a
    /// binary call (and stops at the first failed argument of any other), and its cost
    /// observer still charges the call.
    #[cold]
    #[inline(never)]
    fn failed_call(
        &mut self,
        cost: CallCost,
        args: &'a [Ir],
        at: usize,
        mut values: Vec<Value<'a>>,
        failed: EvalError,
    ) -> EvalResult<'a> {
        if failed.cost_exceeded {
            return Err(failed);
        }
        values.push(Value::Error(Rc::new(failed.clone())));
        if args.len() == 2
            && at == 0
            && let Some(rhs) = args.get(1)
        {
            match self.eval(rhs) {
                Ok(v) => values.push(v),
                Err(e) if e.cost_exceeded => return Err(e),
                Err(e) => values.push(Value::Error(Rc::new(e))),
            }
        }
        self.charge(cost.charge(&values, None))?;
        Err(failed)
    }

    // The branches of `eval` with many locals live out of line: `eval`'s frame is repeated at
    // every level of an expression, and the deepest expression allowed must fit a runtime
    // worker's stack (see `limits_tests`).

    #[inline(never)]
    fn eval_regex(&mut self, func: Func, args: &'a [Ir], regex: &'a regex::Regex, cost: CallCost) -> EvalResult<'a> {
        let mut values = Vec::with_capacity(args.len());
        for a in args {
            values.push(self.eval(a)?);
        }
        self.charge(cost.charge(&values, None))?;
        library::regex::call_compiled(func, regex, &values)
    }

    /// `a.or(b)` and `a.orValue(b)` (`unwrap`): cel-go evaluates `b` only when `a` has no
    /// value, and charges nothing for the call itself.
    #[inline(never)]
    fn eval_or(&mut self, lhs: &'a Ir, rhs: &'a Ir, unwrap: bool) -> EvalResult<'a> {
        match self.eval(lhs)? {
            Value::Optional(Some(v)) if unwrap => Ok((*v).clone()),
            Value::Optional(None) => self.eval(rhs),
            other => Ok(other),
        }
    }

    /// `a.?b`: cel-go observes an optional qualifier only when it finds a value.
    #[inline(never)]
    fn optional_select(&mut self, v: Value<'a>, field: &'a str) -> EvalResult<'a> {
        let r = select(v, field, SelectMode::Optional)?;
        self.charge(u64::from(matches!(r, Value::Optional(Some(_)))))?;
        Ok(r)
    }

    /// `a[?i]`: the constant index is charged only when it finds a value.
    #[inline(never)]
    fn optional_index(&mut self, operand: &'a Ir, index: &'a Ir) -> EvalResult<'a> {
        let v = self.eval(operand)?;
        let i = self.eval(index)?;
        let r = index_value(v, &i, true)?;
        let found = matches!(r, Value::Optional(Some(_))) && matches!(index, Ir::Const(_));
        self.charge(u64::from(found) + Ir::relative_attribute_cost(operand))?;
        Ok(r)
    }

    /// `opt.optMap(v, body)` as cel-go runs its expansion, `opt.hasValue() ?
    /// optional.of(cel.bind(v, opt.value(), body)) : optional.none()`: the target is
    /// evaluated (and charged) again for `value()`, and each call costs one.
    #[inline(never)]
    fn eval_opt_map(&mut self, target: &'a Ir, slot: usize, body: &'a Ir, flat: bool) -> EvalResult<'a> {
        let before = self.cost;
        let value = self.eval(target)?;
        let target_cost = self.cost - before;
        self.charge(1)?; // hasValue()
        match value {
            Value::Optional(None) => {
                self.charge(1)?; // optional.none()
                Ok(Value::Optional(None))
            }
            Value::Optional(Some(v)) => {
                self.charge(target_cost.saturating_add(1))?; // opt.value()
                self.bind(slot, (*v).clone());
                let r = self.eval(body);
                self.stack.truncate(slot);
                let r = r?;
                if flat {
                    Ok(r)
                } else {
                    self.charge(1)?; // optional.of()
                    Ok(Value::Optional(Some(Rc::new(r))))
                }
            }
            _ => Err(EvalError::no_overload()),
        }
    }

    /// `c ? t : f`. cel-go resolves a branch that is an attribute without observing it, so
    /// reading it costs nothing; any other branch costs what it evaluates.
    #[inline(never)]
    fn eval_cond(&mut self, c: &'a Ir, t: &'a Ir, f: &'a Ir) -> EvalResult<'a> {
        let branch = match self.eval(c)? {
            Value::Bool(true) => t,
            Value::Bool(false) => f,
            _ => return Err(EvalError::no_overload()),
        };
        if !branch.is_attribute() {
            return self.eval(branch);
        }
        let before = self.cost;
        let value = self.eval(branch);
        self.cost = before;
        value
    }

    #[inline(never)]
    fn eval_list(&mut self, ir: &'a Ir, elems: &'a [Ir], optional: &[bool]) -> EvalResult<'a> {
        if !ir.is_constant() {
            self.charge(10)?;
        }
        let mut out = Vec::with_capacity(elems.len());
        for (e, opt) in elems.iter().zip(optional) {
            let v = self.eval(e)?;
            if *opt {
                match v {
                    Value::Optional(Some(inner)) => out.push((*inner).clone()),
                    Value::Optional(None) => {}
                    _ => return Err(EvalError::no_overload()),
                }
            } else {
                out.push(v);
            }
        }
        Ok(Value::list(out))
    }

    #[inline(never)]
    fn eval_map(&mut self, ir: &'a Ir, entries: &'a [(Ir, Ir, bool)]) -> EvalResult<'a> {
        if !ir.is_constant() {
            self.charge(30)?;
        }
        let mut out: Vec<(Value<'a>, Value<'a>)> = Vec::with_capacity(entries.len());
        for (k, v, opt) in entries {
            let key = self.eval(k)?;
            let mut val = self.eval(v)?;
            if *opt {
                match val {
                    Value::Optional(Some(inner)) => val = (*inner).clone(),
                    Value::Optional(None) => continue,
                    _ => return Err(EvalError::no_overload()),
                }
            }
            for (existing, _) in &out {
                if equals(existing, &key)? {
                    return Err(EvalError::new(format!("Failed with repeated key: {}", library::display(&key))));
                }
            }
            out.push((key, val));
        }
        Ok(Value::Map(MapData::Owned(Rc::new(out))))
    }

    #[inline(never)]
    fn eval_sort_by(&mut self, target: &'a Ir, slot: usize, key: &'a Ir) -> EvalResult<'a> {
        let Value::List(list) = self.eval(target)? else { return Err(EvalError::no_overload()) };
        // cel-go's expansion reads the bound list twice (as the receiver and as the range of
        // `map`), and `map` reads its result once.
        self.charge(3)?;
        let items = list.items()?;
        let mut keyed = Vec::with_capacity(items.len());
        for item in items {
            // Each `map` step appends a one-item list to the accumulator.
            self.charge(1 + cost::LIST_CREATE_COST + 1)?;
            self.bind(slot, item.clone());
            let k = self.eval(key);
            self.stack.truncate(slot);
            keyed.push((k?, item));
        }
        let keys = Value::list(keyed.iter().map(|(k, _)| k.clone()).collect());
        self.charge(CallCost::sort_keys(&keys))?;
        library::lists::sort_keyed(keyed)
    }

    #[inline]
    fn call(&mut self, func: Func, cost: CallCost, args: Vec<Value<'a>>) -> EvalResult<'a> {
        // What a call must build before its cost can be known is charged first, so that a
        // result larger than the budget is refused rather than allocated.
        let before = if func == Func::ListsRange { cost::runtime_cost_before_call(func, &args) } else { 0 };
        if before > 0 {
            self.charge(before)?;
        }
        let result = library::call(func, &args);
        self.charge(cost.charge(&args, result.as_ref().ok()).saturating_sub(before))?;
        result
    }

    fn logic(&mut self, a: &'a Ir, b: &'a Ir, is_or: bool) -> EvalResult<'a> {
        let decisive = Value::Bool(is_or);
        let l = self.eval(a);
        if let Err(e) = &l {
            if e.cost_exceeded {
                return l;
            }
        }
        if matches!((&l, &decisive), (Ok(Value::Bool(x)), Value::Bool(d)) if x == d) {
            return Ok(decisive);
        }
        let r = self.eval(b);
        if let Err(e) = &r {
            if e.cost_exceeded {
                return r;
            }
        }
        if matches!((&r, &decisive), (Ok(Value::Bool(x)), Value::Bool(d)) if x == d) {
            return Ok(decisive);
        }
        match (l?, r?) {
            (Value::Bool(_), Value::Bool(_)) => Ok(Value::Bool(!is_or)),
            _ => Err(EvalError::no_overload()),
        }
    }

    fn fold(&mut self, f: &'a Fold) -> EvalResult<'a> {
        let range = self.eval(&f.range)?;
        let items: Vec<(Value<'a>, Option<Value<'a>>)> = match &range {
            Value::List(l) => {
                let items = l.items()?;
                match f.var2 {
                    Some(_) => items.into_iter().enumerate().map(|(i, v)| (Value::Int(i as i64), Some(v))).collect(),
                    None => items.into_iter().map(|v| (v, None)).collect(),
                }
            }
            Value::Map(m) => {
                let keys = map_keys(m);
                let mut out = Vec::with_capacity(keys.len());
                for k in keys {
                    let v = match f.var2 {
                        Some(_) => Some(map_get(m, &k).transpose()?.unwrap_or(Value::Null)),
                        None => None,
                    };
                    out.push((k, v));
                }
                out
            }
            _ => return Err(EvalError::no_overload()),
        };
        let init = self.eval(&f.init)?;
        self.bind(f.accu, init);
        for (k, v) in items {
            self.bind(f.var, k);
            if let (Some(slot), Some(v)) = (f.var2, v) {
                self.bind(slot, v);
            }
            match self.eval(&f.cond) {
                Ok(Value::Bool(false)) => break,
                Ok(_) => {}
                Err(e) => {
                    self.stack.truncate(f.accu);
                    return Err(e);
                }
            }
            let step = match self.eval(&f.step) {
                Ok(v) => v,
                Err(e) if e.cost_exceeded => {
                    self.stack.truncate(f.accu);
                    return Err(e);
                }
                Err(e) => Value::Error(Rc::new(e)),
            };
            if let Some(slot) = self.stack.get_mut(f.accu) {
                *slot = step;
            }
        }
        self.stack.truncate(f.accu + 1);
        let r = self.eval(&f.result);
        self.stack.truncate(f.accu);
        r
    }

    fn two_var_loop(&mut self, l: &'a Loop) -> EvalResult<'a> {
        let range = self.eval(&l.range)?;
        let pairs: Vec<(Value<'a>, Value<'a>)> = match &range {
            Value::List(list) => {
                list.items()?.into_iter().enumerate().map(|(i, v)| (Value::Int(i as i64), v)).collect()
            }
            Value::Map(m) => {
                let mut out = Vec::new();
                for k in map_keys(m) {
                    let v = map_get(m, &k).transpose()?.unwrap_or(Value::Null);
                    out.push((k, v));
                }
                out
            }
            _ => return Err(EvalError::no_overload()),
        };
        let result = self.run_loop(l, pairs, matches!(range, Value::List(_)));
        self.stack.truncate(l.var);
        result
    }

    fn run_loop(&mut self, l: &'a Loop, pairs: Vec<(Value<'a>, Value<'a>)>, is_list: bool) -> EvalResult<'a> {
        let mut error: Option<EvalError> = None;
        let mut count = 0usize;
        let mut list_out = Vec::new();
        let mut map_out: Vec<(Value<'a>, Value<'a>)> = Vec::new();
        let costs = LoopCosts::of(l.kind);
        let last = pairs.len().saturating_sub(1);
        for (position, (k, v)) in pairs.into_iter().enumerate() {
            self.charge(costs.condition)?;
            self.bind(l.var, k.clone());
            self.bind(l.var2, v);
            if let Some(filter) = &l.filter {
                match self.eval(filter)? {
                    Value::Bool(true) => {}
                    Value::Bool(false) => continue,
                    _ => return Err(EvalError::no_overload()),
                }
            }
            self.charge(costs.step)?;
            let r = self.eval(&l.body);
            match l.kind {
                LoopKind::All | LoopKind::Exists => {
                    let decisive = l.kind == LoopKind::Exists;
                    match r {
                        Ok(Value::Bool(b)) if b == decisive => {
                            // The fold checks its condition once more before it stops, then
                            // reads its result.
                            if position < last {
                                self.charge(costs.condition)?;
                            }
                            self.charge(costs.result)?;
                            return Ok(Value::Bool(decisive));
                        }
                        Ok(Value::Bool(_)) => {}
                        Ok(_) => error = Some(EvalError::no_overload()),
                        Err(e) if e.cost_exceeded => return Err(e),
                        Err(e) => error = Some(e),
                    }
                }
                LoopKind::ExistsOne => match r? {
                    Value::Bool(true) => {
                        self.charge(2)?; // `accu + 1`; the other branch reads `accu`, free
                        count += 1;
                    }
                    Value::Bool(false) => {}
                    _ => return Err(EvalError::no_overload()),
                },
                LoopKind::TransformList => list_out.push(r?),
                LoopKind::TransformMap => {
                    let key = if is_list { k } else { k.clone() };
                    map_out.push((key, r?));
                }
                LoopKind::TransformMapEntry => {
                    let Value::Map(entry) = r? else { return Err(EvalError::no_overload()) };
                    for key in map_keys(&entry) {
                        for (existing, _) in &map_out {
                            if equals(existing, &key)? {
                                return Err(EvalError::new(format!(
                                    "insert failed: key {} already exists",
                                    library::display(&key)
                                )));
                            }
                        }
                        let val = map_get(&entry, &key).transpose()?.unwrap_or(Value::Null);
                        map_out.push((key, val));
                    }
                }
            }
        }
        self.charge(costs.result)?;
        match l.kind {
            LoopKind::All | LoopKind::Exists => match error {
                Some(e) => Err(e),
                None => Ok(Value::Bool(l.kind == LoopKind::All)),
            },
            LoopKind::ExistsOne => Ok(Value::Bool(count == 1)),
            LoopKind::TransformList => Ok(Value::list(list_out)),
            LoopKind::TransformMap | LoopKind::TransformMapEntry => Ok(Value::Map(MapData::Owned(Rc::new(map_out)))),
        }
    }
}

fn constant<'a>(c: &'a Const) -> Value<'a> {
    match c {
        Const::Null => Value::Null,
        Const::Bool(b) => Value::Bool(*b),
        Const::Int(i) => Value::Int(*i),
        Const::Uint(u) => Value::Uint(*u),
        Const::Double(d) => Value::Double(*d),
        Const::Str(s) => Value::Str(Str::Borrowed(s)),
        Const::Bytes(b) => Value::Bytes(Rc::from(b.as_ref())),
        Const::Duration(d) => Value::Duration(*d),
        Const::Timestamp(t) => Value::Timestamp(*t),
        Const::Type(t) => Value::Type(t.clone()),
    }
}

fn no_such_key(field: &str) -> EvalError {
    EvalError::new(format!("no such key: {field}"))
}

fn select<'a>(v: Value<'a>, field: &'a str, mode: SelectMode) -> EvalResult<'a> {
    let found: Option<EvalResult<'a>> = match &v {
        Value::Object(o) => object_field(o, field),
        Value::Map(m) => map_get(m, &Value::Str(Str::Borrowed(field))),
        Value::Optional(opt) if mode == SelectMode::Optional => {
            return match opt {
                None => Ok(Value::Optional(None)),
                Some(inner) => select((**inner).clone(), field, mode),
            };
        }
        _ => return Err(EvalError::no_overload()),
    };
    match mode {
        SelectMode::Field => found.unwrap_or_else(|| Err(no_such_key(field))),
        SelectMode::Test => match found {
            None => Ok(Value::Bool(false)),
            Some(r) => r.map(|_| Value::Bool(true)),
        },
        SelectMode::Optional => match found {
            None => Ok(Value::Optional(None)),
            Some(r) => r.map(|x| Value::Optional(Some(Rc::new(x)))),
        },
    }
}

fn index_value<'a>(v: Value<'a>, i: &Value<'a>, optional: bool) -> EvalResult<'a> {
    let wrap = |r: Option<EvalResult<'a>>, missing: EvalError| -> EvalResult<'a> {
        match (r, optional) {
            (Some(r), false) => r,
            (Some(r), true) => r.map(|x| Value::Optional(Some(Rc::new(x)))),
            (None, true) => Ok(Value::Optional(None)),
            (None, false) => Err(missing),
        }
    };
    match &v {
        Value::List(l) => {
            let idx = match i {
                Value::Int(n) => *n,
                Value::Uint(n) => i64::try_from(*n).unwrap_or(i64::MAX),
                Value::Double(d) if d.fract() == 0.0 => *d as i64,
                _ => return Err(EvalError::no_overload()),
            };
            let got = usize::try_from(idx).ok().and_then(|u| l.get(u));
            wrap(got, EvalError::new(format!("index out of bounds: {idx}")))
        }
        Value::Map(m) => wrap(map_get(m, i), EvalError::new(format!("no such key: {}", library::display(i)))),
        Value::Optional(None) if optional => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) if optional => index_value((**inner).clone(), i, optional),
        Value::Object(_) => Err(EvalError::no_overload()),
        _ => Err(EvalError::no_overload()),
    }
}

/// What cel-go's expansion of a two-variable comprehension charges besides its predicate or
/// transform: the loop condition per item, the step's own reads and calls per kept item, and
/// the result.
struct LoopCosts {
    condition: u64,
    step: u64,
    result: u64,
}

impl LoopCosts {
    fn of(kind: LoopKind) -> LoopCosts {
        let (condition, step, result) = match kind {
            // @not_strictly_false(accu); accu && p; accu
            LoopKind::All => (2, 1, 1),
            // @not_strictly_false(!accu); accu || p; accu
            LoopKind::Exists => (3, 1, 1),
            // true; p ? accu + 1 : accu (the taken `accu + 1` is charged where it happens); accu == 1
            LoopKind::ExistsOne => (0, 0, 2),
            // true; accu + [f]; accu
            LoopKind::TransformList => (0, 12, 1),
            // true; cel.@mapInsert(accu, k, f); accu
            LoopKind::TransformMap => (0, 3, 1),
            // true; cel.@mapInsert(accu, f); accu
            LoopKind::TransformMapEntry => (0, 2, 1),
        };
        LoopCosts { condition, step, result }
    }
}
