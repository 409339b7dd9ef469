//! Runtime values of CEL evaluation. Object data is viewed in place (a JSON node and its
//! schema node) and converted following the schema as it is reached, so integers stay `int`,
//! formatted strings become bytes, timestamps and durations, and nothing is copied up front.
//!
//! Owns: values, equality (with list-type set/map semantics), ordering, runtime types, and
//! JSON -> value conversion. Must not touch: evaluation order or cost.

use std::cmp::Ordering;
use std::rc::Rc;

use serde_json::{Map as JsonMap, Value as Json};

use super::library::net::Cidr;
use super::library::quantity::Quantity;
use super::library::semver::Semver;
use super::library::time::{Duration, Timestamp};
use super::library::urls::Url;
use super::schema::{Node, Shape};
use super::types::Opaque;

/// A string, borrowed from the object or the program where it can be.
#[derive(Debug, Clone)]
pub enum Str<'a> {
    Borrowed(&'a str),
    Owned(Rc<str>),
}

impl Str<'_> {
    pub fn as_str(&self) -> &str {
        match self {
            Str::Borrowed(s) => s,
            Str::Owned(s) => s,
        }
    }
}

/// How a list compares and concatenates (`x-kubernetes-list-type`).
#[derive(Debug, Clone, Copy)]
pub enum ListKind<'a> {
    Atomic,
    Set,
    Map(&'a [String]),
}

#[derive(Debug, Clone)]
pub enum ListData<'a> {
    Json(&'a [Json], &'a Node),
    Owned(Rc<Vec<Value<'a>>>),
}

#[derive(Debug, Clone)]
pub struct List<'a> {
    pub data: ListData<'a>,
    pub kind: ListKind<'a>,
}

#[derive(Debug, Clone)]
pub enum MapData<'a> {
    /// An object with `additionalProperties`: its values follow the given schema node.
    Json(&'a JsonMap<String, Json>, &'a Node),
    Owned(Rc<Vec<(Value<'a>, Value<'a>)>>),
}

/// An object with declared properties.
#[derive(Debug, Clone, Copy)]
pub struct Obj<'a> {
    pub fields: &'a JsonMap<String, Json>,
    pub node: &'a Node,
}

/// A type as a value: what `type(x)` returns.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeVal {
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    List,
    Map,
    Type,
    Optional,
    /// An object type, identified by its schema node.
    Object(usize),
    Opaque(Opaque),
}

impl TypeVal {
    pub fn name(&self) -> &'static str {
        match self {
            TypeVal::Null => "null_type",
            TypeVal::Bool => "bool",
            TypeVal::Int => "int",
            TypeVal::Uint => "uint",
            TypeVal::Double => "double",
            TypeVal::String => "string",
            TypeVal::Bytes => "bytes",
            TypeVal::Duration => "google.protobuf.Duration",
            TypeVal::Timestamp => "google.protobuf.Timestamp",
            TypeVal::List => "list",
            TypeVal::Map => "map",
            TypeVal::Type => "type",
            TypeVal::Optional => "optional_type",
            TypeVal::Object(_) => "object",
            TypeVal::Opaque(o) => o.name(),
        }
    }
}

