//! CEL types as the checker sees them, and the declared types a structural schema gives
//! (Kubernetes' `DeclType`: the type, and the size bounds cost estimation uses).
//!
//! Owns: type identity, display names (cel-go's spelling), assignability with type
//! parameters, and the OpenAPI -> CEL type mapping. Must not touch: values or evaluation.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::escaping;
use super::schema::{Node, Shape};

/// The largest request Kubernetes accepts, used to bound unbounded lists, maps and strings.
pub const MAX_REQUEST_SIZE_BYTES: i64 = 3 * 1024 * 1024;

/// Opaque types of the Kubernetes libraries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opaque {
    Quantity,
    Url,
    Ip,
    Cidr,
    Semver,
    Format,
    Authorizer,
    PathCheck,
    GroupCheck,
    ResourceCheck,
    AuthzDecision,
}

impl Opaque {
    pub fn name(self) -> &'static str {
        match self {
            Opaque::Quantity => "kubernetes.Quantity",
            Opaque::Url => "kubernetes.URL",
            Opaque::Ip => "net.IP",
            Opaque::Cidr => "net.CIDR",
            Opaque::Semver => "kubernetes.Semver",
            Opaque::Format => "kubernetes.NamedFormat",
            Opaque::Authorizer => "kubernetes.authorization.Authorizer",
            Opaque::PathCheck => "kubernetes.authorization.PathCheck",
            Opaque::GroupCheck => "kubernetes.authorization.GroupCheck",
            Opaque::ResourceCheck => "kubernetes.authorization.ResourceCheck",
            Opaque::AuthzDecision => "kubernetes.authorization.Decision",
        }
    }
}

/// An object ("message") type declared by a schema node with properties.
#[derive(Debug, PartialEq)]
pub struct ObjectType {
    /// A name unique to the schema node, as Kubernetes names its object types.
    pub name: String,
    /// Escaped field name -> (property name in JSON, declared type).
    pub fields: BTreeMap<String, (String, Decl)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Type {
    Dyn,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    List(Arc<Type>),
    Map(Arc<Type>, Arc<Type>),
    Object(Arc<ObjectType>),
    Optional(Arc<Type>),
    /// The type of a type: `type(int)`; `Type(None)` is `type` itself.
    Meta(Option<Arc<Type>>),
    Opaque(Opaque),
    /// A type parameter of a function signature.
    Param(char),
    /// A type an error was already reported for.
    Error,
}

impl Type {
    pub fn list(t: Type) -> Type {
        Type::List(Arc::new(t))
    }

    pub fn map(k: Type, v: Type) -> Type {
        Type::Map(Arc::new(k), Arc::new(v))
    }

    pub fn optional(t: Type) -> Type {
        Type::Optional(Arc::new(t))
    }

    pub fn type_of(t: Type) -> Type {
        Type::Meta(Some(Arc::new(t)))
    }

    pub fn is_dyn_or_error(&self) -> bool {
        matches!(self, Type::Dyn | Type::Error)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Dyn => f.write_str("dyn"),
            Type::Null => f.write_str("null"),
            Type::Bool => f.write_str("bool"),
            Type::Int => f.write_str("int"),
            Type::Uint => f.write_str("uint"),
            Type::Double => f.write_str("double"),
            Type::String => f.write_str("string"),
            Type::Bytes => f.write_str("bytes"),
            Type::Duration => f.write_str("google.protobuf.Duration"),
            Type::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Type::List(e) => write!(f, "list({e})"),
            Type::Map(k, v) => write!(f, "map({k}, {v})"),
            Type::Object(o) => f.write_str(&o.name),
            Type::Optional(t) => write!(f, "optional_type({t})"),
            Type::Meta(Some(t)) => write!(f, "type({t})"),
            Type::Meta(None) => f.write_str("type"),
            Type::Opaque(o) => f.write_str(o.name()),
            Type::Param(c) => write!(f, "{c}"),
            Type::Error => f.write_str("*error*"),
        }
    }
}

