//! The `serveddefinitions` objects (`definitions::builtin`): one per served definition, written
//! into the store under the resource's own keys whenever what they show changes, so that get,
//! list, watch and Tables serve them as any stored object. Each shows the definition as served,
//! Kubernetes' CRD status fields (conditions worded as Kubernetes words them, acceptedNames,
//! storedVersions) and what only this server knows: the storage version, objects per version
//! (older versions as the last migration pass counted them, the storage version as the rest),
//! the migration's progress and the last reload error.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::migrate::progress::Progress;
use crate::definitions::builtin::{GROUP, SERVED_DEFINITION_KIND, SERVED_DEFINITIONS, VERSION};
use crate::definitions::conversion::{Conversion, Endpoint};
use crate::definitions::{Definition, Version};
use crate::store::{Backend, Error, ListOptions, Store, key};

/// What the status of one definition is made of, besides the definition itself.
#[derive(Debug, Default)]
pub struct Facts<'a> {
    pub stored_versions: &'a [String],
    pub progress: Option<&'a Progress>,
    /// Objects per version they are stored in.
    pub objects_per_version: Option<&'a std::collections::BTreeMap<String, u64>>,
    /// Why the last reload of the definition's file was refused, if it was.
    pub reload_error: Option<&'a str>,
}

fn object_key(name: &str) -> String {
    key::object_key(GROUP, SERVED_DEFINITIONS, None, name)
}

/// The prefix of every status object.
pub fn prefix() -> String {
    key::resource_prefix(GROUP, SERVED_DEFINITIONS)
}

