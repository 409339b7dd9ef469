//! JSON patch (RFC 6902) application with k8s.io/apiserver's bounds, so that a small patch
//! cannot make the server do unbounded work: at most [`MAX_JSON_PATCH_OPERATIONS`] operations
//! (413 beyond, in Kubernetes' words), and `copy` operations may add at most
//! [`MAX_COPY_BYTES`] to the document in total (Kubernetes' `JSONPatchMaxCopyBytes`; beyond it
//! the patch fails as any inapplicable patch does, 422). Every other operation can grow the
//! document only by bytes the request body carried, which its own limit already bounds, so
//! with these two bounds a patched document never exceeds the stored object plus twice the
//! request body limit.
//!
//! Owns only the application of one decoded patch to a value; decoding of the request and the
//! rest of the PATCH flow stay in `api::patch` (and webhook patches in `admission`).

use json_patch::PatchOperation;
use serde_json::Value;

use super::status::ApiError;

/// The most operations one JSON patch may hold (k8s.io/apiserver's `maxJSONPatchOperations`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The most bytes all `copy` operations of one patch may add together (k8s.io/apiserver's
/// default `JSONPatchMaxCopyBytes`, the same as its request body limit).
pub const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// Why a patch was not applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchFailure {
    #[error("The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {0}")]
    TooManyOperations(usize),
    /// Worded as the JSON patch library Kubernetes uses words it.
    #[error(
        "Unable to complete the copy, the accumulated size increase of copy is {0}, exceeding the limit {MAX_COPY_BYTES}"
    )]
    CopyLimit(usize),
    #[error("{0}")]
    NotApplicable(String),
    /// A `test` operation found another value (MutatingAdmissionPolicy's JSON patches then
    /// leave the object as it was).
    #[error("{0}")]
    TestFailed(String),
}

impl From<PatchFailure> for ApiError {
    /// A patch with too many operations is 413; any other failure is the generic 422
    /// Kubernetes answers for a patch it could not apply (its text is not shown to clients).
    fn from(failure: PatchFailure) -> Self {
        match failure {
            PatchFailure::TooManyOperations(_) => ApiError::request_entity_too_large(failure.to_string()),
            other => {
                tracing::trace!(error = %other, "json patch not applicable");
                ApiError::patch_not_applicable()
            }
        }
    }
}

/// Applies `operations` to a copy of `target`. The target is left as it was on any error.
pub fn apply(operations: &[PatchOperation], target: &Value) -> Result<Value, PatchFailure> {
    if operations.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchFailure::TooManyOperations(operations.len()));
    }
    let mut doc = target.clone();
    let mut copied = 0usize;
    for (index, operation) in operations.iter().enumerate() {
        if let PatchOperation::Copy(copy) = operation {
            // Measured before the copy is made, so an oversized copy costs no memory.
            let Some(source) = doc.pointer(copy.from.as_str()) else {
                let path = copy.from.as_str();
                return Err(PatchFailure::NotApplicable(format!(
                    "operation '/{index}' failed at path '{path}': \"from\" path is invalid"
                )));
            };
            copied = copied.saturating_add(encoded_size_up_to(source, MAX_COPY_BYTES.saturating_sub(copied)));
            if copied > MAX_COPY_BYTES {
                return Err(PatchFailure::CopyLimit(copied));
            }
        }
        // The whole patch works on a private copy, so the crate's undo log (a second copy of
        // everything replaced) is not needed: on failure the copy is dropped.
        json_patch::patch_unsafe(&mut doc, std::slice::from_ref(operation)).map_err(|e| {
            // The crate numbers operations within the slice it was given: one.
            let message = format!("operation '/{index}' failed at path '{}': {}", e.path, e.kind);
            match e.kind {
                json_patch::PatchErrorKind::TestFailed => PatchFailure::TestFailed(message),
                _ => PatchFailure::NotApplicable(message),
            }
        })?;
    }
    Ok(doc)
}

