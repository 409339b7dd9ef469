//! The candidate definition: its manifest read and checked as Kubernetes checks a created
//! CustomResourceDefinition (`definitions::load::checked_from_value`), and whether the server
//! would accept it as a live update of what it serves, decided by the very planner a reload
//! runs (`definitions::reload::plan`: the update checks, stored versions kept, names held by
//! other definitions), with Kubernetes' words.
//!
//! Pure: the caller brings what is served and the stored versions; nothing is read or written.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::definitions::load::{self, Loaded, Refusal};
use crate::definitions::reload::{self, Context, Served};
use crate::definitions::scan::{Scan, ScannedFile};

/// Reads a candidate manifest (one YAML or JSON document) and checks it.
pub fn parse(bytes: &[u8], source: &str) -> Result<Loaded, Refusal> {
    let text = std::str::from_utf8(bytes).map_err(|e| Refusal::undecodable(format!("cannot read: {e}")))?;
    let mut documents =
        load::parse_documents(text).map_err(|e| Refusal::undecodable(format!("cannot parse: {e}")))?.into_iter();
    let document = documents.next().ok_or_else(|| Refusal::undecodable("no CustomResourceDefinition found"))?;
    if documents.next().is_some() {
        return Err(Refusal::undecodable("one CustomResourceDefinition is expected, found several documents"));
    }
    from_value(document, source)
}

/// Checks a decoded candidate.
pub fn from_value(document: Value, source: &str) -> Result<Loaded, Refusal> {
    load::checked_from_value(document, source)
}

/// Whether the candidate would be served as a live update.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Acceptance {
    pub accepted: bool,
    /// Kubernetes' refusal, whole (`CustomResourceDefinition.apiextensions.k8s.io "..." is
    /// invalid: ...`), when refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Each refusal, with its field path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// Whether serving `candidate` (read from `file`) instead of what `served` holds under its name
