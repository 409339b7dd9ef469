//! The version lifecycle of served definitions, as Kubernetes keeps it in a CRD's status:
//! the definition last accepted (`accepted`, the record a start checks changed files against),
//! which versions objects may be stored in (`stored_versions`, the record behind
//! `status.storedVersions`), the built-in storage-version migration (`migrate`), the
//! `serveddefinitions` status objects (`status`), the background task that runs them as
//! definitions are served and reloaded (`controller`), and the explicit deletion of a no longer
//! served definition's objects (`removed`).
//!
//! Owns the lifecycle records in the store, under `crd-apiserver/` keys outside every
//! resource's, and the objects of the server's own `serveddefinitions` resource. Must not serve
//! HTTP or decide authorization; it reads definitions, never changes them; it rewrites objects
//! only by compare-and-swap, so that a user's write always wins.

pub mod accepted;
pub mod controller;
pub mod migrate;
pub mod removed;
pub mod status;
pub mod stored_versions;
