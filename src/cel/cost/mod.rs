//! Cost: the static estimate made when a definition loads and the actual cost charged at run
//! time, both as cel-go v0.26 computes them for Kubernetes. The estimate follows cel-go's
//! `checker/cost.go`: every expression has a cost range and, where one can be told, a size
//! range (characters, bytes, items or entries); a call's cost comes from an estimator chosen
//! by overload (the `ext` lists and sets libraries' own, then Kubernetes' library estimator by
//! function name, then cel-go's defaults), which also sizes its result. The runtime side
//! (`runtime`) picks, per call site, the rule that cel-go's cost tracker would apply to that
//! overload, and evaluates it from the actual values.
//!
//! Owns: cost arithmetic, size bounds and per-function costs. Must not touch: evaluation
//! results, type checking.

mod estimate;
mod runtime;

pub use estimate::{estimate_call, sort_estimate};
pub use runtime::{CallCost, runtime_cost_before_call};

/// Strings cost a tenth of their length to traverse.
pub const STRING_TRAVERSAL_FACTOR: f64 = 0.1;
/// Regular expressions cost a quarter of their length per character matched.
pub const REGEX_LENGTH_FACTOR: f64 = 0.25;
/// Building a list literal that is not constant.
pub const LIST_CREATE_COST: u64 = 10;
/// Building a map literal that is not constant.
pub const MAP_CREATE_COST: u64 = 30;
/// What a call costs when nothing else is known about it.
pub const CALL_COST: u64 = 1;

/// A cost range. Sums and products saturate at `u64::MAX`, as cel-go's do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub min: u64,
    pub max: u64,
}

impl Cost {
    pub const ZERO: Cost = Cost { min: 0, max: 0 };

    pub const fn fixed(n: u64) -> Cost {
        Cost { min: n, max: n }
    }

    pub fn add(self, o: Cost) -> Cost {
        Cost { min: self.min.saturating_add(o.min), max: self.max.saturating_add(o.max) }
    }

    pub fn multiply(self, o: Cost) -> Cost {
        Cost { min: self.min.saturating_mul(o.min), max: self.max.saturating_mul(o.max) }
    }

    /// Both ends times a factor, rounded up.
    pub fn times_factor(self, f: f64) -> Cost {
        Cost { min: scale(self.min, f), max: scale(self.max, f) }
    }

    /// The range covering both.
    pub fn union(self, o: Cost) -> Cost {
        Cost { min: self.min.min(o.min), max: self.max.max(o.max) }
    }
}

/// The bounds of a value's size, as CEL's `size()` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub min: u64,
    pub max: u64,
}

impl Size {
    pub const UNKNOWN: Size = Size { min: 0, max: u64::MAX };

    pub const fn exact(n: u64) -> Size {
        Size { min: n, max: n }
    }

    /// From nothing to a declared bound (`maxLength`, `maxItems`, ...).
    pub fn upto(n: i64) -> Size {
        Size { min: 0, max: u64::try_from(n).unwrap_or(0) }
    }

    pub fn add(self, o: Size) -> Size {
        Size { min: self.min.saturating_add(o.min), max: self.max.saturating_add(o.max) }
    }

    pub fn multiply(self, o: Size) -> Size {
        Size { min: self.min.saturating_mul(o.min), max: self.max.saturating_mul(o.max) }
    }

    pub fn union(self, o: Size) -> Size {
        Size { min: self.min.min(o.min), max: self.max.max(o.max) }
    }

    /// The cost of doing something costing `c` once per element.
    pub fn times_cost(self, c: Cost) -> Cost {
        Cost { min: self.min.saturating_mul(c.min), max: self.max.saturating_mul(c.max) }
    }

    /// The cost of a traversal charging `f` per element, rounded up.
    pub fn times_factor(self, f: f64) -> Cost {
        Cost { min: scale(self.min, f), max: scale(self.max, f) }
    }
}

/// What a list or map literal (or a value built from one) is known to hold: the size of its
/// keys (indexes for lists) and of its values, which iteration variables take on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntrySize {
    pub is_list: bool,
    pub key: Size,
    pub value: Size,
}

impl EntrySize {
    /// Both entry sizes together; nothing is known unless both are.
    pub fn union(a: Option<EntrySize>, b: Option<EntrySize>) -> Option<EntrySize> {
        let (a, b) = (a?, b?);
        Some(EntrySize { is_list: a.is_list, key: a.key.union(b.key), value: a.value.union(b.value) })
    }
}

/// `n * f` rounded up, saturating as cel-go's `multiplyByCostFactor` does: in floating point,
/// so that the largest sizes keep cel-go's exact (rounded) figures.
pub fn scale(n: u64, f: f64) -> u64 {
    let x = n as f64;
    if x > 0.0 && f > 0.0 && x > u64::MAX as f64 / f {
        return u64::MAX;
    }
    let v = (x * f).ceil();
    if v >= u64::MAX as f64 { u64::MAX } else { v as u64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_an_unknown_size_keeps_cel_gos_floating_point_result() {
        // A tenth of the largest size is not u64::MAX / 10 but what float64 arithmetic gives.
        assert_eq!(scale(u64::MAX, STRING_TRAVERSAL_FACTOR), 1_844_674_407_370_955_264);
        assert_eq!(scale(12, STRING_TRAVERSAL_FACTOR), 2);
        assert_eq!(scale(0, STRING_TRAVERSAL_FACTOR), 0);
        assert_eq!(scale(u64::MAX, 2.0), u64::MAX);
    }

    #[test]
    fn entry_sizes_are_known_only_when_both_sides_are() {
        let a = EntrySize { is_list: true, key: Size::exact(1), value: Size::exact(3) };
        let b = EntrySize { is_list: true, key: Size::exact(1), value: Size::exact(5) };
        let joined = EntrySize::union(Some(a), Some(b)).map(|e| e.value);
        assert_eq!(joined, Some(Size { min: 3, max: 5 }));
        assert_eq!(EntrySize::union(Some(a), None), None);
    }
}
