//! Function semantics: the CEL standard library, cel-go's strings, sets and lists extensions,
//! optionals, and Kubernetes' libraries (lists, regex, urls, quantity, ip/cidr, format,
//! semver), dispatched on the values at run time.
//!
//! Owns: what each function computes and its error texts. Must not touch: cost, variables.

pub mod authz;
pub mod format;
pub mod lists;
pub mod net;
pub mod quantity;
pub mod regex;
pub mod semver;
pub mod strings;
pub mod time;
pub mod urls;

use std::cmp::Ordering;
use std::rc::Rc;

use super::ir::Func;
use super::value::{EvalError, EvalResult, List, ListData, ListKind, MapData, Value, compare, equals, map_get};
use time::{Duration, Timestamp};

/// cel-go's errors for results outside int64, uint64 and the timestamp range.
fn overflow() -> EvalError {
    EvalError::new("integer overflow")
}

fn uint_overflow() -> EvalError {
    EvalError::new("unsigned integer overflow")
}

fn timestamp_overflow() -> EvalError {
    EvalError::new("timestamp overflow")
}

/// Go's `%v` of a value, for error texts.
pub fn display(v: &Value<'_>) -> String {
    match v {
        Value::Str(s) => s.as_str().to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "<nil>".into(),
        other => format!("{:?}", other.type_val()),
    }
}

