//! Rewriting one page of objects stored in an older version into the storage version: read as
//! the API reads a stored object (`api::present::read_coerce`), converted through the
//! definition's conversion (None, or one ConversionReview for the page), written back by
//! compare-and-swap on the revision the page was read at. A user's concurrent write always
//! wins: on a lost race the object is read again, and rewritten only if it is still in an older
//! version; it is never overwritten.

use bytes::Bytes;
use serde_json::Value;

use crate::api::{objects, present, write};
use crate::definitions::Definition;
use crate::store::{Backend, Error, KeyValue, Store};

/// How many times one object is read again after a user's write raced the migrator's.
const ATTEMPTS: usize = 8;

/// What became of the objects of one page.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Rewritten into the storage version by the migrator.
    pub migrated: u64,
    /// Left alone: a user deleted them or wrote them in the storage version meanwhile.
    pub yielded: u64,
}

/// The `apiVersion` of stored bytes, read without decoding the rest of the object.
pub fn stored_api_version(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow, rename = "apiVersion")]
        api_version: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Head<'_>>(bytes).ok()?.api_version.map(std::borrow::Cow::into_owned)
}

/// The objects of `page` (all in older versions) in the storage version, encoded as stored.
fn convert(definition: &Definition, page: &[KeyValue]) -> Result<Vec<Bytes>, String> {
    let mut objects = Vec::with_capacity(page.len());
    for kv in page {
        let mut object: Value =
            serde_json::from_slice(&kv.value).map_err(|e| format!("{}: stored object is not JSON: {e}", kv.key))?;
        present::read_coerce(definition, &mut object);
        objects.push(object);
    }
    let converted = write::convert_all_to(definition, objects, &definition.storage).map_err(|e| e.message)?;
    converted
        .into_iter()
        .map(|mut object| {
            // Stored objects carry no resourceVersion: the store's revision is it.
            if let Some(meta) = objects::metadata_mut(&mut object) {
                meta.remove("resourceVersion");
            }
            crate::core::json::to_vec(&object).map(Bytes::from).map_err(|e| format!("encoding object: {e}"))
        })
        .collect()
}

/// Rewrites `page` (objects stored in older versions) into the storage version.
pub async fn rewrite_page(store: &Backend, definition: &Definition, page: Vec<KeyValue>) -> Result<Outcome, String> {
    let converted = convert(definition, &page)?;
    // Concurrently, so that the store commits the page in few batches.
    let writes = page.iter().zip(converted).map(|(kv, bytes)| store.update(&kv.key, kv.revision, bytes));
    let results = futures_util::future::join_all(writes).await;
    let mut outcome = Outcome::default();
    for (kv, result) in page.iter().zip(results) {
        match result {
            Ok(_) => outcome.migrated += 1,
            Err(Error::Conflict { .. } | Error::NotFound(_)) => match retry_one(store, definition, &kv.key).await? {
                true => outcome.migrated += 1,
                false => outcome.yielded += 1,
            },
            Err(e) => return Err(format!("{}: {e}", kv.key)),
        }
    }
    Ok(outcome)
}

/// Reads one object again after a lost race and rewrites it if it is still in an older
/// version. True when the migrator rewrote it, false when the user's write made it needless.
async fn retry_one(store: &Backend, definition: &Definition, key: &str) -> Result<bool, String> {
    let desired = format!("{}/{}", definition.group, definition.storage.name);
    for _ in 0..ATTEMPTS {
        let Some(current) = store.get(key).await.map_err(|e| format!("{key}: {e}"))? else { return Ok(false) };
        if stored_api_version(&current.value).as_deref() == Some(desired.as_str()) {
            return Ok(false);
        }
        let kv = KeyValue { key: key.to_string(), revision: current.revision, value: current.value };
        let bytes = convert(definition, std::slice::from_ref(&kv))?.into_iter().next();
        let Some(bytes) = bytes else { return Err(format!("{key}: conversion returned no object")) };
        match store.update(key, kv.revision, bytes).await {
            Ok(_) => return Ok(true),
            Err(Error::Conflict { .. }) => continue,
            Err(Error::NotFound(_)) => return Ok(false),
            Err(e) => return Err(format!("{key}: {e}")),
        }
    }
    Err(format!("{key}: still changing after {ATTEMPTS} attempts; it is tried again on the next pass"))
}
