//! Step (b) of a takeover: every object of the resource, listed from the main apiserver in
//! pages at one resourceVersion (its continue tokens keep it), written into our store as they
//! are: `uid`, `creationTimestamp`, `generation`, labels, annotations, `ownerReferences`,
//! `finalizers`, `managedFields`, `deletionTimestamp`/`deletionGracePeriodSeconds` and `status`
//! kept, converted to the storage version (`api::write::convert_all_to`, as the storage
//! migration writes them), `resourceVersion` dropped (the store's revision is the object's).
//! The next page is fetched while the current one is written.

use bytes::Bytes;
use serde_json::Value;

use super::cluster::{Cluster, object_path};
use super::{Error, json};
use crate::definitions::Definition;
use crate::store::{Backend, ListOptions, Revision, Store, key};

/// Objects per page from the main apiserver.
pub const PAGE: usize = 500;

/// What a copy moved.
#[derive(Debug, Default, Clone, Copy)]
pub struct Copied {
    pub objects: u64,
    /// Bytes of the objects as stored (JSON), about what they occupy in the main etcd.
    pub bytes: u64,
}

/// The first page, whose resourceVersion is the main apiserver's revision of the copy.
pub struct FirstPage {
    pub page: Value,
    pub revision: Revision,
}

fn collection(definition: &Definition) -> String {
    object_path(&definition.group, &definition.storage.name, None, &definition.plural, "")
}

/// Lists the first page.
pub async fn first_page(cluster: &Cluster, definition: &Definition) -> Result<FirstPage, Error> {
    let page = cluster.list_page("listing the objects to move", &collection(definition), PAGE, None).await?;
    let revision = json::at(&page, "/metadata/resourceVersion")
        .as_str()
        .and_then(|rv| rv.parse::<Revision>().ok())
        .ok_or_else(|| Error::Cluster("the main apiserver's list has no numeric resourceVersion".into()))?;
    Ok(FirstPage { page, revision })
}

fn continue_token(page: &Value) -> Option<String> {
    json::at(page, "/metadata/continue").as_str().filter(|c| !c.is_empty()).map(str::to_string)
}

fn items(page: &mut Value) -> Vec<Value> {
    match page.get_mut("items").map(Value::take) {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    }
}

/// Counts what a copy would move, reading every page and writing nothing.
pub async fn count(cluster: &Cluster, definition: &Definition, first: FirstPage) -> Result<Copied, Error> {
    let mut copied = Copied::default();
    let mut page = first.page;
    loop {
        for item in items(&mut page) {
            copied.objects += 1;
            copied.bytes += crate::core::json::to_vec(&item).map(|b| b.len() as u64).unwrap_or(0);
        }
        let Some(token) = continue_token(&page) else { return Ok(copied) };
        page = cluster.list_page("listing the objects to move", &collection(definition), PAGE, Some(&token)).await?;
    }
}

/// How many keys our store holds for the resource.
pub async fn held(store: &Backend, definition: &Definition) -> Result<usize, Error> {
    let prefix = key::resource_prefix(&definition.group, &definition.plural);
    let options = ListOptions { limit: Some(1), ..ListOptions::default() };
    let page = store.list(&prefix, options).await.map_err(|e| Error::Store(e.to_string()))?;
    Ok(page.items.len())
}

/// Deletes every key of the resource from our store (a copy rolled back or started again).
pub async fn clear(store: &Backend, definition: &Definition) -> Result<u64, Error> {
    let prefix = key::resource_prefix(&definition.group, &definition.plural);
    let mut deleted = 0;
    loop {
        let options = ListOptions { limit: Some(PAGE), ..ListOptions::default() };
        let page = store.list(&prefix, options).await.map_err(|e| Error::Store(e.to_string()))?;
        if page.items.is_empty() {
            return Ok(deleted);
        }
        let deletions = page.items.iter().map(|kv| store.delete(&kv.key, None));
        for result in futures_util::future::join_all(deletions).await {
            match result {
                Ok(_) | Err(crate::store::Error::NotFound(_)) => deleted += 1,
                Err(e) => return Err(Error::Store(e.to_string())),
            }
        }
    }
}

/// The key and stored bytes of one object from the main apiserver.
fn prepare(definition: &Definition, mut object: Value) -> Result<(String, Bytes), Error> {
    let meta = object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| Error::Cluster("an object from the main apiserver has no metadata".into()))?;
    meta.remove("resourceVersion");
    meta.remove("selfLink");
    let name = meta.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    let namespace = meta.get("namespace").and_then(Value::as_str).map(str::to_string);
    if name.is_empty() {
        return Err(Error::Cluster("an object from the main apiserver has no name".into()));
    }
    if definition.namespaced() != namespace.is_some() {
        return Err(Error::Cluster(format!("object {name}: its namespace does not match the definition's scope")));
    }
    let key = key::object_key(&definition.group, &definition.plural, namespace.as_deref(), &name);
    let bytes = crate::core::json::to_vec(&object).map_err(|e| Error::Store(format!("encoding {name}: {e}")))?;
    Ok((key, Bytes::from(bytes)))
}

/// Writes one page's objects into our store, converted to the storage version.
async fn write_page(store: &Backend, definition: &Definition, items: Vec<Value>) -> Result<Copied, Error> {
    let converted = crate::api::write::convert_all_to(definition, items, &definition.storage)
        .map_err(|e| Error::Store(format!("converting to the storage version: {}", e.message)))?;
    let prepared = converted.into_iter().map(|o| prepare(definition, o)).collect::<Result<Vec<_>, _>>()?;
    let copied = Copied { objects: prepared.len() as u64, bytes: prepared.iter().map(|(_, b)| b.len() as u64).sum() };
    let writes = prepared.into_iter().map(|(key, bytes)| async move {
        store.create(&key, bytes).await.map_err(|e| Error::Store(format!("{key}: {e}")))
    });
    for result in futures_util::future::join_all(writes).await {
        result?;
    }
    Ok(copied)
}

/// Copies every object, the first page given, into our store.
pub async fn copy(
    cluster: &Cluster,
    store: &Backend,
    definition: &Definition,
    first: FirstPage,
) -> Result<Copied, Error> {
    let mut total = Copied::default();
    let mut page = first.page;
    loop {
        let token = continue_token(&page);
        let batch = items(&mut page);
        let path = collection(definition);
        let next = async {
            match &token {
                Some(token) => {
                    cluster.list_page("listing the objects to move", &path, PAGE, Some(token)).await.map(Some)
                }
                None => Ok(None),
            }
        };
        let (written, next) = tokio::join!(write_page(store, definition, batch), next);
        let written = written?;
        total.objects += written.objects;
        total.bytes += written.bytes;
        match next? {
            Some(next) => page = next,
            None => return Ok(total),
        }
    }
}
