//! Step (c) of a takeover: the APIService of every served version (`<version>.<group>`)
//! switched to our Service with its `caBundle`, in one update that also removes
//! `kube-aggregator.kubernetes.io/automanaged` (kube-aggregator's autoregister controller
//! manages an APIService it made for a CRD only while that label is there: without it, the
//! user has taken over its management); then waiting until each is Available and a list
//! through the main apiserver reaches us. Rolling back, and handing back, restore the local
//! APIService with the label, which kube-aggregator manages again.

use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use super::cluster::{Cluster, object_path};
use super::{Error, json};
use crate::definitions::Definition;
use crate::store::Revision;

/// kube-aggregator's autoregister label (`onstart` or `true`).
pub const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// Our Service, as APIServices name it.
#[derive(Debug, Clone)]
pub struct Target {
    pub namespace: String,
    pub name: String,
    pub port: u16,
    /// The CA bundle (PEM) that signs our serving certificate.
    pub ca_bundle: Vec<u8>,
}

impl Target {
    fn service(&self) -> Value {
        json!({"namespace": self.namespace, "name": self.name, "port": self.port})
    }

    fn is_ours(&self, service: &Value) -> bool {
        json::at(service, "/namespace") == self.namespace.as_str() && json::at(service, "/name") == self.name.as_str()
    }
}

/// The APIService names of the definition's served versions.
pub fn names(definition: &Definition) -> Vec<String> {
    definition.served_versions().map(|v| format!("{}.{}", v.name, definition.group)).collect()
}

fn path(name: &str) -> String {
    object_path("apiregistration.k8s.io", "v1", None, "apiservices", name)
}

/// Where an APIService sends its group version now.
pub enum Pointing {
    /// The main apiserver serves it (no `spec.service`), or it does not exist.
    Local,
    Us,
    Elsewhere(String),
}

/// Where each APIService points, with its current form (`None`: missing).
pub async fn current(
    cluster: &Cluster,
    definition: &Definition,
    target: &Target,
) -> Result<Vec<(String, Option<Value>, Pointing)>, Error> {
    let mut out = Vec::new();
    for name in names(definition) {
        let found = cluster.get("reading the APIService", &path(&name)).await?;
        let pointing = match found.as_ref().map(|s| json::at(s, "/spec/service")) {
            None | Some(Value::Null) => Pointing::Local,
            Some(service) if target.is_ours(service) => Pointing::Us,
            Some(service) => Pointing::Elsewhere(format!(
                "{}/{}",
                json::at(service, "/namespace").as_str().unwrap_or_default(),
                json::at(service, "/name").as_str().unwrap_or_default()
            )),
        };
        out.push((name, found, pointing));
    }
    Ok(out)
}

/// Writes `change` of the APIService named `name` by compare-and-swap, reading it again
/// after a lost race; `create` is what to write when it is missing (`None`: nothing).
async fn edit(
    cluster: &Cluster,
    what: &str,
    name: &str,
    change: impl Fn(&mut Value),
    create: Option<Value>,
) -> Result<(), Error> {
    for _ in 0..10 {
        match cluster.get(what, &path(name)).await? {
            Some(mut service) => {
                change(&mut service);
                if let Some(status) = service.as_object_mut() {
                    status.remove("status");
                }
                match cluster.raw(http::Method::PUT, &path(name), Some(&service)).await? {
                    super::cluster::Answer::Ok(_) => return Ok(()),
                    super::cluster::Answer::Failed { code: 409, .. } => continue,
                    other => return Err(Cluster::failure(what, &path(name), other)),
                }
            }
            None => {
                let Some(mut body) = create.clone() else { return Ok(()) };
                change(&mut body);
                match cluster.create(what, &path(""), &body).await? {
                    super::cluster::Answer::Ok(_) => return Ok(()),
                    super::cluster::Answer::Failed { code: 409, .. } => continue,
                    other => return Err(Cluster::failure(what, &path(""), other)),
                }
            }
        }
    }
    Err(Error::Cluster(format!("{what} {name}: kept losing races to another writer")))
}

