//! Definitions that come from the main apiserver's CustomResourceDefinitions instead of files:
//! each becomes one more document of a scan, as a file's would be (source
//! `cluster:customresourcedefinitions/<name>`), so that the reload checks, serves, updates and
//! stops serving it exactly as a file's definition (`reload::plan`). What is loaded is the
//! definition's `spec` with its name, labels and annotations: the main apiserver's status and
//! bookkeeping (uid, resourceVersion, managedFields, `status.storedVersions`) are its own, not
//! ours. A definition whose manifest did not change gives back the very `Loaded` (the same
//! `Arc`s) it gave before, so its watches go on.
//!
//! A name both the files and the cluster define is a conflict: the file's definition is
//! served (files are the server's own configuration), the cluster's is left out and the
//! conflict reported under that name, for as long as it lasts.
//!
//! Pure: no I/O; the caller brings the files' scan and the cluster's definitions.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde_json::{Map, Value};

use super::load::{Problem, loaded_from_value};
use super::scan::{Documents, Scan, ScannedFile};

/// Where a cluster definition comes from, as problems and the served definition name it.
pub fn source_of(name: &str) -> String {
    format!("cluster:customresourcedefinitions/{name}")
}

/// The manifest a cluster definition is loaded from.
fn manifest(crd: &Value) -> Value {
    let mut metadata = Map::new();
    for key in ["name", "labels", "annotations"] {
        if let Some(value) = crd.pointer(&format!("/metadata/{key}")) {
            metadata.insert(key.into(), value.clone());
        }
    }
    let mut manifest = Map::new();
    manifest.insert("apiVersion".into(), crd.get("apiVersion").cloned().unwrap_or(Value::Null));
    manifest.insert("kind".into(), crd.get("kind").cloned().unwrap_or(Value::Null));
    manifest.insert("metadata".into(), Value::Object(metadata));
    manifest.insert("spec".into(), crd.get("spec").cloned().unwrap_or(Value::Null));
    Value::Object(manifest)
}

/// What the cluster's definitions gave at the last reload, by name, with the manifest each
/// was loaded from.
#[derive(Debug, Default)]
pub struct ClusterCache {
    loaded: HashMap<String, (Value, Documents)>,
}

