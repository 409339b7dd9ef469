//! Impact analysis: what a candidate CustomResourceDefinition would do to the objects already
//! stored, before anyone applies it. Whether the change itself would be accepted as a live
//! update (`candidate`: the reload's own planner, Kubernetes' refusals); per served version,
//! how many stored objects would fail validation, grouped by field and message, and which
//! errors ratcheting tolerates on an unchanged update (`evaluate`: the write path's own
//! functions); which fields the next write would prune or default; how the CEL rules' costs
//! change; what storage-version migration it implies; what a conversion webhook makes of the
//! stored objects (`convert`, a dry run at a bounded rate). The store is streamed page by page
//! (`scan`) into bounded totals (`tally`); `report` renders them as JSON and tables.
//!
//! Entry points: [`analyze`] (the `crd-apiserver impact` command, offline, and the running
//! server's analyses) and `runner` (the server's `serveddefinitions/<name>/impact` subresource
//! and the analysis after a live reload, their progress in the status objects).
//!
//! Invariant: reads the store and never writes an object; a running analysis can be cancelled
//! between pages and never holds more than a page of objects.

pub mod candidate;
pub mod convert;
pub mod evaluate;
pub mod report;
pub mod runner;
pub mod scan;
pub mod tally;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;

pub use evaluate::Forms;
pub use report::Report;
pub use scan::{Options, Stop};

use crate::definitions::load::Loaded;
use crate::definitions::reload::Served;
use crate::store::Backend;

/// What an analysis is asked about.
pub struct Subject<'a> {
    /// Every definition served now (the candidate's names are checked against theirs).
    pub served: &'a HashMap<String, Served>,
    pub candidate: &'a Loaded,
    /// Where the candidate was read from (for its problems).
    pub file: &'a Path,
    /// The versions the definition's objects may be stored in (`status.storedVersions`).
    pub stored_versions: &'a [String],
}

/// Analyzes the candidate against the stored objects of its definition: the acceptance check,
/// then a scan of every object. Runs on the calling thread (which must not be one of
/// `runtime`'s workers), waiting for the store on `runtime`.
pub fn analyze(
    store: &Backend,
    runtime: &tokio::runtime::Handle,
    subject: &Subject<'_>,
    options: &Options,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(u64),
) -> Result<Report, Stop> {
    let name = &subject.candidate.definition.name;
    let current = subject.served.get(name).map(|s| s.loaded.definition.clone());
    let mut stored_versions = subject.stored_versions.to_vec();
    if let Some(storage) = current.as_ref().map(|c| c.storage.name.clone())
        && !stored_versions.contains(&storage)
    {
        // The version served as storage has had objects written in it.
        stored_versions.push(storage);
    }
    let change = candidate::acceptance(subject.served, subject.candidate, subject.file, &stored_versions);
    let forms = Forms { current, candidate: subject.candidate.definition.clone() };
    let totals = scan::run(store, runtime, &forms, options, cancel, progress)?;
    Ok(Report::new(&forms, change, totals))
}

#[cfg(test)]
mod tests;
