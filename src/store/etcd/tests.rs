//! The etcd backend against a real etcd: the storage conformance suite, two replicas on one
//! etcd, compaction, etcd's size limit, outages, and restores (the revision offset).
#![cfg(feature = "etcd")]

use std::time::Duration;

use bytes::Bytes;

use super::testing::TestEtcd;
use super::{EtcdOptions, EtcdStore};
use crate::store::{Error, EventType, ListOptions, Store};

fn options(etcd: &TestEtcd) -> EtcdOptions {
    EtcdOptions {
        servers: vec![etcd.endpoint()],
        compaction_interval: Duration::ZERO,
        request_timeout: Duration::from_secs(3),
        ..EtcdOptions::default()
    }
}

async fn open(etcd: &TestEtcd) -> EtcdStore {
    EtcdStore::open(options(etcd)).await.unwrap()
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[tokio::test]
async fn conformance() {
    let etcd = TestEtcd::start();
    let store = open(&etcd).await;
    crate::store::conformance::run_all(&store).await;
    store.close();
}

#[tokio::test]
async fn replicas_share_revisions_conflicts_and_watches() {
    let etcd = TestEtcd::start();
    let a = open(&etcd).await;
    let b_replica = open(&etcd).await;
    let start = a.current_revision();
    let mut watch_on_b = b_replica.watch("/g/r/", start).await.unwrap();
    let created = a.create("/g/r/x", b("1")).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), watch_on_b.next()).await.unwrap().unwrap();
    assert_eq!((event.kind, event.revision, event.value.clone()), (EventType::Added, created, b("1")));
    // Both replicas decide conflicts through etcd: the second update from the same revision
    // loses, whichever replica it went to.
    let updated = b_replica.update("/g/r/x", created, b("2")).await.unwrap();
    assert!(
        matches!(a.update("/g/r/x", created, b("3")).await, Err(Error::Conflict { current, .. }) if current == updated)
    );
    assert_eq!(a.create("/g/r/x", b("again")).await, Err(Error::AlreadyExists("/g/r/x".into())));
    // A client that resumes on the other replica from what it saw gets what followed, once.
    let mut resumed = a.watch("/g/r/", created).await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), resumed.next()).await.unwrap().unwrap();
    assert_eq!((next.kind, next.revision, next.prev.clone()), (EventType::Modified, updated, Some(b("1"))));
    // A write b acknowledged becomes b's current revision once b's watch delivers it.
    assert!(b_replica.wait_for_revision(updated, Duration::from_secs(30)).await);
    assert!(b_replica.current_revision() >= updated);
    // The prefix keeps tenants apart: another prefix on the same etcd sees none of this.
    let other = EtcdStore::open(EtcdOptions { prefix: "/other".into(), ..options(&etcd) }).await.unwrap();
    assert!(other.get("/g/r/x").await.unwrap().is_none());
    assert_eq!(other.count("/g/").await.unwrap(), 0);
    assert_eq!(a.count("/g/").await.unwrap(), 1);
}

/// A tenant whose prefix is idle while another writes: its lists are at etcd's revision, past
/// its own last event, and a client watching from such a list's revision is served at once
/// (the feed writes a progress marker, never listed, rather than trusting etcd's progress
/// notifications) and gets what follows.
#[tokio::test]
async fn a_watch_from_a_list_of_an_idle_prefix_starts_and_continues() {
    let etcd = TestEtcd::start();
    let idle = open(&etcd).await;
    let busy = EtcdStore::open(EtcdOptions { prefix: "/busy".into(), ..options(&etcd) }).await.unwrap();
    let first = idle.create("/g/r/a", b("1")).await.unwrap();
    for i in 0..20 {
        busy.create(&format!("/g/r/{i}"), b("x")).await.unwrap();
    }
    let listed = idle.list("/", ListOptions::default()).await.unwrap();
    assert!(listed.revision > first, "the list is at etcd's revision, past the prefix's last event");
    assert_eq!(listed.items.len(), 1, "only the object, never the progress marker");
    let mut watch = tokio::time::timeout(Duration::from_secs(2), idle.watch("/g/r/", listed.revision))
        .await
        .expect("the watch opened before the catch-up timeout")
        .unwrap();
    let next = idle.create("/g/r/b", b("2")).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), watch.next()).await.unwrap().unwrap();
    assert_eq!((event.kind, event.revision, event.key.as_str()), (EventType::Added, next, "/g/r/b"));
    assert_eq!(idle.list("/", ListOptions::default()).await.unwrap().items.len(), 2);
}