#[derive(Debug, Clone)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(Str<'a>),
    Bytes(Rc<[u8]>),
    Duration(Duration),
    Timestamp(Timestamp),
    List(List<'a>),
    Map(MapData<'a>),
    Object(Obj<'a>),
    Optional(Option<Rc<Value<'a>>>),
    Type(TypeVal),
    Quantity(Rc<Quantity>),
    Url(Rc<Url>),
    Ip(std::net::IpAddr),
    Cidr(Cidr),
    Semver(Rc<Semver>),
    Format(&'static str),
    /// A value of the authorizer library (admission expressions).
    Authz(Rc<super::library::authz::Authz>),
    /// An error held by a comprehension's accumulator, so that `||` and `&&` in later steps
    /// can still absorb it.
    Error(Rc<EvalError>),
}

/// A runtime error: its text is what Kubernetes reports (`no such key: x`, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError {
    pub message: String,
    /// The per-call cost limit was exceeded: no further rule runs.
    pub cost_exceeded: bool,
}

impl EvalError {
    pub fn new(message: impl Into<String>) -> EvalError {
        EvalError { message: message.into(), cost_exceeded: false }
    }

    pub fn no_overload() -> EvalError {
        EvalError::new("no such overload")
    }
}

pub type EvalResult<'a> = Result<Value<'a>, EvalError>;

impl<'a> Value<'a> {
    pub fn str(s: &str) -> Value<'a> {
        Value::Str(Str::Owned(Rc::from(s)))
    }

    pub fn string(s: String) -> Value<'a> {
        Value::Str(Str::Owned(Rc::from(s)))
    }

    pub fn list(items: Vec<Value<'a>>) -> Value<'a> {
        Value::List(List { data: ListData::Owned(Rc::new(items)), kind: ListKind::Atomic })
    }

    pub fn type_val(&self) -> TypeVal {
        match self {
            Value::Null => TypeVal::Null,
            Value::Bool(_) => TypeVal::Bool,
            Value::Int(_) => TypeVal::Int,
            Value::Uint(_) => TypeVal::Uint,
            Value::Double(_) => TypeVal::Double,
            Value::Str(_) => TypeVal::String,
            Value::Bytes(_) => TypeVal::Bytes,
            Value::Duration(_) => TypeVal::Duration,
            Value::Timestamp(_) => TypeVal::Timestamp,
            Value::List(_) => TypeVal::List,
            Value::Map(_) => TypeVal::Map,
            Value::Object(o) => TypeVal::Object(std::ptr::from_ref(o.node) as usize),
            Value::Optional(_) => TypeVal::Optional,
            Value::Type(_) => TypeVal::Type,
            Value::Quantity(_) => TypeVal::Opaque(Opaque::Quantity),
            Value::Url(_) => TypeVal::Opaque(Opaque::Url),
            Value::Ip(_) => TypeVal::Opaque(Opaque::Ip),
            Value::Cidr(_) => TypeVal::Opaque(Opaque::Cidr),
            Value::Semver(_) => TypeVal::Opaque(Opaque::Semver),
            Value::Format(_) => TypeVal::Opaque(Opaque::Format),
            Value::Authz(a) => TypeVal::Opaque(match a.kind {
                super::library::authz::Kind::Authorizer => Opaque::Authorizer,
                super::library::authz::Kind::PathCheck => Opaque::PathCheck,
                super::library::authz::Kind::GroupCheck => Opaque::GroupCheck,
                super::library::authz::Kind::ResourceCheck => Opaque::ResourceCheck,
                super::library::authz::Kind::Decision => Opaque::AuthzDecision,
            }),
            Value::Error(_) => TypeVal::Null,
        }
    }

    /// The size cost tracking uses: characters, bytes, items or entries; 1 otherwise.
    pub fn cost_size(&self) -> u64 {
        match self {
            Value::Str(s) => s.as_str().chars().count() as u64,
            Value::Bytes(b) => b.len() as u64,
            Value::List(l) => l.len() as u64,
            Value::Map(m) => map_len(m) as u64,
            // An object counts its entries, as Kubernetes' unstructured maps do.
            Value::Object(o) => o.fields.len() as u64,
            Value::Optional(Some(v)) => v.cost_size(),
            // Kubernetes sizes addresses in bytes, and a prefix by the bytes its bits span.
            Value::Ip(std::net::IpAddr::V4(_)) => 4,
            Value::Ip(std::net::IpAddr::V6(_)) => 16,
            Value::Cidr(c) => u64::from(c.prefix).div_ceil(8),
            _ => 1,
        }
    }
}

impl<'a> List<'a> {
    pub fn len(&self) -> usize {
        match &self.data {
            ListData::Json(items, _) => items.len(),
            ListData::Owned(items) => items.len(),
        }
    }

    pub fn get(&self, i: usize) -> Option<EvalResult<'a>> {
        match &self.data {
            ListData::Json(items, node) => items.get(i).map(|j| from_json(j, node)),
            ListData::Owned(items) => items.get(i).map(|v| Ok(v.clone())),
        }
    }

    /// Every item, converted.
    pub fn items(&self) -> Result<Vec<Value<'a>>, EvalError> {
        match &self.data {
            ListData::Json(items, node) => items.iter().map(|j| from_json(j, node)).collect(),
            ListData::Owned(items) => Ok(items.as_ref().clone()),
        }
    }
}

