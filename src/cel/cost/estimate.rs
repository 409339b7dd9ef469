//! Static estimates of calls, in cel-go's order: the estimators the `ext` lists (version 3)
//! and sets libraries register for their overloads, then Kubernetes' library estimator (by
//! function name, `k8s.io/apiserver/pkg/cel/library/cost.go`), then cel-go's defaults (by
//! overload). Each gives the call's own cost, without its arguments', and may size its
//! result.
//!
//! Owns: per-function estimates. Must not touch: evaluation, type checking.

use super::super::check::Checked;
use super::super::ir::Func;
use super::super::overloads::Overload;
use super::super::types::{Decl, Opaque, Type};
use super::{CALL_COST, Cost, LIST_CREATE_COST, REGEX_LENGTH_FACTOR, STRING_TRAVERSAL_FACTOR, Size};

/// Kubernetes' bound on the regular expression of a named format (`MaxNameFormatRegexSize`).
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;
/// Kubernetes' bound on a format's name (`MaxFormatSize`).
const MAX_FORMAT_SIZE: u64 = 64;

/// A call's own cost and, where the estimator can tell, the size of its result.
#[derive(Debug, Clone, Copy)]
pub struct CallEstimate {
    pub cost: Cost,
    pub size: Option<Size>,
}

impl CallEstimate {
    fn cost(cost: Cost) -> Option<CallEstimate> {
        Some(CallEstimate { cost, size: None })
    }

    fn fixed(n: u64) -> Option<CallEstimate> {
        CallEstimate::cost(Cost::fixed(n))
    }

    fn sized(cost: Cost, size: Size) -> Option<CallEstimate> {
        Some(CallEstimate { cost, size: Some(size) })
    }
}

/// The call as an estimator sees it: the receiver of a member call apart from its arguments.
struct Site<'c, 'd> {
    func: Func,
    overload: &'c Overload,
    target: Option<&'c Checked<'d>>,
    args: &'c [Checked<'d>],
    root: Option<&'d Decl>,
}

/// The estimate of a call over every overload its arguments match: the union of their costs
/// and of the result sizes they give. `all` holds the receiver first for member calls.
pub fn estimate_call<'d>(
    func: Func,
    overloads: &[&Overload],
    all: &[Checked<'d>],
    root: Option<&'d Decl>,
) -> CallEstimate {
    let mut cost: Option<Cost> = None;
    let mut size: Option<Size> = None;
    for overload in overloads {
        let (target, args) = match (overload.receiver.is_some(), all.split_first()) {
            (true, Some((t, rest))) => (Some(t), rest),
            _ => (None, all),
        };
        let site = Site { func, overload, target, args, root };
        let e = lists_and_sets(&site).or_else(|| kubernetes(&site)).unwrap_or_else(|| cel_defaults(&site));
        cost = Some(cost.map_or(e.cost, |c| c.union(e.cost)));
        if let Some(s) = e.size {
            size = Some(size.map_or(s, |prev| prev.union(s)));
        }
    }
    CallEstimate { cost: cost.unwrap_or(Cost::fixed(CALL_COST)), size }
}

fn size(c: &Checked<'_>) -> Size {
    c.size_or_unknown()
}

fn traverse(s: Size) -> Cost {
    s.times_factor(STRING_TRAVERSAL_FACTOR)
}

/// An integer literal argument as cel-go's list estimators read one (negative: 0).
fn literal_count(c: Option<&Checked<'_>>, default: u64) -> u64 {
    match c.and_then(Checked::int_literal) {
        Some(i) => u64::try_from(i).unwrap_or(0),
        None => default,
    }
}

/// A call building a list of `size` items at `factor` per item, plus the call and the list.
fn allocating_list(factor: f64, size: Size) -> Option<CallEstimate> {
    let cost = size.times_factor(factor).add(Cost::fixed(CALL_COST + LIST_CREATE_COST));
    CallEstimate::sized(cost, size)
}

/// Sorting compares every pair of keys: twice per pair, a tenth more for strings and bytes.
/// The result is sized, as cel-go sizes it, by the number of pairs.
pub fn sort_estimate(keys: Size, key_type: &Type) -> CallEstimate {
    let factor = if matches!(key_type, Type::String | Type::Bytes) { 2.0 + STRING_TRAVERSAL_FACTOR } else { 2.0 };
    let pairs = keys.multiply(keys);
    let cost = pairs.times_factor(factor).add(Cost::fixed(CALL_COST + LIST_CREATE_COST));
    CallEstimate { cost, size: Some(pairs) }
}

