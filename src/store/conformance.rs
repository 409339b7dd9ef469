//! The storage contract as a test suite, run by every backend against a fresh store.

use std::time::Duration;

use bytes::Bytes;

use super::{Error, EventType, ListOptions, Store, Update};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Runs every case against `store`, which must be empty.
pub async fn run_all<S: Store>(store: &S) {
    create_get_update_delete(store).await;
    preconditions(store).await;
    revisions_increase(store).await;
    waits_for_a_revision(store).await;
    lists_page_and_stay_consistent(store).await;
    lists_at_an_old_revision(store).await;
    watch_replays_then_streams(store).await;
    watch_is_scoped_to_its_prefix(store).await;
    concurrent_writers(store).await;
    update_many(store).await;
}

async fn create_get_update_delete<S: Store>(store: &S) {
    let rev = store.create("/crud/r/a", b("1")).await.unwrap();
    let got = store.get("/crud/r/a").await.unwrap().unwrap();
    assert_eq!((got.revision, got.value), (rev, b("1")));
    let rev2 = store.update("/crud/r/a", rev, b("2")).await.unwrap();
    assert!(rev2 > rev);
    assert_eq!(store.get("/crud/r/a").await.unwrap().unwrap().value, b("2"));
    let (rev3, last) = store.delete("/crud/r/a", Some(rev2)).await.unwrap();
    assert!(rev3 > rev2);
    assert_eq!(last, b("2"));
    assert!(store.get("/crud/r/a").await.unwrap().is_none());
    assert!(store.get("/crud/r/never").await.unwrap().is_none());
}

async fn preconditions<S: Store>(store: &S) {
    let rev = store.create("/pre/r/a", b("1")).await.unwrap();
    assert_eq!(store.create("/pre/r/a", b("x")).await, Err(Error::AlreadyExists("/pre/r/a".into())));
    match store.update("/pre/r/a", rev + 100, b("x")).await {
        Err(Error::Conflict { current, .. }) => assert_eq!(current, rev),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(matches!(store.delete("/pre/r/a", Some(rev + 100)).await, Err(Error::Conflict { .. })));
    assert_eq!(store.update("/pre/r/missing", 1, b("x")).await, Err(Error::NotFound("/pre/r/missing".into())));
    assert_eq!(store.delete("/pre/r/missing", None).await, Err(Error::NotFound("/pre/r/missing".into())));
    // Failed writes change nothing.
    assert_eq!(store.get("/pre/r/a").await.unwrap().unwrap().value, b("1"));
}

async fn revisions_increase<S: Store>(store: &S) {
    let before = store.current_revision();
    let a = store.create("/rev/r/a", b("1")).await.unwrap();
    let c = store.create("/rev/r/c", b("1")).await.unwrap();
    assert!(before < a && a < c);
    // A consistent list holds every acknowledged write (etcd's revision may count writes
    // beside the store's keys, such as its progress marker).
    let list = store.list("/rev/r/", ListOptions::default()).await.unwrap();
    assert!(list.revision >= c);
    assert_eq!(list.items.iter().map(|kv| kv.revision).collect::<Vec<_>>(), [a, c]);
    // A backend may acknowledge a write before its revision is current; it becomes current.
    assert!(store.wait_for_revision(c, Duration::from_secs(30)).await);
    assert!(store.current_revision() >= c);
}

/// A revision a client holds that the store has not reached yet: the wait ends once a write
/// reaches it, or with false after its limit.
async fn waits_for_a_revision<S: Store>(store: &S) {
    let now = store.current_revision();
    assert!(store.wait_for_revision(now, Duration::from_secs(30)).await, "a reached revision");
    assert!(!store.wait_for_revision(now + 1_000_000, Duration::from_millis(50)).await, "a revision never written");
    let (reached, written) =
        tokio::join!(store.wait_for_revision(now + 1, Duration::from_secs(30)), store.create("/wait/r/a", b("1")));
    assert!(reached, "the next write's revision");
    assert!(written.unwrap() > now);
    assert!(store.current_revision() > now);
}

async fn lists_page_and_stay_consistent<S: Store>(store: &S) {
    for i in 0..10 {
        store.create(&format!("/page/r/ns/{i:02}"), b(&i.to_string())).await.unwrap();
    }
    store.create("/page/r2/ns/x", b("other resource")).await.unwrap();
    let first = store.list("/page/r/", ListOptions { limit: Some(4), ..Default::default() }).await.unwrap();
    assert_eq!(first.items.len(), 4);
    assert!(first.more);
    assert_eq!(first.remaining, None, "counted without being asked");
    let counted = ListOptions { limit: Some(4), count_remaining: true, ..Default::default() };
    assert_eq!(store.list("/page/r/", counted).await.unwrap().remaining, Some(6));
    // Changes after the first page must not show in later pages of the same list.
    let last_key = first.items.last().unwrap().key.clone();
    let v5 = store.get("/page/r/ns/05").await.unwrap().unwrap();
    store.update("/page/r/ns/05", v5.revision, b("changed")).await.unwrap();
    store.delete("/page/r/ns/06", None).await.unwrap();
    store.create("/page/r/ns/045", b("new")).await.unwrap();
    let mut keys: Vec<String> = first.items.iter().map(|kv| kv.key.clone()).collect();
    let mut start = Some(last_key);
    loop {
        let page = store
            .list(
                "/page/r/",
                ListOptions {
                    revision: Some(first.revision),
                    start_after: start.clone(),
                    limit: Some(4),
                    count_remaining: true,
                    ..ListOptions::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(page.revision, first.revision);
        // Counted at the list's revision: what follows this page of the ten first listed.
        let after = 10 - keys.len() - page.items.len();
        assert_eq!(page.remaining, page.more.then_some(after as u64), "after {start:?}");
        for kv in &page.items {
            if kv.key == "/page/r/ns/05" {
                assert_eq!(kv.value, b("5"));
            }
        }
        keys.extend(page.items.iter().map(|kv| kv.key.clone()));
        if !page.more {
            break;
        }
        start = page.items.last().map(|kv| kv.key.clone());
    }
    let expected: Vec<String> = (0..10).map(|i| format!("/page/r/ns/{i:02}")).collect();
    assert_eq!(keys, expected);
    // A fresh list sees the changes.
    let now = store.list("/page/r/", ListOptions::default()).await.unwrap();
    let now_keys: Vec<&str> = now.items.iter().map(|kv| kv.key.as_str()).collect();
    assert!(now_keys.contains(&"/page/r/ns/045"));
    assert!(!now_keys.contains(&"/page/r/ns/06"));
    assert!(!now.more);
}

async fn lists_at_an_old_revision<S: Store>(store: &S) {
    let r1 = store.create("/old/r/a", b("a1")).await.unwrap();
    let r2 = store.update("/old/r/a", r1, b("a2")).await.unwrap();
    store.delete("/old/r/a", Some(r2)).await.unwrap();
    let at_r1 = store.list("/old/r/", ListOptions { revision: Some(r1), ..Default::default() }).await.unwrap();
    assert_eq!(at_r1.items.len(), 1);
    assert_eq!(at_r1.items[0].value, b("a1"));
    assert_eq!(at_r1.items[0].revision, r1);
    let too_new = store
        .list("/old/r/", ListOptions { revision: Some(store.current_revision() + 10), ..Default::default() })
        .await;
    assert!(matches!(too_new, Err(Error::TooLarge { .. })));
}

async fn watch_replays_then_streams<S: Store>(store: &S) {
    let start = store.current_revision();
    let a = store.create("/watch/r/ns/a", b("1")).await.unwrap();
    let mut watch = store.watch("/watch/r/", start).await.unwrap();
    let a2 = store.update("/watch/r/ns/a", a, b("2")).await.unwrap();
    let (d, _) = store.delete("/watch/r/ns/a", None).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let event = tokio::time::timeout(Duration::from_secs(5), watch.next()).await.unwrap().unwrap();
        seen.push((event.kind, event.revision, event.value.clone(), event.prev.clone()));
    }
    assert_eq!(
        seen,
        vec![
            (EventType::Added, a, b("1"), None),
            (EventType::Modified, a2, b("2"), Some(b("1"))),
            (EventType::Deleted, d, b("2"), Some(b("2"))),
        ]
    );
}

async fn watch_is_scoped_to_its_prefix<S: Store>(store: &S) {
    let start = store.current_revision();
    let mut ns_a = store.watch("/scoped/r/a/", start).await.unwrap();
    store.create("/scoped/r/b/x", b("other namespace")).await.unwrap();
    store.create("/scoped/other/a/x", b("other resource")).await.unwrap();
    let mine = store.create("/scoped/r/a/x", b("mine")).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), ns_a.next()).await.unwrap().unwrap();
    assert_eq!((event.revision, event.key.as_str()), (mine, "/scoped/r/a/x"));
}

