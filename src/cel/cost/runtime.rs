//! The cost charged for a call at run time. cel-go's tracker asks, in order, the tracker an
//! `ext` library registered for the call's overload (lists version 3, sets), then Kubernetes'
//! library estimator (by function name), then its own defaults (by overload). An overload is
//! known to the tracker only when type checking left a single candidate; a call dispatched at
//! run time among several has none. The rule is chosen once per call site, when the program
//! is built ([`CallCost::for_call`]), and applied to the actual values ([`CallCost::charge`]).
//!
//! Owns: runtime cost rules. Must not touch: function results.

use super::super::ir::Func;
use super::super::library::format;
use super::super::overloads::Overload;
use super::super::types::Type;
use super::super::value::{MapData, Value, map_get, map_keys, object_field};
use super::{CALL_COST, LIST_CREATE_COST, REGEX_LENGTH_FACTOR, STRING_TRAVERSAL_FACTOR};

/// How a call site is charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallCost {
    /// A fixed cost: 1 for most calls; 0 where cel-go's tracker never sees the call (`or`,
    /// `orValue`, a lookup in a constant set).
    Fixed(u32),
    /// A tenth of the size of the first argument (the receiver of a member call).
    Traverse,
    /// A fifth of the size of the first argument: a traversal that also builds its result.
    TraverseTwice,
    /// A fifth of the size of the result (`join`).
    ResultTwice,
    /// A tenth of the smaller operand (comparing strings, equality).
    Smaller,
    /// `==`: 1 when the left operand is a Kubernetes library value, else as [`CallCost::Smaller`].
    Equality,
    /// A tenth of both operands (concatenating strings or bytes).
    Both,
    /// The size of the list searched by `in`.
    Searched,
    /// Matching a regular expression: a tenth of the text (plus one) times a quarter of the
    /// pattern.
    Regex,
    /// `contains`: a tenth of the text times a tenth of the substring.
    Contains,
    /// Kubernetes' walk over the whole receiver (`isSorted`, `sum`, `indexOf`, ...).
    TreeTraversal,
    /// The result list's size, the call and the list it builds (`slice`, `reverse`, `lists.range`).
    ListOutput,
    /// `flatten`: the input's size times the depth, the call and the list.
    Flatten,
    /// Sorting or deduplicating the first argument: twice per pair of items.
    SelfCompare,
    /// The sets library: every item of one list against the other, times this factor.
    Sets(u8),
    /// `containsIP`; `string` when the argument is parsed from a string.
    ContainsIp {
        string: bool,
    },
    ContainsCidr {
        string: bool,
    },
    /// A named format's `validate`: the text against the format's largest pattern.
    Validate,
}

impl CallCost {
    /// The rule for a call resolved to `overloads`.
    pub fn for_call(func: Func, overloads: &[&Overload]) -> CallCost {
        let single = match overloads {
            [only] => Some(*only),
            _ => None,
        };
        if let Some(rule) = single.and_then(|o| extension_rule(func, o)) {
            return rule;
        }
        if let Some(rule) = kubernetes_rule(func, single) {
            return rule;
        }
        single.map_or(CallCost::Fixed(1), |o| cel_rule(func, o))
    }