/// would be accepted, as the server's reload decides it; `stored_versions` are the versions its
/// objects may be stored in (`status.storedVersions`).
pub fn acceptance(
    served: &HashMap<String, Served>,
    candidate: &Loaded,
    file: &Path,
    stored_versions: &[String],
) -> Acceptance {
    let name = candidate.definition.name.clone();
    // Every other served definition as a file of its own, so that the names they hold are
    // held against the candidate's.
    let mut files: Vec<ScannedFile> = served
        .values()
        .filter(|s| s.name() != name)
        .map(|s| ScannedFile { path: s.file.clone(), documents: vec![Ok(s.loaded.clone())] })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files.push(ScannedFile { path: PathBuf::from(file), documents: vec![Ok(candidate.clone())] });
    let age = |n: &str| served.contains_key(n).then_some(0);
    let stored = |n: &str| if n == name { stored_versions.to_vec() } else { Vec::new() };
    let plan = reload::plan(
        served,
        &Scan::Files(files),
        &Context { age: &age, stored_versions: &stored, accepted: &reload::nothing_accepted },
    );
    let errors: Vec<String> = plan
        .problems
        .iter()
        .filter(|p| p.name.as_deref() == Some(name.as_str()))
        .flat_map(|p| p.errors.iter().cloned())
        .collect();
    let taken = plan.served.get(&name).is_some_and(|s| {
        Arc::ptr_eq(&s.loaded.definition, &candidate.definition) || s.loaded.manifest.spec == candidate.manifest.spec
    });
    if taken && errors.is_empty() {
        return Acceptance { accepted: true, message: None, errors };
    }
    let message = match errors.as_slice() {
        [] => format!("CustomResourceDefinition.apiextensions.k8s.io \"{name}\" is not accepted"),
        [one] => format!("CustomResourceDefinition.apiextensions.k8s.io \"{name}\" is invalid: {one}"),
        many => format!("CustomResourceDefinition.apiextensions.k8s.io \"{name}\" is invalid: [{}]", many.join(", ")),
    };
    Acceptance { accepted: false, message: Some(message), errors }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crontab(scope: &str, storage_version: &str, short_name: &str) -> String {
        format!(
            r#"{{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {{"name": "crontabs.stable.example.com"}},
  "spec": {{"group": "stable.example.com", "scope": "{scope}",
    "names": {{"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["{short_name}"]}},
    "versions": [{{"name": "{storage_version}", "served": true, "storage": true,
      "schema": {{"openAPIV3Schema": {{"type": "object"}}}}}}]}}}}"#
        )
    }

    const GADGET: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "gadgets.stable.example.com"},
  "spec": {"group": "stable.example.com", "scope": "Namespaced",
    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "shortNames": ["gd"]},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object"}}}]}}"#;

    fn served(texts: &[&str]) -> HashMap<String, Served> {
        texts
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let loaded = parse(text.as_bytes(), "served.yaml").unwrap();
                (loaded.definition.name.clone(), Served { loaded, file: PathBuf::from(format!("{i}.yaml")) })
            })
            .collect()
    }

    #[test]
    fn an_acceptable_change_is_accepted() {
        let served = served(&[&crontab("Namespaced", "v1", "ct"), GADGET]);
        let candidate = parse(crontab("Namespaced", "v1", "cron").as_bytes(), "new.yaml").unwrap();
        let acceptance = acceptance(&served, &candidate, Path::new("new.yaml"), &["v1".into()]);
        assert_eq!(acceptance, Acceptance { accepted: true, message: None, errors: vec![] });
    }

    #[test]
    fn refusals_are_kubernetes_words() {
        let served = served(&[&crontab("Namespaced", "v1", "ct"), GADGET]);
        let candidate = parse(crontab("Cluster", "v2", "ct").as_bytes(), "new.yaml").unwrap();
        let refused = acceptance(&served, &candidate, Path::new("new.yaml"), &["v1".into()]);
        assert!(!refused.accepted);
        assert_eq!(
            refused.errors,
            [
                r#"spec.scope: Invalid value: "Cluster": field is immutable"#,
                "status.storedVersions[0]: Invalid value: \"v1\": missing from spec.versions; v1 was previously a \
                 storage version, and must remain in spec.versions until a storage migration ensures no data remains \
                 persisted in v1 and removes v1 from status.storedVersions"
            ]
        );
        assert!(
            refused.message.as_deref().unwrap().starts_with(
                r#"CustomResourceDefinition.apiextensions.k8s.io "crontabs.stable.example.com" is invalid: [spec.scope: "#
            ),
            "{refused:?}"
        );
        // A name another definition holds.
        let clash = parse(crontab("Namespaced", "v1", "gd").as_bytes(), "new.yaml").unwrap();
        let refused = acceptance(&served, &clash, Path::new("new.yaml"), &["v1".into()]);
        assert_eq!(refused.errors, [r#"names not accepted: "gd" is already in use"#]);
    }

    #[test]
    fn a_new_definition_is_checked_as_a_create() {
        let served = served(&[GADGET]);
        let candidate = parse(crontab("Namespaced", "v1", "gd").as_bytes(), "new.yaml").unwrap();
        let refused = acceptance(&served, &candidate, Path::new("new.yaml"), &[]);
        assert!(!refused.accepted);
        assert_eq!(refused.errors.len(), 1, "{refused:?}");
        let fine = parse(crontab("Namespaced", "v1", "ct").as_bytes(), "new.yaml").unwrap();
        assert!(acceptance(&served, &fine, Path::new("new.yaml"), &[]).accepted);
    }

    #[test]
    fn a_candidate_that_is_not_a_definition_is_refused_with_field_paths() {
        let invalid = crontab("Sideways", "v1", "ct");
        match parse(invalid.as_bytes(), "new.yaml") {
            Err(Refusal::Invalid(errors)) => {
                assert_eq!(
                    errors[0].to_string(),
                    r#"spec.scope: Unsupported value: "Sideways": supported values: "Cluster", "Namespaced""#
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(b"{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\"}", "x"),
            Err(Refusal::NotADefinition(_))
        ));
        assert!(matches!(parse(b"a: [", "x"), Err(Refusal::Undecodable { .. })));
        assert!(matches!(parse(format!("{GADGET}\n---\n{GADGET}").as_bytes(), "x"), Err(Refusal::Undecodable { .. })));
    }
}
