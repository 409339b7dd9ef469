//! The type checker: resolves names, fields and overloads over the crate's parsed AST against
//! the types a schema declares, reports errors as cel-go words them, estimates cost as
//! cel-go's checker does (a cost range and, where known, a size range and the sizes of
//! entries for every expression), and lowers the AST to the [`Ir`] the evaluator runs.
//! Calls live in `calls`, comprehensions and their relatives in `loops`, the field paths
//! sizes are read from in `paths`.
//!
//! Owns: static semantics. Must not touch: evaluation, schema walking.

mod calls;
mod loops;
mod paths;

use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::cost::{Cost, EntrySize, LIST_CREATE_COST, MAP_CREATE_COST, Size};
use super::ir::{Const, Ir, SelectMode};
use super::types::{Decl, Opaque, Type, join};
use super::value::TypeVal;
pub use paths::{SchemaPath, Step, scalar_size};

/// A variable in scope, with what the cost estimator knows of it.
struct Var<'d> {
    name: String,
    ty: Type,
    path: SchemaPath<'d>,
    /// The size of a comprehension's or binding's variable, used when its path gives none.
    size: Option<Size>,
    entry: Option<EntrySize>,
    visible: bool,
}

/// What checking one expression yields.
pub struct Checked<'d> {
    pub ir: Ir,
    pub ty: Type,
    /// Where cel-go's field path of the expression leads.
    pub path: SchemaPath<'d>,
    pub cost: Cost,
    /// The size range cel-go computes for the value (`None`: unknown).
    pub size: Option<Size>,
    /// The sizes of the value's entries, for literals and what is built from them.
    pub entry: Option<EntrySize>,
}

impl<'d> Checked<'d> {
    fn new(ir: Ir, ty: Type) -> Self {
        Checked { ir, ty, path: SchemaPath::None, cost: Cost::ZERO, size: None, entry: None }
    }

    fn error() -> Self {
        Checked::new(Ir::Const(Const::Null), Type::Error)
    }

    /// The size, or the widest range when nothing is known.
    pub fn size_or_unknown(&self) -> Size {
        self.size.unwrap_or(Size::UNKNOWN)
    }

    /// The size Kubernetes' estimator reads for the items of a list value: from the path of
    /// its items, when the list has a path at all (`None`: unknown).
    pub fn item_size(&self, root: Option<&'d Decl>) -> Option<Size> {
        if !self.path.exists() {
            return None;
        }
        self.path.step(root, Step::Items).size()
    }

    /// The value of an integer literal.
    pub fn int_literal(&self) -> Option<i64> {
        match self.ir {
            Ir::Const(Const::Int(i)) => Some(i),
            _ => None,
        }
    }
}

pub struct Checker<'d> {
    scope: Vec<Var<'d>>,
    /// The declaration of the rule's own schema node, where size paths start.
    root: Option<&'d Decl>,
    /// (expression id, message) of every error found.
    pub errors: Vec<(u64, String)>,
    suppress: u32,
    pub uses_old_self: bool,
    pub slots: usize,
    /// Errors found building the program rather than checking it (bad constant patterns).
    pub program_errors: Vec<String>,
    /// Set while checking the list literal of `format`, which may mix types.
    mixed_literal_ok: bool,
    /// How deeply the expression being checked nests, and whether it passed the limit:
    /// the program's depth bounds the evaluator's recursion on a request's stack.
    depth: usize,
    pub too_deep: bool,
    /// Whether this is the environment of MutatingAdmissionPolicy mutations: `Object{...}` and
    /// `JSONPatch{...}` literals and `jsonpatch.escapeKey` are declared only there.
    pub mutation: bool,
}

/// The deepest expression tree checked (cel-go's per-rule recursion limit).
const MAX_EXPRESSION_DEPTH: usize = 250;

impl<'d> Checker<'d> {
    /// A checker with `self` (slot 0) and `oldSelf` (slot 1, usable only when `old_self`).
    pub fn new(self_decl: Option<&'d Decl>, self_ty: Type, old_self: Option<Type>) -> Self {
        let old_visible = old_self.is_some();
        let var = |name: &str, ty: Type, visible: bool| Var {
            name: name.into(),
            ty,
            path: SchemaPath::root(self_decl),
            size: None,
            entry: None,
            visible,
        };
        let scope = vec![var("self", self_ty, true), var("oldSelf", old_self.unwrap_or(Type::Dyn), old_visible)];
        Checker::with_scope(scope, self_decl)
    }