#[tokio::test]
async fn compacted_revisions_are_expired() {
    let etcd = TestEtcd::start();
    let store = open(&etcd).await;
    // Cached first: the window still holds `first` after etcd compacted it, yet a list at it
    // is expired, as etcd answers.
    store.list("/c/r/", ListOptions::default()).await.unwrap();
    cached(&store, 1).await;
    let first = store.create("/c/r/a", b("1")).await.unwrap();
    let second = store.update("/c/r/a", first, b("2")).await.unwrap();
    store.create("/c/r/b", b("1")).await.unwrap();
    let mut kv = store.client().kv_client();
    kv.compact(i64::try_from(second).unwrap(), None).await.unwrap();
    let old = store.list("/c/r/", ListOptions { revision: Some(first), ..Default::default() }).await;
    assert!(matches!(old, Err(Error::Expired { requested, .. }) if requested == first), "{old:?}");
    // The compacted revision itself still reads.
    let before = store.cache_stats();
    let at = store.list("/c/r/", ListOptions { revision: Some(second), ..Default::default() }).await.unwrap();
    assert_eq!(at.items.len(), 1);
    assert_eq!(store.cache_stats().cached_reads, before.cached_reads + 1);
}

#[tokio::test]
async fn a_value_over_etcds_limit_is_refused_and_writes_nothing() {
    let etcd = TestEtcd::start_with(&["--max-request-bytes", "65536"]);
    let store = open(&etcd).await;
    let large = Bytes::from(vec![b'x'; 100_000]);
    let refused = store.create("/big/r/a", large.clone()).await;
    assert_eq!(refused, Err(Error::RequestTooLarge("etcdserver: request is too large".into())));
    assert!(store.get("/big/r/a").await.unwrap().is_none());
    // Far over gRPC's own limit too.
    let huge = Bytes::from(vec![b'x'; 3 << 20]);
    assert!(matches!(store.create("/big/r/b", huge).await, Err(Error::RequestTooLarge(_))));
    let rev = store.create("/big/r/a", b("small")).await.unwrap();
    assert!(matches!(store.update("/big/r/a", rev, large).await, Err(Error::RequestTooLarge(_))));
    assert_eq!(store.get("/big/r/a").await.unwrap().unwrap().value, b("small"));
}

#[tokio::test]
async fn an_outage_fails_requests_in_time_and_heals_by_itself() {
    let mut etcd = TestEtcd::start();
    let store = open(&etcd).await;
    let start = store.current_revision();
    let mut watch = store.watch("/o/r/", start).await.unwrap();
    let before = store.create("/o/r/before", b("1")).await.unwrap();
    assert!(store.health().is_ok());
    etcd.kill();
    // Requests fail within the request timeout, never hang, and say the store is unavailable.
    let began = std::time::Instant::now();
    let failed = store.create("/o/r/during", b("1")).await;
    assert!(matches!(failed, Err(Error::Unavailable(_) | Error::Timeout(_))), "{failed:?}");
    assert!(began.elapsed() < Duration::from_secs(6), "took {:?}", began.elapsed());
    wait_for(|| store.health().is_err(), "the health check to fail").await;
    etcd.resume();
    wait_for(|| store.health().is_ok(), "the health check to recover").await;
    // Nothing failed was written; the watch goes on with no gap.
    assert!(store.get("/o/r/during").await.unwrap().is_none());
    let after = store.create("/o/r/after", b("1")).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(10), watch.next()).await.unwrap().unwrap();
        seen.push(event.revision);
    }
    assert_eq!(seen, [before, after]);
}

#[tokio::test]
async fn start_waits_for_an_unreachable_etcd() {
    let mut etcd = TestEtcd::start();
    etcd.kill();
    let opening = tokio::spawn(EtcdStore::open(options(&etcd)));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!opening.is_finished(), "open must keep retrying while etcd is down");
    etcd.resume();
    let store = tokio::time::timeout(Duration::from_secs(20), opening).await.unwrap().unwrap().unwrap();
    store.create("/s/r/a", b("1")).await.unwrap();
}

