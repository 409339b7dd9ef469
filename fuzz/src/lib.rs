//! Shared pieces of crd-apiserver's fuzz targets: structured inputs (JSON values and edits
//! drawn from dictionaries of the names and texts the server understands), the served
//! definitions, and an in-process API over a throw-away store whose answers are checked
//! against the server's promise: a 2xx, or a 4xx `Status`; never a 5xx, a panic or a hang.
//!
//! Owns nothing of the server; must not be linked into it.

#![recursion_limit = "256"]

pub mod amplify;
pub mod http_bytes;
pub mod json;
pub mod requests;
pub mod rules;
pub mod server;

/// The definitions the request targets are served: the documentation's CronTab and a
/// definition using every schema keyword, list types, int-or-string, embedded resources,
/// preserve-unknown-fields and CEL rules.
pub const CRONTAB: &str = include_str!("../definitions/crontab.yaml");
pub const EVERYTHING: &str = include_str!("../definitions/everything.yaml");
