//! The replica's cache of objects, fed by its one etcd watch (`feed`): per resource prefix
//! (`/group/plural/`), every key's latest stored bytes and revision, and the revision the
//! cache has applied every event up to. Reads that Kubernetes' rules allow to be answered
//! from a cache are answered here (`reads`); everything else goes to etcd.
//!
//! A resource is cached from its first read on: its keys are listed from etcd at the cache's
//! revision of that moment while the feed's later events for it wait beside the listing, then
//! applied (`Resource::Loading`, `Resource::Ready`). Values are the very `Bytes` the feed
//! decoded (shared with the history window), kept once; the memory an entry costs is its key
//! and value bytes and `ENTRY_OVERHEAD`, counted in `Stats`.
//!
//! Must not do I/O: `feed` feeds it, `reads` reads it and loads resources into it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;

use crate::store::history::Record;
use crate::store::{EventType, KeyValue, Revision, Versioned, key};

/// What an entry costs beyond its key and value bytes: its slot in the map (key pointer,
/// revision, `Bytes` handle) with the map's half-full nodes, the allocators' headers of the
/// key and the value, and the shared handle `Bytes` allocates when a value is held twice.
pub const ENTRY_OVERHEAD: usize = 192;

/// Records `change` in the figures of the resource whose prefix is `resource` (`/group/plural/`).
fn record_figures(resource: &str, change: impl FnOnce(&mut crate::metrics::watch_cache::Figures)) {
    if let Some((group, plural)) = resource.trim_matches('/').split_once('/') {
        crate::metrics::global().watch_cache.update(group, plural, change);
    }
}

/// One cached key: its latest value and the revision that wrote it.
#[derive(Debug, Clone)]
struct Entry {
    revision: Revision,
    value: Bytes,
}

impl Entry {
    fn cost(key: &str, value: &Bytes) -> usize {
        key.len() + value.len() + ENTRY_OVERHEAD
    }
}

/// One change to a key of a resource, as the feed hands it over.
struct Change {
    /// Relative to the resource prefix.
    key: Box<str>,
    /// `None`: deleted.
    value: Option<Entry>,
}

enum Resource {
    /// Being listed from etcd at `since`; the feed's changes after it wait in `pending`.
    Loading { id: u64, since: Revision, pending: Vec<Change> },
    /// Every key of the resource at the cache's revision, by the key relative to the prefix.
    Ready(BTreeMap<Box<str>, Entry>),
}

struct Inner {
    /// Every event up to this revision has been applied.
    revision: Revision,
    /// Whether the feed's watch is open: while it is broken, reads go to etcd.
    live: bool,
    resources: HashMap<Box<str>, Resource>,
    next_load: u64,
    objects: usize,
    bytes: usize,
}

/// What the cache holds, for tests and the benchmark's report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Resources whose keys are all cached.
    pub resources: usize,
    pub objects: usize,
    /// Key and value bytes of every entry plus `ENTRY_OVERHEAD` each.
    pub bytes: usize,
    /// The revision every event has been applied up to.
    pub revision: Revision,
    /// The feed's watch is open: without it no resource is read from the cache.
    pub live: bool,
}

/// Whether a resource can be read from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Readiness {
    Ready,
    /// Being loaded, or the watch is broken: read etcd.
    NotYet,
    /// Never read before: load it (`begin_load`), and read etcd meanwhile.
    Unknown,
}

/// A resource listed from etcd at a revision, to be installed by `finish_load`.
pub(super) struct Loaded {
    entries: BTreeMap<Box<str>, Entry>,
}

impl Loaded {
    pub fn new() -> Loaded {
        Loaded { entries: BTreeMap::new() }
    }

    /// Adds a key (relative to the resource prefix) listed at the load's revision.
    pub fn add(&mut self, relative: &str, revision: Revision, value: Bytes) {
        self.entries.insert(relative.into(), Entry { revision, value });
    }
}

pub(super) struct Cache {
    inner: RwLock<Inner>,
}