async fn wait_for(condition: impl Fn() -> bool, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn electing(etcd: &TestEtcd) -> EtcdOptions {
    let timing = crate::store::leadership::ElectionTiming {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
    };
    EtcdOptions { election: Some(timing), ..options(etcd) }
}

#[tokio::test]
async fn one_replica_leads_and_another_takes_over_when_it_stops() {
    let etcd = TestEtcd::start();
    let first = EtcdStore::open(electing(&etcd)).await.unwrap();
    wait_for(|| first.leadership().is_leader(), "the first replica to lead").await;
    let second = EtcdStore::open(electing(&etcd)).await.unwrap();
    // The second waits in line while the first renews its lease, several leases long.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(first.leadership().is_leader() && !second.leadership().is_leader());
    // The leader stops without resigning (its tasks end, as in a crash): its lease expires
    // and the second takes over within about one lease.
    first.close();
    let stopped = tokio::time::Instant::now();
    wait_for(|| second.leadership().is_leader(), "the second replica to take over").await;
    assert!(stopped.elapsed() < Duration::from_secs(5), "took over after {:?}", stopped.elapsed());
    // A store opened without an election (a tool, or --leader-elect=false) always leads.
    assert!(open(&etcd).await.leadership().is_leader());
}

#[tokio::test]
async fn a_leader_cut_off_from_etcd_steps_down_and_leads_again_when_it_returns() {
    let mut etcd = TestEtcd::start();
    let store = EtcdStore::open(electing(&etcd)).await.unwrap();
    wait_for(|| store.leadership().is_leader(), "the replica to lead").await;
    etcd.kill();
    // It stops leading within the renew deadline, before its lease could have expired.
    let cut = tokio::time::Instant::now();
    wait_for(|| !store.leadership().is_leader(), "the replica to step down").await;
    assert!(cut.elapsed() < Duration::from_secs(2), "stepped down after {:?}", cut.elapsed());
    etcd.resume();
    wait_for(|| store.leadership().is_leader(), "the replica to lead again").await;
}

/// A backup header of `revision` holding one state record.
fn header(revision: u64) -> crate::store::backup::Header {
    use crate::store::backup::{Entry, FORMAT, Header, VERSION};
    Header {
        format: FORMAT.into(),
        version: VERSION,
        backend: "sled".into(),
        revision,
        created: String::new(),
        state: vec![Entry::new("crd-apiserver/stored-versions/r.g".into(), 3, b"{\"storedVersions\":[\"v1\"]}")],
    }
}

#[tokio::test]
async fn a_restore_keeps_revisions_above_the_backups_and_an_interrupted_one_is_refused() {
    use crate::store::backup::{Entry, Error as BackupError, RestoreOptions};
    let etcd = TestEtcd::start();
    let objects = || (0..250u64).map(|i| Ok(Entry::new(format!("/g/r/ns/o{i:03}"), 10 + i, b"{}")));
    let into_empty = RestoreOptions { replace: false, bump_revision: 1000 };
    // Broken off after 120 objects: the marker stays and servers refuse the store.
    let broken = objects().take(120).chain(std::iter::once(Err(BackupError::Io("the file went away".into()))));
    let failed = super::restore(&options(&etcd), &header(5000), broken, into_empty).await.unwrap_err();
    assert!(failed.to_string().contains("the file went away"), "{failed}");
    let refused = EtcdStore::open(options(&etcd)).await.err().unwrap();
    assert!(refused.to_string().contains("a restore into it was interrupted"), "{refused}");
    let not_empty = super::restore(&options(&etcd), &header(5000), objects(), into_empty).await.unwrap_err();
    assert!(not_empty.to_string().contains("--replace"), "{not_empty}");
    let replace = RestoreOptions { replace: true, ..into_empty };
    let restored = super::restore(&options(&etcd), &header(5000), objects(), replace).await.unwrap();
    assert_eq!((restored.objects, restored.state), (250, 1));
    assert!(restored.revision > 6000, "{}", restored.revision);

    let store = open(&etcd).await;
    let listed = store.list("/g/r/", ListOptions::default()).await.unwrap();
    assert_eq!(listed.items.len(), 250);
    assert!(listed.items.iter().all(|kv| kv.revision > 6000), "every restored object is above the bump");
    assert!(listed.revision >= restored.revision);
    assert_eq!(
        store.get("crd-apiserver/stored-versions/r.g").await.unwrap().unwrap().value,
        b("{\"storedVersions\":[\"v1\"]}")
    );
    // Revisions of before the restore are expired, for lists and watches alike.
    for old in [10, 4000, 6000] {
        let at = store.list("/g/r/", ListOptions { revision: Some(old), ..Default::default() }).await;
        assert!(matches!(at, Err(Error::Expired { .. })), "{old}: {at:?}");
        assert!(matches!(store.watch("/g/r/", old).await, Err(Error::Expired { .. })), "{old}");
    }
    // Writes, compare-and-swap and watches go on in the store's numbering.
    let from = store.current_revision();
    let mut watch = store.watch("/g/r/", from).await.unwrap();
    let first = &listed.items[0];
    let updated = store.update(&first.key, first.revision, b("{\"n\":1}")).await.unwrap();
    assert!(updated > listed.revision);
    assert!(
        matches!(store.update(&first.key, first.revision, b("stale")).await, Err(Error::Conflict { current, .. }) if current == updated)
    );
    let event = tokio::time::timeout(Duration::from_secs(5), watch.next()).await.unwrap().unwrap();
    assert_eq!((event.kind, event.revision), (EventType::Modified, updated));
    let at = store.list("/g/r/", ListOptions { revision: Some(listed.revision), ..Default::default() }).await.unwrap();
    assert_eq!(at.items.iter().find(|kv| kv.key == first.key).unwrap().value, b("{}"));
    store.close();
}

/// A takeover into an etcd whose revision is behind the main apiserver's: the revisions every
/// replica issues afterwards are above the target, even a replica whose feed has not seen the
/// advance yet (its write is fenced by the record), while the revisions of every key written
/// before keep their numbers (compare-and-swap and watches from them go on).
#[tokio::test]
async fn an_advance_moves_every_replicas_later_revisions_and_keeps_the_earlier_ones() {
    let etcd = TestEtcd::start();
    let a = open(&etcd).await;
    let b_replica = open(&etcd).await;
    let before = a.create("/g/r/old", b("1")).await.unwrap();
    let mut watch_on_b = b_replica.watch("/g/r/", before).await.unwrap();
    // A replica that reads etcd directly (no cache) learns the record with its reads.
    let direct = EtcdStore::open(EtcdOptions { watch_cache: false, ..options(&etcd) }).await.unwrap();
    let target = before + 1_000_000_000;
    let floor = a.advance_revision(target).await.unwrap();
    assert!(floor > target, "{floor}");
    // b's feed may not have seen the record yet: its write is fenced and learns it.
    let on_b = b_replica.create("/g/r/new-b", b("b")).await.unwrap();
    let on_a = a.create("/g/r/new-a", b("a")).await.unwrap();
    assert!(on_b > floor && on_a > floor && on_a != on_b, "{floor} {on_a} {on_b}");
    assert_eq!(direct.get("/g/r/new-a").await.unwrap().unwrap().revision, on_a);
    let listed = direct.list("/g/r/", ListOptions::default()).await.unwrap();
    assert!(listed.revision >= on_a.max(on_b), "{}", listed.revision);
    let revisions: Vec<u64> = listed.items.iter().map(|kv| kv.revision).collect();
    assert_eq!(revisions, [on_a, on_b, before], "new-a, new-b, old");
    direct.close();
    // The key written before keeps its revision, on both replicas, and updates from it work.
    assert_eq!(b_replica.get("/g/r/old").await.unwrap().unwrap().revision, before);
    let updated = b_replica.update("/g/r/old", before, b("2")).await.unwrap();
    assert!(updated > on_a.max(on_b));
    // b's watch from before the advance goes on with the new revisions, in order.
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = tokio::time::timeout(Duration::from_secs(5), watch_on_b.next()).await.unwrap().unwrap();
        seen.push((event.key.clone(), event.revision));
    }
    let revisions: Vec<u64> = seen.iter().map(|(_, r)| *r).collect();
    assert!(revisions.windows(2).all(|w| w[0] < w[1]) && revisions[0] > floor, "{seen:?}");
    assert!(b_replica.wait_for_revision(updated, Duration::from_secs(10)).await);
    assert!(b_replica.current_revision() >= updated);
    // An advance that is already passed changes nothing; a second one stacks on the first.
    assert_eq!(b_replica.advance_revision(10).await.unwrap(), b_replica.advance_revision(10).await.unwrap());
    let second = b_replica.advance_revision(updated + 1_000).await.unwrap();
    assert!(second > updated + 1_000);
    // A replica opened afterwards numbers everything the same.
    let c = open(&etcd).await;
    for (key, revision) in [("/g/r/new-a", on_a), ("/g/r/new-b", on_b), ("/g/r/old", updated)] {
        assert_eq!(c.get(key).await.unwrap().unwrap().revision, revision, "{key}");
    }
    assert!(c.create("/g/r/c", b("c")).await.unwrap() > second);
    let listed = c.list("/g/r/", ListOptions { revision: Some(on_b), ..Default::default() }).await.unwrap();
    assert_eq!(listed.items.len(), 2, "the state at a revision after the advance");
    for store in [a, b_replica, c] {
        store.close();
    }
}