pub fn map_len(m: &MapData<'_>) -> usize {
    match m {
        MapData::Json(map, _) => map.len(),
        MapData::Owned(entries) => entries.len(),
    }
}

/// The value at `key` in a map, if present.
pub fn map_get<'a>(m: &MapData<'a>, key: &Value<'a>) -> Option<EvalResult<'a>> {
    match m {
        MapData::Json(map, node) => match key {
            Value::Str(s) => map.get(s.as_str()).map(|j| from_json(j, node)),
            _ => None,
        },
        MapData::Owned(entries) => {
            entries.iter().find(|(k, _)| equals(k, key).unwrap_or(false)).map(|(_, v)| Ok(v.clone()))
        }
    }
}

/// The keys of a map, in order.
pub fn map_keys<'a>(m: &MapData<'a>) -> Vec<Value<'a>> {
    match m {
        MapData::Json(map, _) => map.keys().map(|k| Value::Str(Str::Borrowed(k.as_str()))).collect(),
        MapData::Owned(entries) => entries.iter().map(|(k, _)| k.clone()).collect(),
    }
}

/// The field of an object, if set: null-valued fields count as absent.
pub fn object_field<'a>(o: &Obj<'a>, name: &str) -> Option<EvalResult<'a>> {
    let json = o.fields.get(name)?;
    if json.is_null() {
        return None;
    }
    let node = o.node.properties.get(name)?;
    Some(from_json(json, node))
}

/// Converts JSON data to a value following its schema node.
pub fn from_json<'a>(json: &'a Json, node: &'a Node) -> EvalResult<'a> {
    if json.is_null() {
        if node.nullable {
            return Ok(Value::Null);
        }
        return Err(EvalError::new("invalid data, got null for schema with nullable=false"));
    }
    let mismatch = || EvalError::new(format!("invalid data, expected {} for the provided schema", expected(node)));
    match node.shape {
        Shape::Object => {
            let map = json.as_object().ok_or_else(|| {
                EvalError::new("invalid data, expected a map for the provided schema with type=object")
            })?;
            match node.additional.as_deref() {
                Some(values) => Ok(Value::Map(MapData::Json(map, values))),
                None => Ok(Value::Object(Obj { fields: map, node })),
            }
        }
        Shape::Array => {
            let items = json.as_array().ok_or_else(|| {
                EvalError::new("invalid data, expected an array for the provided schema with type=array")
            })?;
            let item_node = node.items.as_deref().ok_or_else(mismatch)?;
            let kind = match node.list_type.as_str() {
                "set" => ListKind::Set,
                "map" => ListKind::Map(&node.map_keys),
                _ => ListKind::Atomic,
            };
            Ok(Value::List(List { data: ListData::Json(items, item_node), kind }))
        }
        Shape::IntOrString => match json {
            Json::String(s) => Ok(Value::Str(Str::Borrowed(s))),
            Json::Number(n) => n.as_i64().map(Value::Int).ok_or_else(|| {
                EvalError::new("invalid data, expected XIntOrString value to be either a string or integer")
            }),
            _ => Err(EvalError::new("invalid data, expected XIntOrString value to be either a string or integer")),
        },
        Shape::Integer => match json {
            Json::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)).map(Value::Int).ok_or_else(mismatch),
            _ => Err(mismatch()),
        },
        Shape::Number => match json {
            Json::Number(n) => n.as_f64().map(Value::Double).ok_or_else(mismatch),
            _ => Err(mismatch()),
        },
        Shape::Boolean => json.as_bool().map(Value::Bool).ok_or_else(mismatch),
        Shape::String => {
            let s = json.as_str().ok_or_else(mismatch)?;
            string_with_format(s, &node.format)
        }
        Shape::Unknown => Err(mismatch()),
        // Unstructured data, converted only where an expression reaches it.
        Shape::Any => Ok(match json {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Double(n.as_f64().unwrap_or(f64::NAN)),
            },
            Json::String(s) => Value::Str(Str::Borrowed(s)),
            Json::Array(items) => Value::List(List { data: ListData::Json(items, node), kind: ListKind::Atomic }),
            Json::Object(map) => Value::Map(MapData::Json(map, node)),
        }),
    }
}