pub fn call<'a>(func: Func, args: &[Value<'a>]) -> EvalResult<'a> {
    let a0 = args.first();
    let a1 = args.get(1);
    match func {
        Func::Add => add(a0, a1),
        Func::Sub => sub(a0, a1),
        Func::Mul => arith(a0, a1, i64::checked_mul, u64::checked_mul, |x, y| x * y),
        Func::Div => match (a0, a1) {
            (Some(Value::Int(_)), Some(Value::Int(0))) | (Some(Value::Uint(_)), Some(Value::Uint(0))) => {
                Err(EvalError::new("division by zero"))
            }
            _ => arith(a0, a1, i64::checked_div, u64::checked_div, |x, y| x / y),
        },
        Func::Mod => match (a0, a1) {
            (Some(Value::Int(_)), Some(Value::Int(0))) | (Some(Value::Uint(_)), Some(Value::Uint(0))) => {
                Err(EvalError::new("modulus by zero"))
            }
            (Some(Value::Int(x)), Some(Value::Int(y))) => x.checked_rem(*y).map(Value::Int).ok_or_else(overflow),
            (Some(Value::Uint(x)), Some(Value::Uint(y))) => {
                x.checked_rem(*y).map(Value::Uint).ok_or_else(uint_overflow)
            }
            _ => Err(EvalError::no_overload()),
        },
        Func::Neg => match a0 {
            Some(Value::Int(x)) => x.checked_neg().map(Value::Int).ok_or_else(overflow),
            Some(Value::Double(x)) => Ok(Value::Double(-x)),
            _ => Err(EvalError::no_overload()),
        },
        Func::Not => match a0 {
            Some(Value::Bool(b)) => Ok(Value::Bool(!b)),
            _ => Err(EvalError::no_overload()),
        },
        Func::NotStrictlyFalse => Ok(Value::Bool(!matches!(a0, Some(Value::Bool(false))))),
        Func::Eq | Func::Ne => {
            let (Some(x), Some(y)) = (a0, a1) else { return Err(EvalError::no_overload()) };
            let eq = equals(x, y)?;
            Ok(Value::Bool(if func == Func::Eq { eq } else { !eq }))
        }
        Func::Lt | Func::Le | Func::Gt | Func::Ge => {
            let (Some(x), Some(y)) = (a0, a1) else { return Err(EvalError::no_overload()) };
            let o = compare(x, y)?;
            Ok(Value::Bool(match func {
                Func::Lt => o == Ordering::Less,
                Func::Le => o != Ordering::Greater,
                Func::Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            }))
        }
        Func::In | Func::InSet => {
            let (Some(x), Some(c)) = (a0, a1) else { return Err(EvalError::no_overload()) };
            match c {
                Value::List(l) => {
                    for item in l.items()? {
                        if equals(&item, x)? {
                            return Ok(Value::Bool(true));
                        }
                    }
                    Ok(Value::Bool(false))
                }
                Value::Map(m) => Ok(Value::Bool(map_get(m, x).is_some())),
                _ => Err(EvalError::no_overload()),
            }
        }
        Func::Size => match a0 {
            Some(Value::Str(s)) => Ok(Value::Int(s.as_str().chars().count() as i64)),
            Some(Value::Bytes(b)) => Ok(Value::Int(b.len() as i64)),
            Some(Value::List(l)) => Ok(Value::Int(l.len() as i64)),
            Some(Value::Map(m)) => Ok(Value::Int(super::value::map_len(m) as i64)),
            _ => Err(EvalError::no_overload()),
        },
        Func::Dyn => a0.cloned().ok_or_else(EvalError::no_overload),
        Func::TypeOf => a0.map(|v| Value::Type(v.type_val())).ok_or_else(EvalError::no_overload),
        Func::ToInt | Func::ToUint | Func::ToDouble | Func::ToString | Func::ToBytes | Func::ToBool => {
            convert(func, a0.ok_or_else(EvalError::no_overload)?)
        }
        Func::ToDuration => match a0 {
            Some(Value::Duration(d)) => Ok(Value::Duration(*d)),
            Some(Value::Str(s)) => Duration::parse_go(s.as_str()).map(Value::Duration).map_err(EvalError::new),
            _ => Err(EvalError::no_overload()),
        },
        Func::ToTimestamp => match a0 {
            Some(Value::Timestamp(t)) => Ok(Value::Timestamp(*t)),
            Some(Value::Str(s)) => Timestamp::parse_rfc3339(s.as_str()).map(Value::Timestamp).map_err(EvalError::new),
            Some(Value::Int(i)) => Timestamp::from_seconds(*i).map(Value::Timestamp).map_err(EvalError::new),
            _ => Err(EvalError::no_overload()),
        },
        Func::GetFullYear
        | Func::GetMonth
        | Func::GetDate
        | Func::GetDayOfMonth
        | Func::GetDayOfWeek
        | Func::GetDayOfYear
        | Func::GetHours
        | Func::GetMinutes
        | Func::GetSeconds
        | Func::GetMilliseconds => time_accessor(func, a0, a1),
        Func::OptionalOf => Ok(Value::Optional(Some(Rc::new(a0.cloned().ok_or_else(EvalError::no_overload)?)))),
        Func::OptionalNone => Ok(Value::Optional(None)),
        Func::OptionalOfNonZero => {
            let v = a0.ok_or_else(EvalError::no_overload)?;
            Ok(Value::Optional(if is_zero(v) { None } else { Some(Rc::new(v.clone())) }))
        }
        Func::HasValue => match a0 {
            Some(Value::Optional(o)) => Ok(Value::Bool(o.is_some())),
            _ => Err(EvalError::no_overload()),
        },
        Func::OptValue => match a0 {
            Some(Value::Optional(Some(v))) => Ok((**v).clone()),
            Some(Value::Optional(None)) => Err(EvalError::new("optional.none() dereference")),
            _ => Err(EvalError::no_overload()),
        },
        Func::OrValue => match (a0, a1) {
            (Some(Value::Optional(Some(v))), _) => Ok((**v).clone()),
            (Some(Value::Optional(None)), Some(d)) => Ok(d.clone()),
            _ => Err(EvalError::no_overload()),
        },
        Func::Or => match (a0, a1) {
            (Some(v @ Value::Optional(Some(_))), _) => Ok(v.clone()),
            (Some(Value::Optional(None)), Some(o @ Value::Optional(_))) => Ok(o.clone()),
            _ => Err(EvalError::no_overload()),
        },
        Func::Contains
        | Func::StartsWith
        | Func::EndsWith
        | Func::CharAt
        | Func::LowerAscii
        | Func::UpperAscii
        | Func::Replace
        | Func::Split
        | Func::Substring
        | Func::Trim
        | Func::Join
        | Func::Quote
        | Func::JsonPatchEscapeKey
        | Func::Format => strings::call(func, args),
        Func::IndexOf | Func::LastIndexOf => match a0 {
            Some(Value::Str(_)) => strings::call(func, args),
            _ => lists::call(func, args),
        },
        Func::SetsContains
        | Func::SetsEquivalent
        | Func::SetsIntersects
        | Func::IsSorted
        | Func::Sum
        | Func::Min
        | Func::Max
        | Func::Slice
        | Func::Flatten
        | Func::Distinct
        | Func::Reverse
        | Func::Sort
        | Func::ListsRange => lists::call(func, args),
        Func::Matches | Func::Find | Func::FindAll => regex::call(func, args),
        Func::Url
        | Func::IsUrl
        | Func::GetScheme
        | Func::GetHost
        | Func::GetHostname
        | Func::GetPort
        | Func::GetEscapedPath
        | Func::GetQuery => urls::call(func, args),
        Func::Quantity
        | Func::IsQuantity
        | Func::IsInteger
        | Func::AsInteger
        | Func::AsApproximateFloat
        | Func::Sign
        | Func::QuantityAdd
        | Func::QuantitySub => quantity::call(func, args),
        Func::IsLessThan | Func::IsGreaterThan | Func::CompareTo => match a0 {
            Some(Value::Semver(_)) => semver::call(func, args),
            _ => quantity::call(func, args),
        },
        Func::Ip
        | Func::IsIp
        | Func::IpIsCanonical
        | Func::Family
        | Func::IsUnspecified
        | Func::IsLoopback
        | Func::IsLinkLocalMulticast
        | Func::IsLinkLocalUnicast
        | Func::IsGlobalUnicast
        | Func::Cidr
        | Func::IsCidr
        | Func::ContainsIp
        | Func::ContainsCidr
        | Func::CidrIp
        | Func::Masked
        | Func::PrefixLength => net::call(func, args),
        Func::FormatNamed | Func::FormatBuiltin(_) | Func::Validate => format::call(func, args),
        Func::Semver | Func::IsSemver | Func::Major | Func::Minor | Func::Patch => semver::call(func, args),
        Func::AuthzPath
        | Func::AuthzRequestResource
        | Func::AuthzGroup
        | Func::AuthzServiceAccount
        | Func::AuthzResource
        | Func::AuthzSubresource
        | Func::AuthzNamespace
        | Func::AuthzName
        | Func::AuthzCheck
        | Func::AuthzAllowed
        | Func::AuthzReason
        | Func::AuthzErrored
        | Func::AuthzError => authz::call(func, args),
    }
}

