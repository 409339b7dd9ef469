//! Authentication and authorization: who a request comes from and whether they may make it.
//!
//! Owns the authenticators (front proxy, client certificates, bearer tokens by TokenReview),
//! the authorizers (the delegating chain and SubjectAccessReview) with their caches, and the
//! parsing of the cluster's authentication ConfigMap. Must not touch storage, definitions or
//! request bodies, nor the network: it sees only headers, the TLS peer certificates and
//! request attributes, and asks the main apiserver through the traits in `review`.

pub mod authz;
pub mod cluster_config;
pub mod impersonation;
pub mod requestheader;
pub mod review;
pub mod sar;
pub mod sources;
pub mod token;
pub mod ttl_cache;
pub mod verified;
pub mod x509;

use std::future::Future;
use std::pin::Pin;

use http::HeaderMap;
use rustls_pki_types::CertificateDer;

use crate::core::user::UserInfo;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What authenticators look at.
pub struct Credentials<'a> {
    pub headers: &'a HeaderMap,
    /// The TLS peer's certificate chain, leaf first (empty without a client certificate).
    pub peer_certificates: &'a [CertificateDer<'static>],
}

/// Why presented credentials were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthnError(pub String);

/// Turns credentials into a user. `Ok(None)` means "these are not my kind of credentials".
pub trait Authenticator: Send + Sync {
    fn authenticate<'a>(
        &'a self,
        credentials: &'a Credentials<'a>,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, AuthnError>>;
}

/// The outcome of authentication over a chain of authenticators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authenticated {
    User(UserInfo),
    /// No credentials of any kind were presented.
    Anonymous,
    /// Credentials were presented and refused.
    Refused(Vec<String>),
}

/// Authenticators tried in order, as k8s.io/apiserver's union authenticator tries them: the
/// first success wins; if none succeeds and one failed, the request is refused.
pub struct Chain {
    authenticators: Vec<Box<dyn Authenticator>>,
}

impl Chain {
    pub fn new(authenticators: Vec<Box<dyn Authenticator>>) -> Chain {
        Chain { authenticators }
    }

    pub async fn authenticate(&self, credentials: &Credentials<'_>) -> Authenticated {
        let mut errors = Vec::new();
        for authenticator in &self.authenticators {
            match authenticator.authenticate(credentials).await {
                Ok(Some(user)) => return Authenticated::User(user.with_authenticated_group()),
                Ok(None) => {}
                Err(e) => errors.push(e.0),
            }
        }
        if errors.is_empty() { Authenticated::Anonymous } else { Authenticated::Refused(errors) }
    }
}
