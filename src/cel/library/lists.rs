//! List functions: concatenation with `x-kubernetes-list-type` semantics (sets union, map
//! lists merge by key), cel-go's sets extension, Kubernetes' lists library (`isSorted`,
//! `sum`, `min`, `max`, `indexOf`, `lastIndexOf`) and cel-go's lists extension (`slice`,
//! `flatten`, `distinct`, `reverse`, `sort`, `sortBy`, `lists.range`).
//!
//! Owns: list functions. Must not touch: cost, evaluation.

use std::cmp::Ordering;

use super::super::ir::Func;
use super::super::value::{EvalError, EvalResult, List, ListKind, Value, compare, equals, object_field};
use super::list_value;

fn list<'v, 'a>(v: Option<&'v Value<'a>>) -> Result<&'v List<'a>, EvalError> {
    match v {
        Some(Value::List(l)) => Ok(l),
        _ => Err(EvalError::no_overload()),
    }
}

fn contains<'a>(items: &[Value<'a>], v: &Value<'a>) -> Result<bool, EvalError> {
    for item in items {
        if equals(item, v)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The key of a map-list item: its key fields' values.
fn item_key<'a>(item: &Value<'a>, keys: &[String]) -> Result<Vec<Option<Value<'a>>>, EvalError> {
    let Value::Object(o) = item else { return Ok(vec![Some(item.clone())]) };
    keys.iter().map(|k| object_field(o, k).transpose()).collect()
}

fn keys_equal<'a>(a: &[Option<Value<'a>>], b: &[Option<Value<'a>>]) -> Result<bool, EvalError> {
    for (x, y) in a.iter().zip(b) {
        match (x, y) {
            (None, None) => {}
            (Some(x), Some(y)) if equals(x, y)? => {}
            _ => return Ok(false),
        }
    }
    Ok(true)
}

/// `x + y`: plain concatenation, union for sets, merge by key for map lists.
pub fn concat<'a>(x: &List<'a>, y: &List<'a>) -> EvalResult<'a> {
    let mut xs = x.items()?;
    let ys = y.items()?;
    match x.kind {
        ListKind::Atomic => {
            xs.extend(ys);
            Ok(list_value(xs, ListKind::Atomic))
        }
        ListKind::Set => {
            for v in ys {
                if !contains(&xs, &v)? {
                    xs.push(v);
                }
            }
            Ok(list_value(xs, ListKind::Set))
        }
        ListKind::Map(keys) => {
            let mut xkeys = Vec::with_capacity(xs.len());
            for item in &xs {
                xkeys.push(item_key(item, keys)?);
            }
            for v in ys {
                let k = item_key(&v, keys)?;
                let mut replaced = false;
                for (i, xk) in xkeys.iter().enumerate() {
                    if keys_equal(xk, &k)? {
                        if let Some(slot) = xs.get_mut(i) {
                            *slot = v.clone();
                        }
                        replaced = true;
                        break;
                    }
                }
                if !replaced {
                    xkeys.push(k);
                    xs.push(v);
                }
            }
            Ok(list_value(xs, ListKind::Map(keys)))
        }
    }
}

fn fold_cmp<'a>(items: &[Value<'a>], want: Ordering, what: &str) -> EvalResult<'a> {
    let mut best = items.first().cloned().ok_or_else(|| EvalError::new(format!("{what} called on empty list")))?;
    for v in items.iter().skip(1) {
        if compare(v, &best)? == want {
            best = v.clone();
        }
    }
    Ok(best)
}

