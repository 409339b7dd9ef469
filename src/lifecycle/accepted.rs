//! The definition the server last accepted, one record per definition name in the store
//! (outside every resource's keys), as kube-apiserver keeps a CustomResourceDefinition object in
//! etcd: the defaulted manifest (name, labels, annotations, spec) and the file it came from.
//! Written before a new or changed definition is first served, so that no object is written
//! under a form the store does not know; read at start, so that files changed while the server
//! was stopped are checked as updates of it (`definitions::accepted`). Like storedVersions, a
//! record outlives its definition's removal from the files (its objects stay) and is forgotten
//! with the objects (`removed`). Backups carry it (every `crd-apiserver/` record).
//! Never touches objects.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::{Deserialize, Serialize};

use crate::definitions::accepted::Accepted;
use crate::definitions::reload::Served;
use crate::definitions::scan::Origin;
use crate::store::{Error, ListOptions, Store};

/// Where the records live: resource keys always start with `/`, so no resource can reach them.
const ACCEPTED_DEFINITIONS: &str = "crd-apiserver/accepted-definitions/";

/// How many times a write that lost a race to another replica is tried again.
const ATTEMPTS: usize = 8;

/// What a record starts with: its JSON follows, LZ4-compressed (block format, the JSON's length
/// first, as four little-endian bytes). Schemas compress about 5 to 1 (descriptions repeat),
/// and every byte written stays a while in the store's event window and page cache: 2,065
/// upjet definitions write 21 MB instead of 100 MB. Records written before start with `{`.
const COMPRESSED: &[u8] = b"lz4\0";

/// The longest JSON a record may declare: far above any definition (kube-apiserver's etcd
/// refuses a CustomResourceDefinition over 1.5 MiB), so that a damaged length cannot make a
/// read allocate without bound.
const LONGEST: usize = 256 << 20;

/// The stored form of one record. `manifest` has no schemas; `schemas` holds each version's
/// as the compact JSON text a loaded definition keeps, so that neither writing nor reading a
/// record decodes a schema. (Records written before kept the schemas in the manifest and have
/// no `schemas`: they are read as they are, and rewritten in this form at the next start.)
#[derive(Debug, Deserialize)]
struct Record {
    file: PathBuf,
    source: String,
    manifest: CustomResourceDefinition,
    #[serde(default)]
    schemas: Option<Vec<Option<String>>>,
    /// The file's bytes that gave this form (records written before have none).
    #[serde(default)]
    origin: Option<Origin>,
}

/// [`Record`] as written, borrowing what it holds.
#[derive(Serialize)]
struct RecordRef<'a> {
    file: &'a Path,
    source: &'a str,
    manifest: &'a CustomResourceDefinition,
    schemas: Vec<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    origin: Option<&'a Origin>,
}

fn key_of(definition: &str) -> String {
    format!("{ACCEPTED_DEFINITIONS}{definition}")
}

/// The record's JSON: decompressed, or as it is for a record written uncompressed.
fn json_of<'a>(key: &str, bytes: &'a [u8]) -> Result<std::borrow::Cow<'a, [u8]>, Error> {
    let Some(compressed) = bytes.strip_prefix(COMPRESSED) else { return Ok(std::borrow::Cow::Borrowed(bytes)) };
    let damaged = |why: String| Error::Backend(format!("{key}: not an accepted definition record: {why}"));
    let length = compressed.first_chunk::<4>().map(|l| u32::from_le_bytes(*l) as usize);
    match length {
        Some(length) if length <= LONGEST => {}
        _ => return Err(damaged("bad length".into())),
    }
    lz4_flex::block::decompress_size_prepended(compressed)
        .map(std::borrow::Cow::Owned)
        .map_err(|e| damaged(e.to_string()))
}

fn decode(key: &str, bytes: &[u8]) -> Result<Accepted, Error> {
    let json = json_of(key, bytes)?;
    let record: Record = serde_json::from_slice(&json)
        .map_err(|e| Error::Backend(format!("{key}: not an accepted definition record: {e}")))?;
    Ok(match record.schemas {
        Some(schemas) => Accepted {
            manifest: Arc::new(record.manifest),
            schemas: schemas.into_iter().map(|s| s.map(Arc::from)).collect(),
            file: record.file,
            source: record.source,
            compact: true,
            origin: record.origin,
        },
        None => Accepted::new(record.manifest, record.file, record.source),
    })
}

