//! Client certificate authentication: the peer's chain must verify against a CA bundle for
//! client authentication; the user is the leaf's CN, the groups its O values.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls_pki_types::{CertificateDer, UnixTime};
use webpki::{EndEntityCert, KeyUsage};

use super::verified::VerifiedChains;
use super::{Authenticator, AuthnError, BoxFuture, Credentials};
use crate::core::user::UserInfo;

/// A CA bundle, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaBundle {
    certificates: Vec<CertificateDer<'static>>,
}

impl CaBundle {
    /// Parses PEM text holding one or more CA certificates.
    pub fn from_pem(pem: &[u8]) -> Result<CaBundle, String> {
        use rustls_pki_types::pem::PemObject;
        let certificates: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(pem).collect::<Result<_, _>>().map_err(|e| format!("invalid PEM: {e}"))?;
        if certificates.is_empty() {
            return Err("no certificates found".into());
        }
        for cert in &certificates {
            webpki::anchor_from_trusted_cert(cert).map_err(|e| format!("unusable CA certificate: {e:?}"))?;
        }
        Ok(CaBundle { certificates })
    }

    pub fn is_empty(&self) -> bool {
        self.certificates.is_empty()
    }

    /// Verifies a client chain (leaf first) for client authentication, now.
    pub fn verify_client(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let (leaf, intermediates) = chain.split_first().ok_or("no client certificate")?;
        let anchors: Vec<_> =
            self.certificates.iter().filter_map(|c| webpki::anchor_from_trusted_cert(c).ok()).collect();
        let cert = EndEntityCert::try_from(leaf).map_err(|e| format!("x509: {e:?}"))?;
        let now = UnixTime::now();
        cert.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            intermediates,
            now,
            KeyUsage::client_auth(),
            None,
            None,
        )
        .map(|_| ())
        .map_err(|e| match e {
            webpki::Error::UnknownIssuer => "x509: certificate signed by unknown authority".to_string(),
            // An authority of the same name that did not sign it (a rotated CA, say).
            webpki::Error::InvalidSignatureForPublicKey => {
                "x509: certificate signed by unknown authority (possibly because the candidate authority's signature \
                 does not verify)"
                    .to_string()
            }
            webpki::Error::CertExpired { .. } => "x509: certificate has expired or is not yet valid".to_string(),
            webpki::Error::CertNotValidYet { .. } => "x509: certificate has expired or is not yet valid".to_string(),
            other => format!("x509: {other:?}"),
        })
    }
}

/// The subject of a certificate: CN and every O.
pub fn subject(cert: &CertificateDer<'_>) -> Result<(String, Vec<String>), String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert).map_err(|e| format!("x509: {e}"))?;
    let subject = parsed.subject();
    let cn = subject.iter_common_name().next().and_then(|a| a.as_str().ok()).unwrap_or_default().to_string();
    let orgs = subject.iter_organization().filter_map(|a| a.as_str().ok()).map(str::to_string).collect();
    Ok((cn, orgs))
}

/// The SHA-256 fingerprint of a certificate, as `credential-id` extra values carry it.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, cert);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Authenticates by client certificate against `--client-ca-file` (or the cluster's client
/// CA).
pub struct ClientCertAuthenticator {
    ca: Arc<ArcSwap<CaBundle>>,
    /// Verified chains, with the leaf's subject and SHA-256 fingerprint.
    verified: VerifiedChains<CaBundle, ((String, Vec<String>), String)>,
}

impl ClientCertAuthenticator {
    pub fn new(ca: Arc<ArcSwap<CaBundle>>) -> ClientCertAuthenticator {
        ClientCertAuthenticator { ca, verified: VerifiedChains::default() }
    }
}

impl Authenticator for ClientCertAuthenticator {
    fn authenticate<'a>(
        &'a self,
        credentials: &'a Credentials<'a>,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, AuthnError>> {
        Box::pin(async move {
            let Some(leaf) = credentials.peer_certificates.first() else {
                return Ok(None);
            };
            let ca = self.ca.load_full();
            if ca.is_empty() {
                return Ok(None);
            }
            let chain = credentials.peer_certificates;
            let ((name, groups), fingerprint) = self
                .verified
                .check(&ca, chain, || {
                    ca.verify_client(chain)?;
                    Ok((subject(leaf)?, fingerprint(leaf)))
                })
                .map_err(AuthnError)?;
            let mut user = UserInfo::new(name, groups);
            user.extra
                .insert("authentication.kubernetes.io/credential-id".into(), vec![format!("X509SHA256={fingerprint}")]);
            Ok(Some(user))
        })
    }
}
