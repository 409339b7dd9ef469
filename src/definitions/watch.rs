//! Noticing that the `--definitions` paths changed: file-system events (the `notify` crate:
//! inotify on Linux) on every given directory and on the directory holding every given path,
//! so that editing, adding or removing a file, an atomic rename over a file, a ConfigMap
//! volume's swap of its `..data` symlink and a directory replaced whole are all seen; then the
//! events of a burst are coalesced into one "look again".
//!
//! Owns the watches and nothing else: it never reads a manifest (`scan` does) and never decides
//! what is served (`reload` does).

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// How long the files must stay quiet before they are read: a burst of events (an editor's
/// save, a ConfigMap update, several replacements) makes one reload.
pub const QUIET: Duration = Duration::from_millis(10);
/// The longest a change waits for a quiet moment: files rewritten without pause are still
/// read this often.
pub const MOST_DELAY: Duration = Duration::from_millis(250);

/// Why the paths cannot be watched.
#[derive(Debug, thiserror::Error)]
#[error("watching {path}: {message}")]
pub struct Error {
    pub path: String,
    pub message: String,
}

/// The watches on the definitions paths. Dropping it stops them.
pub struct DefinitionsWatcher {
    watcher: Mutex<RecommendedWatcher>,
    /// The given paths, watched themselves whenever they are directories.
    paths: Vec<PathBuf>,
}

/// What is watched for one given path: the directory holding it, for events naming it (or a
/// ConfigMap volume's `..`-prefixed entries beside it), and the path itself when it is a
/// directory (now, or once it appears).
struct Interest {
    parent: PathBuf,
    name: Option<OsString>,
    path: PathBuf,
}

impl Interest {
    fn of(path: &Path) -> Interest {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let parent = absolute.parent().map(Path::to_path_buf).unwrap_or_else(|| absolute.clone());
        Interest { parent, name: absolute.file_name().map(OsString::from), path: absolute }
    }

    fn concerns(&self, event_path: &Path) -> bool {
        if event_path.parent() == Some(self.path.as_path()) || event_path == self.path {
            return true;
        }
        if event_path.parent() != Some(self.parent.as_path()) {
            return false;
        }
        let name = event_path.file_name();
        name == self.name.as_deref() || name.and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(".."))
    }
}

impl DefinitionsWatcher {
    /// Watches `paths`; every relevant event sends a unit on the returned channel.
    pub fn start(paths: &[PathBuf]) -> Result<(DefinitionsWatcher, mpsc::UnboundedReceiver<()>), Error> {
        let interests: Arc<Vec<Interest>> = Arc::new(paths.iter().map(|p| Interest::of(p)).collect());
        let (tx, rx) = mpsc::unbounded_channel();
        let seen = interests.clone();
        let handler = move |event: notify::Result<notify::Event>| match event {
            Ok(event) => {
                if event.kind.is_access() {
                    return;
                }
                if event.paths.iter().any(|p| seen.iter().any(|i| i.concerns(p))) {
                    let _ = tx.send(());
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "watching the definitions: an event was lost; reading them again");
                let _ = tx.send(());
            }
        };
        let mut watcher =
            notify::recommended_watcher(handler).map_err(|e| Error { path: String::new(), message: e.to_string() })?;
        let mut parents = HashSet::new();
        for interest in interests.iter() {
            if parents.insert(interest.parent.clone()) {
                watch(&mut watcher, &interest.parent)?;
            }
        }
        let paths: Vec<PathBuf> = interests.iter().map(|i| i.path.clone()).collect();
        for directory in paths.iter().filter(|p| p.is_dir()) {
            watch(&mut watcher, directory)?;
        }
        Ok((DefinitionsWatcher { watcher: Mutex::new(watcher), paths }, rx))
    }

    /// Watches the given directories again: one replaced whole (renamed over) is a new
    /// directory, which the old watch does not see, and one that appeared had no watch.
    pub fn rearm(&self) {
        let Ok(mut watcher) = self.watcher.lock() else { return };
        for directory in self.paths.iter().filter(|p| p.is_dir()) {
            let _ = watcher.unwatch(directory);
            if let Err(e) = watch(&mut watcher, directory) {
                tracing::warn!(error = %e, "watching a definitions directory again failed");
            }
        }
    }
}

fn watch(watcher: &mut RecommendedWatcher, path: &Path) -> Result<(), Error> {
    watcher
        .watch(path, RecursiveMode::NonRecursive)
        .map_err(|e| Error { path: path.display().to_string(), message: e.to_string() })
}

/// Waits for the next change, then for the burst it starts to end (no event for [`QUIET`], or
/// [`MOST_DELAY`] after it began). Returns when the burst began; `None` once the watcher is
/// gone.
pub async fn next_change(events: &mut mpsc::UnboundedReceiver<()>) -> Option<std::time::Instant> {
    events.recv().await?;
    end_of_burst(events).await
}

/// Given that a change was just received, waits for the burst it starts to end, as
/// [`next_change`] does. Returns when the burst began; `None` once the watcher is gone.
pub async fn end_of_burst(events: &mut mpsc::UnboundedReceiver<()>) -> Option<std::time::Instant> {
    let began = std::time::Instant::now();
    let give_up = tokio::time::Instant::now() + MOST_DELAY;
    loop {
        let quiet = tokio::time::Instant::now() + QUIET;
        match tokio::time::timeout_at(quiet.min(give_up), events.recv()).await {
            Ok(Some(())) if tokio::time::Instant::now() < give_up => continue,
            Ok(None) => return None,
            _ => return Some(began),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interests_take_the_configmap_swap_and_the_named_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("crontab.yaml");
        std::fs::write(&file, "").unwrap();
        let for_file = Interest::of(&file);
        assert!(for_file.concerns(&file));
        assert!(for_file.concerns(&dir.path().join("..data")));
        assert!(!for_file.concerns(&dir.path().join("other.yaml")));
        let for_dir = Interest::of(dir.path());
        assert!(for_dir.concerns(&dir.path().join("other.yaml")));
        assert!(for_dir.concerns(dir.path()));
        assert!(!for_dir.concerns(&dir.path().join("sub").join("x.yaml")));
    }

    #[tokio::test]
    async fn a_burst_of_events_is_one_change() {
        let dir = tempfile::tempdir().unwrap();
        let (_watcher, mut events) = DefinitionsWatcher::start(&[dir.path().to_path_buf()]).unwrap();
        for i in 0..5 {
            std::fs::write(dir.path().join("a.yaml"), format!("n: {i}")).unwrap();
        }
        tokio::time::timeout(Duration::from_secs(5), next_change(&mut events)).await.unwrap().unwrap();
        // The burst ended with the change: nothing else is pending.
        assert!(tokio::time::timeout(QUIET * 4, next_change(&mut events)).await.is_err());
    }
}
