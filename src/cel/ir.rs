//! The checked form of an expression: what the evaluator runs. Names are resolved to
//! variable slots and functions, fields to JSON property names, regular expressions with
//! constant patterns are compiled once.
//!
//! Owns: the program representation. Must not touch: checking or evaluation logic.

use std::sync::Arc;

use super::cost::CallCost;
use super::library::time::{Duration, Timestamp};
use super::value::TypeVal;

/// Every function and operator the environment declares. Operators whose meaning depends on
/// their operands (`+`, `isLessThan`, ...) dispatch on the values at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    /// `x in [literals]` of scalar literals, which cel-go (with `OptOptimize`) plans as a set
    /// lookup that its runtime cost tracker does not charge; otherwise `In`.
    InSet,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Neg,
    Not,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotStrictlyFalse,
    ToInt,
    ToUint,
    ToDouble,
    ToString,
    ToBytes,
    ToBool,
    ToDuration,
    ToTimestamp,
    Dyn,
    TypeOf,
    Size,
    Contains,
    StartsWith,
    EndsWith,
    Matches,
    GetFullYear,
    GetMonth,
    GetDate,
    GetDayOfMonth,
    GetDayOfWeek,
    GetDayOfYear,
    GetHours,
    GetMinutes,
    GetSeconds,
    GetMilliseconds,
    CharAt,
    IndexOf,
    LastIndexOf,
    LowerAscii,
    UpperAscii,
    Replace,
    Split,
    Substring,
    Trim,
    Join,
    Quote,
    /// `jsonpatch.escapeKey` (mutations only).
    JsonPatchEscapeKey,
    Format,
    SetsContains,
    SetsEquivalent,
    SetsIntersects,
    IsSorted,
    Sum,
    Min,
    Max,
    Slice,
    Flatten,
    Distinct,
    Reverse,
    Sort,
    ListsRange,
    Find,
    FindAll,
    Url,
    IsUrl,
    GetScheme,
    GetHost,
    GetHostname,
    GetPort,
    GetEscapedPath,
    GetQuery,
    Quantity,
    IsQuantity,
    IsInteger,
    AsInteger,
    AsApproximateFloat,
    Sign,
    QuantityAdd,
    QuantitySub,
    IsLessThan,
    IsGreaterThan,
    CompareTo,
    Ip,
    IsIp,
    IpIsCanonical,
    Family,
    IsUnspecified,
    IsLoopback,
    IsLinkLocalMulticast,
    IsLinkLocalUnicast,
    IsGlobalUnicast,
    Cidr,
    IsCidr,
    ContainsIp,
    ContainsCidr,
    CidrIp,
    Masked,
    PrefixLength,
    FormatNamed,
    FormatBuiltin(&'static str),
    Validate,
    Semver,
    IsSemver,
    AuthzPath,
    AuthzRequestResource,
    AuthzGroup,
    AuthzServiceAccount,
    AuthzResource,
    AuthzSubresource,
    AuthzNamespace,
    AuthzName,
    AuthzCheck,
    AuthzAllowed,
    AuthzReason,
    AuthzErrored,
    AuthzError,
    Major,
    Minor,
    Patch,
    OptionalOf,
    OptionalNone,
    OptionalOfNonZero,
    HasValue,
    OptValue,
    OrValue,
    Or,
}

/// A constant of the program.
#[derive(Debug, Clone)]
pub enum Const {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(Arc<str>),
    Bytes(Arc<[u8]>),
    Duration(Duration),
    Timestamp(Timestamp),
    Type(TypeVal),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectMode {
    /// `a.b`
    Field,
    /// `has(a.b)`
    Test,
    /// `a.?b`
    Optional,
}

/// The two-variable and binding forms the crate's parser leaves as calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopKind {
    All,
    Exists,
    ExistsOne,
    TransformList,
    TransformMap,
    TransformMapEntry,
}

