//! What the server knows of a connection, attached to every request on it, and the table
//! that lets connections presenting the same certificate chain share one copy of it.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use rustls_pki_types::CertificateDer;

use super::activity::Activity;
use crate::core::weak_table::WeakTable;

#[derive(Clone)]
pub struct ConnInfo {
    pub remote: SocketAddr,
    /// The TLS peer's certificate chain, leaf first.
    pub peer_certificates: Arc<Vec<CertificateDer<'static>>>,
    /// What the connection is doing; authentication marks it authenticated, so that at the
    /// connection cap it gives way after anonymous ones.
    pub activity: Arc<Activity>,
    /// The name the client asked for in TLS (SNI): kube-aggregator sends
    /// `<service>.<namespace>.svc` of the APIService it serves, which picks an OpenAPI slice.
    pub server_name: Option<Arc<str>>,
}

impl ConnInfo {
    /// A connection of its own, not counted by any listener (tests, the fuzz harness).
    pub fn new(remote: SocketAddr, peer_certificates: Vec<CertificateDer<'static>>) -> ConnInfo {
        ConnInfo {
            remote,
            peer_certificates: Arc::new(peer_certificates),
            activity: Arc::new(Activity::new(None)),
            server_name: None,
        }
    }
}

impl std::fmt::Debug for ConnInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnInfo").field("remote", &self.remote).finish_non_exhaustive()
    }
}

/// The chains connections hold, by a hash of their bytes.
static CHAINS: Mutex<Option<WeakTable<u64, Vec<CertificateDer<'static>>>>> = Mutex::new(None);

/// `chain`, owned, shared with every open connection that presented the same one: the
/// aggregator (and each replica of a client) opens its connections with one certificate, and
/// each connection would otherwise keep its own copy (~0.5 KiB) for as long as it lasts (a
/// watch's connection, as long as its client likes).
pub fn shared_chain(chain: &[CertificateDer<'_>]) -> Arc<Vec<CertificateDer<'static>>> {
    if chain.is_empty() {
        return Arc::default();
    }
    let mut hasher = DefaultHasher::new();
    for certificate in chain {
        certificate.as_ref().hash(&mut hasher);
    }
    let hash = hasher.finish();
    let mut table = CHAINS.lock().unwrap_or_else(PoisonError::into_inner);
    let chains = table.get_or_insert_with(WeakTable::default);
    if let Some(held) = chains.get(&hash)
        && held.iter().map(AsRef::as_ref).eq(chain.iter().map(AsRef::<[u8]>::as_ref))
    {
        return held;
    }
    let owned = Arc::new(chain.iter().map(|c| c.clone().into_owned()).collect::<Vec<_>>());
    // A chain whose hash another chain has is kept apart, not shared: the table points at the
    // newest.
    chains.insert(hash, &owned);
    owned
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(leaf: &[u8]) -> Vec<CertificateDer<'static>> {
        vec![CertificateDer::from(leaf.to_vec()), CertificateDer::from(b"ca".to_vec())]
    }

    #[test]
    fn connections_presenting_one_chain_share_one_copy() {
        let first = shared_chain(&chain(b"shared leaf"));
        let second = shared_chain(&chain(b"shared leaf"));
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(*first, chain(b"shared leaf"));
        let other = shared_chain(&chain(b"another leaf"));
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(*other, chain(b"another leaf"));
        assert!(shared_chain(&[]).is_empty());
    }

    #[test]
    fn a_chain_no_connection_holds_is_let_go() {
        let held = shared_chain(&chain(b"let go"));
        let weak = Arc::downgrade(&held);
        drop(held);
        assert!(weak.upgrade().is_none());
        assert_eq!(*shared_chain(&chain(b"let go")), chain(b"let go"));
        for i in 0..1000 {
            drop(shared_chain(&chain(format!("gone {i}").as_bytes())));
        }
        let table = CHAINS.lock().unwrap();
        assert!(table.as_ref().unwrap().len() <= 128, "swept: {}", table.as_ref().unwrap().len());
    }
}
