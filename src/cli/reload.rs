//! Files re-read while serving: the serving certificate and the CA bundles given by flags.
//! Polled (once a minute, as k8s.io/apiserver also re-checks its files) and swapped in when
//! their contents change, so that a renewed certificate (cert-manager, a rotated Secret)
//! needs no restart. A change that does not load keeps the previous contents.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;

use crate::server::tls::{self, ServingCert};

pub const POLL_INTERVAL: Duration = Duration::from_secs(60);

/// A digest of the files' contents (unreadable files count as empty).
fn digest(paths: &[PathBuf]) -> Vec<u8> {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for path in paths {
        context.update(&std::fs::read(path).unwrap_or_default());
        context.update(&[0]);
    }
    context.finish().as_ref().to_vec()
}

/// Files and what to do when their contents change.
struct Watched<F> {
    what: &'static str,
    paths: Vec<PathBuf>,
    /// The digest of the contents last loaded; a change that failed is tried again.
    seen: Vec<u8>,
    reload: F,
}

impl<F: FnMut() -> Result<(), String>> Watched<F> {
    fn new(what: &'static str, paths: Vec<PathBuf>, reload: F) -> Watched<F> {
        let seen = digest(&paths);
        Watched { what, paths, seen, reload }
    }

    /// Reloads when the contents differ from those last loaded.
    fn check(&mut self) {
        let now = digest(&self.paths);
        if now == self.seen {
            return;
        }
        match (self.reload)() {
            Ok(()) => {
                tracing::info!(what = self.what, "reloaded");
                self.seen = now;
            }
            Err(e) => {
                tracing::warn!(what = self.what, error = %e, "changed, but does not load; keeping the previous one")
            }
        }
    }
}

/// Calls `reload` whenever the contents of `paths` change, checking every `interval`.
pub fn watch<F>(what: &'static str, paths: Vec<PathBuf>, interval: Duration, reload: F)
where
    F: FnMut() -> Result<(), String> + Send + 'static,
{
    tokio::spawn(async move {
        let mut watched = Watched::new(what, paths, reload);
        loop {
            tokio::time::sleep(interval).await;
            watched.check();
        }
    });
}

/// Swaps in the serving certificate when its files change.
pub fn watch_serving_cert(serving: Arc<ServingCert>, cert: &Path, key: &Path, provider: Arc<CryptoProvider>) {
    let (cert, key) = (cert.to_path_buf(), key.to_path_buf());
    watch("serving certificate", vec![cert.clone(), key.clone()], POLL_INTERVAL, move || {
        let loaded = tls::load_certified_key(&cert, &key, &provider).map_err(|e| e.to_string())?;
        serving.0.store(Arc::new(loaded));
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn changes_are_reloaded_and_failures_retried() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ca.crt");
        std::fs::write(&file, "one").unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let path = file.clone();
        let mut watched = Watched::new("test file", vec![file.clone()], move || {
            counted.fetch_add(1, Ordering::SeqCst);
            match std::fs::read_to_string(&path).unwrap_or_default().as_str() {
                "bad" => Err("unusable".into()),
                _ => Ok(()),
            }
        });
        watched.check();
        assert_eq!(calls.load(Ordering::SeqCst), 0, "nothing changed");
        std::fs::write(&file, "two").unwrap();
        watched.check();
        watched.check();
        assert_eq!(calls.load(Ordering::SeqCst), 1, "a change loaded once is not loaded again");
        std::fs::write(&file, "bad").unwrap();
        watched.check();
        watched.check();
        assert_eq!(calls.load(Ordering::SeqCst), 3, "a change that failed is tried again");
        std::fs::write(&file, "two").unwrap();
        watched.check();
        assert_eq!(calls.load(Ordering::SeqCst), 3, "back to what was loaded: nothing to do");
    }
}
