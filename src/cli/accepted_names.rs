//! Which definition holds its names when two clash: the one accepted first, whatever the file
//! order, as Kubernetes' naming controller keeps a CRD's accepted names for as long as it
//! exists. The store keeps a record per served definition (`ACCEPTED`, outside any resource's
//! keys), written when it is first served; its revision is the definition's age. Records of
//! definitions no longer in the files are removed, which frees their names.

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::json;

use crate::definitions::{Definition, Registry};
use crate::store::{Backend, ListOptions, Store};

/// Where the records live: resource keys always start with `/`, so no resource can reach them.
const ACCEPTED: &str = "crd-apiserver/accepted-names/";

/// When each definition was first served (the revision of its record), by definition name.
pub async fn ages(store: &Backend) -> HashMap<String, u64> {
    match store.list(ACCEPTED, ListOptions::default()).await {
        Ok(page) => page
            .items
            .into_iter()
            .filter_map(|kv| Some((kv.key.strip_prefix(ACCEPTED)?.to_string(), kv.revision)))
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "reading which definitions were served before failed; clashes go by file order");
            HashMap::new()
        }
    }
}

/// Definitions served before come first, oldest first; newcomers follow in file order.
pub fn oldest_first(mut definitions: Vec<Definition>, ages: &HashMap<String, u64>) -> Vec<Definition> {
    // A stable sort: newcomers (no age) keep their file order after every older definition.
    definitions.sort_by_key(|d| ages.get(&d.name).copied().unwrap_or(u64::MAX));
    definitions
}

/// Records the served definitions that have no record yet, and removes the records of those
/// that are gone; returns `ages` as the store now has them (kept by the reloader between reloads,
/// so that a reload reads no record of a definition it did not add or remove).
pub async fn record(store: &Backend, registry: &Registry, ages: &HashMap<String, u64>) -> HashMap<String, u64> {
    // All at once, so that the store commits them together.
    let new = registry.definitions().iter().filter(|d| !ages.contains_key(&d.name)).map(|definition| async move {
        let names = json!({"plural": definition.plural, "singular": definition.singular, "kind": definition.kind,
                           "listKind": definition.list_kind, "shortNames": definition.short_names});
        let key = format!("{ACCEPTED}{}", definition.name);
        let age = match store.create(&key, Bytes::from(names.to_string())).await {
            Ok(revision) => Some(revision),
            // Another replica on the store served it first: its record tells the age.
            Err(crate::store::Error::AlreadyExists(_)) => store.get(&key).await.ok().flatten().map(|found| found.revision),
            Err(e) => {
                tracing::warn!(definition = %definition.name, error = %e, "recording the definition's accepted names failed");
                None
            }
        };
        age.map(|age| (definition.name.clone(), age))
    });
    let created = futures_util::future::join_all(new).await;
    let served: std::collections::HashSet<&str> = registry.definitions().iter().map(|d| d.name.as_str()).collect();
    let mut now = HashMap::with_capacity(served.len());
    for (name, age) in ages {
        if served.contains(name.as_str()) {
            now.insert(name.clone(), *age);
            continue;
        }
        match store.delete(&format!("{ACCEPTED}{name}"), None).await {
            Ok(_) | Err(crate::store::Error::NotFound(_)) => {}
            Err(e) => {
                tracing::warn!(definition = %name, error = %e, "freeing the names of a definition no longer served failed");
                // Still held in the store: tried again at the next reload.
                now.insert(name.clone(), *age);
            }
        }
    }
    now.extend(created.into_iter().flatten());
    now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definitions::load::definition_from_value;

    fn definition(name: &str) -> Definition {
        let (plural, group) = name.split_once('.').unwrap();
        let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": group, "scope": "Namespaced",
                "names": {"plural": plural, "singular": "thing", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
        definition_from_value(raw, "test").unwrap()
    }

    #[test]
    fn the_definition_served_first_keeps_its_names() {
        let files = vec![definition("newer.example.com"), definition("older.example.com")];
        let ages = HashMap::from([("older.example.com".to_string(), 7)]);
        let (registry, problems) = Registry::build(oldest_first(files, &ages));
        let served: Vec<&str> = registry.definitions().iter().map(|d| d.name.as_str()).collect();
        assert_eq!(served, ["older.example.com"]);
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].to_string().contains("names not accepted: \"ThingList\" is already in use"),
            "{}",
            problems[0]
        );
    }

    #[tokio::test]
    async fn the_ages_kept_between_reloads_are_the_stores() {
        let dir = tempfile::tempdir().unwrap();
        let sled = crate::store::sled::SledStore::open(dir.path(), crate::store::sled::SledOptions::default()).unwrap();
        let store = Backend::Sled(sled);
        // Another replica recorded one of them first; one record is of a definition gone since.
        store.create(&format!("{ACCEPTED}bs.two.com"), Bytes::from_static(b"{}")).await.unwrap();
        store.create(&format!("{ACCEPTED}gone.three.com"), Bytes::from_static(b"{}")).await.unwrap();
        let kept = HashMap::from([("gone.three.com".to_string(), 2)]);
        let (registry, problems) = Registry::build(vec![definition("as.one.com"), definition("bs.two.com")]);
        assert!(problems.is_empty());
        let now = record(&store, &registry, &kept).await;
        assert_eq!(now, ages(&store).await);
        assert_eq!(now.len(), 2);
        assert_eq!(now["bs.two.com"], 1, "the age of the record another replica wrote");
    }
}
