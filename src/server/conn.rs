//! What the server knows of a connection, attached to every request on it.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls_pki_types::CertificateDer;

use super::activity::Activity;

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