fn is_zero(v: &Value<'_>) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Int(i) => *i == 0,
        Value::Uint(u) => *u == 0,
        Value::Double(d) => *d == 0.0,
        Value::Str(s) => s.as_str().is_empty(),
        Value::Bytes(b) => b.is_empty(),
        Value::Duration(d) => d.0 == 0,
        Value::Timestamp(t) => t.0 == -62_135_596_800_000_000_000,
        Value::List(l) => l.len() == 0,
        Value::Map(m) => super::value::map_len(m) == 0,
        Value::Optional(o) => o.is_none(),
        _ => false,
    }
}

fn arith<'a>(
    a: Option<&Value<'a>>,
    b: Option<&Value<'a>>,
    int: fn(i64, i64) -> Option<i64>,
    uint: fn(u64, u64) -> Option<u64>,
    double: fn(f64, f64) -> f64,
) -> EvalResult<'a> {
    match (a, b) {
        (Some(Value::Int(x)), Some(Value::Int(y))) => int(*x, *y).map(Value::Int).ok_or_else(overflow),
        (Some(Value::Uint(x)), Some(Value::Uint(y))) => uint(*x, *y).map(Value::Uint).ok_or_else(uint_overflow),
        (Some(Value::Double(x)), Some(Value::Double(y))) => Ok(Value::Double(double(*x, *y))),
        _ => Err(EvalError::no_overload()),
    }
}