/// Converts JSON without a schema, as Kubernetes' unstructured values reach CEL in admission
/// policies: integral numbers are `int`, others `double`, objects are maps.
pub fn from_untyped(json: &Json) -> Value<'_> {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::Str(Str::Borrowed(s)),
        Json::Array(items) => Value::List(List {
            data: ListData::Owned(Rc::new(items.iter().map(from_untyped).collect())),
            kind: ListKind::Atomic,
        }),
        Json::Object(map) => Value::Map(MapData::Owned(Rc::new(
            map.iter().map(|(k, v)| (Value::Str(Str::Borrowed(k)), from_untyped(v))).collect(),
        ))),
    }
}

fn expected(node: &Node) -> &'static str {
    match node.shape {
        Shape::Integer => "an integer",
        Shape::Number => "a number",
        Shape::Boolean => "a boolean",
        Shape::String => "a string",
        _ => "a value",
    }
}

fn string_with_format<'a>(s: &'a str, format: &str) -> EvalResult<'a> {
    match format {
        "byte" => {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| EvalError::new(format!("base64 decode failed: {e}")))?;
            Ok(Value::Bytes(Rc::from(bytes)))
        }
        "duration" => Duration::parse_go(s).map(Value::Duration).map_err(EvalError::new),
        "date" => Timestamp::parse_date(s).map(Value::Timestamp).map_err(EvalError::new),
        "date-time" => Timestamp::parse_rfc3339(s).map(Value::Timestamp).map_err(EvalError::new),
        _ => Ok(Value::Str(Str::Borrowed(s))),
    }
}

/// CEL equality. Values of different kinds are unequal; numbers compare across kinds.
pub fn equals<'a>(a: &Value<'a>, b: &Value<'a>) -> Result<bool, EvalError> {
    Ok(match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x.as_str() == y.as_str(),
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        (Value::Duration(x), Value::Duration(y)) => x == y,
        (Value::Timestamp(x), Value::Timestamp(y)) => x == y,
        (Value::Type(x), Value::Type(y)) => x == y,
        (Value::List(x), Value::List(y)) => lists_equal(x, y)?,
        (Value::Map(x), Value::Map(y)) => maps_equal(x, y)?,
        (Value::Object(x), Value::Object(y)) => objects_equal(x, y)?,
        (Value::Optional(x), Value::Optional(y)) => match (x, y) {
            (None, None) => true,
            (Some(x), Some(y)) => equals(x, y)?,
            _ => false,
        },
        (Value::Quantity(x), Value::Quantity(y)) => x.compare(y) == Ordering::Equal,
        (Value::Url(x), Value::Url(y)) => x.raw == y.raw,
        (Value::Ip(x), Value::Ip(y)) => x == y,
        (Value::Cidr(x), Value::Cidr(y)) => x == y,
        (Value::Semver(x), Value::Semver(y)) => x.as_ref() == y.as_ref(),
        (Value::Format(x), Value::Format(y)) => x == y,
        _ => match numeric_cmp(a, b) {
            Some(ord) => ord == Ordering::Equal,
            None => false,
        },
    })
}

/// Compares numbers of any kind; `None` when either is not a number (or is NaN).
pub fn numeric_cmp(a: &Value<'_>, b: &Value<'_>) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Uint(x), Value::Uint(y)) => Some(x.cmp(y)),
        (Value::Double(x), Value::Double(y)) => x.partial_cmp(y),
        (Value::Int(x), Value::Uint(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Value::Uint(x), Value::Int(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Value::Int(x), Value::Double(y)) => int_double_cmp(*x as f64, *y, *x >= 0),
        (Value::Double(x), Value::Int(y)) => int_double_cmp(*y as f64, *x, *y >= 0).map(Ordering::reverse),
        (Value::Uint(x), Value::Double(y)) => (*x as f64).partial_cmp(y),
        (Value::Double(x), Value::Uint(y)) => x.partial_cmp(&(*y as f64)),
        _ => None,
    }
}

