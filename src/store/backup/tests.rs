//! Backups of a sled store in process: the round trip, consistency at one revision while a
//! writer runs (with a history window far smaller than the writes made meanwhile), and the
//! files a restore refuses without touching the store.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use super::*;
use crate::store::sled::{HistoryLimits, SledOptions, SledStore};
use crate::store::{Backend, Error as StoreError, ListOptions, Store};

fn open(dir: &Path, history: HistoryLimits) -> SledStore {
    // sled allows one handle per directory: a store closed a moment ago may still hold it.
    for _ in 0..100 {
        if let Ok(store) = SledStore::open(dir, SledOptions { history, ..SledOptions::default() }) {
            return store;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    SledStore::open(dir, SledOptions::default()).unwrap()
}

/// Writes a backup of `store` into `path`, with a reader that takes its time.
async fn backup_to(store: &Backend, path: &Path, slow: bool) -> Summary {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(1);
    let path = path.to_path_buf();
    let reader = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Some(chunk) = rx.recv().await {
            all.extend_from_slice(&chunk);
            if slow {
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
        }
        std::fs::write(path, all).unwrap();
    });
    let summary = store.backup(&tx).await.unwrap();
    drop(tx);
    reader.await.unwrap();
    summary
}

fn restore_into(dir: &Path, file: &Path, replace: bool) -> Result<Restored, Error> {
    let verified = verify(file)?;
    let options = RestoreOptions { replace, bump_revision: 1000 };
    // A store closed a moment ago may still hold sled's lock.
    for _ in 0..100 {
        match crate::store::sled::restore(dir, &verified.header, Objects::open(&verified)?, options) {
            Err(e) if e.to_string().contains("in use") => std::thread::sleep(std::time::Duration::from_millis(20)),
            outcome => return outcome,
        }
    }
    crate::store::sled::restore(dir, &verified.header, Objects::open(&verified)?, options)
}

async fn everything(store: &SledStore) -> Vec<(String, u64, Bytes)> {
    let mut all = Vec::new();
    for prefix in [OBJECT_PREFIX, STATE_PREFIX] {
        let page = store.list(prefix, ListOptions::default()).await.unwrap();
        all.extend(page.items.into_iter().map(|kv| (kv.key, kv.revision, kv.value)));
    }
    all
}

#[tokio::test]
async fn a_backup_restores_every_key_with_its_bytes_and_revisions_go_on_above_it() {
    let source_dir = tempfile::tempdir().unwrap();
    let store = open(source_dir.path(), HistoryLimits::default());
    store
        .create(
            "crd-apiserver/stored-versions/crontabs.stable.example.com",
            Bytes::from_static(b"{\"storedVersions\":[\"v1\"]}"),
        )
        .await
        .unwrap();
    for i in 0..2500 {
        store.create(&format!("/g/r/ns/o{i:04}"), Bytes::from(format!("{{\"n\":{i}}}"))).await.unwrap();
    }
    // Bytes that are not UTF-8 survive too.
    store.create("/g/r/ns/binary", Bytes::from_static(&[0, 159, 146, 150, 255])).await.unwrap();
    let deleted = store.create("/g/r/ns/gone", Bytes::from_static(b"{}")).await.unwrap();
    store.delete("/g/r/ns/gone", Some(deleted)).await.unwrap();
    let before = everything(&store).await;
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("backup.jsonl");
    let summary = backup_to(&Backend::Sled(store.clone()), &file, false).await;
    assert_eq!((summary.objects, summary.state, summary.revision), (2501, 1, store.current_revision()));
    let first_line = std::fs::read_to_string(&file).unwrap().lines().next().unwrap().to_string();
    assert!(
        first_line.starts_with(r#"{"type":"header","format":"crd-apiserver-backup","version":1,"backend":"sled""#),
        "{first_line}"
    );
    let old = store.current_revision();

    let target_dir = tempfile::tempdir().unwrap();
    let restored = restore_into(target_dir.path(), &file, false).unwrap();
    assert_eq!((restored.objects, restored.state, restored.revision), (2501, 1, old + 1000));
    let target = open(target_dir.path(), HistoryLimits::default());
    assert_eq!(everything(&target).await, before);
    assert_eq!(target.current_revision(), old + 1000);
    // Clients holding the old revisions list and watch again.
    let expired = target.watch("/g/r/", old).await.err();
    assert!(matches!(expired, Some(StoreError::Expired { .. })), "{expired:?}");
    let listed = target.list("/g/r/", ListOptions { revision: Some(old), ..ListOptions::default() }).await;
    assert!(matches!(listed, Err(StoreError::Expired { .. })));
    let next = target.create("/g/r/ns/new", Bytes::from_static(b"{}")).await.unwrap();
    assert!(next > old + 1000);
    target.close();
    drop(target);

    // A store that holds keys is refused, untouched, unless told to replace them.
    let refused = restore_into(target_dir.path(), &file, false).unwrap_err();
    assert!(refused.to_string().contains("is not empty"), "{refused}");
    let replaced = restore_into(target_dir.path(), &file, true).unwrap();
    assert!(replaced.revision > next, "revisions never go back: {} > {next}", replaced.revision);
    let target = open(target_dir.path(), HistoryLimits::default());
    assert_eq!(everything(&target).await, before);
    target.close();
    store.close();
}

#[tokio::test]
async fn an_online_backup_holds_every_write_acknowledged_before_its_revision_and_none_after() {
    let dir = tempfile::tempdir().unwrap();
    // A window of 200 events, fewer than the writer makes while the backup is read (the pin
    // holds the window open), and an eighth of what the pin may hold: the writer is paced so
    // that a fast machine stays within it too.
    let store = open(dir.path(), HistoryLimits { max_events: 200, max_bytes: 1 << 20 });
    // About 1 MiB: the slow reader takes a few chunks, and writes go on meanwhile.
    for i in 0..3000 {
        store.create(&format!("/g/r/ns/seed{i:04}"), Bytes::from(vec![b'x'; 300])).await.unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, stop) = (store.clone(), stop.clone());
        tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("/g/r/ns/w{i:06}");
                let revision = store.create(&key, Bytes::from(key.clone())).await.unwrap();
                // Every seed object rewritten too: the backup must show the old values.
                let seed = format!("/g/r/ns/seed{:04}", i % 3000);
                let current = store.get(&seed).await.unwrap().unwrap().revision;
                store.update(&seed, current, Bytes::from_static(b"{\"changed\":true}")).await.unwrap();
                acknowledged.push((key, revision));
                i += 1;
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            acknowledged
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let file = dir.path().join("online.jsonl");
    let summary = backup_to(&Backend::Sled(store.clone()), &file, true).await;
    stop.store(true, Ordering::Relaxed);
    let acknowledged = writer.await.unwrap();
    let verified = verify(&file).unwrap();
    let entries: Vec<Entry> = Objects::open(&verified).unwrap().map(Result::unwrap).collect();
    let keys: std::collections::HashMap<&str, &Entry> = entries.iter().map(|e| (e.key.as_str(), e)).collect();
    let after = acknowledged.iter().filter(|(_, r)| *r > summary.revision).count();
    assert!(after > 20, "the writer went on during the backup ({after} writes after its revision)");
    for (key, revision) in &acknowledged {
        assert_eq!(
            keys.contains_key(key.as_str()),
            *revision <= summary.revision,
            "{key} at {revision}, backup at {}",
            summary.revision
        );
    }
    for entry in &entries {
        assert!(
            entry.revision <= summary.revision,
            "{} written at {} is newer than the backup",
            entry.key,
            entry.revision
        );
    }
    store.close();
}

fn damaged(dir: &Path, source: &Path, name: &str, change: impl FnOnce(String) -> String) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, change(std::fs::read_to_string(source).unwrap())).unwrap();
    path
}

