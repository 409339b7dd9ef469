//! Kubernetes' quantity library: `quantity`, `isQuantity`, `isInteger`, `asInteger`,
//! `asApproximateFloat`, `sign`, `add`, `sub`, `isLessThan`, `isGreaterThan`, `compareTo`.
//! A quantity is kept exactly as an integer mantissa times a power of ten.
//!
//! Owns: quantity parsing and arithmetic. Must not touch: cost, evaluation.

use std::cmp::Ordering;
use std::rc::Rc;

use super::super::ir::Func;
use super::super::value::{EvalError, EvalResult, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct Quantity {
    pub mantissa: i128,
    pub exp10: i32,
}

const PARSE_ERROR: &str = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

impl Quantity {
    /// Parses `100m`, `1.5Gi`, `2e3`, `-0.002G`.
    pub fn parse(s: &str) -> Result<Quantity, String> {
        if s.is_empty() {
            return Err("quantities must match the regular expression".into());
        }
        let (negative, body) = match s.as_bytes().first() {
            Some(b'-') => (true, s.get(1..).unwrap_or("")),
            Some(b'+') => (false, s.get(1..).unwrap_or("")),
            _ => (false, s),
        };
        let num_len = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
        let (number, suffix) = body.split_at(num_len);
        if number.is_empty() || number.matches('.').count() > 1 || number == "." {
            return Err(PARSE_ERROR.into());
        }
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        let digits = format!("{whole}{frac}");
        let mut mantissa: i128 = 0;
        for c in digits.chars() {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(c.to_digit(10).unwrap_or(0))))
                .ok_or("quantity too large")?;
        }
        let mut exp10 = -(frac.len() as i32);
        let mut binary: u32 = 0;
        match suffix {
            "" => {}
            "n" => exp10 -= 9,
            "u" => exp10 -= 6,
            "m" => exp10 -= 3,
            "k" => exp10 += 3,
            "M" => exp10 += 6,
            "G" => exp10 += 9,
            "T" => exp10 += 12,
            "P" => exp10 += 15,
            "E" => exp10 += 18,
            "Ki" => binary = 10,
            "Mi" => binary = 20,
            "Gi" => binary = 30,
            "Ti" => binary = 40,
            "Pi" => binary = 50,
            "Ei" => binary = 60,
            other => {
                let e = other.strip_prefix(['e', 'E']).ok_or(PARSE_ERROR)?;
                let e: i32 = e.parse().map_err(|_| PARSE_ERROR.to_string())?;
                exp10 += e;
            }
        }
        mantissa = mantissa.checked_mul(1i128 << binary).ok_or("quantity too large")?;
        if negative {
            mantissa = -mantissa;
        }
        Ok(Quantity { mantissa, exp10 }.normalized())
    }

    fn normalized(mut self) -> Quantity {
        if self.mantissa == 0 {
            return Quantity { mantissa: 0, exp10: 0 };
        }
        while self.mantissa % 10 == 0 {
            self.mantissa /= 10;
            self.exp10 += 1;
        }
        self
    }

    /// Both mantissas at the smaller exponent, when that fits.
    fn aligned(&self, o: &Quantity) -> Option<(i128, i128, i32)> {
        let e = self.exp10.min(o.exp10);
        let scale = |q: &Quantity| -> Option<i128> {
            let diff = u32::try_from(q.exp10 - e).ok()?;
            q.mantissa.checked_mul(10i128.checked_pow(diff)?)
        };
        Some((scale(self)?, scale(o)?, e))
    }

    pub fn compare(&self, o: &Quantity) -> Ordering {
        match self.aligned(o) {
            Some((a, b, _)) => a.cmp(&b),
            None => self.as_f64().partial_cmp(&o.as_f64()).unwrap_or(Ordering::Equal),
        }
    }

    pub fn as_f64(&self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.exp10)
    }

    fn is_integer(&self) -> bool {
        self.exp10 >= 0
    }

    fn as_i64(&self) -> Option<i64> {
        let e = u32::try_from(self.exp10).ok()?;
        let v = self.mantissa.checked_mul(10i128.checked_pow(e)?)?;
        i64::try_from(v).ok()
    }

    fn add(&self, o: &Quantity) -> Result<Quantity, EvalError> {
        let (a, b, e) = self.aligned(o).ok_or_else(|| EvalError::new("quantity overflow"))?;
        let m = a.checked_add(b).ok_or_else(|| EvalError::new("quantity overflow"))?;
        Ok(Quantity { mantissa: m, exp10: e }.normalized())
    }
}

fn quantity_arg<'a>(v: Option<&Value<'a>>) -> Result<Quantity, EvalError> {
    match v {
        Some(Value::Quantity(q)) => Ok((**q).clone()),
        Some(Value::Int(i)) => Ok(Quantity { mantissa: i128::from(*i), exp10: 0 }.normalized()),
        _ => Err(EvalError::no_overload()),
    }
}

pub fn call<'a>(func: Func, args: &[Value<'a>]) -> EvalResult<'a> {
    let a0 = args.first();
    let a1 = args.get(1);
    match func {
        Func::Quantity => match a0 {
            Some(Value::Str(s)) => {
                Quantity::parse(s.as_str()).map(|q| Value::Quantity(Rc::new(q))).map_err(EvalError::new)
            }
            _ => Err(EvalError::no_overload()),
        },
        Func::IsQuantity => match a0 {
            Some(Value::Str(s)) => Ok(Value::Bool(Quantity::parse(s.as_str()).is_ok())),
            _ => Err(EvalError::no_overload()),
        },
        Func::IsInteger => Ok(Value::Bool(quantity_arg(a0)?.is_integer())),
        Func::AsInteger => {
            quantity_arg(a0)?.as_i64().map(Value::Int).ok_or_else(|| EvalError::new("cannot convert value to integer"))
        }
        Func::AsApproximateFloat => Ok(Value::Double(quantity_arg(a0)?.as_f64())),
        Func::Sign => Ok(Value::Int(quantity_arg(a0)?.mantissa.signum() as i64)),
        Func::QuantityAdd => Ok(Value::Quantity(Rc::new(quantity_arg(a0)?.add(&quantity_arg(a1)?)?))),
        Func::QuantitySub => {
            let mut b = quantity_arg(a1)?;
            b.mantissa = -b.mantissa;
            Ok(Value::Quantity(Rc::new(quantity_arg(a0)?.add(&b)?)))
        }
        Func::IsLessThan => Ok(Value::Bool(quantity_arg(a0)?.compare(&quantity_arg(a1)?) == Ordering::Less)),
        Func::IsGreaterThan => Ok(Value::Bool(quantity_arg(a0)?.compare(&quantity_arg(a1)?) == Ordering::Greater)),
        Func::CompareTo => Ok(Value::Int(match quantity_arg(a0)?.compare(&quantity_arg(a1)?) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        })),
        _ => Err(EvalError::no_overload()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_quantities_in_different_units() {
        let q = |s: &str| Quantity::parse(s).unwrap();
        assert_eq!(q("2M").compare(&q("0.002G")), Ordering::Equal);
        assert_eq!(q("1Ki").compare(&q("1024")), Ordering::Equal);
        assert_eq!(q("100m").compare(&q("0.1")), Ordering::Equal);
        assert!(Quantity::parse("1.2.3").is_err());
        assert!(Quantity::parse("5x").is_err());
        assert_eq!(q("50k").add(&q("20")).unwrap().compare(&q("50.02k")), Ordering::Equal);
    }
}