fn add<'a>(a: Option<&Value<'a>>, b: Option<&Value<'a>>) -> EvalResult<'a> {
    match (a, b) {
        (Some(Value::Str(x)), Some(Value::Str(y))) => Ok(Value::string(format!("{}{}", x.as_str(), y.as_str()))),
        (Some(Value::Bytes(x)), Some(Value::Bytes(y))) => Ok(Value::Bytes(Rc::from([x.as_ref(), y.as_ref()].concat()))),
        (Some(Value::List(x)), Some(Value::List(y))) => lists::concat(x, y),
        (Some(Value::Duration(x)), Some(Value::Duration(y))) => {
            Duration::checked(x.0 + y.0).map(Value::Duration).map_err(|_| overflow())
        }
        (Some(Value::Timestamp(t)), Some(Value::Duration(d)))
        | (Some(Value::Duration(d)), Some(Value::Timestamp(t))) => {
            t.shifted(t.0 + d.0).map(Value::Timestamp).map_err(|_| timestamp_overflow())
        }
        _ => arith(a, b, i64::checked_add, u64::checked_add, |x, y| x + y),
    }
}

fn sub<'a>(a: Option<&Value<'a>>, b: Option<&Value<'a>>) -> EvalResult<'a> {
    match (a, b) {
        (Some(Value::Duration(x)), Some(Value::Duration(y))) => {
            Duration::checked(x.0 - y.0).map(Value::Duration).map_err(|_| overflow())
        }
        (Some(Value::Timestamp(t)), Some(Value::Duration(d))) => {
            t.shifted(t.0 - d.0).map(Value::Timestamp).map_err(|_| timestamp_overflow())
        }
        (Some(Value::Timestamp(x)), Some(Value::Timestamp(y))) => {
            Duration::checked(x.0 - y.0).map(Value::Duration).map_err(|_| overflow())
        }
        _ => arith(a, b, i64::checked_sub, u64::checked_sub, |x, y| x - y),
    }
}

fn convert<'a>(func: Func, v: &Value<'a>) -> EvalResult<'a> {
    let range = || EvalError::new("range error converting value");
    match (func, v) {
        (Func::ToInt, Value::Int(i)) => Ok(Value::Int(*i)),
        (Func::ToInt, Value::Uint(u)) => i64::try_from(*u).map(Value::Int).map_err(|_| overflow()),
        (Func::ToInt, Value::Double(d)) => {
            if d.is_finite() && *d > -9.223_372_036_854_776e18 && *d < 9.223_372_036_854_776e18 {
                Ok(Value::Int(d.trunc() as i64))
            } else {
                Err(overflow())
            }
        }
        (Func::ToInt, Value::Str(s)) => s
            .as_str()
            .parse::<i64>()
            .map(Value::Int)
            .map_err(|_| EvalError::new(format!("cannot convert string {:?} to int", s.as_str()))),
        (Func::ToInt, Value::Timestamp(t)) => {
            i64::try_from(t.0.div_euclid(1_000_000_000)).map(Value::Int).map_err(|_| overflow())
        }
        (Func::ToInt, Value::Duration(d)) => i64::try_from(d.0).map(Value::Int).map_err(|_| overflow()),
        (Func::ToUint, Value::Uint(u)) => Ok(Value::Uint(*u)),
        (Func::ToUint, Value::Int(i)) => u64::try_from(*i).map(Value::Uint).map_err(|_| uint_overflow()),
        (Func::ToUint, Value::Double(d)) => {
            if d.is_finite() && *d >= 0.0 && *d < 1.844_674_407_370_955_2e19 {
                Ok(Value::Uint(*d as u64))
            } else {
                Err(uint_overflow())
            }
        }
        (Func::ToUint, Value::Str(s)) => s.as_str().parse::<u64>().map(Value::Uint).map_err(|_| range()),
        (Func::ToDouble, Value::Double(d)) => Ok(Value::Double(*d)),
        (Func::ToDouble, Value::Int(i)) => Ok(Value::Double(*i as f64)),
        (Func::ToDouble, Value::Uint(u)) => Ok(Value::Double(*u as f64)),
        (Func::ToDouble, Value::Str(s)) => s.as_str().parse::<f64>().map(Value::Double).map_err(|_| range()),
        (Func::ToString, Value::Str(s)) => Ok(Value::Str(s.clone())),
        (Func::ToString, Value::Int(i)) => Ok(Value::string(i.to_string())),
        (Func::ToString, Value::Uint(u)) => Ok(Value::string(u.to_string())),
        (Func::ToString, Value::Double(d)) => Ok(Value::string(strings::format_double(*d))),
        (Func::ToString, Value::Bool(b)) => Ok(Value::string(b.to_string())),
        (Func::ToString, Value::Bytes(b)) => String::from_utf8(b.to_vec())
            .map(Value::string)
            .map_err(|_| EvalError::new("invalid UTF-8 in bytes, cannot convert to string")),
        (Func::ToString, Value::Duration(d)) => Ok(Value::string(d.to_string())),
        (Func::ToString, Value::Timestamp(t)) => Ok(Value::string(t.to_string())),
        (Func::ToString, Value::Ip(ip)) => Ok(Value::string(ip.to_string())),
        (Func::ToString, Value::Cidr(c)) => Ok(Value::string(c.to_string())),
        (Func::ToBytes, Value::Bytes(b)) => Ok(Value::Bytes(b.clone())),
        (Func::ToBytes, Value::Str(s)) => Ok(Value::Bytes(Rc::from(s.as_str().as_bytes()))),
        (Func::ToBool, Value::Bool(b)) => Ok(Value::Bool(*b)),
        (Func::ToBool, Value::Str(s)) => match s.as_str() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(Value::Bool(true)),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(Value::Bool(false)),
            other => Err(EvalError::new(format!("type conversion error from 'string' to 'bool': {other}"))),
        },
        _ => Err(EvalError::no_overload()),
    }
}