/// Writes the status object of `definition` if what it shows changed.
pub async fn write(store: &Backend, definition: &Definition, facts: &Facts<'_>) -> Result<(), Error> {
    let key = object_key(&definition.name);
    for _ in 0..4 {
        let current = store.get(&key).await?;
        let existing: Option<Value> = current.as_ref().and_then(|c| crate::core::nesting::from_slice(&c.value).ok());
        let (uid, created) = match existing.as_ref().and_then(|e| e.get("metadata")) {
            Some(meta) => (
                meta.get("uid").and_then(Value::as_str).unwrap_or_default().to_string(),
                meta.get("creationTimestamp").and_then(Value::as_str).unwrap_or_default().to_string(),
            ),
            None => (uuid::Uuid::new_v4().to_string(), crate::core::time::now_rfc3339()),
        };
        let mut object = render(definition, facts, &uid, &created);
        keep_impact(&mut object, existing.as_ref());
        if existing.as_ref() == Some(&object) {
            return Ok(());
        }
        let bytes = Bytes::from(serde_json::to_vec(&object).map_err(|e| Error::Backend(e.to_string()))?);
        let written = match current {
            Some(c) => store.update(&key, c.revision, bytes).await,
            None => store.create(&key, bytes).await,
        };
        match written {
            Ok(_) => return Ok(()),
            Err(Error::Conflict { .. } | Error::AlreadyExists(_) | Error::NotFound(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The impact analysis an object shows stays when the controller rewrites it: analyses write
/// it (`update_impact`), whichever replica ran them.
fn keep_impact(object: &mut Value, existing: Option<&Value>) {
    let Some(impact) = existing.and_then(|e| e.pointer("/status/impact")) else { return };
    if let Some(status) = object.get_mut("status") {
        put(status, IMPACT, impact.clone());
    }
}

/// Where the status object shows the last impact analysis of its definition.
const IMPACT: &str = "impact";

/// Sets `status.impact` of `definition`'s status object by compare-and-swap: `change` sees the
/// analysis the object shows now and gives the one to write, or `None` to leave it (then
/// nothing is written). An object not written yet is written with what the store's records
/// say of it. Returns what was written.
pub async fn update_impact(
    store: &Backend,
    definition: &Definition,
    change: &mut (dyn FnMut(Option<&Value>) -> Option<Value> + Send),
) -> Result<Option<Value>, Error> {
    let key = object_key(&definition.name);
    for _ in 0..8 {
        let current = store.get(&key).await?;
        let existing: Option<Value> = current.as_ref().and_then(|c| serde_json::from_slice(&c.value).ok());
        let Some(impact) = change(existing.as_ref().and_then(|e| e.pointer("/status/impact"))) else {
            return Ok(None);
        };
        let mut object = match existing {
            Some(object) => object,
            None => {
                let stored = super::stored_versions::read(store, &definition.name).await?;
                let facts = Facts { stored_versions: &stored, ..Facts::default() };
                let created = crate::core::time::now_rfc3339();
                render(definition, &facts, &uuid::Uuid::new_v4().to_string(), &created)
            }
        };
        if let Some(status) = object.get_mut("status") {
            put(status, IMPACT, impact.clone());
        }
        let bytes = Bytes::from(serde_json::to_vec(&object).map_err(|e| Error::Backend(e.to_string()))?);
        let written = match current {
            Some(c) => store.update(&key, c.revision, bytes).await,
            None => store.create(&key, bytes).await,
        };
        match written {
            Ok(_) => return Ok(Some(impact)),
            Err(Error::Conflict { .. } | Error::AlreadyExists(_) | Error::NotFound(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::Backend(format!("the status of {} kept changing while its impact was written", definition.name)))
}

/// Removes the status objects of definitions no longer served (`served` says which are).
pub async fn remove_others(store: &Backend, served: &(dyn Fn(&str) -> bool + Sync)) -> Result<(), Error> {
    let prefix = prefix();
    let page = store.list(&prefix, ListOptions::default()).await?;
    for kv in page.items {
        let name = kv.key.strip_prefix(&prefix).unwrap_or_default();
        if !served(name) {
            match store.delete(&kv.key, Some(kv.revision)).await {
                Ok(_) | Err(Error::NotFound(_) | Error::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// The status object of `definition`.
pub fn render(definition: &Definition, facts: &Facts<'_>, uid: &str, created: &str) -> Value {
    let mut status = json!({
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found", created),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted", created),
        ],
        "acceptedNames": names(definition),
        "storedVersions": facts.stored_versions,
        "storageVersion": definition.storage.name,
    });
    if let Some(counts) = facts.objects_per_version {
        put(&mut status, "objectsPerVersion", json!(counts));
    }
    if let Some(progress) = facts.progress {
        put(&mut status, "migration", migration(progress, facts.stored_versions));
    }
    if let Some(error) = facts.reload_error {
        put(&mut status, "lastReloadError", json!(error));
    }
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": SERVED_DEFINITION_KIND,
        "metadata": {"name": definition.name, "uid": uid, "creationTimestamp": created, "generation": 1},
        "spec": spec(definition),
        "status": status,
    })
}

fn put(target: &mut Value, key: &str, value: Value) {
    if let Value::Object(map) = target {
        map.insert(key.to_string(), value);
    }
}

fn condition(kind: &str, reason: &str, message: &str, since: &str) -> Value {
    json!({"type": kind, "status": "True", "lastTransitionTime": since, "reason": reason, "message": message})
}

fn names(definition: &Definition) -> Value {
    let mut names = json!({"plural": definition.plural, "singular": definition.singular,
                           "kind": definition.kind, "listKind": definition.list_kind});
    if !definition.short_names.is_empty() {
        put(&mut names, "shortNames", json!(definition.short_names));
    }
    if !definition.categories.is_empty() {
        put(&mut names, "categories", json!(definition.categories));
    }
    names
}

fn migration(progress: &Progress, stored_versions: &[String]) -> Value {
    let from: Vec<&String> = stored_versions.iter().filter(|v| **v != progress.storage_version).collect();
    let mut migration = json!({
        "state": progress.state.as_str(),
        "storageVersion": progress.storage_version,
        "fromVersions": from,
        "migratedObjects": progress.migrated,
        "objectsInOlderVersions": progress.found_old,
        "yieldedToWriters": progress.yielded_to_writers,
        "startedAt": progress.started_at,
    });
    if let Some(finished) = &progress.finished_at {
        put(&mut migration, "finishedAt", json!(finished));
    }
    if let Some(error) = &progress.last_error {
        put(&mut migration, "lastError", json!(error));
    }
    migration
}

/// The definition's spec as served (CustomResourceDefinitionSpec's fields).
fn spec(definition: &Definition) -> Value {
    json!({
        "group": definition.group,
        "names": names(definition),
        "scope": if definition.namespaced() { "Namespaced" } else { "Cluster" },
        "versions": definition.versions.iter().map(|v| version(v)).collect::<Vec<_>>(),
        "conversion": conversion(&definition.conversion),
    })
}

fn version(version: &Version) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), json!(version.name));
    out.insert("served".into(), json!(version.served));
    out.insert("storage".into(), json!(version.storage));
    if version.deprecated {
        out.insert("deprecated".into(), json!(true));
    }
    if let Some(warning) = &version.deprecation_warning {
        out.insert("deprecationWarning".into(), json!(warning));
    }
    if let Some(schema) = version.openapi_schema_value() {
        out.insert("schema".into(), json!({"openAPIV3Schema": schema}));
    }
    let mut subresources = Map::new();
    if version.status_subresource {
        subresources.insert("status".into(), json!({}));
    }
    if let Some(scale) = &version.scale {
        let mut s = json!({"specReplicasPath": scale.spec_replicas_path,
                           "statusReplicasPath": scale.status_replicas_path});
        if let Some(selector) = &scale.label_selector_path {
            put(&mut s, "labelSelectorPath", json!(selector));
        }
        subresources.insert("scale".into(), s);
    }
    if !subresources.is_empty() {
        out.insert("subresources".into(), Value::Object(subresources));
    }
    if !version.printer_columns.is_empty() {
        out.insert("additionalPrinterColumns".into(), json!(version.printer_columns));
    }
    if !version.selectable_fields.is_empty() {
        let fields: Vec<Value> =
            version.selectable_fields.iter().map(|f| json!({"jsonPath": format!(".{f}")})).collect();
        out.insert("selectableFields".into(), Value::Array(fields));
    }
    Value::Object(out)
}

fn conversion(conversion: &Conversion) -> Value {
    match conversion {
        Conversion::None => json!({"strategy": "None"}),
        Conversion::Webhook(hook) => {
            let client_config = match &hook.endpoint {
                Endpoint::Url(url) => json!({"url": url}),
                Endpoint::Service { name, namespace, port, path } => {
                    json!({"service": {"name": name, "namespace": namespace, "port": port, "path": path}})
                }
            };
            json!({"strategy": "Webhook", "webhook": {"clientConfig": client_config,
                   "conversionReviewVersions": [hook.review_version]}})
        }
    }
}