/// The length of `value` written as compact JSON, counted only until it exceeds `limit` (the
/// walk stops there, so measuring a huge value costs no more than the limit).
fn encoded_size_up_to(value: &Value, limit: usize) -> usize {
    let mut size = 0usize;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        size = size.saturating_add(match value {
            Value::Null => 4,
            Value::Bool(b) => 4 + usize::from(!*b),
            Value::Number(n) => n.to_string().len(),
            Value::String(s) => s.len() + 2,
            Value::Array(items) => {
                pending.extend(items.iter());
                2 + items.len().saturating_sub(1)
            }
            Value::Object(fields) => {
                pending.extend(fields.values());
                let keys: usize = fields.keys().map(|k| k.len() + 3).sum();
                2 + keys + fields.len().saturating_sub(1)
            }
        });
        if size > limit {
            return size;
        }
    }
    size
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ops(value: Value) -> Vec<PatchOperation> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn sizes_match_compact_json() {
        let value = json!({"a": [1, true, false, null, "xy", {"b": -2.5}], "cd": {}});
        assert_eq!(encoded_size_up_to(&value, usize::MAX), serde_json::to_vec(&value).unwrap().len());
        assert!(encoded_size_up_to(&json!(["aaaa", "bbbb", "cccc"]), 5) <= 12);
    }

    #[test]
    fn too_many_operations_is_413_in_kubernetes_words() {
        let patch = ops(json!(vec![json!({"op": "test", "path": "/a", "value": 1}); 10_001]));
        let err = ApiError::from(apply(&patch, &json!({"a": 1})).unwrap_err());
        assert_eq!(err.code, 413);
        assert_eq!(err.message, "The allowed maximum operations in a JSON patch is 10000, got 10001");
        let patch = ops(json!(vec![json!({"op": "test", "path": "/a", "value": 1}); 10_000]));
        assert_eq!(apply(&patch, &json!({"a": 1})).unwrap(), json!({"a": 1}));
    }

    #[test]
    fn self_doubling_copies_stop_at_the_copy_limit() {
        // Each copy doubles the array: forty of them would need a terabyte.
        let mut operations = vec![json!({"op": "add", "path": "/x", "value": vec!["0123456789"; 8]})];
        for _ in 0..40 {
            operations.push(json!({"op": "copy", "from": "/x", "path": "/x/-"}));
        }
        let failure = apply(&ops(Value::Array(operations)), &json!({})).unwrap_err();
        assert!(matches!(failure, PatchFailure::CopyLimit(n) if n > MAX_COPY_BYTES), "{failure}");
        let err = ApiError::from(failure);
        assert_eq!(err.code, 422);
        assert_eq!(err.message, "the server rejected our request due to an error in our request");
    }

    #[test]
    fn many_small_copies_add_up() {
        let big = "y".repeat(100_000);
        let mut operations = vec![];
        for i in 0..40 {
            operations.push(json!({"op": "copy", "from": "/big", "path": format!("/c{i}")}));
        }
        let failure = apply(&ops(Value::Array(operations.clone())), &json!({"big": big})).unwrap_err();
        assert!(matches!(failure, PatchFailure::CopyLimit(_)), "{failure}");
        operations.truncate(20);
        let patched = apply(&ops(Value::Array(operations)), &json!({"big": big})).unwrap();
        assert_eq!(patched["c19"].as_str().map(str::len), Some(100_000));
    }

    #[test]
    fn failure_leaves_target_untouched_and_names_the_operation() {
        let target = json!({"a": 1});
        let patch = ops(json!([{"op": "replace", "path": "/a", "value": 2}, {"op": "remove", "path": "/missing"}]));
        let failure = apply(&patch, &target).unwrap_err();
        assert_eq!(failure.to_string(), "operation '/1' failed at path '/missing': path is invalid");
        assert_eq!(ApiError::from(failure).code, 422);
        assert_eq!(target, json!({"a": 1}));
        let copy_from_missing = ops(json!([{"op": "copy", "from": "/nope", "path": "/b"}]));
        let failure = apply(&copy_from_missing, &target).unwrap_err();
        assert_eq!(failure.to_string(), "operation '/0' failed at path '/nope': \"from\" path is invalid");
    }
}