#[derive(Debug)]
pub enum Ir {
    Const(Const),
    /// A variable by its slot on the variable stack.
    Var(usize),
    Select {
        operand: Box<Ir>,
        field: Arc<str>,
        mode: SelectMode,
    },
    Index {
        operand: Box<Ir>,
        index: Box<Ir>,
        optional: bool,
    },
    /// A call, with the rule its runtime cost follows (chosen by its overload).
    Call {
        func: Func,
        args: Vec<Ir>,
        cost: CallCost,
    },
    /// `target.matches(re)`, `find`, `findAll` with a constant pattern, compiled once.
    Regex {
        func: Func,
        args: Vec<Ir>,
        regex: Arc<regex::Regex>,
        cost: CallCost,
    },
    /// `a.or(b)`, and `a.orValue(b)` when `unwrap`: `b` is evaluated only if `a` is empty.
    OrElse {
        lhs: Box<Ir>,
        rhs: Box<Ir>,
        unwrap: bool,
    },
    And(Box<Ir>, Box<Ir>),
    Or(Box<Ir>, Box<Ir>),
    Cond(Box<Ir>, Box<Ir>, Box<Ir>),
    List {
        elems: Vec<Ir>,
        optional: Vec<bool>,
    },
    Map {
        entries: Vec<(Ir, Ir, bool)>,
    },
    Fold(Box<Fold>),
    Loop(Box<Loop>),
    /// `cel.bind(v, init, body)`
    Bind {
        slot: usize,
        init: Box<Ir>,
        body: Box<Ir>,
    },
    /// `opt.optMap(v, body)` / `opt.optFlatMap(v, body)`
    OptMap {
        target: Box<Ir>,
        slot: usize,
        body: Box<Ir>,
        flat: bool,
    },
    /// `list.sortBy(v, key)`
    SortBy {
        target: Box<Ir>,
        slot: usize,
        key: Box<Ir>,
    },
}

impl Ir {
    /// Whether the node is a literal made of literals only. cel-go (with the `OptOptimize`
    /// evaluation option Kubernetes sets) builds such list and map literals once, when the
    /// program is planned, so evaluating them costs nothing.
    pub fn is_constant(&self) -> bool {
        match self {
            Ir::Const(_) => true,
            Ir::List { elems, optional } => !optional.contains(&true) && elems.iter().all(Ir::is_constant),
            Ir::Map { entries } => entries.iter().all(|(k, v, opt)| !opt && k.is_constant() && v.is_constant()),
            _ => false,
        }
    }

    /// Whether the node is an attribute in cel-go's plan (a variable with field and index
    /// qualifiers): selecting from or indexing anything else makes a relative attribute,
    /// charged once more.
    pub fn is_attribute(&self) -> bool {
        matches!(self, Ir::Var(_) | Ir::Select { mode: SelectMode::Field, .. } | Ir::Index { .. })
    }

    /// The runtime cost of the attribute a select or index on `operand` starts, beyond the
    /// qualifier itself.
    pub fn relative_attribute_cost(operand: &Ir) -> u64 {
        u64::from(!operand.is_attribute())
    }

    /// The variable slots below 64 the program reads, one bit each (comprehension and
    /// binding slots included: callers mask the ones they bind themselves).
    pub fn slots_read(&self) -> u64 {
        let mut read = 0;
        let mut pending = vec![self];
        // A worklist rather than recursion: checked programs may be deeper than this
        // thread's stack would like.
        while let Some(ir) = pending.pop() {
            match ir {
                Ir::Const(_) => {}
                Ir::Var(slot) => read |= 1u64.checked_shl(u32::try_from(*slot).unwrap_or(u32::MAX)).unwrap_or(0),
                Ir::Select { operand, .. } => pending.push(operand),
                Ir::Index { operand, index, .. } => pending.extend([&**operand, &**index]),
                Ir::Call { args, .. } | Ir::Regex { args, .. } => pending.extend(args),
                Ir::OrElse { lhs, rhs, .. } | Ir::And(lhs, rhs) | Ir::Or(lhs, rhs) => pending.extend([&**lhs, &**rhs]),
                Ir::Cond(c, t, f) => pending.extend([&**c, &**t, &**f]),
                Ir::List { elems, .. } => pending.extend(elems),
                Ir::Map { entries } => pending.extend(entries.iter().flat_map(|(k, v, _)| [k, v])),
                Ir::Fold(f) => pending.extend([&f.range, &f.init, &f.cond, &f.step, &f.result]),
                Ir::Loop(l) => pending.extend([&l.range, &l.body].into_iter().chain(&l.filter)),
                Ir::Bind { init, body, .. } => pending.extend([&**init, &**body]),
                Ir::OptMap { target, body, .. } => pending.extend([&**target, &**body]),
                Ir::SortBy { target, key, .. } => pending.extend([&**target, &**key]),
            }
        }
        read
    }
}

/// A comprehension as the standard macros expand them.
#[derive(Debug)]
pub struct Fold {
    pub range: Ir,
    pub var: usize,
    pub var2: Option<usize>,
    pub accu: usize,
    pub init: Ir,
    pub cond: Ir,
    pub step: Ir,
    pub result: Ir,
}

/// A two-variable comprehension: `all(k, v, p)`, `transformList(i, v, [filter,] f)`, ...
#[derive(Debug)]
pub struct Loop {
    pub kind: LoopKind,
    pub range: Ir,
    pub var: usize,
    pub var2: usize,
    pub filter: Option<Ir>,
    pub body: Ir,
}