fn time_accessor<'a>(func: Func, a0: Option<&Value<'a>>, a1: Option<&Value<'a>>) -> EvalResult<'a> {
    if let Some(Value::Duration(d)) = a0 {
        let n = d.0;
        return Ok(Value::Int(match func {
            Func::GetHours => n / 3_600_000_000_000,
            Func::GetMinutes => n / 60_000_000_000,
            Func::GetSeconds => n / 1_000_000_000,
            Func::GetMilliseconds => n / 1_000_000,
            _ => return Err(EvalError::no_overload()),
        } as i64));
    }
    let Some(Value::Timestamp(t)) = a0 else { return Err(EvalError::no_overload()) };
    let zone = match a1 {
        Some(Value::Str(s)) => Some(s.as_str()),
        Some(_) => return Err(EvalError::no_overload()),
        None => None,
    };
    let dt = t.in_zone(zone).map_err(EvalError::new)?;
    Ok(Value::Int(match func {
        Func::GetFullYear => i64::from(dt.year()),
        Func::GetMonth => i64::from(dt.month()) - 1,
        Func::GetDate => i64::from(dt.day()),
        Func::GetDayOfMonth => i64::from(dt.day()) - 1,
        Func::GetDayOfWeek => i64::from(dt.weekday().to_sunday_zero_offset()),
        Func::GetDayOfYear => i64::from(dt.day_of_year()) - 1,
        Func::GetHours => i64::from(dt.hour()),
        Func::GetMinutes => i64::from(dt.minute()),
        Func::GetSeconds => i64::from(dt.second()),
        _ => i64::from(dt.millisecond()),
    }))
}

/// A list value with items of the given kind.
pub fn list_value<'a>(items: Vec<Value<'a>>, kind: ListKind<'a>) -> Value<'a> {
    Value::List(List { data: ListData::Owned(Rc::new(items)), kind })
}

/// A map value from entries.
pub fn map_value<'a>(entries: Vec<(Value<'a>, Value<'a>)>) -> Value<'a> {
    Value::Map(MapData::Owned(Rc::new(entries)))
}
