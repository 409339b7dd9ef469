//! The flags of delegated authentication and authorization, named as k8s.io/apiserver's
//! `DelegatingAuthenticationOptions`, `RequestHeaderAuthenticationOptions` and
//! `DelegatingAuthorizationOptions` name them.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args};

use super::parse_duration;

#[derive(Debug, Clone, Args)]
pub struct AuthFlags {
    /// CA bundle that signs the front proxy's client certificate (the aggregator's
    /// requestheader CA). When not given, the front-proxy settings come from the cluster's
    /// kube-system/extension-apiserver-authentication ConfigMap, and follow its changes.
    #[arg(long)]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// Common names the front proxy's certificate may have (empty: any certificate signed by
    /// the requestheader CA).
    #[arg(long, value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,
    /// Headers naming the user, first non-empty wins.
    #[arg(long, value_delimiter = ',', default_value = "x-remote-user")]
    pub requestheader_username_headers: Vec<String>,
    /// Headers naming the user's UID, first non-empty wins.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_uid_headers: Vec<String>,
    /// Headers naming the user's groups (every value of every header).
    #[arg(long, value_delimiter = ',', default_value = "x-remote-group")]
    pub requestheader_group_headers: Vec<String>,
    /// Header name prefixes carrying extra user information.
    #[arg(long, value_delimiter = ',', default_value = "x-remote-extra-")]
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// kubeconfig of the main apiserver for TokenReview and the authentication ConfigMap
    /// (default: --kubeconfig, else the in-cluster service account).
    #[arg(long)]
    pub authentication_kubeconfig: Option<PathBuf>,
    /// kubeconfig of the main apiserver for SubjectAccessReview (default: --kubeconfig, else
    /// the in-cluster service account).
    #[arg(long)]
    pub authorization_kubeconfig: Option<PathBuf>,
    /// kubeconfig of the main apiserver for everything else (Namespaces).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Start even when the authentication ConfigMap cannot be read (front-proxy and cluster
    /// client-CA authentication then wait until it can).
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true", action = ArgAction::Set)]
    pub authentication_tolerate_lookup_failure: bool,
    /// Never read the authentication ConfigMap.
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true", action = ArgAction::Set)]
    pub authentication_skip_lookup: bool,
    /// How long TokenReview answers are remembered.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// How long allowed SubjectAccessReview answers are remembered.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// How long denied SubjectAccessReview answers are remembered.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
}
