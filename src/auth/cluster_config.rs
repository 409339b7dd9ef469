//! The authentication settings kube-apiserver publishes in the
//! `kube-system/extension-apiserver-authentication` ConfigMap, parsed, and merged with the
//! settings given on the command line (a flag wins over the cluster for what it sets).

use std::collections::BTreeMap;

use super::requestheader::RequestHeaderConfig;
use super::x509::CaBundle;

pub const NAMESPACE: &str = "kube-system";
pub const NAME: &str = "extension-apiserver-authentication";
/// The Role in kube-system that grants reading the ConfigMap.
pub const READER_ROLE: &str = "extension-apiserver-authentication-reader";

const CLIENT_CA: &str = "client-ca-file";
const REQUESTHEADER_CA: &str = "requestheader-client-ca-file";
const ALLOWED_NAMES: &str = "requestheader-allowed-names";
const USERNAME_HEADERS: &str = "requestheader-username-headers";
const UID_HEADERS: &str = "requestheader-uid-headers";
const GROUP_HEADERS: &str = "requestheader-group-headers";
const EXTRA_PREFIXES: &str = "requestheader-extra-headers-prefix";

/// A ConfigMap whose contents cannot be used; the previous settings stay in force.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("configmap/{NAME} in {NAMESPACE}: {key}: {message}")]
pub struct Invalid {
    pub key: &'static str,
    pub message: String,
}

/// What the cluster says, parsed.
#[derive(Debug, Clone, Default)]
pub struct ClusterAuthentication {
    /// The CA of client certificates (empty when the key is missing).
    pub client_ca: CaBundle,
    /// The front-proxy settings (a default, disabled, configuration when the cluster has no
    /// requestheader CA).
    pub request_header: RequestHeaderConfig,
}

/// A list key: a JSON array of strings; an empty string or `null` is an empty list.
fn list(data: &BTreeMap<String, String>, key: &'static str) -> Result<Vec<String>, Invalid> {
    let text = data.get(key).map(|s| s.trim()).unwrap_or_default();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let parsed: Option<Vec<String>> =
        serde_json::from_str(text).map_err(|e| Invalid { key, message: format!("not a JSON list of strings: {e}") })?;
    Ok(parsed.unwrap_or_default())
}

fn bundle(data: &BTreeMap<String, String>, key: &'static str) -> Result<CaBundle, Invalid> {
    match data.get(key).map(|s| s.trim()) {
        None | Some("") => Ok(CaBundle::default()),
        Some(pem) => CaBundle::from_pem(pem.as_bytes()).map_err(|message| Invalid { key, message }),
    }
}

impl ClusterAuthentication {
    /// Parses the ConfigMap's data (a missing ConfigMap is empty data).
    pub fn parse(data: &BTreeMap<String, String>) -> Result<ClusterAuthentication, Invalid> {
        let client_ca = bundle(data, CLIENT_CA)?;
        let ca = bundle(data, REQUESTHEADER_CA)?;
        let request_header = if ca.is_empty() {
            RequestHeaderConfig::default()
        } else {
            RequestHeaderConfig {
                ca,
                allowed_names: list(data, ALLOWED_NAMES)?,
                username_headers: list(data, USERNAME_HEADERS)?,
                uid_headers: list(data, UID_HEADERS)?,
                group_headers: list(data, GROUP_HEADERS)?,
                extra_prefixes: list(data, EXTRA_PREFIXES)?,
            }
        };
        Ok(ClusterAuthentication { client_ca, request_header })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::pki::Authority;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parses_what_kube_apiserver_writes() {
        let client = Authority::new("client-ca").unwrap();
        let proxy = Authority::new("proxy-ca").unwrap();
        let parsed = ClusterAuthentication::parse(&data(&[
            (CLIENT_CA, &client.pem.cert),
            (REQUESTHEADER_CA, &proxy.pem.cert),
            (ALLOWED_NAMES, r#"["front-proxy-client"]"#),
            (USERNAME_HEADERS, r#"["X-Remote-User"]"#),
            (GROUP_HEADERS, r#"["X-Remote-Group"]"#),
            (EXTRA_PREFIXES, r#"["X-Remote-Extra-"]"#),
            (UID_HEADERS, "null"),
        ]))
        .unwrap();
        assert!(!parsed.client_ca.is_empty());
        let rh = parsed.request_header;
        assert!(!rh.ca.is_empty());
        assert_eq!(rh.allowed_names, vec!["front-proxy-client".to_string()]);
        assert_eq!(rh.username_headers, vec!["X-Remote-User".to_string()]);
        assert!(rh.uid_headers.is_empty());
        assert_eq!(rh.extra_prefixes, vec!["X-Remote-Extra-".to_string()]);
    }

    #[test]
    fn missing_keys_disable_and_bad_values_are_reported() {
        let empty = ClusterAuthentication::parse(&BTreeMap::new()).unwrap();
        assert!(empty.client_ca.is_empty() && empty.request_header.ca.is_empty());
        let proxy = Authority::new("proxy-ca").unwrap();
        let err =
            ClusterAuthentication::parse(&data(&[(REQUESTHEADER_CA, &proxy.pem.cert), (ALLOWED_NAMES, "front-proxy")]))
                .unwrap_err();
        assert_eq!(err.key, ALLOWED_NAMES);
        let err = ClusterAuthentication::parse(&data(&[(CLIENT_CA, "garbage")])).unwrap_err();
        assert_eq!(err.key, CLIENT_CA);
        let allowed_empty =
            ClusterAuthentication::parse(&data(&[(REQUESTHEADER_CA, &proxy.pem.cert), (ALLOWED_NAMES, "")])).unwrap();
        assert!(allowed_empty.request_header.allowed_names.is_empty());
    }
}
