//! Client of the main apiserver (kube-rs): the authentication ConfigMap (read, then
//! watched), SubjectAccessReview and TokenReview (answering `auth::review`'s questions), and a
//! cache of Namespaces (states and labels), and list+watch of whole kinds (`follow`: the
//! admission configurations), ResourceQuotas for quota admission (`quotas`), and the params
//! of admission policies (`params`), and the CustomResourceDefinitions the server is told to
//! serve (`cluster_definitions`).
//!
//! Owns connections to kube-apiserver and nothing else: it decides nothing about requests
//! (that is `auth`), serves nothing (that is `server`/`api`), and never touches storage.

pub mod auth_configmap;
pub mod cluster_definitions;
pub mod follow;
pub mod namespaces;
pub mod params;
pub mod quotas;
pub mod reviews;

use std::path::Path;

/// Why the main apiserver could not be reached or answered unusably.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("in-cluster configuration: {0}")]
    InCluster(String),
    #[error("creating the client: {0}")]
    Client(String),
    #[error("{0}")]
    Request(String),
}

/// Whether this process runs in a pod (the service account's environment is present).
pub fn in_cluster() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some_and(|v| !v.is_empty())
}

/// A client from a kubeconfig file, or from the in-cluster service account when no file is
/// given; `None` when neither is available.
pub async fn connect(kubeconfig: Option<&Path>) -> Result<Option<::kube::Client>, Error> {
    let config = match kubeconfig {
        Some(path) => {
            let fail = |message: String| Error::Kubeconfig { path: path.display().to_string(), message };
            let file = ::kube::config::Kubeconfig::read_from(path).map_err(|e| fail(e.to_string()))?;
            ::kube::Config::from_custom_kubeconfig(file, &::kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| fail(e.to_string()))?
        }
        None if in_cluster() => ::kube::Config::incluster().map_err(|e| Error::InCluster(e.to_string()))?,
        None => return Ok(None),
    };
    ::kube::Client::try_from(config).map(Some).map_err(|e| Error::Client(e.to_string()))
}

/// The text of a failed call: the Status message when the apiserver answered one.
pub fn describe(error: &::kube::Error) -> String {
    match error {
        ::kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// The HTTP code of a failed call, when the apiserver answered.
pub fn status_code(error: &::kube::Error) -> Option<u16> {
    match error {
        ::kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}
