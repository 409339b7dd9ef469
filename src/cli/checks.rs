//! The named health checks `serve` offers, built from the parts they look at: `ping` and `log`
//! everywhere; the store's check (named after its backend: `sled`, or `etcd` as kube-apiserver
//! names it) on `/healthz` and `/readyz`; `informer-sync` (the
//! followers of the main apiserver) and `shutdown` on `/readyz` only.
//!
//! Owns which check goes on which path. Must not answer requests (`server::health` does).

use std::sync::Arc;

use crate::server::health::{self, Health, Informers, NamedCheck};
use crate::server::shutdown::Lifecycle;
use crate::store::{Backend, Store};

/// The checks of the three paths.
///
/// The store's check is not a liveness check: a store that cannot write (a full disk) keeps
/// serving reads and reopens itself once it can write again, so restarting the process would
/// only take the reads away.
pub fn build(store: &Backend, informers: &Arc<Informers>, lifecycle: &Lifecycle) -> Health {
    let ping = health::ping();
    let log = health::log();
    let storage = store_check(store);
    Health {
        healthz: vec![ping.clone(), log.clone(), storage.clone()],
        livez: vec![ping.clone(), log.clone()],
        readyz: vec![ping, log, storage, informers.check(), lifecycle.shutdown_check()],
    }
}

/// The store's check: fails while the store cannot take writes, with the cause.
fn store_check(store: &Backend) -> Arc<NamedCheck> {
    let name = store.name();
    let store = store.clone();
    NamedCheck::new(name, move || store.health().map_err(|e| e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::shutdown::ShutdownOptions;
    use crate::store::sled::{SledOptions, SledStore};

    fn names(checks: &[Arc<NamedCheck>]) -> Vec<&str> {
        checks.iter().map(|c| c.name()).collect()
    }

    #[test]
    fn paths_carry_kubernetes_checks_in_kubernetes_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Backend::Sled(SledStore::open(dir.path(), SledOptions::default()).unwrap());
        let health = build(&store, &Arc::new(Informers::default()), &Lifecycle::new(ShutdownOptions::default()));
        assert_eq!(names(&health.healthz), ["ping", "log", "sled"]);
        assert_eq!(names(&health.livez), ["ping", "log"]);
        assert_eq!(names(&health.readyz), ["ping", "log", "sled", "informer-sync", "shutdown"]);
        assert!(health.report(crate::server::health::Probe::Readyz, []).failures.is_empty());
        store.close();
    }
}
