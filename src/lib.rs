//! crd-apiserver: an aggregated Kubernetes apiserver that serves the resources of
//! CustomResourceDefinition manifests from its own store.
//!
//! See ARCHITECTURE.md for the map of modules and the direction of their dependencies.

pub mod admission;
pub mod api;
pub mod auth;
// CEL validation rules (x-kubernetes-validations).
pub mod cel;
pub mod cli;
pub mod conversion;
pub mod core;
pub mod definitions;
pub mod fieldmanager;
pub mod impact;
pub mod kube;
pub mod lifecycle;
pub mod logs;
pub mod metrics;
pub mod schema;
pub mod server;
pub mod store;
pub mod takeover;