pub fn call<'a>(func: Func, args: &[Value<'a>]) -> EvalResult<'a> {
    let a0 = args.first();
    let a1 = args.get(1);
    let a2 = args.get(2);
    match func {
        Func::SetsContains | Func::SetsEquivalent | Func::SetsIntersects => {
            let xs = list(a0)?.items()?;
            let ys = list(a1)?.items()?;
            let all_in = |a: &[Value<'a>], b: &[Value<'a>]| -> Result<bool, EvalError> {
                for v in a {
                    if !contains(b, v)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            };
            Ok(Value::Bool(match func {
                Func::SetsContains => all_in(&ys, &xs)?,
                Func::SetsEquivalent => all_in(&ys, &xs)? && all_in(&xs, &ys)?,
                _ => {
                    let mut any = false;
                    for v in &ys {
                        if contains(&xs, v)? {
                            any = true;
                            break;
                        }
                    }
                    any
                }
            }))
        }
        Func::IsSorted => {
            let items = list(a0)?.items()?;
            for w in items.windows(2) {
                if let [a, b] = w {
                    if compare(a, b)? == Ordering::Greater {
                        return Ok(Value::Bool(false));
                    }
                }
            }
            Ok(Value::Bool(true))
        }
        Func::Sum => {
            let items = list(a0)?.items()?;
            // The checker passes the zero of the sum's type.
            let mut acc = match (items.first(), a1) {
                (Some(Value::Double(_)), _) => Value::Double(0.0),
                (Some(Value::Uint(_)), _) => Value::Uint(0),
                (Some(Value::Duration(_)), _) => Value::Duration(super::time::Duration(0)),
                (Some(_), _) => Value::Int(0),
                (None, Some(zero)) => zero.clone(),
                (None, None) => Value::Int(0),
            };
            for v in items {
                acc = super::call(Func::Add, &[acc, v])?;
            }
            Ok(acc)
        }
        Func::Min => fold_cmp(&list(a0)?.items()?, Ordering::Less, "min"),
        Func::Max => fold_cmp(&list(a0)?.items()?, Ordering::Greater, "max"),
        Func::IndexOf | Func::LastIndexOf => {
            let items = list(a0)?.items()?;
            let target = a1.ok_or_else(EvalError::no_overload)?;
            let mut found = -1i64;
            for (i, v) in items.iter().enumerate() {
                if equals(v, target)? {
                    found = i as i64;
                    if func == Func::IndexOf {
                        break;
                    }
                }
            }
            Ok(Value::Int(found))
        }
        Func::ListsRange => {
            let Some(Value::Int(n)) = a0 else { return Err(EvalError::no_overload()) };
            Ok(Value::list((0..*n).map(Value::Int).collect()))
        }
        Func::Slice => {
            let l = list(a0)?;
            let (Some(Value::Int(start)), Some(Value::Int(end))) = (a1, a2) else {
                return Err(EvalError::no_overload());
            };
            let (start, end) = (*start, *end);
            if start < 0 || end < 0 {
                return Err(EvalError::new(format!("cannot slice({start}, {end}), negative indexes not supported")));
            }
            if start > end {
                return Err(EvalError::new(format!(
                    "cannot slice({start}, {end}), start index must be less than or equal to end index"
                )));
            }
            if end as usize > l.len() {
                return Err(EvalError::new(format!("cannot slice({start}, {end}), list is length {}", l.len())));
            }
            let items = l.items()?;
            Ok(Value::list(items.get(start as usize..end as usize).unwrap_or(&[]).to_vec()))
        }
        Func::Flatten => {
            let depth = match a1 {
                Some(Value::Int(d)) if *d < 0 => return Err(EvalError::new("level must be non-negative")),
                Some(Value::Int(d)) => *d,
                _ => 1,
            };
            let mut out = Vec::new();
            flatten(list(a0)?, depth, &mut out)?;
            Ok(Value::list(out))
        }
        Func::Distinct => {
            let mut out: Vec<Value<'a>> = Vec::new();
            for v in list(a0)?.items()? {
                if !contains(&out, &v)? {
                    out.push(v);
                }
            }
            Ok(Value::list(out))
        }
        Func::Reverse => {
            let mut items = list(a0)?.items()?;
            items.reverse();
            Ok(Value::list(items))
        }
        Func::Sort => {
            let items = list(a0)?.items()?;
            let keyed: Vec<(Value<'a>, Value<'a>)> = items.iter().cloned().zip(items.iter().cloned()).collect();
            sort_keyed(keyed)
        }
        _ => Err(EvalError::no_overload()),
    }
}

fn flatten<'a>(l: &List<'a>, depth: i64, out: &mut Vec<Value<'a>>) -> Result<(), EvalError> {
    for v in l.items()? {
        match (&v, depth) {
            (Value::List(inner), d) if d > 0 => flatten(inner, d - 1, out)?,
            _ => out.push(v),
        }
    }
    Ok(())
}

/// Sorts items by their keys (stable), failing on keys that cannot be ordered.
pub fn sort_keyed<'a>(mut keyed: Vec<(Value<'a>, Value<'a>)>) -> EvalResult<'a> {
    let mut error = None;
    keyed.sort_by(|(a, _), (b, _)| match compare(a, b) {
        Ok(o) => o,
        Err(e) => {
            error = Some(e);
            Ordering::Equal
        }
    });
    if let Some(e) = error {
        return Err(e);
    }
    Ok(Value::list(keyed.into_iter().map(|(_, v)| v).collect()))
}
