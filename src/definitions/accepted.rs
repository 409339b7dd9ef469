//! The definitions the server last accepted, as the store keeps them (`lifecycle::accepted`
//! reads and writes the records), and what a start makes of them. Kubernetes keeps a CRD's
//! object in etcd: an update is checked against it whatever happened to the process. Here the
//! files are the definitions, so a file changed while the server was stopped would escape the
//! update checks; with the last accepted form of each definition at hand, a start checks the
//! files as a live reload would (`reload::plan`), and a refused file leaves the accepted form
//! served, as a refused live change does.
//!
//! Pure: no file, store or HTTP access; the caller brings the records.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::load::{Loaded, loaded_from_record, loaded_from_value, take_schema_texts, with_schema_texts};
use super::reload::Served;
use super::scan::{Documents, Origin, Scan};

/// The form of a definition the server last accepted, and where it came from.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// The defaulted manifest (name, labels, annotations and spec; no status), without its
    /// versions' schemas, as [`Loaded::manifest`] is.
    pub manifest: Arc<CustomResourceDefinition>,
    /// Each version's schema as compact JSON text, in version order, as a loaded definition
    /// keeps them.
    pub schemas: Vec<Option<Arc<str>>>,
    /// The file (or `cluster:customresourcedefinitions/<name>`) it was read from.
    pub file: PathBuf,
    /// Its source as problems name it (the file, and the document of a multi-document file).
    pub source: String,
    /// Whether the store keeps it in its compact form (schemas as text, compressed): a record
    /// in the earlier form is written again, once, though it says the same.
    pub compact: bool,
    /// The bytes of `file` that gave this very form, when known: a start that finds them
    /// there takes the file's documents from the records.
    pub origin: Option<Origin>,
}

impl Accepted {
    /// The accepted form of a whole manifest (with its schemas, as the store records it).
    pub fn new(mut manifest: CustomResourceDefinition, file: PathBuf, source: String) -> Accepted {
        let schemas = take_schema_texts(&mut manifest);
        Accepted { manifest: Arc::new(manifest), schemas, file, source, compact: false, origin: None }
    }

    /// Whether `loaded` has this spec: the manifest's and every version's schema.
    pub fn same_spec(&self, loaded: &Loaded) -> bool {
        self.manifest.spec == loaded.manifest.spec && self.schemas == loaded.schema_texts()
    }

    /// Whether a decoded, defaulted manifest without schemas (`manifest`) and its schemas'
    /// texts are this form: the same metadata, spec and schemas.
    pub fn is_form(&self, manifest: &CustomResourceDefinition, schemas: &[Option<Arc<str>>]) -> bool {
        self.schemas == schemas && self.manifest.spec == manifest.spec && self.manifest.metadata == manifest.metadata
    }

    /// The whole manifest, with its schemas.
    pub fn full_manifest(&self) -> CustomResourceDefinition {
        with_schema_texts(&self.manifest, &self.schemas)
    }
}

/// Whether `manifest` (decoded, defaulted, without schemas) with `schemas` is the last accepted
/// form of its name: a start does not check it again (`load::Trusted`).
pub fn vouches_for(
    accepted: &HashMap<String, Accepted>,
    manifest: &CustomResourceDefinition,
    schemas: &[Option<Arc<str>>],
) -> bool {
    let name = manifest.metadata.name.as_deref().unwrap_or_default();
    accepted.get(name).is_some_and(|a| a.is_form(manifest, schemas))
}

/// The accepted records by the file bytes that gave them (`Accepted::origin`), for a start to
/// take a file's documents from (`scan::Recall`).
pub struct Recollection<'a> {
    by_bytes: HashMap<(&'a std::path::Path, &'a str), Vec<&'a Accepted>>,
}

