//! CustomResourceDefinitions: loading manifests from files, checking them as Kubernetes does
//! on create, and the immutable [`Registry`] of served resources that the API reads.
//!
//! Owns the model of a served definition (names, scope, versions, subresources, columns) and
//! the registry swap on reload. Must not touch storage or HTTP; it never serves a request.

pub mod accepted;
pub mod build;
pub mod builtin;
pub mod cluster;
pub mod conversion;
pub mod load;
pub mod model;
pub mod registry;
pub mod reload;
pub mod reload_status;
pub mod scan;
pub mod shape;
pub mod strict;
pub mod update;
pub mod validate;
pub mod version_order;
pub mod versions;
pub mod watch;
pub mod yaml_lines;
pub mod yaml_subset;

pub use load::{LoadReport, Problem, load_paths};
pub use model::{Definition, Scale, Scope, Version};
pub use registry::Registry;
