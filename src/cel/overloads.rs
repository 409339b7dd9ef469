//! The declarations of the CEL environment Kubernetes gives CRD rules: every function and
//! operator with its signatures, and overload resolution as cel-go's checker does it.
//!
//! Owns: the declaration table. Must not touch: evaluation (see `eval` and `library`).

use std::collections::HashMap;
use std::sync::LazyLock;

use super::ir::Func;
use super::types::{Bindings, Opaque, Type, assignable};

pub struct Overload {
    /// The receiver type for member functions.
    pub receiver: Option<Type>,
    pub params: Vec<Type>,
    pub result: Type,
    pub func: Func,
}

/// (function name, receiver or "" for global, parameters, result, implementation)
type Row = (&'static str, &'static str, &'static str, &'static str, Func);

const COMPARABLE: &[&str] = &["int", "uint", "double", "string", "bytes", "bool", "duration", "timestamp"];

fn rows() -> Vec<Row> {
    use Func as F;
    let mut r: Vec<Row> = vec![
        ("_+_", "", "int, int", "int", F::Add),
        ("_+_", "", "uint, uint", "uint", F::Add),
        ("_+_", "", "double, double", "double", F::Add),
        ("_+_", "", "string, string", "string", F::Add),
        ("_+_", "", "bytes, bytes", "bytes", F::Add),
        ("_+_", "", "list(A), list(A)", "list(A)", F::Add),
        ("_+_", "", "duration, duration", "duration", F::Add),
        ("_+_", "", "timestamp, duration", "timestamp", F::Add),
        ("_+_", "", "duration, timestamp", "timestamp", F::Add),
        ("_-_", "", "int, int", "int", F::Sub),
        ("_-_", "", "uint, uint", "uint", F::Sub),
        ("_-_", "", "double, double", "double", F::Sub),
        ("_-_", "", "duration, duration", "duration", F::Sub),
        ("_-_", "", "timestamp, duration", "timestamp", F::Sub),
        ("_-_", "", "timestamp, timestamp", "duration", F::Sub),
        ("_*_", "", "int, int", "int", F::Mul),
        ("_*_", "", "uint, uint", "uint", F::Mul),
        ("_*_", "", "double, double", "double", F::Mul),
        ("_/_", "", "int, int", "int", F::Div),
        ("_/_", "", "uint, uint", "uint", F::Div),
        ("_/_", "", "double, double", "double", F::Div),
        ("_%_", "", "int, int", "int", F::Mod),
        ("_%_", "", "uint, uint", "uint", F::Mod),
        ("-_", "", "int", "int", F::Neg),
        ("-_", "", "double", "double", F::Neg),
        ("!_", "", "bool", "bool", F::Not),
        ("_==_", "", "A, A", "bool", F::Eq),
        ("_!=_", "", "A, A", "bool", F::Ne),
        ("@in", "", "A, list(A)", "bool", F::In),
        ("@in", "", "A, map(A, B)", "bool", F::In),
        ("@not_strictly_false", "", "bool", "bool", F::NotStrictlyFalse),
        ("int", "", "int", "int", F::ToInt),
        ("int", "", "uint", "int", F::ToInt),
        ("int", "", "double", "int", F::ToInt),
        ("int", "", "string", "int", F::ToInt),
        ("int", "", "timestamp", "int", F::ToInt),
        ("int", "", "duration", "int", F::ToInt),
        ("uint", "", "int", "uint", F::ToUint),
        ("uint", "", "uint", "uint", F::ToUint),
        ("uint", "", "double", "uint", F::ToUint),
        ("uint", "", "string", "uint", F::ToUint),
        ("double", "", "int", "double", F::ToDouble),
        ("double", "", "uint", "double", F::ToDouble),
        ("double", "", "double", "double", F::ToDouble),
        ("double", "", "string", "double", F::ToDouble),
        ("bytes", "", "bytes", "bytes", F::ToBytes),
        ("bytes", "", "string", "bytes", F::ToBytes),
        ("bool", "", "bool", "bool", F::ToBool),
        ("bool", "", "string", "bool", F::ToBool),
        ("duration", "", "duration", "duration", F::ToDuration),
        ("duration", "", "string", "duration", F::ToDuration),
        ("timestamp", "", "timestamp", "timestamp", F::ToTimestamp),
        ("timestamp", "", "string", "timestamp", F::ToTimestamp),
        ("timestamp", "", "int", "timestamp", F::ToTimestamp),
        ("dyn", "", "A", "dyn", F::Dyn),
        ("size", "", "string", "int", F::Size),
        ("size", "", "bytes", "int", F::Size),
        ("size", "", "list(A)", "int", F::Size),
        ("size", "", "map(A, B)", "int", F::Size),
        ("size", "string", "", "int", F::Size),
        ("size", "bytes", "", "int", F::Size),
        ("size", "list(A)", "", "int", F::Size),
        ("size", "map(A, B)", "", "int", F::Size),
        ("contains", "string", "string", "bool", F::Contains),
        ("startsWith", "string", "string", "bool", F::StartsWith),
        ("endsWith", "string", "string", "bool", F::EndsWith),
        ("matches", "string", "string", "bool", F::Matches),
        ("matches", "", "string, string", "bool", F::Matches),
        ("charAt", "string", "int", "string", F::CharAt),
        ("indexOf", "string", "string", "int", F::IndexOf),
        ("indexOf", "string", "string, int", "int", F::IndexOf),
        ("lastIndexOf", "string", "string", "int", F::LastIndexOf),
        ("lastIndexOf", "string", "string, int", "int", F::LastIndexOf),
        ("lowerAscii", "string", "", "string", F::LowerAscii),
        ("upperAscii", "string", "", "string", F::UpperAscii),
        ("replace", "string", "string, string", "string", F::Replace),
        ("replace", "string", "string, string, int", "string", F::Replace),
        ("split", "string", "string", "list(string)", F::Split),
        ("split", "string", "string, int", "list(string)", F::Split),
        ("substring", "string", "int", "string", F::Substring),
        ("substring", "string", "int, int", "string", F::Substring),
        ("trim", "string", "", "string", F::Trim),
        ("join", "list(string)", "", "string", F::Join),
        ("join", "list(string)", "string", "string", F::Join),
        ("strings.quote", "", "string", "string", F::Quote),
        ("jsonpatch.escapeKey", "", "string", "string", F::JsonPatchEscapeKey),
        ("format", "string", "list(dyn)", "string", F::Format),
        ("sets.contains", "", "list(A), list(A)", "bool", F::SetsContains),
        ("sets.equivalent", "", "list(A), list(A)", "bool", F::SetsEquivalent),
        ("sets.intersects", "", "list(A), list(A)", "bool", F::SetsIntersects),
        ("sum", "list(int)", "", "int", F::Sum),
        ("sum", "list(uint)", "", "uint", F::Sum),
        ("sum", "list(double)", "", "double", F::Sum),
        ("sum", "list(duration)", "", "duration", F::Sum),
        ("indexOf", "list(A)", "A", "int", F::IndexOf),
        ("lastIndexOf", "list(A)", "A", "int", F::LastIndexOf),
        ("lists.range", "", "int", "list(int)", F::ListsRange),
        ("slice", "list(A)", "int, int", "list(A)", F::Slice),
        ("flatten", "list(list(A))", "", "list(A)", F::Flatten),
        ("flatten", "list(dyn)", "int", "list(dyn)", F::Flatten),
        ("distinct", "list(A)", "", "list(A)", F::Distinct),
        ("reverse", "list(A)", "", "list(A)", F::Reverse),
        ("find", "string", "string", "string", F::Find),
        ("findAll", "string", "string", "list(string)", F::FindAll),
        ("findAll", "string", "string, int", "list(string)", F::FindAll),
        ("path", "kubernetes.authorization.Authorizer", "string", "kubernetes.authorization.PathCheck", F::AuthzPath),
        (
            "group",
            "kubernetes.authorization.Authorizer",
            "string",
            "kubernetes.authorization.GroupCheck",
            F::AuthzGroup,
        ),
        (
            "serviceAccount",
            "kubernetes.authorization.Authorizer",
            "string, string",
            "kubernetes.authorization.Authorizer",
            F::AuthzServiceAccount,
        ),
        (
            "resource",
            "kubernetes.authorization.GroupCheck",
            "string",
            "kubernetes.authorization.ResourceCheck",
            F::AuthzResource,
        ),
        (
            "subresource",
            "kubernetes.authorization.ResourceCheck",
            "string",
            "kubernetes.authorization.ResourceCheck",
            F::AuthzSubresource,
        ),
        (
            "namespace",
            "kubernetes.authorization.ResourceCheck",
            "string",
            "kubernetes.authorization.ResourceCheck",
            F::AuthzNamespace,
        ),
        (
            "name",
            "kubernetes.authorization.ResourceCheck",
            "string",
            "kubernetes.authorization.ResourceCheck",
            F::AuthzName,
        ),
        (
            "check",
            "kubernetes.authorization.ResourceCheck",
            "string",
            "kubernetes.authorization.Decision",
            F::AuthzCheck,
        ),
        ("check", "kubernetes.authorization.PathCheck", "string", "kubernetes.authorization.Decision", F::AuthzCheck),
        ("allowed", "kubernetes.authorization.Decision", "", "bool", F::AuthzAllowed),
        ("reason", "kubernetes.authorization.Decision", "", "string", F::AuthzReason),
        ("errored", "kubernetes.authorization.Decision", "", "bool", F::AuthzErrored),
        ("error", "kubernetes.authorization.Decision", "", "string", F::AuthzError),
        ("url", "", "string", "kubernetes.URL", F::Url),
        ("isURL", "", "string", "bool", F::IsUrl),
        ("getScheme", "kubernetes.URL", "", "string", F::GetScheme),
        ("getHost", "kubernetes.URL", "", "string", F::GetHost),
        ("getHostname", "kubernetes.URL", "", "string", F::GetHostname),
        ("getPort", "kubernetes.URL", "", "string", F::GetPort),
        ("getEscapedPath", "kubernetes.URL", "", "string", F::GetEscapedPath),
        ("getQuery", "kubernetes.URL", "", "map(string, list(string))", F::GetQuery),
        ("quantity", "", "string", "kubernetes.Quantity", F::Quantity),
        ("isQuantity", "", "string", "bool", F::IsQuantity),
        ("isInteger", "kubernetes.Quantity", "", "bool", F::IsInteger),
        ("asInteger", "kubernetes.Quantity", "", "int", F::AsInteger),
        ("asApproximateFloat", "kubernetes.Quantity", "", "double", F::AsApproximateFloat),
        ("sign", "kubernetes.Quantity", "", "int", F::Sign),
        ("add", "kubernetes.Quantity", "kubernetes.Quantity", "kubernetes.Quantity", F::QuantityAdd),
        ("add", "kubernetes.Quantity", "int", "kubernetes.Quantity", F::QuantityAdd),
        ("sub", "kubernetes.Quantity", "kubernetes.Quantity", "kubernetes.Quantity", F::QuantitySub),
        ("sub", "kubernetes.Quantity", "int", "kubernetes.Quantity", F::QuantitySub),
        ("isLessThan", "kubernetes.Quantity", "kubernetes.Quantity", "bool", F::IsLessThan),
        ("isGreaterThan", "kubernetes.Quantity", "kubernetes.Quantity", "bool", F::IsGreaterThan),
        ("compareTo", "kubernetes.Quantity", "kubernetes.Quantity", "int", F::CompareTo),
        ("ip", "", "string", "net.IP", F::Ip),
        ("isIP", "", "string", "bool", F::IsIp),
        ("ip.isCanonical", "", "string", "bool", F::IpIsCanonical),
        ("family", "net.IP", "", "int", F::Family),
        ("isUnspecified", "net.IP", "", "bool", F::IsUnspecified),
        ("isLoopback", "net.IP", "", "bool", F::IsLoopback),
        ("isLinkLocalMulticast", "net.IP", "", "bool", F::IsLinkLocalMulticast),
        ("isLinkLocalUnicast", "net.IP", "", "bool", F::IsLinkLocalUnicast),
        ("isGlobalUnicast", "net.IP", "", "bool", F::IsGlobalUnicast),
        ("string", "", "net.IP", "string", F::ToString),
        ("cidr", "", "string", "net.CIDR", F::Cidr),
        ("isCIDR", "", "string", "bool", F::IsCidr),
        ("containsIP", "net.CIDR", "net.IP", "bool", F::ContainsIp),
        ("containsIP", "net.CIDR", "string", "bool", F::ContainsIp),
        ("containsCIDR", "net.CIDR", "net.CIDR", "bool", F::ContainsCidr),
        ("containsCIDR", "net.CIDR", "string", "bool", F::ContainsCidr),
        ("ip", "net.CIDR", "", "net.IP", F::CidrIp),
        ("masked", "net.CIDR", "", "net.CIDR", F::Masked),
        ("prefixLength", "net.CIDR", "", "int", F::PrefixLength),
        ("string", "", "net.CIDR", "string", F::ToString),
        ("format.named", "", "string", "optional_type(kubernetes.NamedFormat)", F::FormatNamed),
        ("validate", "kubernetes.NamedFormat", "string", "optional_type(list(string))", F::Validate),
        ("semver", "", "string", "kubernetes.Semver", F::Semver),
        ("semver", "", "string, bool", "kubernetes.Semver", F::Semver),
        ("isSemver", "", "string", "bool", F::IsSemver),
        ("isSemver", "", "string, bool", "bool", F::IsSemver),
        ("major", "kubernetes.Semver", "", "int", F::Major),
        ("minor", "kubernetes.Semver", "", "int", F::Minor),
        ("patch", "kubernetes.Semver", "", "int", F::Patch),
        ("isLessThan", "kubernetes.Semver", "kubernetes.Semver", "bool", F::IsLessThan),
        ("isGreaterThan", "kubernetes.Semver", "kubernetes.Semver", "bool", F::IsGreaterThan),
        ("compareTo", "kubernetes.Semver", "kubernetes.Semver", "int", F::CompareTo),
        ("optional.of", "", "A", "optional_type(A)", F::OptionalOf),
        ("optional.ofNonZeroValue", "", "A", "optional_type(A)", F::OptionalOfNonZero),
        ("optional.none", "", "", "optional_type(dyn)", F::OptionalNone),
        ("hasValue", "optional_type(A)", "", "bool", F::HasValue),
        ("value", "optional_type(A)", "", "A", F::OptValue),
        ("orValue", "optional_type(A)", "A", "A", F::OrValue),
        ("or", "optional_type(A)", "optional_type(A)", "optional_type(A)", F::Or),
    ];
    for t in COMPARABLE {
        let pair: &'static str = Box::leak(format!("{t}, {t}").into_boxed_str());
        for (op, f) in [("_<_", F::Lt), ("_<=_", F::Le), ("_>_", F::Gt), ("_>=_", F::Ge)] {
            r.push((op, "", pair, "bool", f));
        }
        let list: &'static str = Box::leak(format!("list({t})").into_boxed_str());
        r.push(("min", list, "", t, F::Min));
        r.push(("max", list, "", t, F::Max));
        r.push(("isSorted", list, "", "bool", F::IsSorted));
        r.push(("sort", list, "", list, F::Sort));
    }
    for pair in ["int, uint", "int, double", "uint, int", "uint, double", "double, int", "double, uint"] {
        for (op, f) in [("_<_", F::Lt), ("_<=_", F::Le), ("_>_", F::Gt), ("_>=_", F::Ge)] {
            r.push((op, "", pair, "bool", f));
        }
    }
    for t in ["int", "uint", "double", "bool", "string", "bytes", "timestamp", "duration"] {
        r.push(("string", "", t, "string", F::ToString));
    }
    for f in ["getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear"] {
        let func = time_func(f);
        r.push((f, "timestamp", "", "int", func));
        r.push((f, "timestamp", "string", "int", func));
    }
    for f in ["getHours", "getMinutes", "getSeconds", "getMilliseconds"] {
        let func = time_func(f);
        r.push((f, "timestamp", "", "int", func));
        r.push((f, "timestamp", "string", "int", func));
        r.push((f, "duration", "", "int", func));
    }
    for name in super::library::format::NAMES {
        let qualified: &'static str = Box::leak(format!("format.{name}").into_boxed_str());
        r.push((qualified, "", "", "kubernetes.NamedFormat", F::FormatBuiltin(name)));
    }
    r
}