    /// A checker with the given variables (all `dyn`) in slots 0, 1, ...: the environment of
    /// admission policies (`object`, `oldObject`, `request`, `params`, ...).
    pub fn with_variables(names: &[&str]) -> Self {
        let ty = |n: &str| {
            if n == "authorizer" { Type::Opaque(super::types::Opaque::Authorizer) } else { Type::Dyn }
        };
        let scope = names.iter().map(|n| Var {
            name: (*n).to_string(),
            ty: ty(n),
            path: SchemaPath::Lost,
            size: None,
            entry: None,
            visible: true,
        });
        Checker::with_scope(scope.collect(), None)
    }

    fn with_scope(scope: Vec<Var<'d>>, root: Option<&'d Decl>) -> Self {
        Checker {
            slots: scope.len(),
            scope,
            root,
            errors: Vec::new(),
            suppress: 0,
            uses_old_self: false,
            program_errors: Vec::new(),
            mixed_literal_ok: false,
            depth: 0,
            too_deep: false,
            mutation: false,
        }
    }

    fn err(&mut self, id: u64, msg: impl Into<String>) {
        if self.suppress == 0 {
            self.errors.push((id, msg.into()));
        }
    }

    /// Brings a variable into scope with what the estimator knows of it: the path it
    /// continues and, for when the path gives no size, its own size and entry sizes.
    fn push_var(
        &mut self,
        name: &str,
        ty: Type,
        path: SchemaPath<'d>,
        size: Option<Size>,
        entry: Option<EntrySize>,
    ) -> usize {
        let slot = self.scope.len();
        self.scope.push(Var { name: name.to_string(), ty, path, size, entry, visible: true });
        self.slots = self.slots.max(self.scope.len());
        slot
    }

    /// Brings a binding (an accumulator, `cel.bind`'s variable) into scope with the path,
    /// size and entry sizes of the expression it is bound to.
    fn push_bound(&mut self, name: &str, ty: Type, bound: &Checked<'d>) -> usize {
        self.push_var(name, ty, bound.path, bound.size, bound.entry)
    }

    fn pop_var(&mut self) {
        self.scope.pop();
    }

