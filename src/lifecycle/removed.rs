//! The objects of a definition that is no longer served. Removing a definition from the files
//! stops serving it but keeps its objects (a ConfigMap mishap must never destroy data), so
//! deleting them is an explicit admin step: `crd-apiserver delete-objects` against a stopped
//! server's store, or a running server's `POST /delete-objects`. Both count first, delete only
//! when confirmed, and forget the definition's lifecycle records with its objects.
//!
//! Owns the sweep over one definition's keys; never touches a served definition's objects (the
//! caller says, before every page, whether the definition is still unserved) and never serves
//! HTTP.

use crate::store::{Backend, ListOptions, Store, key};

/// Objects listed (and deleted) per page.
const PAGE: usize = 500;

/// `<plural>.<group>` split into its plural and group, if it is one.
pub fn split_name(name: &str) -> Option<(&str, &str)> {
    name.split_once('.').filter(|(plural, group)| !plural.is_empty() && !group.is_empty())
}

/// Why a sweep stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The definition is (again) served, or may be: nothing more is deleted.
    #[error("{0}")]
    Served(String),
    #[error("{0}")]
    Store(String),
    /// Nothing of the definition is in the store: probably a mistyped name.
    #[error("{0}")]
    Unknown(String),
}

/// Whether the store knows the definition named `name`: it holds objects of it, or a record
/// every served definition leaves (storedVersions, the accepted definition). `Err` says why
/// not, for the admin who named it.
pub async fn known(store: &Backend, name: &str) -> Result<(), Error> {
    let Some((plural, group)) = split_name(name) else {
        return Err(Error::Store(format!("{name:?} is not a definition name (<plural>.<group>)")));
    };
    let failed = |e: crate::store::Error| Error::Store(format!("reading what the store holds of {name}: {e}"));
    if !super::stored_versions::read(store, name).await.map_err(failed)?.is_empty()
        || super::accepted::read(store, name).await.map_err(failed)?.is_some()
    {
        return Ok(());
    }
    let options = ListOptions { limit: Some(1), ..ListOptions::default() };
    let page = store.list(&key::resource_prefix(group, plural), options).await.map_err(failed)?;
    if page.items.is_empty() {
        return Err(Error::Unknown(format!(
            "no definition named {name} is known here: the store holds no object and no record of it (check the name)"
        )));
    }
    Ok(())
}