/// Type parameter bindings made while matching a signature.
#[derive(Debug, Default, Clone)]
pub struct Bindings(Vec<(char, Type)>);

impl Bindings {
    pub fn get(&self, p: char) -> Option<&Type> {
        self.0.iter().find(|(c, _)| *c == p).map(|(_, t)| t)
    }

    /// The type with its parameters replaced; unbound parameters become `dyn`.
    pub fn substitute(&self, t: &Type) -> Type {
        match t {
            Type::Param(p) => self.get(*p).cloned().unwrap_or(Type::Dyn),
            Type::List(e) => Type::list(self.substitute(e)),
            Type::Map(k, v) => Type::map(self.substitute(k), self.substitute(v)),
            Type::Optional(e) => Type::optional(self.substitute(e)),
            Type::Meta(Some(e)) => Type::type_of(self.substitute(e)),
            other => other.clone(),
        }
    }
}

/// Whether a value of type `actual` may be passed where `formal` is expected, binding the
/// formal's type parameters (cel-go's `isAssignable`, without its proto wrappers).
pub fn assignable(formal: &Type, actual: &Type, b: &mut Bindings) -> bool {
    match (formal, actual) {
        (Type::Error, _) | (_, Type::Error) => true,
        (Type::Param(p), _) => match b.get(*p).cloned() {
            Some(bound) => {
                if assignable(&bound, actual, b) {
                    // A more specific type refines a `dyn` binding.
                    if bound == Type::Dyn {
                        set_binding(b, *p, actual.clone());
                    } else if matches!(bound, Type::List(_) | Type::Map(_, _)) {
                        let refined = refine_dyn(&bound, actual);
                        set_binding(b, *p, refined);
                    }
                    true
                } else {
                    assignable(actual, &bound, &mut Bindings::default())
                }
            }
            None => {
                b.0.push((*p, actual.clone()));
                true
            }
        },
        (Type::Dyn, _) | (_, Type::Dyn) => true,
        (Type::List(f), Type::List(a)) => assignable(f, a, b),
        (Type::Map(fk, fv), Type::Map(ak, av)) => assignable(fk, ak, b) && assignable(fv, av, b),
        (Type::Optional(f), Type::Optional(a)) => assignable(f, a, b),
        (Type::Meta(_), Type::Meta(_)) => true,
        (Type::Object(f), Type::Object(a)) => f.name == a.name,
        (Type::Object(_), Type::Null) => true,
        (f, a) => f == a,
    }
}

/// `bound` with its `dyn` parts replaced by what `actual` has there.
fn refine_dyn(bound: &Type, actual: &Type) -> Type {
    match (bound, actual) {
        (Type::Dyn, a) => a.clone(),
        (Type::List(x), Type::List(y)) => Type::list(refine_dyn(x, y)),
        (Type::Map(xk, xv), Type::Map(yk, yv)) => Type::map(refine_dyn(xk, yk), refine_dyn(xv, yv)),
        (b, _) => b.clone(),
    }
}

fn set_binding(b: &mut Bindings, p: char, t: Type) {
    if let Some(slot) = b.0.iter_mut().find(|(c, _)| *c == p) {
        slot.1 = t;
    }
}

/// The most specific type both may be viewed as; `dyn` when they differ.
pub fn join(a: &Type, b: &Type) -> Type {
    match (a, b) {
        (Type::Dyn, x) | (x, Type::Dyn) => {
            // `dyn` joined with a container keeps the container's shape.
            match x {
                Type::List(_) | Type::Map(_, _) => x.clone(),
                _ => Type::Dyn,
            }
        }
        (Type::List(x), Type::List(y)) => Type::list(join(x, y)),
        (Type::Map(xk, xv), Type::Map(yk, yv)) => Type::map(join(xk, yk), join(xv, yv)),
        (x, y) if x == y => x.clone(),
        (Type::Error, x) | (x, Type::Error) => x.clone(),
        _ => Type::Dyn,
    }
}