    /// A type name (`int`, `google.protobuf.Duration`): an identifier to cel-go's estimator,
    /// costing one, whose one-element path Kubernetes reads as the rule's own node.
    fn type_name(&self, t: Type) -> Checked<'d> {
        let path = SchemaPath::root(self.root);
        Checked { path, size: path.size(), ..type_literal(t) }
    }

    fn is_var(&self, name: &str) -> bool {
        self.scope.iter().any(|v| v.visible && v.name == name)
    }

    pub fn check(&mut self, e: &IdedExpr) -> Checked<'d> {
        if self.depth >= MAX_EXPRESSION_DEPTH {
            self.too_deep = true;
            return Checked::error();
        }
        self.depth += 1;
        let checked = self.check_node(e);
        self.depth -= 1;
        checked
    }

    fn check_node(&mut self, e: &IdedExpr) -> Checked<'d> {
        match &e.expr {
            Expr::Literal(lit) => literal(lit),
            Expr::Ident(name) => self.ident(e.id, name),
            Expr::Select(sel) => {
                if !sel.test {
                    if let Some(t) = qualified_type(e).filter(|_| !self.root_is_var(e)) {
                        return self.type_name(t);
                    }
                }
                let operand = self.check(&sel.operand);
                let mode = if sel.test { SelectMode::Test } else { SelectMode::Field };
                self.select(e.id, operand, &sel.field, mode)
            }
            Expr::Call(call) => self.call(e, &call.func_name, call.target.as_deref(), &call.args),
            Expr::List(list) => self.list(list),
            Expr::Map(map) => self.map(map),
            Expr::Comprehension(c) => self.fold(c),
            Expr::Struct(s) if self.mutation => self.struct_literal(e.id, s),
            Expr::Struct(_) => {
                self.err(e.id, "object creation is not supported");
                Checked::error()
            }
            Expr::Unspecified => Checked::error(),
        }
    }

    fn root_is_var(&self, e: &IdedExpr) -> bool {
        let mut cur = e;
        loop {
            match &cur.expr {
                Expr::Select(s) => cur = &s.operand,
                Expr::Ident(name) => return self.is_var(name),
                _ => return true,
            }
        }
    }

    fn ident(&mut self, id: u64, name: &str) -> Checked<'d> {
        let found = self.scope.iter().enumerate().rev().find(|(_, v)| v.visible && v.name == name);
        if let Some((slot, var)) = found {
            // A path's bound comes first, then a scalar's fixed size, then the variable's own.
            let size = var.path.size().or_else(|| scalar_size(&var.ty)).or(var.size);
            let checked = Checked {
                ir: Ir::Var(slot),
                ty: var.ty.clone(),
                path: var.path,
                cost: Cost::fixed(1),
                size,
                entry: var.entry,
            };
            if slot == 1 {
                self.uses_old_self = true;
            }
            return checked;
        }
        if let Some(t) = named_type(name) {
            return self.type_name(t);
        }
        self.err(id, format!("undeclared reference to '{name}' (in container '')"));
        Checked::error()
    }

    fn select(&mut self, id: u64, operand: Checked<'d>, field: &str, mode: SelectMode) -> Checked<'d> {
        let test = mode == SelectMode::Test;
        // Selecting a field of an optional value yields an optional, as `.?` does.
        let (inner, optional, mode) = match (&operand.ty, mode) {
            (Type::Optional(t), SelectMode::Test) => ((**t).clone(), false, SelectMode::Test),
            (Type::Optional(t), _) => ((**t).clone(), true, SelectMode::Optional),
            (t, SelectMode::Optional) => (t.clone(), true, SelectMode::Optional),
            (t, m) => (t.clone(), false, m),
        };
        if let (Type::Opaque(super::types::Opaque::Authorizer), "requestResource", false) = (&inner, field, test) {
            // `authorizer.requestResource`: a resource check of the request's own resource.
            let cost = operand.cost.add(Cost::fixed(1));
            let ir = Ir::Call {
                func: super::ir::Func::AuthzRequestResource,
                args: vec![operand.ir],
                cost: super::cost::CallCost::Fixed(1),
            };
            return Checked { cost, ..Checked::new(ir, Type::Opaque(super::types::Opaque::ResourceCheck)) };
        }
        let (ty, json_name) = match &inner {
            Type::Object(_) => match inner_field(&inner, field) {
                Some((json, decl)) => (decl.ty.clone(), json),
                None => {
                    self.err(id, format!("undefined field '{field}'"));
                    return Checked::error();
                }
            },
            Type::Map(_, v) => ((**v).clone(), field.to_string()),
            Type::Dyn | Type::Error => (Type::Dyn, field.to_string()),
            other => {
                self.err(id, format!("type '{other}' does not support field selection"));
                return Checked::error();
            }
        };
        let ty = if test {
            Type::Bool
        } else if optional {
            Type::optional(ty)
        } else {
            ty
        };
        let ir = Ir::Select { operand: Box::new(operand.ir), field: Arc::from(json_name.as_str()), mode };
        if test {
            // has() costs nothing in Kubernetes' environment and keeps no path.
            return Checked { cost: operand.cost, size: scalar_size(&ty), ..Checked::new(ir, ty) };
        }
        // cel-go charges a selection from a map or an object; from `dyn` or an optional
        // nothing. The path continues through the selection, optional or not.
        let charged = matches!(operand.ty, Type::Object(_) | Type::Map(..) | Type::Param(_));
        let cost = if charged { operand.cost.add(Cost::fixed(1)) } else { operand.cost };
        let path = operand.path.step(self.root, Step::Field(field));
        let size = path.size().or_else(|| scalar_size(&ty));
        Checked { ir, ty, path, cost, size, entry: None }
    }

    fn list(&mut self, list: &cel::common::ast::ListExpr) -> Checked<'d> {
        let mixed_ok = std::mem::replace(&mut self.mixed_literal_ok, false);
        let checked = self.list_elements(list, mixed_ok);
        if mixed_ok {
            // A mixed list passed to `format` is a list of `dyn`.
            return Checked { ty: Type::list(Type::Dyn), ..checked };
        }
        checked
    }

    fn list_elements(&mut self, list: &cel::common::ast::ListExpr, mixed_ok: bool) -> Checked<'d> {
        let mut elems = Vec::new();
        let mut optional = Vec::new();
        let mut elem_ty: Option<Type> = None;
        let mut cost = Cost::fixed(LIST_CREATE_COST);
        // An empty literal's items are of size 0; otherwise the union of the items' sizes.
        let mut item_size = if list.elements.is_empty() { Size::exact(0) } else { Size { min: u64::MAX, max: 0 } };
        for (i, e) in list.elements.iter().enumerate() {
            let is_opt = list.optional_indices.contains(&i);
            let c = self.check(e);
            let mut t = c.ty.clone();
            if is_opt {
                match &t {
                    Type::Optional(inner) => t = (**inner).clone(),
                    Type::Dyn | Type::Error => {}
                    other => {
                        self.err(e.id, format!("expected type 'optional_type' but found '{other}'"));
                    }
                }
            }
            elem_ty = Some(self.homogeneous(e.id, elem_ty, &t, mixed_ok));
            cost = cost.add(c.cost);
            item_size = item_size.union(c.size_or_unknown());
            elems.push(c.ir);
            optional.push(is_opt);
        }
        let n = elems.len() as u64;
        let ty = Type::list(elem_ty.unwrap_or(Type::Dyn));
        let entry = EntrySize { is_list: true, key: Size::exact(1), value: item_size };
        let size = Some(Size::exact(n));
        Checked { ir: Ir::List { elems, optional }, ty, path: SchemaPath::None, cost, size, entry: Some(entry) }
    }

    /// The element type of an aggregate literal so far, reporting a mixed one.
    fn homogeneous(&mut self, id: u64, so_far: Option<Type>, next: &Type, mixed_ok: bool) -> Type {
        match so_far {
            None => next.clone(),
            Some(t) if t.is_dyn_or_error() || next.is_dyn_or_error() => join(&t, next),
            Some(t) if mixed_ok => join(&t, next),
            Some(t) => {
                if !same_type(&t, next) {
                    self.err(id, format!("expected type '{t}' but found '{next}'"));
                }
                t
            }
        }
    }

    /// `Object{...}`, `Object.spec{...}` and `JSONPatch{...}` of MutatingAdmissionPolicy
    /// mutations: an object built field by field, evaluated as a map of its fields.
    fn struct_literal(&mut self, id: u64, literal: &cel::common::ast::StructExpr) -> Checked<'d> {
        let Some(kind) = super::mutation::LiteralKind::of(&literal.type_name) else {
            self.err(id, format!("undeclared reference to '{}' (in container '')", literal.type_name));
            return Checked::error();
        };
        let mut entries = Vec::new();
        let mut cost = Cost::fixed(super::mutation::STRUCT_CREATION_COST);
        for entry in &literal.entries {
            let EntryExpr::StructField(field) = &entry.expr else {
                self.err(entry.id, "unexpected map entry in object literal");
                continue;
            };
            let value = self.check(&field.value);
            let value_ty = match (&value.ty, field.optional) {
                (Type::Optional(inner), true) => (**inner).clone(),
                (t, _) => t.clone(),
            };
            if let Some(message) = kind.field_error(&field.field, &value_ty) {
                self.err(entry.id, message);
            }
            cost = cost.add(value.cost);
            entries.push((Ir::Const(Const::Str(Arc::from(field.field.as_str()))), value.ir, field.optional));
        }
        Checked { cost, ..Checked::new(Ir::Map { entries }, kind.ty()) }
    }

    fn map(&mut self, map: &cel::common::ast::MapExpr) -> Checked<'d> {
        let mut entries = Vec::new();
        let mut key_ty = None;
        let mut val_ty = None;
        let mut cost = Cost::fixed(MAP_CREATE_COST);
        let unset = if map.entries.is_empty() { Size::exact(0) } else { Size { min: u64::MAX, max: 0 } };
        let (mut key_size, mut value_size) = (unset, unset);
        for entry in &map.entries {
            let EntryExpr::MapEntry(me) = &entry.expr else {
                self.err(entry.id, "unexpected struct field in map literal");
                continue;
            };
            let k = self.check(&me.key);
            let v = self.check(&me.value);
            key_ty = Some(self.homogeneous(me.key.id, key_ty, &k.ty, false));
            let vt = match (&v.ty, me.optional) {
                (Type::Optional(inner), true) => (**inner).clone(),
                (t, _) => t.clone(),
            };
            val_ty = Some(self.homogeneous(me.value.id, val_ty, &vt, false));
            cost = cost.add(k.cost).add(v.cost);
            key_size = key_size.union(k.size_or_unknown());
            value_size = value_size.union(v.size_or_unknown());
            entries.push((k.ir, v.ir, me.optional));
        }
        let n = entries.len() as u64;
        let ty = Type::map(key_ty.unwrap_or(Type::Dyn), val_ty.unwrap_or(Type::Dyn));
        let entry = EntrySize { is_list: false, key: key_size, value: value_size };
        let size = Some(Size::exact(n));
        Checked { ir: Ir::Map { entries }, ty, path: SchemaPath::None, cost, size, entry: Some(entry) }
    }
}