/// The record of `served`: its manifest without the status a file may carry (the server keeps
/// storedVersions itself), its schemas' texts, and the bytes it came from when known.
fn encode(served: &Served, origin: Option<&Origin>) -> Result<Bytes, Error> {
    let mut manifest = (*served.loaded.manifest).clone();
    manifest.status = None;
    let schemas = served.loaded.schema_texts();
    let record = RecordRef {
        file: &served.file,
        source: &served.loaded.definition.source,
        manifest: &manifest,
        schemas: schemas.iter().map(Option::as_deref).collect(),
        origin,
    };
    let json = serde_json::to_vec(&record)
        .map_err(|e| Error::Backend(format!("encoding the accepted definition {}: {e}", served.name())))?;
    let mut bytes = COMPRESSED.to_vec();
    bytes.extend_from_slice(&lz4_flex::block::compress_prepend_size(&json));
    Ok(Bytes::from(bytes))
}

/// The last accepted form of the definition named `definition`, if it was ever served.
pub async fn read(store: &impl Store, definition: &str) -> Result<Option<Accepted>, Error> {
    let key = key_of(definition);
    match store.get(&key).await? {
        Some(found) => decode(&key, &found.value).map(Some),
        None => Ok(None),
    }
}

/// The last accepted form of every definition ever served (and not forgotten), by name.
pub async fn read_all(store: &impl Store) -> Result<HashMap<String, Accepted>, Error> {
    let page = store.list(ACCEPTED_DEFINITIONS, ListOptions::default()).await?;
    let mut all = HashMap::with_capacity(page.items.len());
    for kv in page.items {
        let Some(name) = kv.key.strip_prefix(ACCEPTED_DEFINITIONS) else { continue };
        all.insert(name.to_string(), decode(&kv.key, &kv.value)?);
    }
    Ok(all)
}

/// Records each of `definitions` as the accepted form of its name, with the file bytes it came
/// from when known (all at once, so that the store commits them together). A record that
/// already says the same is left as it is.
pub async fn record<'a>(
    store: &impl Store,
    definitions: impl IntoIterator<Item = (&'a Served, Option<&'a Origin>)>,
) -> Result<(), Error> {
    // Encoding (JSON, then LZ4) is CPU work: a first start's 2,065 upjet records, one after the
    // other, held it up for a quarter of a second (issue 32); they are encoded on every core.
    let definitions: Vec<(&Served, Option<&Origin>)> = definitions.into_iter().collect();
    let encoded = crate::core::parallel::map(&definitions, |(served, origin)| encode(served, *origin));
    let writes = definitions.iter().zip(encoded).map(|((served, _), bytes)| put(store, served.name(), bytes));
    futures_util::future::join_all(writes).await.into_iter().collect()
}

