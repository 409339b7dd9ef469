//! Reading the `--definitions` paths again and again: every manifest file is read on each
//! scan, but only files whose bytes changed are parsed, checked and compiled again; the others
//! give back the very definitions (the same `Arc`s) they gave before, so that an unchanged
//! definition is recognised by identity and its watches go on.
//!
//! Owns the cache of loaded files. Must not decide what is served (`live::plan` does).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::load::{Loaded, Problem, load_text, manifest_files};

/// Each document's definition or problem, in document order.
pub type Documents = Vec<Result<Loaded, Problem>>;

/// What one manifest file gave.
#[derive(Debug, Clone)]
pub struct ScannedFile {
    pub path: PathBuf,
    pub documents: Documents,
}

impl ScannedFile {
    /// Whether some of the file's contents could not be told apart as definitions (unreadable,
    /// unparsable, a document without a name): the definitions it held before may be in there.
    pub fn is_murky(&self) -> bool {
        self.documents.iter().any(|d| matches!(d, Err(p) if p.name.is_none()))
    }
}

/// The outcome of one scan.
#[derive(Debug, Clone)]
pub enum Scan {
    /// Every path could be listed: the files found, in order.
    Files(Vec<ScannedFile>),
    /// A path could not be read or listed (a directory being swapped, say): nothing can be
    /// said of the definitions it held.
    Failed(Problem),
}

/// The files seen at the last scan, by path, with their bytes and what they gave.
#[derive(Debug, Default)]
pub struct FileCache {
    files: HashMap<PathBuf, (Vec<u8>, Documents)>,
}

impl FileCache {
    /// Reads every manifest under `paths`; changed files are loaded on every core.
    pub fn scan(&mut self, paths: &[PathBuf]) -> Scan {
        let files = match manifest_files(paths) {
            Ok(files) => files,
            Err(problem) => return Scan::Failed(problem),
        };
        let read: Vec<(PathBuf, Result<Vec<u8>, String>)> = files
            .into_iter()
            .map(|path| {
                let bytes = std::fs::read(&path).map_err(|e| format!("cannot read: {e}"));
                (path, bytes)
            })
            .collect();
        let changed: Vec<&(PathBuf, Result<Vec<u8>, String>)> = read
            .iter()
            .filter(|(path, bytes)| match (bytes, self.files.get(path)) {
                (Ok(bytes), Some((seen, _))) => bytes != seen,
                _ => true,
            })
            .collect();
        let loaded = crate::core::parallel::map(&changed, |(path, bytes)| match bytes {
            Ok(bytes) => load_text(path, bytes),
            Err(message) => vec![Err(Problem::new(path.display().to_string(), None, vec![message.clone()]))],
        });
        let mut fresh: HashMap<&Path, Documents> = changed.iter().map(|(path, _)| path.as_path()).zip(loaded).collect();
        let mut files = HashMap::with_capacity(read.len());
        let mut scanned = Vec::with_capacity(read.len());
        for (path, bytes) in &read {
            let documents = match fresh.remove(path.as_path()) {
                Some(documents) => documents,
                None => self.files.get(path).map(|(_, documents)| documents.clone()).unwrap_or_default(),
            };
            if let Ok(bytes) = bytes {
                files.insert(path.clone(), (bytes.clone(), documents.clone()));
            }
            scanned.push(ScannedFile { path: path.clone(), documents });
        }
        self.files = files;
        Scan::Files(scanned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRONTAB: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, kind: CronTab}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
";

    fn definitions(scan: &Scan) -> Vec<&Loaded> {
        match scan {
            Scan::Files(files) => {
                files.iter().flat_map(|f| f.documents.iter().filter_map(|d| d.as_ref().ok())).collect()
            }
            Scan::Failed(p) => panic!("{p}"),
        }
    }

    #[test]
    fn unchanged_files_give_the_same_definitions() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("crontab.yaml");
        std::fs::write(&file, CRONTAB).unwrap();
        let mut cache = FileCache::default();
        let first = cache.scan(&[dir.path().to_path_buf()]);
        let again = cache.scan(&[dir.path().to_path_buf()]);
        assert!(std::sync::Arc::ptr_eq(&definitions(&first)[0].definition, &definitions(&again)[0].definition));
        std::fs::write(&file, CRONTAB.replace("CronTab", "CronTab2")).unwrap();
        let changed = cache.scan(&[dir.path().to_path_buf()]);
        assert_eq!(definitions(&changed)[0].definition.kind, "CronTab2");
    }

    #[test]
    fn a_half_written_file_is_murky_and_a_missing_path_fails() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("crontab.yaml"), &CRONTAB[..60]).unwrap();
        let mut cache = FileCache::default();
        match cache.scan(&[dir.path().to_path_buf()]) {
            Scan::Files(files) => assert!(files[0].is_murky(), "{:?}", files[0].documents),
            Scan::Failed(p) => panic!("{p}"),
        }
        assert!(matches!(cache.scan(&[dir.path().join("gone")]), Scan::Failed(_)));
    }
}