fn same_type(a: &Type, b: &Type) -> bool {
    match (a, b) {
        (Type::List(x), Type::List(y)) => same_type(x, y) || x.is_dyn_or_error() || y.is_dyn_or_error(),
        (Type::Map(xk, xv), Type::Map(yk, yv)) => {
            (same_type(xk, yk) || xk.is_dyn_or_error() || yk.is_dyn_or_error())
                && (same_type(xv, yv) || xv.is_dyn_or_error() || yv.is_dyn_or_error())
        }
        (Type::Optional(x), Type::Optional(y)) => same_type(x, y) || x.is_dyn_or_error() || y.is_dyn_or_error(),
        (Type::Meta(_), Type::Meta(_)) => true,
        _ => a == b,
    }
}

/// The dotted name a call target spells, when it is only identifiers: `sets`, `format`.
fn namespace_of(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        Expr::Ident(n) => Some(n.clone()),
        Expr::Select(s) if !s.test => namespace_of(&s.operand).map(|ns| format!("{ns}.{}", s.field)),
        _ => None,
    }
}

/// A qualified type name such as `google.protobuf.Duration` or `net.IP`.
fn qualified_type(e: &IdedExpr) -> Option<Type> {
    named_type(&namespace_of(e)?)
}

fn named_type(name: &str) -> Option<Type> {
    Some(match name {
        "int" => Type::Int,
        "uint" => Type::Uint,
        "double" => Type::Double,
        "bool" => Type::Bool,
        "string" => Type::String,
        "bytes" => Type::Bytes,
        "null_type" => Type::Null,
        "list" => Type::list(Type::Dyn),
        "map" => Type::map(Type::Dyn, Type::Dyn),
        "type" => Type::Meta(None),
        "optional_type" => Type::optional(Type::Dyn),
        "google.protobuf.Duration" => Type::Duration,
        "google.protobuf.Timestamp" => Type::Timestamp,
        "net.IP" => Type::Opaque(Opaque::Ip),
        "net.CIDR" => Type::Opaque(Opaque::Cidr),
        "kubernetes.Quantity" => Type::Opaque(Opaque::Quantity),
        "kubernetes.URL" => Type::Opaque(Opaque::Url),
        "kubernetes.Semver" => Type::Opaque(Opaque::Semver),
        _ => return None,
    })
}