fn int_double_cmp(x: f64, y: f64, _non_negative: bool) -> Option<Ordering> {
    x.partial_cmp(&y)
}

/// Ordering for `<`, `<=`, `>`, `>=`: numbers, strings, bytes, bools, durations, timestamps.
pub fn compare(a: &Value<'_>, b: &Value<'_>) -> Result<Ordering, EvalError> {
    let ord = match (a, b) {
        (Value::Str(x), Value::Str(y)) => Some(x.as_str().cmp(y.as_str())),
        (Value::Bytes(x), Value::Bytes(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Duration(x), Value::Duration(y)) => Some(x.cmp(y)),
        (Value::Timestamp(x), Value::Timestamp(y)) => Some(x.cmp(y)),
        _ => match numeric_cmp(a, b) {
            Some(o) => Some(o),
            None if is_number(a) && is_number(b) => return Err(EvalError::new("NaN values cannot be ordered")),
            None => None,
        },
    };
    ord.ok_or_else(EvalError::no_overload)
}

fn is_number(v: &Value<'_>) -> bool {
    matches!(v, Value::Int(_) | Value::Uint(_) | Value::Double(_))
}

fn lists_equal<'a>(x: &List<'a>, y: &List<'a>) -> Result<bool, EvalError> {
    if x.len() != y.len() {
        return Ok(false);
    }
    let xs = x.items()?;
    let ys = y.items()?;
    match x.kind {
        ListKind::Atomic => {
            for (a, b) in xs.iter().zip(ys.iter()) {
                if !equals(a, b)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        // Sets and maps ignore order: every item of one has its equal in the other.
        ListKind::Set | ListKind::Map(_) => {
            let mut used = vec![false; ys.len()];
            for a in &xs {
                let mut found = false;
                for (i, b) in ys.iter().enumerate() {
                    if !used.get(i).copied().unwrap_or(true) && equals(a, b)? {
                        if let Some(u) = used.get_mut(i) {
                            *u = true;
                        }
                        found = true;
                        break;
                    }
                }
                if !found {
                    return Ok(false);
                }
            }
            Ok(true)
        }
    }
}

fn maps_equal<'a>(x: &MapData<'a>, y: &MapData<'a>) -> Result<bool, EvalError> {
    if map_len(x) != map_len(y) {
        return Ok(false);
    }
    for k in map_keys(x) {
        let Some(a) = map_get(x, &k) else { return Ok(false) };
        let Some(b) = map_get(y, &k) else { return Ok(false) };
        if !equals(&a?, &b?)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Kubernetes' equality of objects (`unstructuredMap.Equal`): as many entries on both sides
/// (null and unknown fields included); each declared property present (not null) on both or
/// neither, and equal; each unknown field kept by x-kubernetes-preserve-unknown-fields equal
/// as data where the other side has it too. A declared property of no type holds preserved
/// data, compared as data.
fn objects_equal<'a>(x: &Obj<'a>, y: &Obj<'a>) -> Result<bool, EvalError> {
    if x.fields.len() != y.fields.len() {
        return Ok(false);
    }
    for (name, value) in x.fields {
        let Some(node) = x.node.properties.get(name) else {
            if y.fields.get(name).is_some_and(|other| other != value) {
                return Ok(false);
            }
            continue;
        };
        let present = |o: &Obj<'a>| o.fields.get(name).filter(|v| !v.is_null());
        match (present(x), present(y)) {
            (None, None) => {}
            (Some(a), Some(b)) if node.shape == Shape::Unknown => {
                if a != b {
                    return Ok(false);
                }
            }
            (Some(_), Some(_)) => match (object_field(x, name), object_field(y, name)) {
                (Some(a), Some(b)) => {
                    if !equals(&a?, &b?)? {
                        return Ok(false);
                    }
                }
                _ => return Ok(false),
            },
            _ => return Ok(false),
        }
    }
    Ok(true)
}