/// Counts, and with `delete` deletes, every object of the definition named `name`
/// (`<plural>.<group>`), page by page; then, when every one is deleted, forgets its
/// storedVersions, migration and accepted definition records (served again, it starts from its
/// storage version, as a new CRD does). Each delete is conditional on the revision listed: an object written meanwhile
/// is not deleted blind. `unserved` is asked before every page; `report` sees the count so far
/// after every page.
pub async fn sweep(
    store: &Backend,
    name: &str,
    delete: bool,
    unserved: &(dyn Fn() -> Result<(), String> + Send + Sync),
    report: &mut (dyn FnMut(u64) + Send),
) -> Result<u64, Error> {
    let Some((plural, group)) = split_name(name) else {
        return Err(Error::Store(format!("{name:?} is not a definition name (<plural>.<group>)")));
    };
    let prefix = key::resource_prefix(group, plural);
    let mut count = 0;
    let mut start_after = None;
    loop {
        unserved().map_err(Error::Served)?;
        let options = ListOptions { start_after: start_after.take(), limit: Some(PAGE), ..ListOptions::default() };
        let page = store.list(&prefix, options).await.map_err(|e| Error::Store(format!("listing {prefix}: {e}")))?;
        let Some(last) = page.items.last().map(|kv| kv.key.clone()) else { break };
        for kv in &page.items {
            if delete {
                match store.delete(&kv.key, Some(kv.revision)).await {
                    // Deleted meanwhile by someone else: gone all the same.
                    Ok(_) | Err(crate::store::Error::NotFound(_)) => {}
                    Err(e) => return Err(Error::Store(format!("deleting {}: {e}", kv.key))),
                }
            }
            count += 1;
        }
        report(count);
        start_after = Some(last);
    }
    if delete {
        super::stored_versions::forget(store, name).await.map_err(|e| {
            Error::Store(format!("deleted {count} objects of {name}, but not its storedVersions record: {e}"))
        })?;
        super::migrate::progress::forget(store, name).await.map_err(|e| {
            Error::Store(format!("deleted {count} objects of {name}, but not its migration record: {e}"))
        })?;
        super::accepted::forget(store, name).await.map_err(|e| {
            Error::Store(format!("deleted {count} objects of {name}, but not its accepted definition record: {e}"))
        })?;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sled::{SledOptions, SledStore};
    use bytes::Bytes;

    #[tokio::test]
    async fn a_sweep_counts_then_deletes_only_the_definitions_objects_and_forgets_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = Backend::Sled(SledStore::open(dir.path(), SledOptions::default()).unwrap());
        for i in 0..(PAGE + 3) {
            let key = key::object_key("g.io", "widgets", Some("ns"), &format!("w{i:04}"));
            store.create(&key, Bytes::from_static(b"{}")).await.unwrap();
        }
        let other = key::object_key("g.io", "gadgets", Some("ns"), "g");
        store.create(&other, Bytes::from_static(b"{}")).await.unwrap();
        super::super::stored_versions::add(&store, "widgets.g.io", "v1").await.unwrap();
        super::super::migrate::progress::request(&store, "widgets.g.io", "v1").await.unwrap();
        let unserved = || Ok(());
        let mut reports = Vec::new();

        let counted = sweep(&store, "widgets.g.io", false, &unserved, &mut |n| reports.push(n)).await.unwrap();
        assert_eq!(counted, PAGE as u64 + 3);
        assert_eq!(reports, [PAGE as u64, PAGE as u64 + 3]);
        assert_eq!(store.count(&key::resource_prefix("g.io", "widgets")).await.unwrap(), PAGE as u64 + 3);

        let deleted = sweep(&store, "widgets.g.io", true, &unserved, &mut |_| {}).await.unwrap();
        assert_eq!(deleted, PAGE as u64 + 3);
        assert_eq!(store.count(&key::resource_prefix("g.io", "widgets")).await.unwrap(), 0);
        assert!(store.get(&other).await.unwrap().is_some(), "another definition's object stays");
        assert!(super::super::stored_versions::read(&store, "widgets.g.io").await.unwrap().is_empty());
        assert_eq!(super::super::migrate::progress::read(&store, "widgets.g.io").await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_definition_is_known_by_its_objects_or_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = Backend::Sled(SledStore::open(dir.path(), SledOptions::default()).unwrap());
        let unknown = known(&store, "widgets.g.io").await;
        assert!(
            matches!(&unknown, Err(Error::Unknown(m)) if m.starts_with("no definition named widgets.g.io is known here")),
            "{unknown:?}"
        );
        super::super::stored_versions::add(&store, "widgets.g.io", "v1").await.unwrap();
        assert!(known(&store, "widgets.g.io").await.is_ok());
        let key = key::object_key("g.io", "gadgets", None, "g");
        store.create(&key, Bytes::from_static(b"{}")).await.unwrap();
        assert!(known(&store, "gadgets.g.io").await.is_ok());
        assert!(matches!(known(&store, "gadget").await, Err(Error::Store(_))));
    }

    #[tokio::test]
    async fn a_sweep_stops_when_the_definition_is_served_and_refuses_a_bad_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = Backend::Sled(SledStore::open(dir.path(), SledOptions::default()).unwrap());
        let key = key::object_key("g.io", "widgets", None, "w");
        store.create(&key, Bytes::from_static(b"{}")).await.unwrap();
        let served = || Err("widgets.g.io is served".to_string());
        let stopped = sweep(&store, "widgets.g.io", true, &served, &mut |_| {}).await;
        assert!(matches!(stopped, Err(Error::Served(m)) if m == "widgets.g.io is served"));
        assert!(store.get(&key).await.unwrap().is_some());
        assert!(matches!(sweep(&store, "widgets", true, &|| Ok(()), &mut |_| {}).await, Err(Error::Store(_))));
    }
}
