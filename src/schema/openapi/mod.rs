//! OpenAPI v3 value validation with kube-openapi's semantics and messages: every keyword
//! Kubernetes supports, every error collected, mapped to field errors as the CRD server maps
//! them (`spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal
//! to 10`), with validation ratcheting on updates.

mod junctors;
mod number;
mod result;
mod value;

use serde_json::Value;

use super::node::Schema;
use crate::core::field::{FieldError, Path};
use result::Loc;

/// Validates `object` against `schema` (`ValidateCustomResource`). Field paths start at
/// `prefix` (the nil path for whole objects, `status` for the status subresource).
pub fn validate(schema: &Schema, object: &Value, prefix: &Path) -> Vec<FieldError> {
    let outcome = value::validate(schema, object, &Loc::root(), None);
    outcome.errors.iter().map(|e| e.to_field_error(prefix)).collect()
}

/// Validates an update: errors on values unchanged from `old` are dropped (ratcheting).
pub fn validate_update(schema: &Schema, object: &Value, old: &Value, prefix: &Path) -> Vec<FieldError> {
    let outcome = value::validate(schema, object, &Loc::root(), Some(old));
    outcome.errors.iter().map(|e| e.to_field_error(prefix)).collect()
}

#[cfg(test)]
mod tests;