/// A type declared by a schema, with the bounds cost estimation uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Decl {
    pub ty: Type,
    /// The most elements (characters for strings, items, properties) a value may have.
    pub max_elements: i64,
    /// The fewest bytes a value of this type takes in JSON.
    pub min_size: i64,
    pub elem: Option<Box<Decl>>,
}

impl Decl {
    fn simple(ty: Type, min_size: i64, max_elements: i64) -> Decl {
        Decl { ty, max_elements, min_size, elem: None }
    }

    /// The declared type of a schema node, or `None` when CEL cannot see it.
    pub fn of(node: &Node, path: &str) -> Option<Decl> {
        let unbounded_string = MAX_REQUEST_SIZE_BYTES - 2;
        match node.shape {
            Shape::IntOrString => {
                let max = node.max_length.map_or(unbounded_string, |m| m.max(0) * 4);
                Some(Decl::simple(Type::Dyn, 1, max))
            }
            Shape::Array => {
                let items = node.items.as_deref()?;
                let elem = Decl::of(items, &format!("{path}.@idx"))?;
                let max = node.max_items.map_or((MAX_REQUEST_SIZE_BYTES - 2) / (elem.min_size + 1), |m| m.max(0));
                Some(Decl {
                    ty: Type::list(elem.ty.clone()),
                    max_elements: max,
                    min_size: 2,
                    elem: Some(Box::new(elem)),
                })
            }
            Shape::Object if node.additional.is_some() => {
                let values = node.additional.as_deref()?;
                let elem = Decl::of(values, &format!("{path}.@elem"))?;
                let max = node.max_properties.map_or((MAX_REQUEST_SIZE_BYTES - 2) / (elem.min_size + 6), |m| m.max(0));
                Some(Decl {
                    ty: Type::map(Type::String, elem.ty.clone()),
                    max_elements: max,
                    min_size: 2,
                    elem: Some(Box::new(elem)),
                })
            }
            Shape::Object => {
                let mut fields = BTreeMap::new();
                let mut min_size = 2;
                for (name, prop) in &node.properties {
                    let Some(decl) = Decl::of(prop, &format!("{path}.{name}")) else { continue };
                    let required = node.required.iter().any(|r| r == name);
                    if required && !prop.has_default {
                        min_size += name.len() as i64 + decl.min_size + 4;
                    }
                    if let Some(escaped) = escaping::escape(name) {
                        fields.insert(escaped, (name.clone(), decl));
                    }
                }
                let ty = Type::Object(Arc::new(ObjectType { name: path.to_string(), fields }));
                // Kubernetes gives objects no element bound: their size estimate is 0.
                Some(Decl { ty, max_elements: 0, min_size, elem: None })
            }
            Shape::String => {
                let (ty, min, max) = match node.format.as_str() {
                    "byte" => (Type::Bytes, 2, node.max_length.map_or(unbounded_string, |m| m.max(0))),
                    "duration" => (Type::Duration, 3, 32),
                    "date" => (Type::Timestamp, 12, 12),
                    "date-time" => (Type::Timestamp, 21, 32),
                    _ => {
                        let max = match (node.max_length, node.enum_max_len) {
                            (Some(m), _) => m.max(0) * 4,
                            (None, Some(e)) => e,
                            (None, None) => unbounded_string,
                        };
                        (Type::String, 2, max)
                    }
                };
                Some(Decl::simple(ty, min, max))
            }
            Shape::Boolean => Some(Decl::simple(Type::Bool, 4, 0)),
            Shape::Number => Some(Decl::simple(Type::Double, 1, 0)),
            Shape::Integer => Some(Decl::simple(Type::Int, 1, 0)),
            Shape::Unknown | Shape::Any => None,
        }
    }

    /// The declared type of the field with this escaped name.
    pub fn field(&self, escaped: &str) -> Option<&(String, Decl)> {
        match &self.ty {
            Type::Object(o) => o.fields.get(escaped),
            _ => None,
        }
    }
}
