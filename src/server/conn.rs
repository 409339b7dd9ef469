//! What the server knows of a connection, attached to every request on it.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls_pki_types::CertificateDer;

#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub remote: SocketAddr,
    /// The TLS peer's certificate chain, leaf first.
    pub peer_certificates: Arc<Vec<CertificateDer<'static>>>,
}