fn type_literal<'d>(t: Type) -> Checked<'d> {
    let val = match &t {
        Type::Int => TypeVal::Int,
        Type::Uint => TypeVal::Uint,
        Type::Double => TypeVal::Double,
        Type::Bool => TypeVal::Bool,
        Type::String => TypeVal::String,
        Type::Bytes => TypeVal::Bytes,
        Type::Null => TypeVal::Null,
        Type::List(_) => TypeVal::List,
        Type::Map(_, _) => TypeVal::Map,
        Type::Optional(_) => TypeVal::Optional,
        Type::Duration => TypeVal::Duration,
        Type::Timestamp => TypeVal::Timestamp,
        Type::Opaque(o) => TypeVal::Opaque(*o),
        _ => TypeVal::Type,
    };
    // A type name is an identifier to cel-go's estimator (cost 1) and a constant at run time.
    Checked { cost: Cost::fixed(1), ..Checked::new(Ir::Const(Const::Type(val)), Type::type_of(t)) }
}

fn inner_field(ty: &Type, field: &str) -> Option<(String, Decl)> {
    match ty {
        Type::Object(o) => o.fields.get(field).or_else(|| o.fields.get(&keyword_field(field))).cloned(),
        _ => None,
    }
}

/// Since Kubernetes 1.30 a CEL keyword may name its escaped field: `self.if` is `self.__if__`.
fn keyword_field(field: &str) -> String {
    if super::escaping::escape(field).is_some_and(|e| e != field)
        && !field.contains(['.', '-', '/'])
        && !field.contains("__")
    {
        format!("__{field}__")
    } else {
        field.to_string()
    }
}

fn literal<'d>(lit: &LiteralValue) -> Checked<'d> {
    let (c, ty, size) = match lit {
        LiteralValue::Boolean(b) => (Const::Bool(*b.inner()), Type::Bool, 1),
        LiteralValue::Int(i) => (Const::Int(*i.inner()), Type::Int, 1),
        LiteralValue::UInt(u) => (Const::Uint(*u.inner()), Type::Uint, 1),
        LiteralValue::Double(d) => (Const::Double(*d.inner()), Type::Double, 1),
        LiteralValue::Null => (Const::Null, Type::Null, 1),
        LiteralValue::String(s) => {
            let text: &str = s.inner();
            (Const::Str(Arc::from(text)), Type::String, text.chars().count() as u64)
        }
        LiteralValue::Bytes(b) => {
            let bytes: &[u8] = b.inner();
            (Const::Bytes(Arc::from(bytes)), Type::Bytes, bytes.len() as u64)
        }
    };
    Checked { size: Some(Size::exact(size)), ..Checked::new(Ir::Const(c), ty) }
}
