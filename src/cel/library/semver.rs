//! Kubernetes' semver library: `semver(s[, normalize])`, `isSemver`, `major`, `minor`,
//! `patch`, `isLessThan`, `isGreaterThan`, `compareTo` (Semantic Versioning 2.0 ordering).
//!
//! Owns: version parsing and ordering. Must not touch: cost, evaluation.

use std::cmp::Ordering;
use std::rc::Rc;

use super::super::ir::Func;
use super::super::value::{EvalError, EvalResult, Value};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: Vec<String>,
}

fn number(s: &str) -> Result<u64, String> {
    if s.is_empty() || (s.len() > 1 && s.starts_with('0')) || !s.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("invalid version part {s:?}"));
    }
    s.parse().map_err(|_| format!("invalid version part {s:?}"))
}

impl Semver {
    /// Parses `1.2.3[-pre][+build]`; with `normalize`, a `v` prefix and missing minor or
    /// patch are accepted and leading zeros dropped.
    pub fn parse(s: &str, normalize: bool) -> Result<Semver, String> {
        let mut text = s.to_string();
        if normalize {
            text = text.strip_prefix('v').unwrap_or(&text).to_string();
        }
        let (core_pre, _build) = text.split_once('+').unwrap_or((&text, ""));
        let (core, pre) = match core_pre.split_once('-') {
            Some((c, p)) => (c.to_string(), Some(p.to_string())),
            None => (core_pre.to_string(), None),
        };
        let mut parts: Vec<String> = core.split('.').map(str::to_string).collect();
        if normalize {
            while parts.len() < 3 {
                parts.push("0".into());
            }
            for p in &mut parts {
                let trimmed = p.trim_start_matches('0');
                *p = if trimmed.is_empty() { "0".into() } else { trimmed.to_string() };
            }
        }
        let [major, minor, patch] = parts.as_slice() else {
            return Err("No Major.Minor.Patch elements found".into());
        };
        let pre = match pre {
            Some(p) => {
                let ids: Vec<String> = p.split('.').map(str::to_string).collect();
                if ids.iter().any(|i| i.is_empty()) {
                    return Err("Prerelease is empty".into());
                }
                ids
            }
            None => Vec::new(),
        };
        Ok(Semver { major: number(major)?, minor: number(minor)?, patch: number(patch)?, pre })
    }

    pub fn compare(&self, o: &Semver) -> Ordering {
        let core = (self.major, self.minor, self.patch).cmp(&(o.major, o.minor, o.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), o.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        for (a, b) in self.pre.iter().zip(&o.pre) {
            let ord = match (a.parse::<u64>(), b.parse::<u64>()) {
                (Ok(x), Ok(y)) => x.cmp(&y),
                (Ok(_), Err(_)) => Ordering::Less,
                (Err(_), Ok(_)) => Ordering::Greater,
                _ => a.cmp(b),
            };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        self.pre.len().cmp(&o.pre.len())
    }
}

fn semver_arg<'v>(v: Option<&'v Value<'_>>) -> Result<&'v Semver, EvalError> {
    match v {
        Some(Value::Semver(s)) => Ok(s),
        _ => Err(EvalError::no_overload()),
    }
}

pub fn call<'a>(func: Func, args: &[Value<'a>]) -> EvalResult<'a> {
    let a0 = args.first();
    let a1 = args.get(1);
    let normalize = matches!(a1, Some(Value::Bool(true)));
    Ok(match func {
        Func::Semver => match a0 {
            Some(Value::Str(s)) => Value::Semver(Rc::new(
                Semver::parse(s.as_str(), normalize)
                    .map_err(|e| EvalError::new(format!("could not parse {:?} as semver: {e}", s.as_str())))?,
            )),
            _ => return Err(EvalError::no_overload()),
        },
        Func::IsSemver => match a0 {
            Some(Value::Str(s)) => Value::Bool(Semver::parse(s.as_str(), normalize).is_ok()),
            _ => return Err(EvalError::no_overload()),
        },
        Func::Major => Value::Int(semver_arg(a0)?.major as i64),
        Func::Minor => Value::Int(semver_arg(a0)?.minor as i64),
        Func::Patch => Value::Int(semver_arg(a0)?.patch as i64),
        Func::IsLessThan => Value::Bool(semver_arg(a0)?.compare(semver_arg(a1)?) == Ordering::Less),
        Func::IsGreaterThan => Value::Bool(semver_arg(a0)?.compare(semver_arg(a1)?) == Ordering::Greater),
        Func::CompareTo => Value::Int(match semver_arg(a0)?.compare(semver_arg(a1)?) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }),
        _ => return Err(EvalError::no_overload()),
    })
}