async fn concurrent_writers<S: Store>(store: &S) {
    let writes = (0..64).map(|i| store.create_owned(format!("/conc/r/{i}")));
    let revisions: Vec<u64> = futures_util::future::join_all(writes).await.into_iter().map(|r| r.unwrap()).collect();
    let mut sorted = revisions.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 64, "every write gets its own revision");
    let list = store.list("/conc/r/", ListOptions::default()).await.unwrap();
    assert_eq!(list.items.len(), 64);
}

/// Test helper: a create whose future owns its key.
trait CreateOwned: Store {
    fn create_owned(&self, key: String) -> impl std::future::Future<Output = super::Result<u64>> + Send {
        async move { self.create(&key, Bytes::from_static(b"{}")).await }
    }
}

impl<S: Store> CreateOwned for S {}

/// `update_many` decides each update as `update` would, and every success is an event of its
/// own.
async fn update_many<S: Store>(store: &S) {
    let a = store.create("/many/r/a", b("a1")).await.unwrap();
    let c = store.create("/many/r/c", b("c1")).await.unwrap();
    let mut watch = store.watch("/many/r/", c).await.unwrap();
    let update = |key: &str, expected, value: &str| Update { key: key.to_string(), expected, value: b(value) };
    let results = store
        .update_many(vec![update("/many/r/a", a, "a2"), update("/many/r/b", 1, "b2"), update("/many/r/c", a, "c2")])
        .await;
    let [Ok(a2), Err(Error::NotFound(_)), Err(Error::Conflict { current, .. })] = results.as_slice() else {
        panic!("unexpected results {results:?}");
    };
    assert!(*a2 > c);
    assert_eq!(*current, c);
    assert_eq!(store.get("/many/r/a").await.unwrap().unwrap().value, b("a2"));
    assert_eq!(store.get("/many/r/c").await.unwrap().unwrap().value, b("c1"));
    let event = tokio::time::timeout(Duration::from_secs(10), watch.next()).await.unwrap().unwrap();
    assert_eq!((event.kind, event.key.as_str(), event.revision), (EventType::Modified, "/many/r/a", *a2));
    assert_eq!(event.prev, Some(b("a1")));
    assert!(store.update_many(Vec::new()).await.is_empty());
}
