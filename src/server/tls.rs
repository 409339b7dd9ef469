//! TLS for the secure port: the serving certificate (reloadable), ALPN `h2` and `http/1.1`,
//! and a client certificate that is requested but never required. Client chains are verified
//! later, by each authenticator against its own CA (the client CA and the front-proxy CA
//! differ), as Kubernetes does.

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

/// Errors loading the serving certificate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}: {message}")]
    Read { path: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::Read { path: path.display().to_string(), message: e.to_string() })
}

/// Loads a certificate chain and its key from PEM files.
pub fn load_certified_key(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, Error> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(cert)?)
        .collect::<Result<_, _>>()
        .map_err(|e| Error::Invalid(format!("{}: {e}", cert.display())))?;
    if chain.is_empty() {
        return Err(Error::Invalid(format!("{}: no certificate found", cert.display())));
    }
    let key =
        PrivateKeyDer::from_pem_slice(&read(key)?).map_err(|e| Error::Invalid(format!("{}: {e}", key.display())))?;
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| Error::Invalid(format!("unusable private key: {e}")))?;
    Ok(CertifiedKey::new(chain, signing_key))
}

/// The serving certificate, swappable while serving.
#[derive(Debug)]
pub struct ServingCert(pub ArcSwap<CertifiedKey>);

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

/// Requests a client certificate, accepts any at the handshake (checking only that the peer
/// holds its key), and leaves chain verification to the authenticators.
#[derive(Debug)]
struct RequestClientCert {
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // No hints: Go clients then send their certificate whatever CA issued it.
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// The crypto provider: ring only.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The server's TLS configuration.
pub fn server_config(serving: Arc<ServingCert>, provider: Arc<CryptoProvider>) -> Result<ServerConfig, Error> {
    let verifier = Arc::new(RequestClientCert { provider: provider.clone() });
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Invalid(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(serving);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
