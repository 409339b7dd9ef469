//! What the last reload of the definitions said, kept in memory for whoever shows it (the log
//! says it once; the served definitions' status resource shows it for as long as it holds):
//! every problem it found, by definition and file, and when it ran. A problem that names no
//! definition (a file that cannot be read or parsed) concerns the definitions served from that
//! file, which go on as they were; one that concerns no served definition at all is shown on
//! an entry of its own (`ReloadOutcome::unserved`).
//!
//! A problem lasts as long as its cause: every reload reads every file again, so a refused
//! change is reported by each reload until the file is fixed (or the change becomes
//! acceptable), and then no more. Must not touch files, the store or HTTP.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::load::Problem;
use super::reload::Served;

/// One problem of the last reload.
#[derive(Debug, Clone, PartialEq)]
pub struct ReloadError {
    /// The definition it concerns (`metadata.name`), when it names one. A definition that has
    /// an error and is served is served in its previous form.
    pub definition: Option<String>,
    /// The file (and document) it comes from.
    pub source: String,
    /// The whole message, as logged: `<file>: CustomResourceDefinition "<name>" is invalid: ...`.
    pub message: String,
    /// Why, in a word (`load::reason`).
    pub reason: &'static str,
    /// The field errors (the message is made of them).
    pub errors: Vec<String>,
    /// For a problem that names no definition, the served definitions whose file it is in (or
    /// under, for a directory): they are served as they were, and their status shows it.
    pub concerns: Vec<String>,
}

impl ReloadError {
    /// Whether it concerns the definition named `definition`.
    pub fn concerns(&self, definition: &str) -> bool {
        self.definition.as_deref() == Some(definition) || self.concerns.iter().any(|d| d == definition)
    }
}

/// The problems of a source that no served definition shows: a definition that is not served
/// (new and invalid, refused, or whose names clash), or a file that holds no served definition
/// and cannot be read. Shown as an entry of its own among the served definitions' statuses.
#[derive(Debug, Clone, PartialEq)]
pub struct Unserved<'a> {
    /// The entry's name: the definition's, or for a file whose definitions cannot be told
    /// (`file_entry_name`) one made of the file's name.
    pub name: String,
    pub errors: Vec<&'a ReloadError>,
}

/// The name of the entry of a file (or directory) that holds no served definition and whose
/// definitions cannot be told: `file-<its name>-<hash of its path>`, a valid object name that
/// no definition can have (a definition's name has dots).
pub fn file_entry_name(file: &std::path::Path) -> String {
    let base = file.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    let mut cleaned = String::new();
    for c in base.chars().take(60) {
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && (cleaned.is_empty() || cleaned.ends_with('-'))) {
            cleaned.push(c);
        }
    }
    let cleaned = cleaned.trim_end_matches('-');
    let digest = ring::digest::digest(&ring::digest::SHA256, file.as_os_str().as_encoded_bytes());
    let hash: String = digest.as_ref().iter().take(4).map(|b| format!("{b:02x}")).collect();
    if cleaned.is_empty() { format!("file-{hash}") } else { format!("file-{cleaned}-{hash}") }
}

/// The outcome of one reload.
#[derive(Debug, Clone, Default)]
pub struct ReloadOutcome {
    /// When it ran; `None` before the first load.
    pub time: Option<jiff::Timestamp>,
    pub errors: Vec<ReloadError>,
}

impl ReloadOutcome {
    /// Its errors concerning `definition` (joined, in file order), if any.
    pub fn error_of(&self, definition: &str) -> Option<String> {
        let messages: Vec<&str> = self.errors_of(definition).map(|e| e.message.as_str()).collect();
        (!messages.is_empty()).then(|| messages.join("\n"))
    }

    /// Its errors concerning `definition`, in file order.
    pub fn errors_of<'a>(&'a self, definition: &'a str) -> impl Iterator<Item = &'a ReloadError> + 'a {
        self.errors.iter().filter(move |e| e.concerns(definition))
    }

    /// The problems no served definition shows (`served` says which are served), by entry
    /// name. A failure of the reload itself (no source) is no source's.
    pub fn unserved(&self, served: &dyn Fn(&str) -> bool) -> Vec<Unserved<'_>> {
        let mut entries: BTreeMap<String, Vec<&ReloadError>> = BTreeMap::new();
        for error in &self.errors {
            let name = match &error.definition {
                Some(name) if served(name) => continue,
                Some(name) => name.clone(),
                None if error.source.is_empty() || !error.concerns.is_empty() => continue,
                None => file_entry_name(super::load::source_file(&error.source)),
            };
            entries.entry(name).or_default().push(error);
        }
        entries.into_iter().map(|(name, errors)| Unserved { name, errors }).collect()
    }
}

/// The last reload's outcome, shared between the reloader (which writes it) and readers.
#[derive(Debug, Default)]
pub struct ReloadStatus {
    last: ArcSwap<ReloadOutcome>,
    /// Wakes the reloader without a file event.
    again: tokio::sync::Notify,
}

impl ReloadStatus {
    pub fn new() -> Arc<ReloadStatus> {
        Arc::new(ReloadStatus::default())
    }

    /// The last reload's outcome.
    pub fn last(&self) -> Arc<ReloadOutcome> {
        self.last.load_full()
    }

    /// The last reload's error concerning `definition` (its errors joined, in file order), if
    /// any: what the definition's status shows as its last reload error.
    pub fn last_error(&self, definition: &str) -> Option<String> {
        self.last.load().error_of(definition)
    }

