//! Shared vocabulary of the server: group/version/resource names, request info, user info,
//! field errors, Kubernetes `Status` errors, name rules and time stamps.
//!
//! Owns plain data types and pure functions only. Must not do I/O (`priority` makes one
//! scheduling call on its caller's thread), and must not depend on any other module of this
//! crate: every other module may depend on it.

pub mod bounded_patch;
pub mod error_chain;
pub mod field;
pub mod gvr;
pub mod json;
pub mod json_syntax;
pub mod names;
pub mod namespace;
pub mod nesting;
pub mod parallel;
pub mod paths;
pub mod priority;
pub mod random;
pub mod recall;
pub mod request_info;
pub mod request_scope;
pub mod sorted_map;
pub mod status;
pub mod strconv;
pub mod time;
pub mod user;
pub mod weak_table;
