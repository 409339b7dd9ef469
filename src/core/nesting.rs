//! How deeply objects may nest, and what that costs threads. kube-apiserver reads bodies up to
//! 10,000 levels of objects and arrays deep (Go's `encoding/json` and go-yaml both stop there),
//! so a custom object can be that deep, and every walk of one (decoding, pruning, defaulting,
//! validation, CEL, the field manager, conversion, encoding, even dropping it) recurses that
//! deep. Go grows its stacks; ours are fixed when a thread starts, so every thread that handles
//! objects gets [`THREAD_STACK_BYTES`], sized by measuring the deepest walk (see
//! `tests/nesting.rs`). Memory is only used as deep requests touch it.
//!
//! Owns the two numbers; the runtimes and threads that handle objects use them.

/// The deepest nesting of objects and arrays a body may have (Go's `maxNestingDepth`).
pub const MAX_DEPTH: usize = 10_000;

/// The stack of every thread that handles objects: enough for any walk of an object nested
/// [`MAX_DEPTH`] deep, with room to spare, in a debug build (whose frames are the largest).
pub const THREAD_STACK_BYTES: usize = 256 << 20;