/// The element type of a list type.
fn element_type(t: Option<&Type>) -> Option<&Type> {
    match t {
        Some(Type::List(e)) => Some(e),
        _ => None,
    }
}

/// The estimators of cel-go's `ext.Lists` (version 3) and `ext.Sets`.
fn lists_and_sets(s: &Site<'_, '_>) -> Option<CallEstimate> {
    let (target, args) = (s.target, s.args);
    match s.func {
        Func::Slice if args.len() == 2 => {
            let sz = size(target?);
            let start = literal_count(args.first(), 0);
            let end = literal_count(args.get(1), sz.max);
            allocating_list(1.0, Size::exact(end.wrapping_sub(start)))
        }
        Func::ListsRange if target.is_none() && args.len() == 1 => {
            allocating_list(1.0, Size::exact(literal_count(args.first(), u64::MAX)))
        }
        Func::Reverse if args.is_empty() => allocating_list(1.0, size(target?)),
        Func::Flatten if args.len() <= 1 => {
            let depth = if args.is_empty() { 1 } else { literal_count(args.first(), u64::MAX) };
            allocating_list(depth as f64, size(target?))
        }
        Func::Distinct if args.is_empty() => {
            let sz = size(target?);
            allocating_list(2.0, sz.multiply(sz))
        }
        Func::Sort if args.is_empty() => {
            let elem = element_type(s.overload.receiver.as_ref())?;
            Some(sort_estimate(size(target?), elem))
        }
        Func::SetsContains | Func::SetsIntersects | Func::SetsEquivalent => {
            let [a, b] = args else { return None };
            let factor = if s.func == Func::SetsEquivalent { 2.0 } else { 1.0 };
            CallEstimate::cost(size(a).multiply(size(b)).times_factor(factor).add(Cost::fixed(CALL_COST)))
        }
        _ => None,
    }
}