#[tokio::test]
async fn truncated_altered_and_newer_files_are_refused_and_the_store_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("source"), HistoryLimits::default());
    for i in 0..300 {
        store.create(&format!("/g/r/ns/o{i:03}"), Bytes::from(vec![b'x'; 1000])).await.unwrap();
    }
    let file = dir.path().join("good.jsonl");
    backup_to(&Backend::Sled(store.clone()), &file, false).await;
    store.close();
    let size = std::fs::metadata(&file).unwrap().len() as usize;
    let cases = [
        (damaged(dir.path(), &file, "cut-in-a-line", |t| t[..size / 2].to_string()), "truncated"),
        (
            damaged(dir.path(), &file, "cut-at-a-line", |t| {
                let lines: Vec<&str> = t.lines().collect();
                lines[..lines.len() / 2].iter().map(|l| format!("{l}\n")).collect()
            }),
            "without its trailer line: it is truncated",
        ),
        (
            damaged(dir.path(), &file, "no-trailer", |t| {
                t.lines().filter(|l| !l.contains("\"trailer\"")).map(|l| format!("{l}\n")).collect()
            }),
            "truncated",
        ),
        (damaged(dir.path(), &file, "altered", |t| t.replacen("xxxxx", "yyyyy", 1)), "checksum does not match"),
        (
            damaged(dir.path(), &file, "newer", |t| t.replacen("\"version\":1", "\"version\":2", 1)),
            "format version 2, newer than this crd-apiserver reads",
        ),
        (damaged(dir.path(), &file, "not-a-backup", |_| "{\"kind\":\"List\"}\n".into()), "not a crd-apiserver backup"),
        (damaged(dir.path(), &file, "empty", |_| String::new()), "empty"),
    ];
    let target = dir.path().join("target");
    for (path, expected) in &cases {
        let error = restore_into(&target, path, false).unwrap_err();
        assert!(matches!(error, Error::Refused(_)), "{path:?}: {error}");
        assert!(error.to_string().contains(expected), "{path:?}: {error}");
        assert!(!target.exists(), "{path:?}: the store was touched");
    }
    assert_eq!(restore_into(&target, &file, false).unwrap().objects, 300);
}

