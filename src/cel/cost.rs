//! Cost: the static estimate made when a definition loads (cel-go's estimator with
//! Kubernetes' library costs and schema size bounds), and the actual cost charged for each
//! call at run time. Both follow cel-go's model: identifiers and selections cost 1, constants
//! 0, list and map literals 10 and 30, calls 1 unless they traverse strings or lists.
//!
//! Owns: cost arithmetic and per-function costs. Must not touch: evaluation results.

use super::check::Checked;
use super::ir::Func;
use super::types::Type;
use super::value::Value;

/// Strings cost a tenth of their length to traverse.
pub const STRING_TRAVERSAL_FACTOR: f64 = 0.1;
/// Regular expressions cost a quarter of their length per character matched.
pub const REGEX_LENGTH_FACTOR: f64 = 0.25;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub min: u64,
    pub max: u64,
}

impl Cost {
    pub const ZERO: Cost = Cost { min: 0, max: 0 };

    pub fn fixed(n: u64) -> Cost {
        Cost { min: n, max: n }
    }

    pub fn add(self, o: Cost) -> Cost {
        Cost { min: self.min.saturating_add(o.min), max: self.max.saturating_add(o.max) }
    }

    pub fn union(self, o: Cost) -> Cost {
        Cost { min: self.min.min(o.min), max: self.max.max(o.max) }
    }
}

/// The bounds of a value's size (characters, bytes, items, entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub min: u64,
    pub max: u64,
}

impl Size {
    pub const UNKNOWN: Size = Size { min: 0, max: u64::MAX };

    pub fn exact(n: u64) -> Size {
        Size { min: n, max: n }
    }

    pub fn upto(n: i64) -> Size {
        Size { min: 0, max: n.max(0) as u64 }
    }

    pub fn union(self, o: Size) -> Size {
        Size { min: self.min.min(o.min), max: self.max.max(o.max) }
    }

    pub fn add(self, o: Size) -> Size {
        Size { min: self.min.saturating_add(o.min), max: self.max.saturating_add(o.max) }
    }

    /// The cost of doing something costing `c` once per element.
    pub fn times_cost(self, c: Cost) -> Cost {
        Cost { min: self.min.saturating_mul(c.min), max: self.max.saturating_mul(c.max) }
    }

    pub fn times_factor(self, f: f64) -> Cost {
        Cost { min: scale(self.min, f), max: scale(self.max, f) }
    }

    fn times(self, o: Size) -> Size {
        Size { min: self.min.saturating_mul(o.min), max: self.max.saturating_mul(o.max) }
    }
}

fn scale(n: u64, f: f64) -> u64 {
    if n == u64::MAX {
        return u64::MAX;
    }
    let v = (n as f64 * f).ceil();
    if v >= u64::MAX as f64 { u64::MAX } else { v as u64 }
}

/// A value's size: known, or 1 for scalars (as cel-go's `computeTypeSize`), else unknown.
fn size_of(c: Option<&Checked<'_>>) -> Size {
    match c {
        Some(c) => c.size.unwrap_or_else(|| if is_scalar(&c.ty) { Size::exact(1) } else { Size::UNKNOWN }),
        None => Size::UNKNOWN,
    }
}

pub fn is_scalar(t: &Type) -> bool {
    matches!(
        t,
        Type::Bool
            | Type::Int
            | Type::Uint
            | Type::Double
            | Type::Duration
            | Type::Timestamp
            | Type::Null
            | Type::Opaque(_)
            | Type::Meta(_)
            | Type::Optional(_)
    )
}

/// The size of the elements of a list argument, from its declaration.
fn elem_size(c: Option<&Checked<'_>>) -> Size {
    c.and_then(|c| c.decl).and_then(|d| d.elem.as_deref()).map_or(Size::exact(1), |e| Size::upto(e.max_elements))
}