/// Kubernetes' library estimator, which chooses by function name.
fn kubernetes(s: &Site<'_, '_>) -> Option<CallEstimate> {
    let (target, args) = (s.target, s.args);
    let first = args.first();
    match s.func {
        Func::AuthzCheck => CallEstimate::fixed(350_000),
        Func::AuthzServiceAccount
        | Func::AuthzPath
        | Func::AuthzGroup
        | Func::AuthzResource
        | Func::AuthzSubresource
        | Func::AuthzNamespace
        | Func::AuthzName
        | Func::AuthzAllowed
        | Func::AuthzReason
        | Func::AuthzError
        | Func::AuthzErrored => CallEstimate::fixed(1),
        Func::IsSorted | Func::Sum | Func::Max | Func::Min | Func::IndexOf | Func::LastIndexOf => {
            let target = target?;
            match &target.ty {
                // One comparison per item, and the traversal of string and bytes items.
                Type::List(elem) => {
                    let mut per_item = Cost::fixed(1);
                    if matches!(**elem, Type::String | Type::Bytes) {
                        per_item = per_item.add(traverse(target.item_size(s.root).unwrap_or(Size::UNKNOWN)));
                    }
                    CallEstimate::cost(size(target).times_cost(per_item))
                }
                _ => CallEstimate::cost(traverse(size(target))),
            }
        }
        Func::Url | Func::JsonPatchEscapeKey if args.len() == 1 => {
            let sz = size(first?);
            CallEstimate::sized(traverse(sz), sz)
        }
        Func::LowerAscii | Func::UpperAscii | Func::Substring | Func::Trim => {
            let sz = size(target?);
            CallEstimate::sized(traverse(sz), sz)
        }
        Func::Replace => {
            let (sz, from, to) = (size(target?), size(args.first()?), size(args.get(1)?));
            let result = replaced_size(sz, from, to);
            CallEstimate::sized(sz.times_factor(2.0 * STRING_TRAVERSAL_FACTOR), result)
        }
        Func::Split => {
            let sz = size(target?);
            // A literal limit bounds the pieces; otherwise every character may be one.
            let max = args.get(1).and_then(Checked::int_literal).map_or(sz.max, |n| n as u64);
            CallEstimate::sized(sz.times_factor(2.0 * STRING_TRAVERSAL_FACTOR), Size { min: 0, max })
        }
        Func::Join => joined(s.root, target?, first),
        Func::Find | Func::FindAll => {
            let sz = size(target?);
            let text = sz.add(Size::exact(1)).times_factor(STRING_TRAVERSAL_FACTOR);
            let pattern = size(first?).times_factor(REGEX_LENGTH_FACTOR);
            CallEstimate::sized(text.multiply(pattern), Size { min: 0, max: sz.max })
        }
        Func::Cidr
        | Func::IsIp
        | Func::IsCidr
        | Func::Ip
        | Func::Quantity
        | Func::IsQuantity
        | Func::Semver
        | Func::IsSemver => CallEstimate::cost(traverse(size(first?))),
        Func::IpIsCanonical => CallEstimate::cost(size(first?).times_factor(2.0 * STRING_TRAVERSAL_FACTOR)),
        Func::ContainsIp | Func::ContainsCidr => contains_address(s),
        Func::Validate => {
            let text = traverse(size(first?));
            CallEstimate::cost(text.times_factor(MAX_NAME_FORMAT_REGEX_SIZE * REGEX_LENGTH_FACTOR))
        }
        Func::CidrIp
        | Func::Masked
        | Func::PrefixLength
        | Func::Family
        | Func::IsUnspecified
        | Func::IsLoopback
        | Func::IsLinkLocalMulticast
        | Func::IsLinkLocalUnicast
        | Func::IsGlobalUnicast
        | Func::FormatNamed
        | Func::Sign
        | Func::AsInteger
        | Func::IsInteger
        | Func::AsApproximateFloat
        | Func::IsGreaterThan
        | Func::IsLessThan
        | Func::CompareTo
        | Func::QuantityAdd
        | Func::QuantitySub
        | Func::Major
        | Func::Minor
        | Func::Patch
        | Func::GetScheme
        | Func::GetHostname
        | Func::GetHost
        | Func::GetPort
        | Func::GetEscapedPath
        | Func::GetQuery => CallEstimate::fixed(1),
        Func::Eq => library_equality(args),
        _ => None,
    }
}

/// `replace`'s result: the longest when the shortest substrings are replaced by the longest
/// replacement as often as they fit, the shortest the other way round.
fn replaced_size(sz: Size, from: Size, to: Size) -> Size {
    let (mut count, mut kept) = (Size::exact(0), Size::exact(0));
    if from.min == 0 {
        // An empty pattern surrounds every character with the replacement.
        count.max = if sz.max < u64::MAX { sz.max + 1 } else { sz.max };
        kept.max = sz.max;
    } else if to.max <= from.min {
        kept.max = sz.max;
    } else {
        count.max = (sz.max as f64 / from.min as f64).ceil() as u64;
    }
    if from.max == 0 {
        count.min = if sz.min < u64::MAX { sz.min + 1 } else { sz.min };
        kept.min = sz.min;
    } else if from.max <= to.min {
        kept.min = sz.min;
    } else {
        count.min = (sz.min as f64 / from.max as f64).ceil() as u64;
    }
    count.multiply(to).add(kept)
}

/// `join`: every item, and the separator between them.
fn joined<'d>(root: Option<&'d Decl>, target: &Checked<'d>, separator: Option<&Checked<'d>>) -> Option<CallEstimate> {
    let items = size(target);
    let mut sz = match &target.ty {
        Type::List(_) => items.multiply(target.item_size(root).unwrap_or(Size::UNKNOWN)),
        _ => Size::exact(0),
    };
    if let Some(sep) = separator {
        let gaps = Size { min: items.min.saturating_sub(1), max: items.max.saturating_sub(1) };
        sz = sz.add(size(sep).multiply(gaps));
    }
    CallEstimate::sized(traverse(sz), sz)
}