#[tokio::test]
async fn an_interrupted_restore_leaves_a_store_that_refuses_to_open_until_restored_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("source"), HistoryLimits::default());
    for i in 0..10 {
        store.create(&format!("/g/r/ns/o{i}"), Bytes::from_static(b"{}")).await.unwrap();
    }
    let file = dir.path().join("backup.jsonl");
    backup_to(&Backend::Sled(store.clone()), &file, false).await;
    store.close();
    let verified = verify(&file).unwrap();
    let target = dir.path().join("target");
    // The reading breaks off after three objects (a disk error, a crash).
    let broken =
        Objects::open(&verified).unwrap().take(3).chain(std::iter::once(Err(Error::Io("the disk went away".into()))));
    let options = RestoreOptions { replace: false, bump_revision: 0 };
    let failed = crate::store::sled::restore(&target, &verified.header, broken, options).unwrap_err();
    assert!(failed.to_string().contains("the disk went away"), "{failed}");
    let mut refused = SledStore::open(&target, SledOptions::default()).err().unwrap();
    for _ in 0..100 {
        if !refused.to_string().contains("in use") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        refused = SledStore::open(&target, SledOptions::default()).err().unwrap();
    }
    assert!(refused.to_string().contains("a restore into it was interrupted"), "{refused}");
    assert!(restore_into(&target, &file, false).unwrap_err().to_string().contains("not empty"));
    assert_eq!(restore_into(&target, &file, true).unwrap().objects, 10);
    let restored = open(&target, HistoryLimits::default());
    assert_eq!(restored.list("/g/r/", ListOptions::default()).await.unwrap().items.len(), 10);
}
