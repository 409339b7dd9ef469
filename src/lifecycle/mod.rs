//! The version lifecycle of served definitions, as Kubernetes keeps it in a CRD's status:
//! which versions objects may be stored in (`stored_versions`, the record behind
//! `status.storedVersions`).
//!
//! Owns the lifecycle records in the store, under `crd-apiserver/` keys outside every
//! resource's. Must not serve HTTP or decide authorization; it reads definitions, never
//! changes them.

pub mod stored_versions;
