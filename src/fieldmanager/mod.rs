//! Server-side apply and field ownership (`metadata.managedFields`), as Kubernetes'
//! structured-merge-diff and k8s.io/apimachinery's managedfields define them: which manager
//! owns which field after every write, how an applied configuration merges into an object
//! (list and map types decide), when an apply conflicts, and the exact wire form of all of
//! it (FieldsV1, manager entries, conflict messages).
//!
//! Invariant: no HTTP, no storage; objects are `serde_json::Value` trees in the request's
//! version, schemas are compiled once per definition version ([`Schema`]). The API layer
//! turns [`Error`] into Kubernetes Status errors.

pub mod apply_configuration;
mod conflict;
mod fieldsv1;
mod gojson;
mod last_applied;
mod managed;
mod manager;
mod path;
mod scale;
mod schema;
mod set;
mod typed;
mod updater;

pub use conflict::{Conflict, Conflicts};
pub use fieldsv1::{decode as decode_fields, encode as encode_fields};
pub use managed::{InvalidManagedFields, Managed, Manager, Operation};
pub use manager::FieldManager;
pub use path::{Path, PathElement, path_string};
pub use scale::{ReplicasPaths, SCALE_API_VERSION, replicas_path};
pub use schema::Schema;
pub use set::Set;
pub use updater::{Error, Versions};

/// The current time at the precision managedFields keep (whole seconds).
pub fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second()).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod create_tests;
#[cfg(test)]
mod tests;
