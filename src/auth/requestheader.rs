//! Front-proxy authentication (k8s.io/apiserver's requestheader authenticator): a client
//! whose certificate chains to the requestheader CA (for client authentication) and whose CN
//! is an allowed name vouches for a user named in headers.
//!
//! Identity headers are read only here, and only after the proxy's certificate verified; the
//! authentication filter removes them from every request afterwards.

use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use http::HeaderMap;

use super::verified::{Subject, VerifiedChains};
use super::x509::{CaBundle, subject};
use super::{Authenticator, AuthnError, BoxFuture, Credentials};
use crate::core::user::UserInfo;

/// Header names when neither flags nor the cluster say otherwise.
pub const DEFAULT_USERNAME_HEADERS: &[&str] = &["x-remote-user"];
pub const DEFAULT_GROUP_HEADERS: &[&str] = &["x-remote-group"];
pub const DEFAULT_EXTRA_PREFIXES: &[&str] = &["x-remote-extra-"];

/// Everything the front-proxy authenticator trusts; swapped whole when the
/// `extension-apiserver-authentication` ConfigMap changes. An empty CA disables it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    pub ca: CaBundle,
    /// CNs the proxy certificate may have; empty accepts any certificate from the CA.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

impl RequestHeaderConfig {
    /// Every header name and prefix this configuration reads (lower-cased), so that they can
    /// be removed after authentication.
    pub fn header_names(&self) -> impl Iterator<Item = String> + '_ {
        self.username_headers
            .iter()
            .chain(&self.uid_headers)
            .chain(&self.group_headers)
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty())
    }

    pub fn prefixes(&self) -> impl Iterator<Item = String> + '_ {
        self.extra_prefixes.iter().map(|p| p.trim().to_ascii_lowercase()).filter(|p| !p.is_empty())
    }
}

/// The configuration as the authenticator and the header-stripping filter share it.
pub type SharedRequestHeaderConfig = Arc<ArcSwap<RequestHeaderConfig>>;

pub struct RequestHeaderAuthenticator {
    config: SharedRequestHeaderConfig,
    verified: VerifiedChains<RequestHeaderConfig>,
}

impl RequestHeaderAuthenticator {
    pub fn new(config: SharedRequestHeaderConfig) -> RequestHeaderAuthenticator {
        RequestHeaderAuthenticator { config, verified: VerifiedChains::default() }
    }
}

impl Authenticator for RequestHeaderAuthenticator {
    fn authenticate<'a>(
        &'a self,
        credentials: &'a Credentials<'a>,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, AuthnError>> {
        Box::pin(async move {
            let config = self.config.load_full();
            let chain = credentials.peer_certificates;
            authenticate(&config, credentials, || self.verified.check(&config, chain, || verify(&config, chain)))
        })
    }
}

/// Verifies a proxy's chain against the requestheader CA; returns the leaf's subject.
fn verify(
    config: &RequestHeaderConfig,
    chain: &[rustls_pki_types::CertificateDer<'static>],
) -> Result<Subject, String> {
    config.ca.verify_client(chain)?;
    subject(chain.first().ok_or("no client certificate")?)
}

/// Authenticates with `verified` answering for the chain (remembered or checked now).
fn authenticate(
    config: &RequestHeaderConfig,
    credentials: &Credentials<'_>,
    verified: impl FnOnce() -> Result<Subject, String>,
) -> Result<Option<UserInfo>, AuthnError> {
    if credentials.peer_certificates.is_empty() || config.ca.is_empty() {
        return Ok(None);
    }
    let (common_name, _) = verified().map_err(AuthnError)?;
    if !config.allowed_names.is_empty() && !config.allowed_names.contains(&common_name) {
        return Err(AuthnError(format!("x509: subject with cn={common_name} is not in the allowed list")));
    }
    let headers = credentials.headers;
    let Some(name) = first_value(headers, &config.username_headers) else {
        // A verified proxy that names nobody: not this authenticator's request.
        return Ok(None);
    };
    Ok(Some(UserInfo {
        name,
        uid: first_value(headers, &config.uid_headers).unwrap_or_default(),
        groups: all_values(headers, &config.group_headers),
        extra: extra(headers, &config.extra_prefixes),
    }))
}

fn text(value: &http::HeaderValue) -> String {
    String::from_utf8_lossy(value.as_bytes()).into_owned()
}

/// The first non-empty value among the headers, in the order the headers are configured.
fn first_value(headers: &HeaderMap, names: &[String]) -> Option<String> {
    names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .filter_map(|n| headers.get(n.to_ascii_lowercase().as_str()))
        .map(text)
        .find(|v| !v.is_empty())
}

/// Every non-empty value of every header: one group per header line, never split on commas.
fn all_values(headers: &HeaderMap, names: &[String]) -> Vec<String> {
    names
        .iter()
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .flat_map(|n| headers.get_all(n.as_str()).iter().map(text).collect::<Vec<_>>())
        .filter(|v| !v.is_empty())
        .collect()
}

/// Extra values from prefixed headers: the key is the rest of the header name, lower-cased,
/// then percent-decoded (kept as it is when it does not decode).
fn extra(headers: &HeaderMap, prefixes: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let prefixes: Vec<String> =
        prefixes.iter().map(|p| p.trim().to_ascii_lowercase()).filter(|p| !p.is_empty()).collect();
    for name in headers.keys() {
        for prefix in &prefixes {
            let Some(rest) = name.as_str().strip_prefix(prefix.as_str()) else {
                continue;
            };
            let key = path_unescape(rest).unwrap_or_else(|| rest.to_string());
            extra.entry(key).or_default().extend(headers.get_all(name).iter().map(text));
        }
    }
    extra
}

/// Decodes `%XX` escapes as Go's `url.PathUnescape` does: a malformed escape or a result that
/// is not UTF-8 fails the whole key.
pub fn path_unescape(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let high = bytes.get(i + 1).and_then(|c| (*c as char).to_digit(16))?;
            let low = bytes.get(i + 2).and_then(|c| (*c as char).to_digit(16))?;
            out.push((high * 16 + low) as u8);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests;
