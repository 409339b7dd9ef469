//! The field paths cel-go's cost estimator keeps for expressions (`self.spec.items` is
//! `[self, spec, items]`, an item of it `[..., @items]`), and the size bounds Kubernetes' size
//! estimator reads at the end of a path from the schema's declared types.
//!
//! cel-go keeps a path only for identifiers, field selections, `_[_]` indexing and
//! comprehension variables; calls, literals and comprehensions have none. Kubernetes walks a
//! path from the rule's own schema node after dropping its first element, whatever that
//! element is, so a selection from an expression without a path (`f(x).name`) reads the
//! bounds of the rule's own node.
//!
//! Owns: path steps and the size a path gives. Must not touch: types or costs of calls.

use super::super::cost::Size;
use super::super::types::{Decl, Type};

/// Map keys are declared as plain strings with no bound (`MaxElements` 0).
static MAP_KEY: Decl = Decl { ty: Type::String, max_elements: 0, min_size: 2, elem: None };

/// Where an expression's path leads in the declared types.
#[derive(Debug, Clone, Copy)]
pub enum SchemaPath<'d> {
    /// cel-go keeps no path for the expression.
    None,
    /// The path ends at this declaration.
    At(&'d Decl),
    /// The path leads nowhere in the declared types: no size can be read.
    Lost,
}

/// One element of a path.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    Field(&'a str),
    /// `@items` of a list or `@values` of a map.
    Items,
    Keys,
    /// The index variable of a two-variable comprehension over a list.
    Indices,
}

impl<'d> SchemaPath<'d> {
    /// The path of the rule's variables (`self`, `oldSelf`): its own schema node.
    pub fn root(root: Option<&'d Decl>) -> SchemaPath<'d> {
        root.map_or(SchemaPath::Lost, SchemaPath::At)
    }

    /// The path one step further. A path starting here has the step as its only element,
    /// which the walk drops: it ends at the rule's own node.
    pub fn step(self, root: Option<&'d Decl>, step: Step<'_>) -> SchemaPath<'d> {
        let from = match self {
            SchemaPath::None => return SchemaPath::root(root),
            SchemaPath::At(d) => d,
            SchemaPath::Lost => return SchemaPath::Lost,
        };
        let next = match step {
            Step::Field(name) => from.field(name).map(|(_, d)| d),
            Step::Items => from.elem.as_deref(),
            Step::Keys => matches!(from.ty, Type::Map(..)).then_some(&MAP_KEY),
            Step::Indices => None,
        };
        next.map_or(SchemaPath::Lost, SchemaPath::At)
    }

    /// Whether cel-go keeps a path for the expression at all.
    pub fn exists(self) -> bool {
        !matches!(self, SchemaPath::None)
    }

    /// The size Kubernetes' estimator gives the value at the end of the path.
    pub fn size(self) -> Option<Size> {
        match self {
            SchemaPath::At(d) => Some(Size::upto(d.max_elements)),
            _ => None,
        }
    }
}

/// The size cel-go gives a value of a fixed-size type: 1 for scalars (and optional scalars),
/// nothing for strings, bytes, lists, maps, objects and everything else.
pub fn scalar_size(ty: &Type) -> Option<Size> {
    match ty {
        Type::Bool | Type::Int | Type::Uint | Type::Double | Type::Duration | Type::Timestamp => Some(Size::exact(1)),
        Type::Optional(inner) => scalar_size(inner),
        _ => None,
    }
}