/// Waits until `store` caches `n` resources (each is loaded on its first read) and may answer
/// from them (its watch is open).
async fn cached(store: &EtcdStore, resources: usize) {
    let ready = || {
        let cache = store.cache_stats().cache;
        cache.resources >= resources && cache.live
    };
    wait_for(ready, "the resource to be cached").await;
}

#[tokio::test]
async fn a_consistent_read_on_one_replica_sees_every_write_acknowledged_by_another() {
    let etcd = TestEtcd::start();
    let a = open(&etcd).await;
    let b_replica = open(&etcd).await;
    assert!(b_replica.get("/ryw/r/ns/x").await.unwrap().is_none());
    cached(&b_replica, 1).await;
    let before = b_replica.cache_stats();
    let mut revision = 0;
    for i in 0..100 {
        let key = format!("/ryw/r/ns/o{}", i % 10);
        // Each write is acknowledged by A; B's very next consistent read must show it.
        let (deleted, written) = match b_replica.get(&key).await.unwrap() {
            None => (false, a.create(&key, b(&i.to_string())).await.unwrap()),
            Some(old) if i % 7 == 0 => (true, a.delete(&key, Some(old.revision)).await.unwrap().0),
            Some(old) => (false, a.update(&key, old.revision, b(&i.to_string())).await.unwrap()),
        };
        revision = written;
        let seen = b_replica.get(&key).await.unwrap();
        let listed = b_replica.list("/ryw/r/ns/", ListOptions::default()).await.unwrap();
        assert!(listed.revision >= revision);
        let in_list = listed.items.iter().find(|kv| kv.key == key).map(|kv| (kv.revision, kv.value.clone()));
        if deleted {
            assert!(seen.is_none() && in_list.is_none(), "deletion {i} on A not seen by B");
        } else {
            let seen = seen.unwrap_or_else(|| panic!("write {i} on A not seen by B"));
            assert_eq!((seen.revision, seen.value), (revision, b(&i.to_string())), "write {i}");
            assert_eq!(in_list, Some((revision, b(&i.to_string()))), "write {i} not listed");
        }
    }
    let after = b_replica.cache_stats();
    // Every one of those reads came from B's cache, with at most one read of etcd's revision
    // each.
    assert_eq!(after.direct_reads, before.direct_reads);
    assert_eq!(after.cached_reads - before.cached_reads, 300);
    assert!(after.revision_reads - before.revision_reads <= 300);
    assert!(after.cache.revision >= revision);
}