impl ClusterCache {
    /// The files' scan with the cluster's definitions added (those the files also define left
    /// out), and the conflicts to report.
    pub fn combine(&mut self, scan: Scan, cluster: &BTreeMap<String, Value>) -> (Scan, Vec<Problem>) {
        let mut files = match scan {
            Scan::Files(files) => files,
            // Nothing can be said of the files: everything goes on as it was.
            failed @ Scan::Failed(_) => return (failed, Vec::new()),
        };
        let mut in_files: HashMap<&str, String> = HashMap::new();
        for file in &files {
            for document in &file.documents {
                let name = match document {
                    Ok(loaded) => Some(loaded.definition.name.as_str()),
                    Err(problem) => problem.name.as_deref(),
                };
                if let Some(name) = name {
                    in_files.entry(name).or_insert_with(|| file.path.display().to_string());
                }
            }
        }
        let mut conflicts = Vec::new();
        let mut added = Vec::new();
        let mut loaded = HashMap::with_capacity(cluster.len());
        for (name, crd) in cluster {
            let source = source_of(name);
            if let Some(file) = in_files.get(name.as_str()) {
                conflicts.push(Problem::new(
                    &source,
                    Some(name.clone()),
                    vec![format!(
                        "also defined in {file}: a definition is served from one source only, and the file's is served; remove it from the files or from the cluster definitions the server is told to serve"
                    )],
                )
                .because(super::load::reason::DUPLICATE));
                continue;
            }
            let manifest = manifest(crd);
            let documents = match self.loaded.remove(name) {
                Some((seen, documents)) if seen == manifest => documents,
                _ => vec![loaded_from_value(manifest.clone(), &source)],
            };
            added.push(ScannedFile { path: PathBuf::from(&source), documents: documents.clone() });
            loaded.insert(name.clone(), (manifest, documents));
        }
        self.loaded = loaded;
        files.extend(added);
        (Scan::Files(files), conflicts)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::definitions::reload::{self, Context};

    fn crd(plural: &str, versions: &[&str]) -> Value {
        let versions: Vec<Value> = versions
            .iter()
            .enumerate()
            .map(|(i, v)| json!({"name": v, "served": true, "storage": i + 1 == versions.len(), "schema": {"openAPIV3Schema": {"type": "object"}}}))
            .collect();
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.example.com"), "uid": "u", "resourceVersion": "12", "managedFields": []},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": plural, "kind": "Thing"}, "versions": versions},
            "status": {"storedVersions": ["v0"], "acceptedNames": {"plural": plural, "kind": "Thing"}},
        })
    }

    fn plan(previous: &HashMap<String, reload::Served>, scan: &Scan) -> reload::Plan {
        let context = Context { age: &|_| None, stored_versions: &|_| Vec::new(), accepted: &reload::nothing_accepted };
        reload::plan(previous, scan, &context)
    }

    #[test]
    fn cluster_definitions_are_served_updated_and_removed_like_files() {
        let mut cache = ClusterCache::default();
        let cluster = BTreeMap::from([("things.example.com".to_string(), crd("things", &["v1"]))]);
        let (scan, conflicts) = cache.combine(Scan::Files(Vec::new()), &cluster);
        assert!(conflicts.is_empty());
        let first = plan(&HashMap::new(), &scan);
        assert_eq!(first.added, ["things.example.com"]);
        assert!(first.problems.is_empty(), "{:?}", first.problems);
        let served = &first.served["things.example.com"];
        assert_eq!(served.loaded.definition.source, "cluster:customresourcedefinitions/things.example.com");

        // A new resourceVersion or status with the same spec: the same definition.
        let mut touched = crd("things", &["v1"]);
        touched["metadata"]["resourceVersion"] = json!("13");
        touched["status"]["storedVersions"] = json!(["v1"]);
        let (scan, _) =
            cache.combine(Scan::Files(Vec::new()), &BTreeMap::from([("things.example.com".to_string(), touched)]));
        let again = plan(&first.served, &scan);
        assert!(again.is_unchanged());
        assert!(Arc::ptr_eq(&again.served["things.example.com"].loaded.definition, &served.loaded.definition));

        // A version added (helm upgrade): changed.
        let upgraded = BTreeMap::from([("things.example.com".to_string(), crd("things", &["v1", "v2"]))]);
        let (scan, _) = cache.combine(Scan::Files(Vec::new()), &upgraded);
        let changed = plan(&first.served, &scan);
        assert_eq!(changed.changed, ["things.example.com"]);
        assert_eq!(changed.served["things.example.com"].loaded.definition.versions.len(), 2);

        // Gone from the cluster (or the selection): no longer served.
        let (scan, _) = cache.combine(Scan::Files(Vec::new()), &BTreeMap::new());
        let removed = plan(&changed.served, &scan);
        assert_eq!(removed.removed, ["things.example.com"]);
    }

    #[test]
    fn an_invalid_cluster_definition_is_reported_and_a_file_wins_a_conflict() {
        let mut cache = ClusterCache::default();
        let mut invalid = crd("widgets", &["v1"]);
        invalid["spec"]["versions"][0]["storage"] = json!(false);
        let cluster = BTreeMap::from([
            ("widgets.example.com".to_string(), invalid),
            ("things.example.com".to_string(), crd("things", &["v1"])),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("things.yaml");
        let text = serde_json::to_string(&crd("things", &["v1"])).unwrap();
        std::fs::write(&file, text).unwrap();
        let files = crate::definitions::scan::FileCache::default().scan(std::slice::from_ref(&file));
        let (scan, conflicts) = cache.combine(files, &cluster);
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].name.as_deref(), Some("things.example.com"));
        assert!(conflicts[0].to_string().starts_with(&format!(
            "cluster:customresourcedefinitions/things.example.com: CustomResourceDefinition \"things.example.com\" is invalid: also defined in {}",
            file.display()
        )));
        let planned = plan(&HashMap::new(), &scan);
        assert_eq!(planned.added, ["things.example.com"]);
        assert_eq!(planned.served["things.example.com"].loaded.definition.source, file.display().to_string());
        let problem = planned.problems.iter().find(|p| p.name.as_deref() == Some("widgets.example.com")).unwrap();
        assert_eq!(problem.source, "cluster:customresourcedefinitions/widgets.example.com");
        assert!(problem.errors.iter().any(|e| e.contains("storage")), "{problem}");
    }
}
