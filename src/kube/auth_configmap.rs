//! The `kube-system/extension-apiserver-authentication` ConfigMap: read once at start (its
//! failure is reported so the caller can stop), then watched, with a re-read at least every
//! minute, feeding every change into the live authentication settings.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ::kube::api::{Api, WatchEvent, WatchParams};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;

use super::{describe, status_code};
use crate::auth::cluster_config::{ClusterAuthentication, NAME, NAMESPACE, READER_ROLE};
use crate::auth::sources::AuthenticationSources;

/// How long one watch lasts before the ConfigMap is read again.
const RECHECK: Duration = Duration::from_secs(60);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The first read failed.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error(
        "cannot read configmap/{NAME} in {NAMESPACE}: {message}. The server's service account needs a RoleBinding \
         in {NAMESPACE} to the Role {READER_ROLE}, for example: kubectl create rolebinding -n {NAMESPACE} \
         crd-apiserver:{READER_ROLE} --role={READER_ROLE} --serviceaccount=<namespace>:<serviceaccount> \
         (or start with --authentication-tolerate-lookup-failure to run without it)"
    )]
    Forbidden { message: String },
    #[error(
        "cannot read configmap/{NAME} in {NAMESPACE}: {message} \
         (start with --authentication-tolerate-lookup-failure to run without it)"
    )]
    Unreachable { message: String },
}

fn api(client: ::kube::Client) -> Api<ConfigMap> {
    Api::namespaced(client, NAMESPACE)
}

/// Reads the ConfigMap: its data and resourceVersion (a missing ConfigMap is empty data).
async fn read(api: &Api<ConfigMap>) -> Result<(BTreeMap<String, String>, String), LookupError> {
    match api.get_opt(NAME).await {
        Ok(Some(map)) => Ok((map.data.unwrap_or_default(), map.metadata.resource_version.unwrap_or_default())),
        Ok(None) => Ok((BTreeMap::new(), String::new())),
        Err(e) if status_code(&e) == Some(403) => Err(LookupError::Forbidden { message: describe(&e) }),
        Err(e) => Err(LookupError::Unreachable { message: describe(&e) }),
    }
}

fn apply(sources: &AuthenticationSources, data: &BTreeMap<String, String>) {
    match ClusterAuthentication::parse(data) {
        Ok(cluster) => {
            for setting in sources.apply(&cluster) {
                tracing::info!(setting, "authentication settings from configmap/{NAME} in {NAMESPACE} changed");
            }
        }
        Err(e) => tracing::warn!(error = %e, "keeping the previous authentication settings"),
    }
}

/// Reads the ConfigMap once and applies it; returns the resourceVersion to watch from.
pub async fn load(client: ::kube::Client, sources: &AuthenticationSources) -> Result<String, LookupError> {
    let (data, version) = read(&api(client)).await?;
    if data.is_empty() {
        tracing::warn!("configmap/{NAME} in {NAMESPACE} is missing or empty: no front-proxy or cluster client CA");
    }
    apply(sources, &data);
    Ok(version)
}

/// Follows the ConfigMap forever: watches from `version`, and reads it again whenever a
/// watch ends (at least every minute) or fails (with backoff).
pub async fn follow(client: ::kube::Client, sources: Arc<AuthenticationSources>, mut version: String) {
    let api = api(client);
    let mut backoff = Duration::from_secs(1);
    loop {
        if !version.is_empty() {
            match watch(&api, &sources, &mut version).await {
                Ok(()) => backoff = Duration::from_secs(1),
                Err(message) => tracing::debug!(error = %message, "watch of configmap/{NAME} ended"),
            }
        }
        match read(&api).await {
            Ok((data, v)) => {
                apply(&sources, &data);
                version = if v.is_empty() { "0".to_string() } else { v };
                if version == "0" {
                    // Nothing to watch from yet: look again later.
                    tokio::time::sleep(RECHECK).await;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "re-reading the authentication configmap failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

async fn watch(api: &Api<ConfigMap>, sources: &AuthenticationSources, version: &mut String) -> Result<(), String> {
    let params = WatchParams::default().fields(&format!("metadata.name={NAME}")).timeout(RECHECK.as_secs() as u32);
    let stream = api.watch(&params, version).await.map_err(|e| describe(&e))?;
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event.map_err(|e| describe(&e))? {
            WatchEvent::Added(map) | WatchEvent::Modified(map) => {
                apply(sources, &map.data.unwrap_or_default());
                if let Some(v) = map.metadata.resource_version {
                    *version = v;
                }
            }
            WatchEvent::Deleted(map) => {
                apply(sources, &BTreeMap::new());
                if let Some(v) = map.metadata.resource_version {
                    *version = v;
                }
            }
            WatchEvent::Bookmark(mark) => *version = mark.metadata.resource_version,
            WatchEvent::Error(status) => return Err(status.message),
        }
    }
    Ok(())
}
