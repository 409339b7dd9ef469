//! kube-openapi's number checks: the value's range for the node's format (int32, float, ...),
//! then `multipleOf`, `minimum` and `maximum`, compared as integers when the value is an
//! integer (the bound truncated, as Go converts it) and as floats otherwise.

use serde_json::{Number, Value};

use super::result::{Code, Loc, OaError, Outcome};
use crate::core::field::go_float;
use crate::schema::node::{Schema, TypeBits};

/// A JSON number as Kubernetes decodes it: int64 when it fits, float64 otherwise.
#[derive(Debug, Clone, Copy)]
pub(super) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub fn of(n: &Number) -> Num {
        match n.as_i64() {
            Some(i) => Num::Int(i),
            None => Num::Float(n.as_f64().unwrap_or(0.0)),
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// go-openapi's `IsFloat64AJSONInteger`.
pub(super) fn is_json_integer(f: f64) -> bool {
    const MAX: f64 = 9_007_199_254_740_991.0;
    if !f.is_finite() || !(-MAX..=MAX).contains(&f) {
        return false;
    }
    if f.fract() == 0.0 {
        return true;
    }
    if f <= 0.0 {
        return false;
    }
    let g = f.trunc();
    if g == 0.0 {
        return false;
    }
    (f - g) / (f + g) < 1e-9
}

/// The type and format the numeric checks use: only a single `integer` or `number` type.
fn numeric_kind(s: &Schema) -> (&'static str, &'static str) {
    if s.types.len() != 1 {
        return ("", "");
    }
    let format = s.format.as_deref().unwrap_or_default();
    if s.has_type_bits(TypeBits::INTEGER) {
        let format = match format {
            "int32" => "int32",
            "int64" => "int64",
            _ => "",
        };
        ("integer", format)
    } else if s.has_type_bits(TypeBits::NUMBER) {
        let format = match format {
            "float" => "float",
            "double" => "double",
            _ => "",
        };
        ("number", format)
    } else {
        ("", "")
    }
}

/// `IsValueValidAgainstRange`: whether `value` fits the type and format; the error is a
/// plain one (reported on the root path).
fn range_error(value: Num, kind: (&str, &str), prefix: &str, loc: &Loc<'_>) -> Option<OaError> {
    // Go prints the value (`'f'`, shortest) and parses it back with the format's size: a float
    // passes an integer format only when it prints without a fraction and fits.
    const I64_END: f64 = 9_223_372_036_854_775_808.0;
    let bad = match (kind, value) {
        (("integer", "int32"), Num::Int(i)) => i32::try_from(i).is_err(),
        (("integer", "int32"), Num::Float(f)) => {
            !(f.fract() == 0.0 && (-2_147_483_648.0..=2_147_483_647.0).contains(&f))
        }
        (("integer", _), Num::Int(_)) => false,
        (("integer", _), Num::Float(f)) => !(f.fract() == 0.0 && (-I64_END..I64_END).contains(&f)),
        ((_, "float"), v) => (v.as_f64() as f32).is_infinite(),
        _ => false,
    };
    if !bad {
        return None;
    }
    let (type_name, format) = kind;
    let path = loc.render();
    Some(OaError::Plain(if format.is_empty() {
        format!("{prefix} value must be of type {type_name} (default format) in {path}")
    } else {
        format!("{prefix} value must be of type {type_name} with format {format} in {path}")
    }))
}

fn json(value: Num) -> Value {
    match value {
        Num::Int(i) => Value::from(i),
        Num::Float(f) => Value::from(f),
    }
}

/// Checks a number against its node.
pub(super) fn check(s: &Schema, n: &Number, loc: &Loc<'_>) -> Outcome {
    let value = Num::of(n);
    let kind = numeric_kind(s);
    let mut res = Outcome::default();
    if let Some(e) = range_error(value, kind, "Checked", loc) {
        res.add(e);
    }
    let mut multiple = Outcome::default();
    if let Some(factor) = s.multiple_of {
        let native = match range_error(Num::Float(factor), kind, "MultipleOf", loc) {
            Some(e) => {
                multiple.add(e);
                false
            }
            None => true,
        };
        if let Some(e) = multiple_of(value, factor, native, loc) {
            multiple.add(e);
        }
    }
    let mut minimum = Outcome::default();
    if let Some(bound) = s.minimum {
        let native = bound_in_range(bound, kind, "Minimum boundary", loc, &mut minimum);
        if let Some(e) = compare(value, bound, native, s.exclusive_minimum, Bound::Min, loc) {
            minimum.add(e);
        }
    }
    let mut maximum = Outcome::default();
    if let Some(bound) = s.maximum {
        let native = bound_in_range(bound, kind, "Maximum boundary", loc, &mut maximum);
        if let Some(e) = compare(value, bound, native, s.exclusive_maximum, Bound::Max, loc) {
            maximum.add(e);
        }
    }
    res.merge(multiple);
    res.merge(minimum);
    res.merge(maximum);
    res.inc();
    res
}

fn bound_in_range(bound: f64, kind: (&str, &str), prefix: &str, loc: &Loc<'_>, into: &mut Outcome) -> bool {
    match range_error(Num::Float(bound), kind, prefix, loc) {
        Some(e) => {
            into.add(e);
            false
        }
        None => true,
    }
}

fn multiple_of(value: Num, factor: f64, native: bool, loc: &Loc<'_>) -> Option<OaError> {
    let name = loc.render();
    if let (true, Num::Int(i)) = (native, value) {
        let factor = factor as i64;
        if factor <= 0 {
            let message = format!("factor MultipleOf declared for {name} must be positive: {factor}");
            return Some(OaError::validation(Code::Other, &name, Some(Value::from(factor)), message));
        }
        return (i % factor != 0).then(|| {
            OaError::validation(
                Code::Other,
                &name,
                Some(Value::from(i)),
                format!("{name} in body should be a multiple of {factor}"),
            )
        });
    }
    let data = value.as_f64();
    if factor <= 0.0 {
        let message = format!("factor MultipleOf declared for {name} must be positive: {}", go_float(factor));
        return Some(OaError::validation(Code::Other, &name, Some(Value::from(factor)), message));
    }
    let ratio = if factor < 1.0 { 1.0 / factor * data } else { data / factor };
    (!is_json_integer(ratio)).then(|| {
        OaError::validation(
            Code::Other,
            &name,
            Some(json(value)),
            format!("{name} in body should be a multiple of {}", go_float(factor)),
        )
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Bound {
    Min,
    Max,
}

fn compare(value: Num, bound: f64, native: bool, exclusive: bool, which: Bound, loc: &Loc<'_>) -> Option<OaError> {
    let (fails, shown_bound) = match (native, value) {
        (true, Num::Int(i)) => {
            let b = bound as i64;
            let fails = match which {
                Bound::Max => i > b || (exclusive && i == b),
                Bound::Min => i < b || (exclusive && i == b),
            };
            (fails, b.to_string())
        }
        _ => {
            let f = value.as_f64();
            let fails = match which {
                Bound::Max => f > bound || (exclusive && f == bound),
                Bound::Min => f < bound || (exclusive && f == bound),
            };
            (fails, go_float(bound))
        }
    };
    if !fails {
        return None;
    }
    let name = loc.render();
    let relation = match (which, exclusive) {
        (Bound::Max, false) => "less than or equal to",
        (Bound::Max, true) => "less than",
        (Bound::Min, false) => "greater than or equal to",
        (Bound::Min, true) => "greater than",
    };
    let message = format!("{name} in body should be {relation} {shown_bound}");
    Some(OaError::validation(Code::Other, &name, Some(json(value)), message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_integers() {
        assert!(is_json_integer(3.0));
        assert!(is_json_integer(-3.0));
        assert!(!is_json_integer(0.5));
        assert!(!is_json_integer(1e19));
        assert!(is_json_integer(3.0000000000001));
    }
}