    /// Records a reload's problems (called by the reloader only); `served` is what is served
    /// from now on, to tell which definitions a problem naming none concerns.
    pub fn record(&self, problems: &[Problem], served: &HashMap<String, Served>) {
        let errors = problems
            .iter()
            .map(|p| {
                let mut concerns: Vec<String> = match p.name {
                    Some(_) => Vec::new(),
                    None => {
                        served.values().filter(|s| s.file.starts_with(p.file())).map(|s| s.name().to_string()).collect()
                    }
                };
                concerns.sort();
                ReloadError {
                    definition: p.name.clone(),
                    source: p.source.clone(),
                    message: p.to_string(),
                    reason: p.reason,
                    errors: p.errors.clone(),
                    concerns,
                }
            })
            .collect();
        self.last.store(Arc::new(ReloadOutcome { time: Some(jiff::Timestamp::now()), errors }));
    }
}

impl ReloadStatus {
    /// Asks the reloader to read the files again although none changed, if the last reload
    /// refused something (what it refused may be accepted now).
    pub fn ask_again(&self) {
        if !self.last.load().errors.is_empty() {
            self.again.notify_one();
        }
    }

    /// Waits until a reload is asked for by [`ReloadStatus::ask_again`].
    pub async fn asked_again(&self) {
        self.again.notified().await;
    }

    /// Adds a failure of the reload itself (the store could not record what it needed) to the
    /// last outcome.
    pub fn record_failure(&self, message: &str) {
        let mut outcome = ReloadOutcome::clone(&self.last.load());
        outcome.time = Some(jiff::Timestamp::now());
        outcome.errors.push(ReloadError {
            definition: None,
            source: String::new(),
            message: message.to_string(),
            reason: super::load::reason::RELOAD_FAILED,
            errors: vec![message.to_string()],
            concerns: Vec::new(),
        });
        self.last.store(Arc::new(outcome));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_last_until_the_next_reload() {
        let status = ReloadStatus::new();
        assert!(status.last().time.is_none());
        status.record(
            &[
                Problem::new(
                    "a.yaml",
                    Some("as.example.com".into()),
                    vec!["spec.scope: Invalid value: \"Cluster\": field is immutable".into()],
                ),
                Problem::new("b.yaml", None, vec!["cannot parse: oops".into()]),
            ],
            &HashMap::new(),
        );
        assert_eq!(
            status.last_error("as.example.com").as_deref(),
            Some(
                "a.yaml: CustomResourceDefinition \"as.example.com\" is invalid: spec.scope: Invalid value: \"Cluster\": field is immutable"
            )
        );
        assert_eq!(status.last().errors.len(), 2);
        status.record(&[], &HashMap::new());
        assert_eq!(status.last_error("as.example.com"), None);
        assert!(status.last().time.is_some());
    }

    fn served(name: &str, file: &str) -> (String, Served) {
        let plural = name.split('.').next().unwrap_or_default();
        let manifest = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": plural, "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}
        });
        let loaded = super::super::load::loaded_from_value(manifest, file).unwrap();
        (name.to_string(), Served { loaded, file: file.into() })
    }

    #[test]
    fn a_problem_naming_no_definition_concerns_those_of_its_file_or_has_an_entry() {
        use super::super::load::reason;
        let status = ReloadStatus::new();
        let served: HashMap<String, Served> =
            [served("as.example.com", "defs/a.yaml"), served("bs.example.com", "defs/b.yaml")].into();
        status.record(
            &[
                Problem::new("defs/a.yaml", None, vec!["cannot parse: oops".into()]).because(reason::UNPARSABLE),
                Problem::new("defs/c.yaml (document 2)", None, vec!["expected ...".into()])
                    .because(reason::NOT_A_DEFINITION),
                Problem::new(
                    "defs/d.yaml",
                    Some("ds.example.com".into()),
                    vec!["names not accepted: \"as\" is already in use".into()],
                )
                .because(reason::PLURAL_CONFLICT),
            ],
            &served,
        );
        let last = status.last();
        // The file that cannot be parsed held `as`, which goes on as it was: its status says why.
        assert_eq!(
            last.error_of("as.example.com").as_deref(),
            Some("defs/a.yaml: not a usable CustomResourceDefinition: cannot parse: oops")
        );
        assert_eq!(last.errors_of("as.example.com").map(|e| e.reason).collect::<Vec<_>>(), [reason::UNPARSABLE]);
        assert_eq!(last.error_of("bs.example.com"), None);
        let unserved = last.unserved(&|name| served.contains_key(name));
        let entries: Vec<(&str, Vec<&str>)> =
            unserved.iter().map(|u| (u.name.as_str(), u.errors.iter().map(|e| e.reason).collect())).collect();
        let c = file_entry_name(std::path::Path::new("defs/c.yaml"));
        assert_eq!(
            entries,
            [("ds.example.com", vec![reason::PLURAL_CONFLICT]), (c.as_str(), vec![reason::NOT_A_DEFINITION])]
        );
        assert!(c.starts_with("file-c-yaml-") && c.len() == "file-c-yaml-".len() + 8, "{c}");
        // A failure of the reload itself has no entry.
        status.record_failure("recording status.storedVersions failed: closed");
        assert_eq!(status.last().unserved(&|name| served.contains_key(name)).len(), 2);
    }

    #[test]
    fn file_entry_names_are_object_names_no_definition_has() {
        let name = file_entry_name(std::path::Path::new("/etc/Defs/My_Widgets..v2.YAML"));
        assert!(name.starts_with("file-my-widgets-v2-yaml-"), "{name}");
        assert!(!name.contains('.'));
        assert_ne!(name, file_entry_name(std::path::Path::new("/etc/other/My_Widgets..v2.YAML")));
        assert!(file_entry_name(std::path::Path::new("/")).starts_with("file-"));
    }
}