/// `containsIP` and `containsCIDR`: comparing addresses of 4 or 16 bytes, and parsing the
/// argument when it is a string.
fn contains_address(s: &Site<'_, '_>) -> Option<CallEstimate> {
    let first = s.args.first()?;
    let address = Size { min: 4, max: 16 };
    let mut cost = address.add(address).times_factor(STRING_TRAVERSAL_FACTOR);
    if s.func == Func::ContainsCidr {
        cost = cost.add(address.times_factor(STRING_TRAVERSAL_FACTOR)).add(Cost::fixed(1));
    }
    if s.overload.params.first() == Some(&Type::String) {
        cost = cost.add(traverse(size(first)));
    }
    CallEstimate::cost(cost)
}

/// Equality of two values of the same Kubernetes library type.
fn library_equality(args: &[Checked<'_>]) -> Option<CallEstimate> {
    let [lhs, rhs] = args else { return None };
    let Type::Opaque(kind) = &lhs.ty else { return None };
    if lhs.ty != rhs.ty {
        return None;
    }
    match kind {
        Opaque::Format => {
            CallEstimate::cost(Cost { min: 1, max: MAX_FORMAT_SIZE }.times_factor(STRING_TRAVERSAL_FACTOR))
        }
        // Kubernetes reads the right-hand side's size for both sides.
        Opaque::Url => {
            let sz = rhs.size.unwrap_or(Size::exact(1));
            CallEstimate::cost(Cost { min: 1, max: sz.max }.times_factor(STRING_TRAVERSAL_FACTOR))
        }
        _ => CallEstimate::fixed(1),
    }
}

/// cel-go's own estimates, by overload.
fn cel_defaults(s: &Site<'_, '_>) -> CallEstimate {
    let (target, args) = (s.target, s.args);
    let param = |i: usize| s.overload.params.get(i);
    let stringlike = |t: Option<&Type>| matches!(t, Some(Type::String | Type::Bytes));
    let own = |cost: Cost| CallEstimate { cost, size: None };
    match (s.func, target, args) {
        (Func::Format, Some(t), _) => own(traverse(size(t))),
        (Func::ToBytes, None, [a]) if param(0) == Some(&Type::String) => {
            let sz = size(a);
            CallEstimate { cost: traverse(sz), size: Some(Size { min: sz.min, max: sz.max.wrapping_mul(4) }) }
        }
        (Func::ToString, None, [a]) if param(0) == Some(&Type::Bytes) => {
            let sz = size(a);
            CallEstimate { cost: traverse(sz), size: Some(Size { min: sz.min / 4, max: sz.max }) }
        }
        (Func::Quote, None, [a]) => {
            let sz = size(a);
            let quoted = Size { min: sz.min.wrapping_add(2), max: sz.max.wrapping_mul(2).wrapping_add(2) };
            CallEstimate { cost: traverse(sz), size: Some(quoted) }
        }
        (Func::StartsWith | Func::EndsWith, _, [a]) => own(traverse(size(a))),
        (Func::In, None, [_, list]) if matches!(param(1), Some(Type::List(_))) => own(size(list).times_factor(1.0)),
        (Func::Matches, Some(t), [pattern]) => {
            let text = size(t).add(Size::exact(1)).times_factor(STRING_TRAVERSAL_FACTOR);
            own(text.multiply(size(pattern).times_factor(REGEX_LENGTH_FACTOR)))
        }
        (Func::Contains, Some(t), [sub]) => own(traverse(size(t)).multiply(traverse(size(sub)))),
        (Func::Add, None, [a, b]) if stringlike(param(0)) || matches!(param(0), Some(Type::List(_))) => {
            let sum = size(a).add(size(b));
            let cost = if stringlike(param(0)) { traverse(sum) } else { Cost::fixed(CALL_COST) };
            CallEstimate { cost, size: Some(sum) }
        }
        (Func::Lt | Func::Le | Func::Gt | Func::Ge, None, [a, b]) if stringlike(param(0)) => own(smaller(a, b)),
        (Func::Eq | Func::Ne, None, [a, b]) => own(smaller(a, b)),
        _ => own(Cost::fixed(CALL_COST)),
    }
}

/// Comparing two values traverses the smaller one.
fn smaller(a: &Checked<'_>, b: &Checked<'_>) -> Cost {
    let smallest = size(a).max.min(size(b).max);
    Cost { min: u64::from(smallest > 0), max: smallest }.times_factor(STRING_TRAVERSAL_FACTOR)
}
