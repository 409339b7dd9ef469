//! Where the live authentication settings come from: fixed by flags, or followed from the
//! cluster's ConfigMap. Holds the shared, swappable CA bundles the authenticators read, so a
//! rotated CA or changed allowed names take effect on the next request, without a restart.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::cluster_config::ClusterAuthentication;
use super::requestheader::{RequestHeaderConfig, SharedRequestHeaderConfig};
use super::x509::CaBundle;

pub struct AuthenticationSources {
    pub client_ca: Arc<ArcSwap<CaBundle>>,
    pub request_header: SharedRequestHeaderConfig,
    client_ca_pinned: bool,
    request_header_pinned: bool,
}

impl AuthenticationSources {
    /// `client_ca` and `request_header` are the settings given by flags, if any; what is not
    /// given is taken from the cluster.
    pub fn new(client_ca: Option<CaBundle>, request_header: Option<RequestHeaderConfig>) -> Self {
        AuthenticationSources {
            client_ca_pinned: client_ca.is_some(),
            request_header_pinned: request_header.is_some(),
            client_ca: Arc::new(ArcSwap::from_pointee(client_ca.unwrap_or_default())),
            request_header: Arc::new(ArcSwap::from_pointee(request_header.unwrap_or_default())),
        }
    }

    /// Whether anything is left for the cluster to provide.
    pub fn wants_cluster(&self) -> bool {
        !(self.client_ca_pinned && self.request_header_pinned)
    }

    /// Takes what the cluster says for the settings flags did not fix. Returns the names of
    /// the settings that changed.
    pub fn apply(&self, cluster: &ClusterAuthentication) -> Vec<&'static str> {
        let mut changed = Vec::new();
        if !self.client_ca_pinned && **self.client_ca.load() != cluster.client_ca {
            self.client_ca.store(Arc::new(cluster.client_ca.clone()));
            changed.push("client-ca");
        }
        if !self.request_header_pinned && **self.request_header.load() != cluster.request_header {
            self.request_header.store(Arc::new(cluster.request_header.clone()));
            changed.push("requestheader");
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::pki::Authority;

    #[test]
    fn flags_win_and_the_cluster_fills_in() {
        let a = CaBundle::from_pem(Authority::new("a").unwrap().pem.cert.as_bytes()).unwrap();
        let b = CaBundle::from_pem(Authority::new("b").unwrap().pem.cert.as_bytes()).unwrap();
        let sources = AuthenticationSources::new(Some(a.clone()), None);
        assert!(sources.wants_cluster());
        let cluster = ClusterAuthentication {
            client_ca: b.clone(),
            request_header: RequestHeaderConfig {
                ca: b.clone(),
                allowed_names: vec!["p".into()],
                ..RequestHeaderConfig::default()
            },
        };
        assert_eq!(sources.apply(&cluster), vec!["requestheader"]);
        assert_eq!(**sources.client_ca.load(), a);
        assert_eq!(sources.request_header.load().allowed_names, vec!["p".to_string()]);
        assert!(sources.apply(&cluster).is_empty(), "nothing changed the second time");
        assert!(!AuthenticationSources::new(Some(a), Some(RequestHeaderConfig::default())).wants_cluster());
    }
}
