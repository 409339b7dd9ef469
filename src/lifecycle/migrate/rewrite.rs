//! Rewriting one page of objects stored in an older version into the storage version: read as
//! the API reads a stored object (`api::present::read_coerce`), converted through the
//! definition's conversion (None, or one ConversionReview for the page), written back by
//! compare-and-swap on the revision the page was read at. A user's concurrent write always
//! wins: on a lost race the object is read again, and rewritten only if it is still in an older
//! version; it is never overwritten.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use bytes::Bytes;
use serde_json::Value;

pub use crate::api::present::stored_api_version;
use crate::api::{objects, present, verbatim, write};
use crate::definitions::Definition;
use crate::definitions::conversion::Conversion;
use crate::store::{Backend, Error, KeyValue, Revision, Store, Update};

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

/// The objects of `page` (all in older versions) in the storage version, encoded as stored.
/// With the `None` conversion most objects are the stored bytes with another `apiVersion`, as
/// `api::verbatim` proves without decoding them; the others (and every object of a definition
/// with a conversion webhook, one review for the page) take the general path.
fn convert(definition: &Definition, page: &[KeyValue]) -> Result<Vec<Bytes>, String> {
    let mut converted: Vec<Option<Bytes>> = match definition.conversion {
        Conversion::None => page.iter().map(|kv| unchanged_but_api_version(definition, &kv.value)).collect(),
        Conversion::Webhook(_) => vec![None; page.len()],
    };
    let general: Vec<&KeyValue> =
        page.iter().zip(&converted).filter(|(_, done)| done.is_none()).map(|(kv, _)| kv).collect();
    if !general.is_empty() {
        let mut rest = convert_general(definition, &general)?.into_iter();
        for slot in converted.iter_mut().filter(|slot| slot.is_none()) {
            *slot = rest.next();
        }
    }
    converted.into_iter().map(|bytes| bytes.ok_or_else(|| "conversion returned fewer objects".to_string())).collect()
}

/// `stored` rewritten into the storage version by the `None` conversion, when the general path
/// would change nothing but its `apiVersion`.
fn unchanged_but_api_version(definition: &Definition, stored: &[u8]) -> Option<Bytes> {
    let api_version = stored_api_version(stored)?;
    let from = definition.version(api_version.strip_prefix(definition.group.as_str())?.strip_prefix('/')?)?;
    verbatim::with_api_version(definition, from, &definition.storage, stored).map(Bytes::from)
}

/// The general path: read as the API reads a stored object, converted, pruned, encoded.
fn convert_general(definition: &Definition, page: &[&KeyValue]) -> Result<Vec<Bytes>, String> {
    let mut objects = Vec::with_capacity(page.len());
    for kv in page {
        let mut object: Value = crate::core::nesting::from_slice(&kv.value)
            .map_err(|e| format!("{}: stored object is not JSON: {e}", kv.key))?;
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
    Converted::new(definition, page)?.start(store).await.finish(store, definition).await
}

/// The results of a page's writes, once the store has them.
type Results<'a> = Pin<Box<dyn Future<Output = Vec<crate::store::Result<Revision>>> + Send + 'a>>;

/// The rewrite of one page, sent to the store and not yet answered: the migrator reads and
/// converts the next page meanwhile.
pub struct PageWrite<'a> {
    page: Vec<KeyValue>,
    results: Results<'a>,
}

/// A page converted into the storage version, not yet sent.
pub struct Converted {
    page: Vec<KeyValue>,
    values: Vec<Bytes>,
}

impl Converted {
    /// Converts `page` (objects stored in older versions) into the storage version.
    pub fn new(definition: &Definition, page: Vec<KeyValue>) -> Result<Converted, String> {
        let values = convert(definition, &page)?;
        Ok(Converted { page, values })
    }

    /// Sends the writes to the store, by compare-and-swap on the revisions the objects were
    /// read at, in one `update_many` (one commit on sled); their answers are awaited in
    /// `PageWrite::finish`.
    pub async fn start(self, store: &Backend) -> PageWrite<'_> {
        let Converted { page, values } = self;
        let updates = page
            .iter()
            .zip(values)
            .map(|(kv, value)| Update { key: kv.key.clone(), expected: kv.revision, value })
            .collect();
        let mut results: Results<'_> = Box::pin(store.update_many(updates));
        // Polled once, so that the store has the writes now.
        let mut early = None;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(done) = results.as_mut().poll(cx) {
                early = Some(done);
            }
            Poll::Ready(())
        })
        .await;
        if let Some(done) = early {
            results = Box::pin(std::future::ready(done));
        }
        PageWrite { page, results }
    }
}

impl PageWrite<'_> {
    /// Waits for the writes; an object a user wrote or deleted meanwhile is read again and
    /// rewritten only if it is still in an older version.
    pub async fn finish(self, store: &Backend, definition: &Definition) -> Result<Outcome, String> {
        let results = self.results.await;
        let mut outcome = Outcome::default();
        for (kv, result) in self.page.iter().zip(results) {
            match result {
                Ok(_) => outcome.migrated += 1,
                Err(Error::Conflict { .. } | Error::NotFound(_)) => {
                    match retry_one(store, definition, &kv.key).await? {
                        true => outcome.migrated += 1,
                        false => outcome.yielded += 1,
                    }
                }
                Err(e) => return Err(format!("{}: {e}", kv.key)),
            }
        }
        Ok(outcome)
    }
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