async fn put(store: &impl Store, name: &str, bytes: Result<Bytes, Error>) -> Result<(), Error> {
    let key = key_of(name);
    let bytes = bytes?;
    let mut last = Error::Backend(format!("{key}: too many concurrent changes"));
    for _ in 0..ATTEMPTS {
        let written = match store.get(&key).await? {
            Some(found) if found.value == bytes => return Ok(()),
            Some(found) => store.update(&key, found.revision, bytes.clone()).await,
            None => store.create(&key, bytes.clone()).await,
        };
        match written {
            Ok(_) => return Ok(()),
            Err(e @ (Error::Conflict { .. } | Error::AlreadyExists(_) | Error::NotFound(_))) => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Drops the record of a definition whose objects were all deleted (`crd-apiserver
/// delete-objects`): served again, it is a new definition.
pub async fn forget(store: &impl Store, definition: &str) -> Result<(), Error> {
    match store.delete(&key_of(definition), None).await {
        Ok(_) | Err(Error::NotFound(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definitions::load::loaded_from_value;
    use crate::store::Backend;
    use crate::store::sled::{SledOptions, SledStore};
    use serde_json::json;

    fn served(description: &str) -> Served {
        let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com", "labels": {"team": "a"}},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "description": description,
                        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}}}}}}}]},
            "status": {"storedVersions": ["v0"]}});
        Served { loaded: loaded_from_value(raw, "w.yaml").unwrap(), file: PathBuf::from("/defs/w.yaml") }
    }

    #[tokio::test]
    async fn a_record_keeps_the_manifest_without_status_until_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let store = Backend::Sled(SledStore::open(dir.path(), SledOptions::default()).unwrap());
        assert!(read(&store, "widgets.example.com").await.unwrap().is_none());
        let first = served("One.");
        record(&store, [(&first, None)]).await.unwrap();
        let revision = store.current_revision();
        // The same again writes nothing.
        record(&store, [(&first, None)]).await.unwrap();
        assert_eq!(store.current_revision(), revision);
        // A change of the schema alone is recorded, schema and all.
        let changed = served("Two.");
        record(&store, [(&changed, None)]).await.unwrap();
        assert!(store.current_revision() > revision);
        let all = read_all(&store).await.unwrap();
        let accepted = &all["widgets.example.com"];
        assert_eq!(accepted.manifest.spec, changed.loaded.manifest.spec);
        assert_eq!(accepted.schemas, changed.loaded.schema_texts());
        assert!(accepted.schemas[0].as_deref().is_some_and(|s| s.contains("\"Two.\"")), "{:?}", accepted.schemas);
        assert!(accepted.same_spec(&changed.loaded) && !accepted.same_spec(&first.loaded));
        assert_eq!(accepted.manifest.metadata.labels, changed.loaded.manifest.metadata.labels);
        assert_eq!(accepted.manifest.status, None);
        assert_eq!((accepted.file.to_str(), accepted.source.as_str()), (Some("/defs/w.yaml"), "w.yaml"));
        assert!(accepted.compact);
        assert_eq!(accepted.origin, None);
        // The file bytes it came from are kept with it.
        let origin = Origin {
            sha256: "ab".repeat(32),
            form: crate::definitions::load::FORM.into(),
            document: 1,
            documents: 2,
            warnings: vec!["unrecognized format \"sometime\"".into()],
        };
        record(&store, [(&changed, Some(&origin))]).await.unwrap();
        assert_eq!(read(&store, "widgets.example.com").await.unwrap().unwrap().origin, Some(origin));
        forget(&store, "widgets.example.com").await.unwrap();
        assert!(read_all(&store).await.unwrap().is_empty());
    }

    /// A record keeps the schemas as text, compressed: a long schema costs the store a
    /// fraction of its JSON (upjet's schemas repeat their descriptions).
    #[tokio::test]
    async fn a_record_is_stored_compressed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Backend::Sled(SledStore::open(dir.path(), SledOptions::default()).unwrap());
        let description = "The name of the resource, as the provider's documentation words it. ".repeat(400);
        let served = served(&description);
        record(&store, [(&served, None)]).await.unwrap();
        let stored = store.get(&key_of("widgets.example.com")).await.unwrap().unwrap().value;
        let json = serde_json::to_vec(&served.loaded.full_manifest()).unwrap();
        assert!(stored.starts_with(COMPRESSED));
        assert!(stored.len() * 10 < json.len(), "{} bytes stored for {} of JSON", stored.len(), json.len());
        let accepted = read(&store, "widgets.example.com").await.unwrap().unwrap();
        assert!(accepted.same_spec(&served.loaded) && accepted.compact);
    }

    /// A record written before (the whole manifest as JSON, schemas in it) is read as it was,
    /// and known for one to write again; a damaged one is an error, not a read without bound.
    #[tokio::test]
    async fn a_record_in_the_earlier_form_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = Backend::Sled(SledStore::open(dir.path(), SledOptions::default()).unwrap());
        let served = served("One.");
        let earlier = json!({"file": "/defs/w.yaml", "source": "w.yaml", "manifest": served.loaded.full_manifest()});
        store.create(&key_of("widgets.example.com"), Bytes::from(serde_json::to_vec(&earlier).unwrap())).await.unwrap();
        let accepted = read(&store, "widgets.example.com").await.unwrap().unwrap();
        assert!(accepted.same_spec(&served.loaded) && !accepted.compact);
        assert_eq!(accepted.schemas, served.loaded.schema_texts());
        let mut damaged = COMPRESSED.to_vec();
        damaged.extend_from_slice(&u32::MAX.to_le_bytes());
        damaged.extend_from_slice(b"junk");
        store.create(&key_of("gadgets.example.com"), Bytes::from(damaged)).await.unwrap();
        let error = read(&store, "gadgets.example.com").await.unwrap_err().to_string();
        assert!(error.contains("not an accepted definition record"), "{error}");
    }
}
