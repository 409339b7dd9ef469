//! What the last reload of the definitions said, kept in memory for whoever shows it (the log
//! says it once; the served definitions' status resource shows it for as long as it holds):
//! every problem it found, by definition and file, and when it ran.
//!
//! A problem lasts as long as its cause: every reload reads every file again, so a refused
//! change is reported by each reload until the file is fixed (or the change becomes
//! acceptable), and then no more. Must not touch files, the store or HTTP.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::load::Problem;

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
        let messages: Vec<&str> = self
            .errors
            .iter()
            .filter(|e| e.definition.as_deref() == Some(definition))
            .map(|e| e.message.as_str())
            .collect();
        (!messages.is_empty()).then(|| messages.join("\n"))
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

    /// Records a reload's problems (called by the reloader only).
    pub fn record(&self, problems: &[Problem]) {
        let errors = problems
            .iter()
            .map(|p| ReloadError { definition: p.name.clone(), source: p.source.clone(), message: p.to_string() })
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
        outcome.errors.push(ReloadError { definition: None, source: String::new(), message: message.to_string() });
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
        status.record(&[
            Problem::new(
                "a.yaml",
                Some("as.example.com".into()),
                vec!["spec.scope: Invalid value: \"Cluster\": field is immutable".into()],
            ),
            Problem::new("b.yaml", None, vec!["cannot parse: oops".into()]),
        ]);
        assert_eq!(
            status.last_error("as.example.com").as_deref(),
            Some(
                "a.yaml: CustomResourceDefinition \"as.example.com\" is invalid: spec.scope: Invalid value: \"Cluster\": field is immutable"
            )
        );
        assert_eq!(status.last().errors.len(), 2);
        status.record(&[]);
        assert_eq!(status.last_error("as.example.com"), None);
        assert!(status.last().time.is_some());
    }
}