/// The estimated cost of a call (its own, not its arguments') and its result's size.
/// `args` holds the receiver first for member calls.
pub fn call_cost(func: Func, args: &[Checked<'_>], result: &Type) -> (Cost, Option<Size>) {
    let a0 = args.first();
    let a1 = args.get(1);
    let traverse = |s: Size| s.times_factor(STRING_TRAVERSAL_FACTOR);
    let elem_traversal = |c: Option<&Checked<'_>>| {
        let list = size_of(c);
        let per = match result {
            Type::String | Type::Bytes => traverse(elem_size(c)),
            _ => Cost::fixed(1),
        };
        list.times_cost(Cost { min: per.min.max(1), max: per.max.max(1) })
    };
    match func {
        Func::Eq | Func::Ne | Func::Lt | Func::Le | Func::Gt | Func::Ge => {
            let smallest = size_of(a0).max.min(size_of(a1).max);
            let c = Cost { min: u64::from(smallest > 0), max: smallest };
            (Cost { min: scale(c.min, STRING_TRAVERSAL_FACTOR), max: scale(c.max, STRING_TRAVERSAL_FACTOR) }, None)
        }
        Func::Add => {
            let sum = size_of(a0).add(size_of(a1));
            match result {
                Type::String | Type::Bytes => (traverse(sum), Some(sum)),
                Type::List(_) => (Cost::fixed(1), Some(sum)),
                _ => (Cost::fixed(1), None),
            }
        }
        Func::StartsWith | Func::EndsWith => (traverse(size_of(a1)), None),
        Func::Contains => {
            let s = traverse(size_of(a0));
            let sub = traverse(size_of(a1));
            (Cost { min: s.min.saturating_mul(sub.min), max: s.max.saturating_mul(sub.max) }, None)
        }
        Func::Matches | Func::Find | Func::FindAll => {
            let s = traverse(size_of(a0).add(Size::exact(1)));
            let r = size_of(a1).times_factor(REGEX_LENGTH_FACTOR);
            let result_size = Some(size_of(a0));
            (Cost { min: s.min.saturating_mul(r.min), max: s.max.saturating_mul(r.max) }, result_size)
        }
        // A map answers `in` by lookup; a list by traversal.
        Func::In | Func::InSet => match a1.map(|a| &a.ty) {
            Some(Type::Map(..)) => (Cost::fixed(1), None),
            _ => (size_of(a1).times_cost(Cost::fixed(1)), None),
        },
        Func::Size
        | Func::ToInt
        | Func::ToUint
        | Func::ToDouble
        | Func::ToBool
        | Func::Dyn
        | Func::TypeOf
        | Func::Not
        | Func::Neg
        | Func::NotStrictlyFalse => (Cost::fixed(1), a0.and_then(|a| a.size).filter(|_| func == Func::Dyn)),
        // cel-go gives `string(int)` no size, which would price the documentation's own
        // `"... " + string(self.maxLimit)` messageExpression out of every budget: the size
        // kept here lets it compile, as the documentation promises.
        Func::ToString | Func::ToBytes | Func::Quote | Func::Format => {
            (traverse(size_of(a0)), Some(size_of(a0).times(Size { min: 1, max: 4 })))
        }
        Func::CharAt => (Cost::fixed(1), None),
        Func::LowerAscii
        | Func::UpperAscii
        | Func::Trim
        | Func::Substring
        | Func::Replace
        | Func::JsonPatchEscapeKey => (traverse(size_of(a0)), Some(size_of(a0))),
        Func::IndexOf | Func::LastIndexOf => match a0.map(|a| &a.ty) {
            Some(Type::String) => (traverse(size_of(a0)).add(traverse(size_of(a1))), None),
            _ => (elem_traversal(a0), None),
        },
        Func::Split => (traverse(size_of(a0)), Some(size_of(a0))),
        Func::Join => {
            let list = size_of(a0);
            let total = list.times(elem_size(a0));
            (traverse(total).add(Cost::fixed(1)), Some(total))
        }
        Func::IsSorted | Func::Sum | Func::Min | Func::Max => (elem_traversal(a0), None),
        Func::SetsContains | Func::SetsEquivalent | Func::SetsIntersects => {
            let s = size_of(a0).times(size_of(a1));
            (s.times_cost(Cost::fixed(1)).add(Cost::fixed(1)), None)
        }
        Func::Distinct | Func::Sort => {
            let n = size_of(a0);
            (n.times(n).times_cost(Cost::fixed(1)).add(Cost::fixed(1)), Some(n))
        }
        Func::Reverse | Func::Slice | Func::Flatten => {
            (size_of(a0).times_cost(Cost::fixed(1)).add(Cost::fixed(1)), Some(size_of(a0)))
        }
        Func::Url | Func::IsUrl | Func::Ip | Func::IsIp | Func::IpIsCanonical | Func::Cidr | Func::IsCidr => {
            (traverse(size_of(a0)).add(Cost::fixed(1)), None)
        }
        Func::Quantity | Func::IsQuantity | Func::Semver | Func::IsSemver | Func::Validate => {
            // The string argument: the receiver's for `validate`, the first otherwise.
            let text = if func == Func::Validate { size_of(a1) } else { size_of(a0) };
            (traverse(text).add(Cost::fixed(1)), None)
        }
        Func::GetQuery | Func::GetEscapedPath | Func::GetHost | Func::GetHostname | Func::GetPort | Func::GetScheme => {
            (Cost::fixed(1), None)
        }
        Func::ListsRange => (Cost::fixed(1), None),
        // Kubernetes charges an authorization check as a fixed, expensive call.
        Func::AuthzCheck => (Cost::fixed(350_000), None),
        _ => (Cost::fixed(1), None),
    }
}