#[tokio::test]
async fn concurrent_consistent_reads_share_revision_reads() {
    let etcd = TestEtcd::start();
    let store = open(&etcd).await;
    store.create("/share/r/a", b("1")).await.unwrap();
    store.get("/share/r/a").await.unwrap();
    cached(&store, 1).await;
    let before = store.cache_stats();
    let reads: Vec<_> = (0..200)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.get("/share/r/a").await.unwrap().unwrap().value })
        })
        .collect();
    for read in reads {
        assert_eq!(read.await.unwrap(), b("1"));
    }
    let after = store.cache_stats();
    assert_eq!(after.cached_reads - before.cached_reads, 200);
    let rounds = after.revision_reads - before.revision_reads;
    assert!(rounds < 100, "200 concurrent reads made {rounds} revision reads");
}

#[tokio::test]
async fn reads_not_older_than_a_revision_are_answered_by_the_cache_without_asking_etcd() {
    use crate::store::Freshness;
    let etcd = TestEtcd::start();
    let a = open(&etcd).await;
    let b_replica = open(&etcd).await;
    let first = a.create("/rv0/r/x", b("1")).await.unwrap();
    assert!(b_replica.get_fresh("/rv0/r/x", Freshness::NotOlderThan(0)).await.unwrap().is_some());
    cached(&b_replica, 1).await;
    // The cache may have been loaded before b's watch delivered the create (a read at "0" may
    // be that stale, as in Kubernetes): wait until it holds the create.
    assert!(b_replica.get_fresh("/rv0/r/x", Freshness::NotOlderThan(first)).await.unwrap().is_some());
    let before = b_replica.cache_stats();
    // resourceVersion="0": whatever the cache holds, at once.
    let any = b_replica.get_fresh("/rv0/r/x", Freshness::NotOlderThan(0)).await.unwrap().unwrap();
    assert!(any.revision >= first);
    let listed = b_replica.list("/rv0/r/", ListOptions { freshness: Freshness::NotOlderThan(0), ..Default::default() });
    assert_eq!(listed.await.unwrap().items.len(), 1);
    // resourceVersion="N": the cache once it has reached N, still without a revision read.
    let second = a.update("/rv0/r/x", first, b("2")).await.unwrap();
    let fresh = b_replica.get_fresh("/rv0/r/x", Freshness::NotOlderThan(second)).await.unwrap().unwrap();
    assert_eq!((fresh.revision, fresh.value), (second, b("2")));
    let after = b_replica.cache_stats();
    assert_eq!(after.revision_reads, before.revision_reads, "no read of etcd's revision");
    assert_eq!((after.cached_reads - before.cached_reads, after.direct_reads), (3, before.direct_reads));
    // A consistent read asks etcd for its revision.
    b_replica.get("/rv0/r/x").await.unwrap();
    assert!(b_replica.cache_stats().revision_reads > before.revision_reads);
}