    /// What the call costs for these arguments (the receiver first) and result.
    #[inline]
    pub fn charge(self, args: &[Value<'_>], result: Option<&Value<'_>>) -> u64 {
        let size = |i: usize| args.get(i).map_or(1, Value::cost_size);
        let traverse = |n: u64| ceil(n as f64 * STRING_TRAVERSAL_FACTOR);
        match self {
            CallCost::Fixed(n) => u64::from(n),
            CallCost::Traverse => traverse(size(0)),
            CallCost::TraverseTwice => ceil(size(0) as f64 * 2.0 * STRING_TRAVERSAL_FACTOR),
            CallCost::ResultTwice => ceil(result.map_or(1, Value::cost_size) as f64 * 2.0 * STRING_TRAVERSAL_FACTOR),
            CallCost::Smaller => traverse(size(0).min(size(1))),
            CallCost::Equality if args.first().is_some_and(is_library_value) => 1,
            CallCost::Equality => traverse(size(0).min(size(1))),
            CallCost::Both => traverse(size(0).saturating_add(size(1))),
            CallCost::Searched => size(1),
            CallCost::Regex => regex_cost(size(0), size(1)),
            CallCost::Contains => traverse(size(0)).saturating_mul(traverse(size(1))),
            CallCost::TreeTraversal => args.first().map_or(0, traversal),
            CallCost::ListOutput => allocating(1.0, result.map_or(1, Value::cost_size)),
            CallCost::Flatten => {
                let depth = match args.get(1) {
                    Some(Value::Int(d)) => *d as f64,
                    _ => 1.0,
                };
                // cel-go converts the product as Go does on amd64, wrapping a negative depth's.
                go_u64(size(0) as f64 * depth).wrapping_add(CALL_COST + LIST_CREATE_COST)
            }
            CallCost::SelfCompare => self_compare(args.first()),
            CallCost::Sets(factor) => {
                CALL_COST.saturating_add(go_u64(size(0).wrapping_mul(size(1)) as f64 * f64::from(factor)))
            }
            CallCost::ContainsIp { string } => {
                let cidr = size(0);
                traverse(cidr + cidr) + if string { traverse(size(1)) } else { 0 }
            }
            CallCost::ContainsCidr { string } => {
                let cidr = size(0);
                traverse(cidr + cidr) + traverse(cidr) + 1 + if string { traverse(size(1)) } else { 0 }
            }
            CallCost::Validate => match args.first() {
                Some(Value::Format(name)) => regex_cost(size(1), format::max_regex_size(name)),
                _ => 1,
            },
        }
    }

    /// The cost of sorting a list by the keys computed for its items (`sortBy`).
    pub fn sort_keys(keys: &Value<'_>) -> u64 {
        self_compare(Some(keys))
    }
}

/// The cost charged before a call runs, for calls whose result size follows from their
/// arguments alone: `lists.range(n)` builds `n` elements, so a range larger than the budget
/// is refused before anything is allocated. It is part of, not in addition to, the call's
/// cost.
pub fn runtime_cost_before_call(func: Func, args: &[Value<'_>]) -> u64 {
    match (func, args.first()) {
        (Func::ListsRange, Some(Value::Int(n))) => u64::try_from(*n).unwrap_or(0),
        _ => 0,
    }
}

fn ceil(x: f64) -> u64 {
    go_u64(x.ceil())
}

/// Go's conversion of a float to `uint64` on amd64: negative values wrap through `int64`.
fn go_u64(x: f64) -> u64 {
    if x < 0.0 { (x as i64) as u64 } else { x as u64 }
}

fn regex_cost(text: u64, pattern: u64) -> u64 {
    let text = ceil((1 + text) as f64 * STRING_TRAVERSAL_FACTOR);
    text.saturating_mul(ceil(pattern as f64 * REGEX_LENGTH_FACTOR))
}

fn allocating(factor: f64, size: u64) -> u64 {
    go_u64(size as f64 * factor).saturating_add(CALL_COST + LIST_CREATE_COST)
}

/// Sorting and deduplicating compare every pair: twice each, a tenth more for strings.
fn self_compare(list: Option<&Value<'_>>) -> u64 {
    let Some(Value::List(l)) = list else { return allocating(2.0, 0) };
    let n = l.len() as u64;
    let stringlike = matches!(l.get(0), Some(Ok(Value::Str(_) | Value::Bytes(_))));
    let factor = if stringlike { 2.0 + STRING_TRAVERSAL_FACTOR } else { 2.0 };
    allocating(factor, n.wrapping_mul(n))
}

/// Whether a value is one of the Kubernetes library's, whose equality costs 1.
fn is_library_value(v: &Value<'_>) -> bool {
    matches!(
        v,
        Value::Quantity(_)
            | Value::Ip(_)
            | Value::Cidr(_)
            | Value::Format(_)
            | Value::Url(_)
            | Value::Semver(_)
            | Value::Authz(_)
    )
}

/// Kubernetes' cost of walking a value: a tenth of each string's bytes (rounded down), 1 per
/// scalar, and the sum over the items of lists and the keys and values of maps.
fn traversal(v: &Value<'_>) -> u64 {
    match v {
        Value::Str(s) => (s.as_str().len() as f64 * STRING_TRAVERSAL_FACTOR) as u64,
        Value::Bytes(b) => (b.len() as f64 * STRING_TRAVERSAL_FACTOR) as u64,
        Value::List(l) => l.items().map_or(0, |items| items.iter().map(traversal).fold(0, u64::saturating_add)),
        Value::Map(m) => map_traversal(m),
        Value::Object(o) => o
            .fields
            .keys()
            .filter_map(|k| object_field(o, k).map(|v| (k, v)))
            .map(|(k, v)| (k.len() as f64 * STRING_TRAVERSAL_FACTOR) as u64 + v.as_ref().map_or(1, traversal))
            .fold(0, u64::saturating_add),
        _ => 1,
    }
}

fn map_traversal(m: &MapData<'_>) -> u64 {
    map_keys(m)
        .iter()
        .map(|k| {
            let value = map_get(m, k).and_then(Result::ok);
            traversal(k).saturating_add(value.as_ref().map_or(1, traversal))
        })
        .fold(0, u64::saturating_add)
}

/// The trackers cel-go's `ext` lists (version 3) and sets libraries register per overload.
fn extension_rule(func: Func, _overload: &Overload) -> Option<CallCost> {
    Some(match func {
        Func::Slice | Func::ListsRange | Func::Reverse => CallCost::ListOutput,
        Func::Flatten => CallCost::Flatten,
        Func::Distinct | Func::Sort => CallCost::SelfCompare,
        Func::SetsContains | Func::SetsIntersects => CallCost::Sets(1),
        Func::SetsEquivalent => CallCost::Sets(2),
        _ => return None,
    })
}

/// Kubernetes' library costs, chosen by function name.
fn kubernetes_rule(func: Func, single: Option<&Overload>) -> Option<CallCost> {
    let string_arg = single.is_some_and(|o| o.params.first() == Some(&Type::String));
    Some(match func {
        Func::AuthzCheck => CallCost::Fixed(350_000),
        Func::IsSorted | Func::Sum | Func::Max | Func::Min | Func::IndexOf | Func::LastIndexOf => {
            CallCost::TreeTraversal
        }
        Func::Url
        | Func::LowerAscii
        | Func::UpperAscii
        | Func::Substring
        | Func::Trim
        | Func::JsonPatchEscapeKey
        | Func::Cidr
        | Func::IsIp
        | Func::IsCidr
        | Func::Ip
        | Func::Quantity
        | Func::IsQuantity
        | Func::Semver
        | Func::IsSemver => CallCost::Traverse,
        Func::Replace | Func::Split | Func::IpIsCanonical => CallCost::TraverseTwice,
        Func::Join => CallCost::ResultTwice,
        Func::Find | Func::FindAll => CallCost::Regex,
        Func::ContainsIp => CallCost::ContainsIp { string: string_arg },
        Func::ContainsCidr => CallCost::ContainsCidr { string: string_arg },
        Func::Validate => CallCost::Validate,
        Func::Eq => CallCost::Equality,
        _ => return None,
    })
}

/// cel-go's own costs, by overload.
fn cel_rule(func: Func, o: &Overload) -> CallCost {
    let member = o.receiver.is_some();
    let first = o.receiver.as_ref().or(o.params.first());
    let stringlike = matches!(first, Some(Type::String | Type::Bytes));
    match func {
        Func::StartsWith | Func::EndsWith | Func::Quote | Func::Format => CallCost::Traverse,
        Func::ToBytes if first == Some(&Type::String) => CallCost::Traverse,
        Func::ToString if first == Some(&Type::Bytes) => CallCost::Traverse,
        Func::In if matches!(o.params.get(1), Some(Type::List(_))) => CallCost::Searched,
        Func::InSet | Func::Or | Func::OrValue => CallCost::Fixed(0),
        Func::Lt | Func::Le | Func::Gt | Func::Ge if stringlike => CallCost::Smaller,
        Func::Ne => CallCost::Smaller,
        Func::Add if stringlike => CallCost::Both,
        Func::Matches if member => CallCost::Regex,
        Func::Contains => CallCost::Contains,
        _ => CallCost::Fixed(1),
    }
}