/// The cost charged before a call runs, for calls whose result size follows from their
/// arguments alone: `lists.range(n)` builds `n` elements, so a range larger than the budget
/// is refused before anything is allocated.
pub fn runtime_cost_before_call(func: Func, args: &[Value<'_>]) -> u64 {
    match (func, args.first()) {
        (Func::ListsRange, Some(Value::Int(n))) => u64::try_from(*n).unwrap_or(0),
        _ => 0,
    }
}

/// The cost charged for a call at run time, from the actual argument values.
pub fn runtime_call_cost(func: Func, args: &[Value<'_>], result: Option<&Value<'_>>) -> u64 {
    let size = |i: usize| args.get(i).map_or(1, Value::cost_size);
    let traverse = |n: u64| scale(n, STRING_TRAVERSAL_FACTOR);
    match func {
        Func::Eq | Func::Ne | Func::Lt | Func::Le | Func::Gt | Func::Ge => {
            if matches!(args.first(), Some(Value::Str(_) | Value::Bytes(_) | Value::List(_) | Value::Map(_))) {
                traverse(size(0).min(size(1)))
            } else {
                1
            }
        }
        Func::Add => match args.first() {
            Some(Value::Str(_) | Value::Bytes(_)) => traverse(size(0) + size(1)),
            _ => 1,
        },
        Func::StartsWith | Func::EndsWith => traverse(size(0)),
        Func::Contains => traverse(size(0)).saturating_mul(traverse(size(1))),
        Func::Matches | Func::Find | Func::FindAll => {
            traverse(1 + size(0)).saturating_mul(scale(size(1), REGEX_LENGTH_FACTOR))
        }
        Func::In => match args.get(1) {
            Some(Value::Map(_)) => 1,
            _ => size(1),
        },
        Func::InSet => 0,
        Func::ToString | Func::ToBytes | Func::Quote | Func::Format => traverse(size(0)),
        Func::LowerAscii
        | Func::UpperAscii
        | Func::Trim
        | Func::Substring
        | Func::Replace
        | Func::Split
        | Func::JsonPatchEscapeKey => traverse(size(0)).max(1),
        Func::CharAt => 1,
        Func::IndexOf | Func::LastIndexOf => match args.first() {
            Some(Value::Str(_)) => traverse(size(0)).max(1),
            _ => size(0).max(1),
        },
        Func::Join => traverse(result.map_or(1, Value::cost_size)).max(1),
        Func::IsSorted | Func::Sum | Func::Min | Func::Max | Func::Reverse | Func::Slice | Func::Flatten => {
            size(0).max(1)
        }
        Func::SetsContains | Func::SetsEquivalent | Func::SetsIntersects => size(0).saturating_mul(size(1)).max(1),
        Func::Distinct | Func::Sort => size(0).saturating_mul(size(0)).max(1),
        Func::Url | Func::IsUrl | Func::Ip | Func::IsIp | Func::IpIsCanonical | Func::Cidr | Func::IsCidr => {
            traverse(size(0)) + 1
        }
        _ => 1,
    }
}