fn time_func(name: &str) -> Func {
    match name {
        "getFullYear" => Func::GetFullYear,
        "getMonth" => Func::GetMonth,
        "getDate" => Func::GetDate,
        "getDayOfMonth" => Func::GetDayOfMonth,
        "getDayOfWeek" => Func::GetDayOfWeek,
        "getDayOfYear" => Func::GetDayOfYear,
        "getHours" => Func::GetHours,
        "getMinutes" => Func::GetMinutes,
        "getSeconds" => Func::GetSeconds,
        _ => Func::GetMilliseconds,
    }
}

/// Declarations by function name.
pub static TABLE: LazyLock<HashMap<&'static str, Vec<Overload>>> = LazyLock::new(|| {
    let mut table: HashMap<&'static str, Vec<Overload>> = HashMap::new();
    for (name, receiver, params, result, func) in rows() {
        let receiver = if receiver.is_empty() { None } else { Some(parse_type(receiver)) };
        let params = split_top(params).into_iter().map(parse_type).collect();
        table.entry(name).or_default().push(Overload { receiver, params, result: parse_type(result), func });
    }
    table
});

/// Splits `a, list(b), map(c, d)` at top-level commas.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(s.get(start..i).unwrap_or("").trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = s.get(start..).unwrap_or("").trim();
    if !last.is_empty() {
        parts.push(last);
    }
    parts
}