#[tokio::test]
async fn pages_of_a_list_read_from_the_cache_stay_at_their_revision_while_writes_go_on() {
    let etcd = TestEtcd::start();
    let writer = open(&etcd).await;
    let reader = open(&etcd).await;
    for i in 0..60 {
        writer.create(&format!("/page/r/ns/o{i:02}"), b("0")).await.unwrap();
    }
    reader.list("/page/r/", ListOptions { limit: Some(1), ..Default::default() }).await.unwrap();
    cached(&reader, 1).await;
    let before = reader.cache_stats();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writing = {
        let (writer, stop) = (writer.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let key = format!("/page/r/ns/o{:02}", n % 70);
                let _ = match writer.get(&key).await.unwrap() {
                    None => writer.create(&key, b(&n.to_string())).await,
                    Some(old) if n % 3 == 0 => writer.delete(&key, Some(old.revision)).await.map(|(r, _)| r),
                    Some(old) => writer.update(&key, old.revision, b(&n.to_string())).await,
                };
            }
            n
        })
    };
    let options = |start_after, revision| ListOptions {
        revision,
        start_after,
        limit: Some(7),
        count_remaining: true,
        ..Default::default()
    };
    let first = reader.list("/page/r/ns/", options(None, None)).await.unwrap();
    let at = first.revision;
    let mut items = first.items.clone();
    let mut remaining = first.remaining;
    let mut pages = 1;
    let mut more = first.more;
    while more {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let page = reader.list("/page/r/ns/", options(items.last().map(|kv| kv.key.clone()), Some(at))).await.unwrap();
        assert_eq!(page.revision, at);
        assert_eq!(remaining.map(|r| r as usize), Some(page.items.len() + page.remaining.unwrap_or(0) as usize));
        remaining = page.remaining;
        items.extend(page.items);
        more = page.more;
        pages += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = writing.await.unwrap();
    assert!(writes > 10, "the writer made only {writes} writes");
    assert!(reader.current_revision() > at, "writes went on while the pages were read");
    // etcd's own range at that revision.
    let mut kv = writer.client().kv_client();
    let range = etcd_client::GetOptions::new().with_prefix().with_revision(i64::try_from(at).unwrap());
    let expected = kv.get("/crd-apiserver/page/r/ns/", Some(range)).await.unwrap();
    let expected: Vec<_> = expected
        .kvs()
        .iter()
        .map(|kv| {
            (
                kv.key_str().unwrap().trim_start_matches("/crd-apiserver").to_string(),
                kv.mod_revision() as u64,
                kv.value().to_vec(),
            )
        })
        .collect();
    let got: Vec<_> = items.iter().map(|kv| (kv.key.clone(), kv.revision, kv.value.to_vec())).collect();
    assert_eq!(got, expected);
    let after = reader.cache_stats();
    assert_eq!(after.cached_reads - before.cached_reads, pages, "every page came from the cache");
}

