//! One pass of kube-controller-manager's namespace controller over a Terminating namespace,
//! for the backend's resources: discover the namespaced resources that can be deleted (from
//! aggregated discovery), delete each collection (falling back to listing and deleting one by
//! one on 404/405), list again, and finalize the namespace when nothing is left.

use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;

use super::aggregator::{self, Backend, Caller};
use super::discovery;
use super::rbac::{NAMESPACE_CONTROLLER, User};
use super::respond;
use super::state::{State, lock};

/// The controller's identity, as the aggregator passes it on.
fn controller() -> User {
    User::new(
        NAMESPACE_CONTROLLER,
        &["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
    )
}

async fn call(
    state: &State,
    backend: &Backend,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(u16, Value), String> {
    let mut request = http::Request::builder().method(method).uri(path).header("accept", "application/json");
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let (parts, ()) = request.body(()).map_err(|e| e.to_string())?.into_parts();
    let body = respond::full(Bytes::from(body.unwrap_or_default().to_string()));
    let user = controller();
    let response = aggregator::forward(state, backend, &parts, body, Caller { user: &user, remote: None }).await?;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, serde_json::from_slice(&bytes).unwrap_or_default()))
}

/// The collection paths of every deletable namespaced resource in `namespace`.
fn collections(groups: &[Value], namespace: &str) -> Vec<String> {
    let mut out = Vec::new();
    for group in groups {
        let name = group["metadata"]["name"].as_str().unwrap_or_default();
        // The first version listed is the preferred one.
        let Some(version) = group["versions"].as_array().and_then(|v| v.first()) else { continue };
        for resource in version["resources"].as_array().cloned().unwrap_or_default() {
            let verbs: Vec<&str> =
                resource["verbs"].as_array().map(|v| v.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            if resource["scope"] == "Namespaced" && verbs.contains(&"delete") {
                out.push(format!(
                    "/apis/{name}/{}/namespaces/{namespace}/{}",
                    version["version"].as_str().unwrap_or_default(),
                    resource["resource"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    out
}

/// Runs one pass; returns how many objects remain (0: the namespace was finalized).
pub async fn run(state: &State, backend: &Backend, namespace: &str) -> Result<usize, String> {
    let services = lock(&state.services).clone();
    let groups = discovery::backend_groups(state, backend, &services).await;
    if groups.is_empty() && !services.is_empty() {
        return Err("NamespaceDeletionDiscoveryFailure: discovery of the aggregated groups failed".into());
    }
    let paths = collections(&groups, namespace);
    for path in &paths {
        let (status, _) = call(state, backend, "DELETE", path, Some(r#"{"propagationPolicy":"Background"}"#)).await?;
        if status == 404 || status == 405 {
            let (_, list) = call(state, backend, "GET", path, None).await?;
            for item in list["items"].as_array().cloned().unwrap_or_default() {
                let name = item["metadata"]["name"].as_str().unwrap_or_default();
                call(state, backend, "DELETE", &format!("{path}/{name}"), None).await?;
            }
        } else if !(200..300).contains(&status) {
            return Err(format!("NamespaceDeletionContentFailure: DELETE {path} answered {status}"));
        }
    }
    let mut remaining = 0;
    for path in &paths {
        let (_, list) = call(state, backend, "GET", path, None).await?;
        remaining += list["items"].as_array().map(Vec::len).unwrap_or_default();
    }
    if remaining == 0 {
        state.finalize_namespace(namespace);
    }
    Ok(remaining)
}