/// Parses the type notation of the table above.
pub fn parse_type(s: &str) -> Type {
    let s = s.trim();
    if let Some(inner) = s.strip_prefix("list(").and_then(|r| r.strip_suffix(')')) {
        return Type::list(parse_type(inner));
    }
    if let Some(inner) = s.strip_prefix("map(").and_then(|r| r.strip_suffix(')')) {
        let parts = split_top(inner);
        let k = parts.first().map_or(Type::Dyn, |p| parse_type(p));
        let v = parts.get(1).map_or(Type::Dyn, |p| parse_type(p));
        return Type::map(k, v);
    }
    if let Some(inner) = s.strip_prefix("optional_type(").and_then(|r| r.strip_suffix(')')) {
        return Type::optional(parse_type(inner));
    }
    match s {
        "int" => Type::Int,
        "uint" => Type::Uint,
        "double" => Type::Double,
        "string" => Type::String,
        "bytes" => Type::Bytes,
        "bool" => Type::Bool,
        "duration" => Type::Duration,
        "timestamp" => Type::Timestamp,
        "dyn" => Type::Dyn,
        "kubernetes.URL" => Type::Opaque(Opaque::Url),
        "kubernetes.Quantity" => Type::Opaque(Opaque::Quantity),
        "kubernetes.Semver" => Type::Opaque(Opaque::Semver),
        "kubernetes.NamedFormat" => Type::Opaque(Opaque::Format),
        "net.IP" => Type::Opaque(Opaque::Ip),
        "net.CIDR" => Type::Opaque(Opaque::Cidr),
        "kubernetes.authorization.Authorizer" => Type::Opaque(Opaque::Authorizer),
        "kubernetes.authorization.PathCheck" => Type::Opaque(Opaque::PathCheck),
        "kubernetes.authorization.GroupCheck" => Type::Opaque(Opaque::GroupCheck),
        "kubernetes.authorization.ResourceCheck" => Type::Opaque(Opaque::ResourceCheck),
        "kubernetes.authorization.Decision" => Type::Opaque(Opaque::AuthzDecision),
        p if p.len() == 1 => Type::Param(p.chars().next().unwrap_or('A')),
        _ => Type::Dyn,
    }
}