#[tokio::test]
async fn the_cache_counts_each_object_as_its_bytes_plus_a_constant() {
    let etcd = TestEtcd::start();
    let store = open(&etcd).await;
    let value = Bytes::from(vec![b'v'; 1000]);
    for i in 0..300 {
        store.create(&format!("/mem/r/ns/o{i:03}"), value.clone()).await.unwrap();
    }
    store.get("/mem/r/ns/o000").await.unwrap();
    cached(&store, 1).await;
    let per_object = "ns/o000".len() + 1000 + super::ENTRY_OVERHEAD;
    let stats = store.cache_stats().cache;
    assert_eq!((stats.objects, stats.bytes), (300, 300 * per_object));
    // Updates replace, deletes release; objects of resources never read are not held.
    let kept = store.get("/mem/r/ns/o000").await.unwrap().unwrap();
    store.update("/mem/r/ns/o000", kept.revision, Bytes::from(vec![b'v'; 10])).await.unwrap();
    for i in 200..300 {
        store.delete(&format!("/mem/r/ns/o{i:03}"), None).await.unwrap();
    }
    store.create("/other/r/x", value.clone()).await.unwrap();
    let stats = store.cache_stats().cache;
    assert_eq!((stats.objects, stats.bytes), (200, 200 * per_object - 990));
    // The cached value is the one the watch delivered, not a copy per read.
    let one = store.get("/mem/r/ns/o001").await.unwrap().unwrap().value;
    let two = store.get("/mem/r/ns/o001").await.unwrap().unwrap().value;
    assert_eq!(one.as_ptr(), two.as_ptr());
}

#[tokio::test]
async fn the_cache_reports_kubernetes_watch_cache_metrics() {
    use crate::store::Freshness;
    let etcd = TestEtcd::start();
    let store = open(&etcd).await;
    // Figures are process-wide: this test's resource is its own.
    let figures = || crate::metrics::global().watch_cache.figures("metrics.cache", "r");
    store.create("/metrics.cache/r/a", b("1")).await.unwrap();
    store.get("/metrics.cache/r/a").await.unwrap();
    cached(&store, 1).await;
    assert_eq!(figures().initializations, 1);
    let second = store.create("/metrics.cache/r/b", b("22")).await.unwrap();
    wait_for(|| figures().revision >= second, "the cache to apply the second create").await;
    assert!(figures().events >= 1, "the create after the load was received");
    let not_older = ListOptions { freshness: Freshness::NotOlderThan(second), ..Default::default() };
    let listed = store.list("/metrics.cache/r/", not_older).await.unwrap();
    assert_eq!(listed.items.len(), 2);
    let after = figures();
    assert_eq!((after.lists, after.fetched, after.returned), (1, 2, 2));
    let text = crate::metrics::render(crate::metrics::Format::Prometheus);
    for line in [
        "apiserver_watch_cache_initializations_total{group=\"metrics.cache\",resource=\"r\"} 1",
        "apiserver_cache_list_total{group=\"metrics.cache\",resource=\"r\",index=\"\"} 1",
        "apiserver_cache_list_returned_objects_total{group=\"metrics.cache\",resource=\"r\"} 2",
    ] {
        assert!(text.contains(line), "{line} not in\n{text}");
    }
    assert!(text.contains("apiserver_watch_cache_resource_version{group=\"metrics.cache\",resource=\"r\"} "));
    assert!(text.contains("apiserver_watch_cache_events_received_total{group=\"metrics.cache\",resource=\"r\"} "));
}
