//! JSON patch and merge patch documents read and applied as kube-apiserver's patch handler
//! does (`jsonPatcher.applyJSPatch`): first decoded as a Go type (`[]jsonPatchOp`, or a map),
//! a refusal then being 400 `error decoding patch: <Go's text>`; fields the type does not have
//! and fields given twice noted as strict-decoding errors (`json patch unknown field
//! "[0].bogus"`), which `fieldValidation` turns into warnings or a refusal; then applied, a
//! patch that does not apply (an unknown `op`, a missing `path`, a failed `test`) being the
//! generic 422. With `fieldValidation=Ignore` the document is only read by the JSON patch
//! library, in whose words a refusal comes.
//!
//! Owns reading the documents and the wording; `core::bounded_patch` applies operations, and
//! `api::patch` runs the request.

use json_patch::{
    AddOperation, CopyOperation, MoveOperation, PatchOperation, RemoveOperation, ReplaceOperation, TestOperation,
};
use serde_json::{Map, Value};

use super::strict::{self, JsonError};
use super::write::FieldValidation;
use crate::core::bounded_patch::{self, MAX_JSON_PATCH_OPERATIONS};
use crate::core::status::ApiError;

/// A patched document and the strict-decoding errors its patch had, worded as kube-apiserver
/// words them (each a warning under `Warn`).
#[derive(Debug)]
pub struct Patched {
    pub object: Value,
    pub strict_errors: Vec<String>,
}

/// Applies a JSON patch (RFC 6902) to `target`.
pub fn json_patch(patch: &[u8], target: &Value, mode: FieldValidation) -> Result<Patched, ApiError> {
    let typed = mode != FieldValidation::Ignore;
    let prefix = if typed { "error decoding patch: " } else { "" };
    let parsed = read(patch, prefix)?;
    let (operations, strict_errors) = match &parsed.value {
        Value::Null => (Vec::new(), Vec::new()),
        Value::Array(items) => {
            if typed {
                check_typed(items)?;
            } else if let Some(other) = items.iter().find(|i| !i.is_object() && !i.is_null()) {
                return Err(ApiError::bad_request(format!(
                    "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
                    json_type(other)
                )));
            }
            let mut strict_errors: Vec<String> =
                parsed.duplicates.iter().map(|d| format!("json patch duplicate field \"{d}\"")).collect();
            if typed {
                strict_errors.extend(unknown_fields(items).map(|f| format!("json patch unknown field \"{f}\"")));
            } else {
                strict_errors.clear();
            }
            (items.iter().map(operation).collect(), strict_errors)
        }
        other => {
            let into = if typed { "[]handlers.jsonPatchOp" } else { "jsonpatch.Patch" };
            return Err(ApiError::bad_request(format!(
                "{prefix}json: cannot unmarshal {} into Go value of type {into}",
                json_type(other)
            )));
        }
    };
    if operations.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(bounded_patch::PatchFailure::TooManyOperations(operations.len()).into());
    }
    // An operation the library cannot read fails the patch when it is reached, as any
    // operation that does not apply: the generic 422.
    let operations: Vec<PatchOperation> =
        operations.into_iter().collect::<Option<_>>().ok_or_else(ApiError::patch_not_applicable)?;
    let object = bounded_patch::apply(&operations, target)?;
    Ok(Patched { object, strict_errors })
}

/// Applies a JSON merge patch (RFC 7386) to `target`.
pub fn merge_patch(patch: &[u8], target: &Value, mode: FieldValidation) -> Result<Patched, ApiError> {
    let typed = mode != FieldValidation::Ignore;
    let parsed =
        if typed { read(patch, "error decoding patch: ")? } else { read(patch, "").map_err(|_| bad_merge_patch())? };
    match &parsed.value {
        Value::Object(_) => {}
        // The library refuses a patch that is not an object (`ErrBadJSONPatch`).
        Value::Null => return Err(bad_merge_patch()),
        other if typed => {
            return Err(ApiError::bad_request(format!(
                "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                json_type(other)
            )));
        }
        _ => return Err(bad_merge_patch()),
    }
    let strict_errors =
        if typed { parsed.duplicates.iter().map(|d| format!("duplicate field \"{d}\"")).collect() } else { Vec::new() };
    let mut object = target.clone();
    json_patch::merge(&mut object, &parsed.value);
    Ok(Patched { object, strict_errors })
}

fn bad_merge_patch() -> ApiError {
    ApiError::bad_request("Invalid JSON Patch")
}

/// The patch document as JSON, refused with Go's text after `prefix`.
fn read(patch: &[u8], prefix: &str) -> Result<strict::Tracked, ApiError> {
    let parsed = strict::from_json(patch).map_err(|e| match e {
        JsonError::Syntax(text) => ApiError::bad_request(format!("{prefix}{text}")),
    })?;
    if let Some(number) = parsed.overflowing_number {
        return Err(ApiError::bad_request(format!("{prefix}{}", strict::number_error(&number))));
    }
    Ok(parsed.tracked)
}

/// The fields of `jsonPatchOp` and their Go types' refusals (`op`, `path` and `from` are
/// strings; `value` is anything).
fn check_typed(items: &[Value]) -> Result<(), ApiError> {
    for item in items {
        match item {
            Value::Null => {}
            Value::Object(fields) => {
                for name in ["op", "path", "from"] {
                    if let Some(value) = fields.get(name).filter(|v| !v.is_string() && !v.is_null()) {
                        return Err(ApiError::bad_request(format!(
                            "error decoding patch: json: cannot unmarshal {} into Go struct field jsonPatchOp.{name} of type string",
                            json_type(value)
                        )));
                    }
                }
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "error decoding patch: json: cannot unmarshal {} into Go value of type handlers.jsonPatchOp",
                    json_type(other)
                )));
            }
        }
    }
    Ok(())
}

/// Fields of the operations `jsonPatchOp` does not have, as `[0].bogus`.
fn unknown_fields(items: &[Value]) -> impl Iterator<Item = String> + '_ {
    items.iter().enumerate().flat_map(|(i, item)| {
        item.as_object()
            .into_iter()
            .flat_map(|fields| fields.keys())
            .filter(|k| !matches!(k.as_str(), "op" | "path" | "from" | "value"))
            .map(move |k| format!("[{i}].{k}"))
    })
}

/// One operation as the JSON patch library reads it, or `None` when it cannot (an unknown
/// `op`, a missing or non-string `path` or `from`). A missing `value` is `null`, as the
/// library takes it.
fn operation(item: &Value) -> Option<PatchOperation> {
    let empty = Map::new();
    let fields = item.as_object().unwrap_or(&empty);
    let text = |name: &str| fields.get(name).and_then(Value::as_str);
    let pointer = |name: &str| text(name).and_then(|p| json_patch::jsonptr::PointerBuf::parse(p).ok());
    let value = || fields.get("value").cloned().unwrap_or(Value::Null);
    Some(match text("op")? {
        "add" => PatchOperation::Add(AddOperation { path: pointer("path")?, value: value() }),
        "remove" => PatchOperation::Remove(RemoveOperation { path: pointer("path")? }),
        "replace" => PatchOperation::Replace(ReplaceOperation { path: pointer("path")?, value: value() }),
        "move" => PatchOperation::Move(MoveOperation { from: pointer("from")?, path: pointer("path")? }),
        "copy" => PatchOperation::Copy(CopyOperation { from: pointer("from")?, path: pointer("path")? }),
        "test" => PatchOperation::Test(TestOperation { path: pointer("path")?, value: value() }),
        _ => return None,
    })
}

/// A JSON value's type as Go's `UnmarshalTypeError` names it.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests;