impl<'a> Recollection<'a> {
    /// The records of `accepted` that name the bytes they came from, as this loader reads them.
    pub fn of(accepted: &'a HashMap<String, Accepted>) -> Recollection<'a> {
        let mut by_bytes: HashMap<_, Vec<&Accepted>> = HashMap::new();
        for record in accepted.values() {
            if let Some(origin) = record.origin.as_ref().filter(|o| o.form == super::load::FORM) {
                by_bytes.entry((record.file.as_path(), origin.sha256.as_str())).or_default().push(record);
            }
        }
        Recollection { by_bytes }
    }

    /// Every document of the file `file` whose bytes have the SHA-256 `sha256`, when there is a
    /// record of each (one per position, all counting the same documents); `None` otherwise.
    pub fn documents(&self, file: &std::path::Path, sha256: &str) -> Option<Documents> {
        let records = self.by_bytes.get(&(file, sha256))?;
        let count = records.first()?.origin.as_ref()?.documents;
        if records.len() != count {
            return None;
        }
        let mut at: Vec<Option<&Accepted>> = vec![None; count];
        for record in records {
            let origin = record.origin.as_ref()?;
            let slot = at.get_mut(origin.document).filter(|slot| slot.is_none() && origin.documents == count)?;
            *slot = Some(record);
        }
        at.into_iter()
            .map(|record| {
                let record = record?;
                let warnings = record.origin.as_ref().map(|o| o.warnings.clone()).unwrap_or_default();
                let loaded = loaded_from_record(
                    record.manifest.clone(),
                    record.schemas.clone(),
                    record.source.clone(),
                    warnings,
                );
                Some(Ok(loaded))
            })
            .collect()
    }
}

/// What a start plans from as served before (`reload::plan`'s `previous`): the accepted form of
/// every definition that was served when the server stopped (`served_before`) and that the
/// scan gives in another form, or cannot give (a document naming it that fails to load, a file
/// that held it and cannot be read through). Only these are compiled; a definition the files
/// give unchanged is served from the files, as if it had never stopped. Also for a definition
/// served at the stop that a later scan brings (a cluster definition listed after the first
/// load), with the records of the definitions that scan brings.
pub fn accepted_forms(
    scan: &Scan,
    accepted: &HashMap<String, Accepted>,
    served_before: &dyn Fn(&str) -> bool,
) -> HashMap<String, Served> {
    let Scan::Files(files) = scan else { return HashMap::new() };
    // (A reload among thousands of definitions reads the records of its newcomers only.)
    if accepted.is_empty() {
        return HashMap::new();
    }
    let mut needed: Vec<&str> = Vec::new();
    for file in files {
        for document in &file.documents {
            let (name, same) = match document {
                Ok(loaded) => {
                    let same = accepted.get(&loaded.definition.name).is_some_and(|a| a.same_spec(loaded));
                    (Some(loaded.definition.name.as_str()), same)
                }
                Err(problem) => (problem.name.as_deref(), false),
            };
            if let Some(name) = name
                && !same
            {
                needed.push(name);
            }
        }
    }
    let murky: Vec<&PathBuf> = files.iter().filter(|f| f.is_murky()).map(|f| &f.path).collect();
    needed.extend(accepted.iter().filter(|(_, a)| murky.contains(&&a.file)).map(|(name, _)| name.as_str()));
    needed.sort_unstable();
    needed.dedup();
    needed
        .into_iter()
        .filter(|name| served_before(name))
        .filter_map(|name| Some((name.to_string(), served(accepted.get(name)?)?)))
        .collect()
}

/// The accepted form compiled, as the file it came from was.
pub fn served(accepted: &Accepted) -> Option<Served> {
    let raw = match serde_json::to_value(accepted.full_manifest()) {
        Ok(raw) => raw,
        Err(e) => {
            tracing::warn!(source = %accepted.source, error = %e, "the last accepted definition cannot be encoded");
            return None;
        }
    };
    let compiled = crate::cel::on_compile_stack(|| loaded_from_value(raw, &accepted.source));
    match compiled {
        Some(Ok(loaded)) => Some(Served { loaded, file: accepted.file.clone() }),
        Some(Err(problem)) => {
            // Accepted by an earlier build whose checks were looser: the files are checked
            // against its manifest all the same (`reload::Context::accepted`).
            tracing::warn!("the last accepted definition no longer loads: {problem}");
            None
        }
        None => None,
    }
}

#[cfg(test)]
mod tests;