/// A list of a resource's keys answered by the cache.
pub(super) struct Page {
    pub revision: Revision,
    pub items: Vec<KeyValue>,
    pub more: bool,
    pub remaining: Option<u64>,
    /// Entries the page read from the cache and the window (returned or not).
    pub fetched: usize,
}

/// What a list asks of the cache (the same as `ListOptions` without the revision).
pub(super) struct PageRequest<'a> {
    pub prefix: &'a str,
    pub start_after: Option<&'a str>,
    pub limit: Option<usize>,
    pub count_remaining: bool,
}

impl Cache {
    pub fn new(revision: Revision) -> Cache {
        Cache {
            inner: RwLock::new(Inner {
                revision,
                live: false,
                resources: HashMap::new(),
                next_load: 0,
                objects: 0,
                bytes: 0,
            }),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        // Every mutation leaves the cache consistent before it can panic.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn revision(&self) -> Revision {
        self.read().revision
    }

    pub fn stats(&self) -> Stats {
        let inner = self.read();
        Stats {
            resources: inner.resources.values().filter(|r| matches!(r, Resource::Ready(_))).count(),
            objects: inner.objects,
            bytes: inner.bytes,
            revision: inner.revision,
            live: inner.live,
        }
    }

    /// The feed's watch is open (`true`) or broken (`false`).
    pub fn set_live(&self, live: bool) {
        self.write().live = live;
    }

    pub fn readiness(&self, resource: &str) -> Readiness {
        let inner = self.read();
        match inner.resources.get(resource) {
            None => Readiness::Unknown,
            Some(Resource::Ready(_)) if inner.live => Readiness::Ready,
            Some(_) => Readiness::NotYet,
        }
    }

    /// Starts caching `resource`: returns the load's id and the revision to list it at, or
    /// `None` when it is already cached or loading. (A broken watch resumes after the
    /// cache's revision, so a load may start while it is broken.)
    pub fn begin_load(&self, resource: &str) -> Option<(u64, Revision)> {
        let mut inner = self.write();
        if inner.resources.contains_key(resource) {
            return None;
        }
        inner.next_load += 1;
        let (id, since) = (inner.next_load, inner.revision);
        inner.resources.insert(resource.into(), Resource::Loading { id, since, pending: Vec::new() });
        Some((id, since))
    }

    /// Installs a resource listed at the revision `begin_load` gave, with the changes the
    /// feed made since; false when the load was superseded (a reset) meanwhile.
    pub fn finish_load(&self, resource: &str, id: u64, loaded: Loaded) -> bool {
        let mut guard = self.write();
        let inner = &mut *guard;
        let Some(slot) = inner.resources.get_mut(resource) else { return false };
        let Resource::Loading { id: loading, pending, .. } = slot else { return false };
        if *loading != id {
            return false;
        }
        let pending = std::mem::take(pending);
        let mut entries = loaded.entries;
        for (key, entry) in &entries {
            inner.objects += 1;
            inner.bytes += Entry::cost(key, &entry.value);
        }
        for change in pending {
            apply_change(&mut entries, change, &mut inner.objects, &mut inner.bytes);
        }
        *slot = Resource::Ready(entries);
        let revision = inner.revision;
        record_figures(resource, |f| {
            f.initializations += 1;
            f.revision = revision;
        });
        true
    }

    /// Forgets a load that failed, so that a later read tries again.
    pub fn abandon_load(&self, resource: &str, id: u64) {
        let mut inner = self.write();
        if matches!(inner.resources.get(resource), Some(Resource::Loading { id: loading, .. }) if *loading == id) {
            inner.resources.remove(resource);
        }
    }

    /// Applies the feed's events (in revision order) and moves the cache to `revision`.
    pub fn apply(&self, records: &[Record], revision: Revision) {
        let mut guard = self.write();
        let inner = &mut *guard;
        for record in records {
            let event = &record.event;
            let Some(prefix) = key::resource_prefix_of(&event.key) else { continue };
            let Some(resource) = inner.resources.get_mut(prefix) else { continue };
            let relative = event.key.get(prefix.len()..).unwrap_or_default();
            let value = match event.kind {
                EventType::Deleted => None,
                EventType::Added | EventType::Modified => {
                    Some(Entry { revision: event.revision, value: event.value.clone() })
                }
            };
            record_figures(prefix, |f| f.events += 1);
            let change = Change { key: relative.into(), value };
            match resource {
                Resource::Loading { since, pending, .. } => {
                    if event.revision > *since {
                        pending.push(change);
                    }
                }
                Resource::Ready(entries) => apply_change(entries, change, &mut inner.objects, &mut inner.bytes),
            }
        }
        inner.revision = inner.revision.max(revision);
        for (prefix, resource) in &inner.resources {
            if matches!(resource, Resource::Ready(_)) {
                record_figures(prefix, |f| f.revision = inner.revision);
            }
        }
    }

    /// Forgets every resource: the feed lost events (a compaction passed it) and the cache
    /// starts again at `revision`, loading each resource again on its next read.
    pub fn reset(&self, revision: Revision) {
        let mut inner = self.write();
        inner.resources.clear();
        inner.objects = 0;
        inner.bytes = 0;
        inner.revision = revision;
    }

    /// The latest value of `full_key` of the resource `resource`, and the cache's revision;
    /// `None` when the resource is not cached (any more).
    pub fn get(&self, resource: &str, full_key: &str) -> Option<(Revision, Option<Versioned>)> {
        let inner = self.read();
        let Some(Resource::Ready(entries)) = inner.resources.get(resource) else { return None };
        if !inner.live {
            return None;
        }
        let relative = full_key.get(resource.len()..)?;
        let found = entries.get(relative).map(|e| Versioned { revision: e.revision, value: e.value.clone() });
        Some((inner.revision, found))
    }

    /// A page of `resource`'s keys: as of the cache's revision (`at` is `None`), or as of `at`,
    /// with `changed` (from the history window: every key changed after `at` with its value
    /// at `at`) taken over the cached values. `changed` is read by `history` while the cache
    /// is held, so that the cache cannot move past what the window shows (the feed updates
    /// the window first). `None` when the resource is not cached, or `at` is past the cache.
    pub fn page<H>(
        &self,
        resource: &str,
        request: &PageRequest<'_>,
        at: Option<Revision>,
        history: H,
    ) -> Option<crate::store::Result<Page>>
    where
        H: FnOnce(Revision) -> crate::store::Result<BTreeMap<String, Option<Versioned>>>,
    {
        let inner = self.read();
        let Some(Resource::Ready(entries)) = inner.resources.get(resource) else { return None };
        if !inner.live || at.is_some_and(|at| at > inner.revision) {
            return None;
        }
        let revision = at.unwrap_or(inner.revision);
        let changed = match at {
            Some(at) if at < inner.revision => match history(at) {
                Ok(changed) => changed,
                Err(e) => return Some(Err(e)),
            },
            _ => BTreeMap::new(),
        };
        let relative_prefix = request.prefix.get(resource.len()..)?;
        let start = match request.start_after {
            Some(after) if after.starts_with(request.prefix) => {
                std::ops::Bound::Excluded(after.get(resource.len()..).unwrap_or_default())
            }
            // After every key of the prefix: nothing is left.
            Some(after) if after > request.prefix => {
                return Some(Ok(Page {
                    revision: at.unwrap_or(inner.revision),
                    items: Vec::new(),
                    more: false,
                    remaining: None,
                    fetched: 0,
                }));
            }
            _ => std::ops::Bound::Included(relative_prefix),
        };
        let mut cached = entries
            .range::<str, _>((start, std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(relative_prefix))
            .peekable();
        let after = request.start_after.unwrap_or_default();
        let mut changed =
            changed.into_iter().filter(|(k, _)| k.starts_with(request.prefix) && k.as_str() > after).peekable();
        let limit = request.limit.unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut more = false;
        let mut remaining = 0u64;
        let mut fetched = 0;
        loop {
            let from_cache = cached.peek().map(|(k, _)| format!("{resource}{k}"));
            let from_history = changed.peek().map(|(k, _)| k.clone());
            let (full, value) = match (from_cache, from_history) {
                (None, None) => break,
                (Some(c), Some(h)) if h <= c => {
                    if h == c {
                        cached.next();
                    }
                    let Some(next) = changed.next() else { break };
                    next
                }
                (Some(c), _) => {
                    let Some((_, entry)) = cached.next() else { break };
                    // Not in the window after `at`, so unchanged since: the cached value is
                    // the one at `at` (the filter only guards against a window that lies).
                    let value = Some(Versioned { revision: entry.revision, value: entry.value.clone() })
                        .filter(|v| v.revision <= revision);
                    (c, value)
                }
                (None, Some(_)) => {
                    let Some(next) = changed.next() else { break };
                    next
                }
            };
            fetched += 1;
            let Some(value) = value else { continue };
            if items.len() == limit {
                more = true;
                if !request.count_remaining {
                    break;
                }
                remaining += 1;
                continue;
            }
            items.push(KeyValue { key: full, revision: value.revision, value: value.value });
        }
        let remaining = (more && request.count_remaining).then_some(remaining);
        Some(Ok(Page { revision, items, more, remaining, fetched }))
    }
}

fn apply_change(entries: &mut BTreeMap<Box<str>, Entry>, change: Change, objects: &mut usize, bytes: &mut usize) {
    let cost = |key: &str, entry: &Entry| Entry::cost(key, &entry.value);
    match change.value {
        Some(entry) => {
            *bytes += cost(&change.key, &entry);
            match entries.get_mut(&change.key) {
                Some(old) => {
                    *bytes -= cost(&change.key, old);
                    *old = entry;
                }
                None => {
                    *objects += 1;
                    entries.insert(change.key, entry);
                }
            }
        }
        None => {
            if let Some(old) = entries.remove(&change.key) {
                *objects -= 1;
                *bytes -= cost(&change.key, &old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Event;

    fn record(kind: EventType, key: &str, revision: Revision, value: &'static str) -> Record {
        let event = Event { kind, key: key.into(), revision, value: Bytes::from_static(value.as_bytes()), prev: None };
        Record::new(event, 0)
    }

    fn live(revision: Revision) -> Cache {
        let cache = Cache::new(revision);
        cache.set_live(true);
        cache
    }

    fn request(prefix: &str) -> PageRequest<'_> {
        PageRequest { prefix, start_after: None, limit: None, count_remaining: false }
    }

    fn keys(page: &Page) -> Vec<(&str, &[u8])> {
        page.items.iter().map(|kv| (kv.key.as_str(), kv.value.as_ref())).collect()
    }

    #[test]
    fn a_resource_loads_with_the_changes_made_while_it_was_listed() {
        let cache = live(10);
        assert_eq!(cache.readiness("/g/r/"), Readiness::Unknown);
        let (id, since) = cache.begin_load("/g/r/").unwrap();
        assert_eq!(since, 10);
        assert_eq!(cache.readiness("/g/r/"), Readiness::NotYet);
        assert!(cache.begin_load("/g/r/").is_none(), "one load at a time");
        // While the listing at 10 runs, the feed deletes a and creates c.
        cache.apply(
            &[record(EventType::Deleted, "/g/r/ns/a", 11, "1"), record(EventType::Added, "/g/r/ns/c", 12, "3")],
            12,
        );
        let mut loaded = Loaded::new();
        loaded.add("ns/a", 5, Bytes::from_static(b"1"));
        loaded.add("ns/b", 6, Bytes::from_static(b"22"));
        assert!(cache.finish_load("/g/r/", id, loaded));
        assert_eq!(cache.readiness("/g/r/"), Readiness::Ready);
        assert_eq!(cache.get("/g/r/", "/g/r/ns/a"), Some((12, None)));
        let c = cache.get("/g/r/", "/g/r/ns/c").unwrap().1.unwrap();
        assert_eq!((c.revision, c.value.as_ref()), (12, b"3".as_ref()));
        // Memory: key and value bytes of b and c plus the constant each.
        let stats = cache.stats();
        assert_eq!((stats.objects, stats.resources, stats.revision), (2, 1, 12));
        assert_eq!(stats.bytes, ("ns/b".len() + 2 + ENTRY_OVERHEAD) + ("ns/c".len() + 1 + ENTRY_OVERHEAD));
        // Replacing and deleting keep the count exact.
        cache.apply(&[record(EventType::Modified, "/g/r/ns/b", 13, "2222")], 13);
        cache.apply(&[record(EventType::Deleted, "/g/r/ns/c", 14, "3")], 14);
        assert_eq!(cache.stats().bytes, "ns/b".len() + 4 + ENTRY_OVERHEAD);
        // Other resources are not cached until read.
        cache.apply(&[record(EventType::Added, "/g/other/x", 15, "x")], 15);
        assert_eq!(cache.get("/g/other/", "/g/other/x"), None);
        cache.reset(20);
        assert_eq!(cache.stats(), Stats { revision: 20, live: true, ..Stats::default() });
        assert!(!cache.finish_load("/g/r/", id, Loaded::new()), "a load from before a reset is dropped");
    }

    #[test]
    fn a_broken_watch_sends_reads_to_etcd() {
        let cache = live(1);
        let (id, _) = cache.begin_load("/g/r/").unwrap();
        assert!(cache.finish_load("/g/r/", id, Loaded::new()));
        cache.set_live(false);
        assert_eq!(cache.readiness("/g/r/"), Readiness::NotYet);
        assert_eq!(cache.get("/g/r/", "/g/r/a"), None);
        cache.set_live(true);
        assert_eq!(cache.readiness("/g/r/"), Readiness::Ready);
    }

    #[test]
    fn pages_at_an_older_revision_take_the_window_over_the_cache() {
        let cache = live(1);
        let (id, _) = cache.begin_load("/g/r/").unwrap();
        let mut loaded = Loaded::new();
        for (k, rev) in [("a", 1), ("b", 1), ("d", 1)] {
            loaded.add(k, rev, Bytes::from_static(b"old"));
        }
        assert!(cache.finish_load("/g/r/", id, loaded));
        // After 1: c created (2), b deleted (3), d updated (4).
        cache.apply(
            &[
                record(EventType::Added, "/g/r/c", 2, "new"),
                record(EventType::Deleted, "/g/r/b", 3, "old"),
                record(EventType::Modified, "/g/r/d", 4, "new"),
            ],
            4,
        );
        let now = cache.page("/g/r/", &request("/g/r/"), None, |_| unreachable!()).unwrap().unwrap();
        assert_eq!(now.revision, 4);
        assert_eq!(keys(&now), [("/g/r/a", b"old".as_ref()), ("/g/r/c", b"new"), ("/g/r/d", b"new")]);
        let old_value = |revision| Some(Versioned { revision, value: Bytes::from_static(b"old") });
        let window = || {
            BTreeMap::from([
                ("/g/r/b".to_string(), old_value(1)),
                ("/g/r/c".to_string(), None),
                ("/g/r/d".to_string(), old_value(1)),
            ])
        };
        let at_1 = PageRequest { limit: Some(2), count_remaining: true, ..request("/g/r/") };
        let first = cache.page("/g/r/", &at_1, Some(1), |at| Ok(if at == 1 { window() } else { BTreeMap::new() }));
        let first = first.unwrap().unwrap();
        assert_eq!(keys(&first), [("/g/r/a", b"old".as_ref()), ("/g/r/b", b"old")]);
        assert_eq!((first.revision, first.more, first.remaining), (1, true, Some(1)));
        let rest = PageRequest { start_after: Some("/g/r/b"), ..at_1 };
        let second = cache.page("/g/r/", &rest, Some(1), |_| Ok(window())).unwrap().unwrap();
        assert_eq!(keys(&second), [("/g/r/d", b"old".as_ref())]);
        assert!(!second.more);
        // Past the cache: not answered here.
        assert!(cache.page("/g/r/", &request("/g/r/"), Some(5), |_| Ok(BTreeMap::new())).is_none());
    }
}
