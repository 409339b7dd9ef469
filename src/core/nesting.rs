//! How deeply objects may nest, and what that costs threads. kube-apiserver reads bodies up to
//! 10,000 levels of objects and arrays deep (Go's `encoding/json` and go-yaml both stop there),
//! so a custom object can be that deep, and every walk of one (decoding, pruning, defaulting,
//! validation, CEL, the field manager, conversion, encoding, even dropping it) recurses that
//! deep. Go grows its stacks; ours are fixed when a thread starts, so every thread that handles
//! objects gets [`THREAD_STACK_BYTES`], which `tests/nesting.rs` checks end to end on a debug
//! build (a stack overflow aborts the process). Memory is only used as deep requests touch it.
//!
//! Owns the two numbers, and decoding JSON that deep; the runtimes and threads that handle
//! objects use them.

/// The deepest nesting of objects and arrays a body may have (Go's `maxNestingDepth`).
pub const MAX_DEPTH: usize = 10_000;

/// The stack of every thread that handles objects: enough for any walk of an object nested
/// [`MAX_DEPTH`] deep, with room to spare, in a debug build (whose frames are the largest).
pub const THREAD_STACK_BYTES: usize = 256 << 20;

/// Decodes JSON however deep it nests: serde_json's readers stop at 128 levels, but a stored
/// object, a webhook's answer or a patch may be [`MAX_DEPTH`] deep (bodies are checked against
/// that limit before they are stored). Recurses as deep as the text: call it on a thread with
/// [`THREAD_STACK_BYTES`].
pub fn from_slice<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> serde_json::Result<T> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    deserializer.disable_recursion_limit();
    let value = T::deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// [`from_slice`] for text.
pub fn from_str<'de, T: serde::Deserialize<'de>>(text: &'de str) -> serde_json::Result<T> {
    from_slice(text.as_bytes())
}