fn remove_label(service: &mut Value) {
    if let Some(labels) = service.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.remove(AUTOMANAGED);
    }
}

/// Points every APIService at `target`.
pub async fn switch(cluster: &Cluster, definition: &Definition, target: &Target) -> Result<(), Error> {
    let ca = base64::engine::general_purpose::STANDARD.encode(&target.ca_bundle);
    for (i, version) in definition.served_versions().enumerate() {
        let name = format!("{}.{}", version.name, definition.group);
        let fresh = json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": name},
            "spec": {"group": definition.group, "version": version.name, "groupPriorityMinimum": 1000, "versionPriority": 100 - i},
        });
        let change = |service: &mut Value| {
            remove_label(service);
            json::set(service, &["spec", "service"], target.service());
            json::set(service, &["spec", "caBundle"], json!(ca));
            json::remove(service, &["spec", "insecureSkipTLSVerify"]);
        };
        edit(cluster, "switching the APIService to this server", &name, change, Some(fresh)).await?;
    }
    Ok(())
}

/// Puts every APIService back as `originals` had it (`None`: it did not exist).
pub async fn roll_back(cluster: &Cluster, originals: &[(String, Option<Value>)]) -> Result<(), Error> {
    for (name, original) in originals {
        match original {
            Some(original) => {
                let restore = |service: &mut Value| {
                    json::set(service, &["metadata", "labels"], json::at(original, "/metadata/labels").clone());
                    json::set(service, &["spec"], json::at(original, "/spec").clone());
                };
                edit(cluster, "rolling the APIService back", name, restore, None).await?;
            }
            None => cluster.delete("rolling the APIService back", &path(name)).await?,
        }
    }
    Ok(())
}

/// Gives every APIService back to kube-aggregator: local again, with the automanaged label.
pub async fn give_back(cluster: &Cluster, definition: &Definition) -> Result<(), Error> {
    for name in names(definition) {
        let change = |service: &mut Value| {
            json::set(service, &["metadata", "labels", AUTOMANAGED], json!("true"));
            if let Some(spec) = service.pointer_mut("/spec").and_then(Value::as_object_mut) {
                spec.remove("service");
                spec.remove("caBundle");
                spec.remove("insecureSkipTLSVerify");
            }
        };
        edit(cluster, "giving the APIService back to kube-aggregator", &name, change, None).await?;
    }
    Ok(())
}

fn available(service: &Value) -> bool {
    json::at(service, "/status/conditions")
        .as_array()
        .is_some_and(|c| c.iter().any(|c| json::at(c, "/type") == "Available" && json::at(c, "/status") == "True"))
}

/// Waits until every APIService is Available and a list through the main apiserver answers
/// a resourceVersion of ours (`at_least` or above: `Some`) or of its own (below: `None`).
pub async fn wait_reached(
    cluster: &Cluster,
    definition: &Definition,
    floor: Revision,
    ours: bool,
    timeout: Duration,
) -> Result<(), Error> {
    let started = Instant::now();
    let collection = object_path(&definition.group, &definition.storage.name, None, &definition.plural, "");
    let mut last = String::new();
    while started.elapsed() < timeout {
        let mut all = true;
        for name in names(definition) {
            match cluster.get("reading the APIService", &path(&name)).await? {
                Some(service) if available(&service) => {}
                _ => {
                    all = false;
                    last = format!("APIService {name} is not Available");
                }
            }
        }
        if all {
            match cluster.list_page("listing through the main apiserver", &collection, 1, None).await {
                Ok(page) => {
                    let rv =
                        json::at(&page, "/metadata/resourceVersion").as_str().and_then(|r| r.parse::<Revision>().ok());
                    if rv.is_some_and(|rv| (rv >= floor) == ours) {
                        return Ok(());
                    }
                    last = format!("a list through the main apiserver answered resourceVersion {rv:?}");
                }
                Err(e) => last = e.to_string(),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(Error::Cluster(format!("requests did not reach the expected server within {timeout:?}: {last}")))
}