/// The outcome of resolving a call.
pub struct Resolved {
    pub func: Func,
    pub result: Type,
    /// Every overload the argument types match, as cel-go's checker records them: the cost of
    /// the call is estimated over all of them, and its runtime cost rule is chosen by the
    /// overload only when there is just one.
    pub overloads: Vec<&'static Overload>,
}

/// Finds the overloads of `name` matching the argument types; `None` when none does.
pub fn resolve(name: &str, receiver: Option<&Type>, args: &[Type]) -> Option<Resolved> {
    let table: &'static HashMap<&'static str, Vec<Overload>> = &TABLE;
    let overloads = table.get(name)?;
    let mut found: Option<Resolved> = None;
    for o in overloads {
        if o.params.len() != args.len() || o.receiver.is_some() != receiver.is_some() {
            continue;
        }
        let mut b = Bindings::default();
        if let (Some(formal), Some(actual)) = (&o.receiver, receiver) {
            if !assignable(formal, actual, &mut b) {
                continue;
            }
        }
        if !o.params.iter().zip(args).all(|(f, a)| assignable(f, a, &mut b)) {
            continue;
        }
        let result = b.substitute(&o.result);
        found = Some(match found {
            None => Resolved { func: o.func, result, overloads: vec![o] },
            Some(mut prev) => {
                if prev.result != result {
                    prev.result = Type::Dyn;
                }
                prev.overloads.push(o);
                prev
            }
        });
    }
    found
}

/// Whether any function (global or member) has this name.
pub fn declared(name: &str) -> bool {
    TABLE.contains_key(name)
}
