//! The per-resource request and watch series of k8s.io/apiserver (`apiserver_request_total`,
//! `_duration_seconds`, `apiserver_response_sizes`, `apiserver_longrunning_requests`,
//! `apiserver_request_aborts_total`, `apiserver_registered_watchers`,
//! `apiserver_watch_events_total` and `_sizes`, `apiserver_terminated_watchers_total`).
//!
//! Each served group/version/resource has one [`ResourceSeries`], found once when definitions
//! load and handed to requests with the served resource, so recording is a few atomic adds:
//! no label hashing, no lock, no allocation. Its table of cells (one per verb, scope, dry run and
//! subresource) is allocated when the resource first sees traffic, and each cell when its
//! labels first occur, so thousands of idle definitions cost a few hundred bytes each.
//! Series are kept for the life of the process, as Prometheus clients keep them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwap;
use std::time::Duration;

use super::histogram::{AtomicHistogram, Unit, exponential};
use super::labels::{CELLS, RequestLabels, SUBRESOURCES, Verb};

/// `apiserver_request_duration_seconds` buckets.
pub static DURATION_BOUNDS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0,
    45.0, 60.0,
];
/// `apiserver_response_sizes` buckets: `ExponentialBuckets(1000, 10, 7)`.
pub static SIZE_BOUNDS: [f64; 7] = exponential::<7>(1000.0, 10.0);
/// `apiserver_watch_events_sizes` buckets: `ExponentialBuckets(1024, 2, 8)`.
pub static WATCH_EVENT_SIZE_BOUNDS: [f64; 8] = exponential::<8>(1024.0, 2.0);

/// Status codes counted without a lock; others (rare) go to a small locked list.
const COMMON_CODES: [u16; 20] =
    [200, 201, 202, 204, 304, 400, 401, 403, 404, 405, 406, 409, 410, 413, 415, 422, 429, 500, 503, 504];

/// The series of one combination of request labels.
#[derive(Debug)]
pub struct Cell {
    codes: [AtomicU64; COMMON_CODES.len()],
    rare_codes: Mutex<Vec<(u16, u64)>>,
    duration: AtomicHistogram,
    sizes: Option<AtomicHistogram>,
    longrunning: AtomicI64,
    aborts: AtomicU64,
}

impl Cell {
    fn new(labels: &RequestLabels) -> Cell {
        Cell {
            codes: Default::default(),
            rare_codes: Mutex::new(Vec::new()),
            duration: AtomicHistogram::new(&DURATION_BOUNDS, Unit::Nanoseconds),
            sizes: labels.records_size.then(|| AtomicHistogram::new(&SIZE_BOUNDS, Unit::Plain)),
            longrunning: AtomicI64::new(0),
            aborts: AtomicU64::new(0),
        }
    }

    /// Counts a finished request: its code, how long it took, and (gets and lists) its size.
    pub fn record(&self, code: u16, elapsed: Duration, size: u64) {
        match COMMON_CODES.iter().position(|c| *c == code) {
            Some(i) => {
                if let Some(counter) = self.codes.get(i) {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }
            None => {
                let mut rare = self.rare_codes.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                match rare.iter_mut().find(|(c, _)| *c == code) {
                    Some((_, n)) => *n += 1,
                    None => rare.push((code, 1)),
                }
            }
        }
        self.duration.observe_duration(elapsed);
        if let Some(sizes) = &self.sizes {
            sizes.observe(size);
        }
    }

    /// A long-running request (a watch) started; the guard marks its end.
    pub fn long_running(self: &Arc<Self>) -> LongRunning {
        self.longrunning.fetch_add(1, Ordering::Relaxed);
        LongRunning(self.clone())
    }

    /// A request the server gave up on (its deadline passed).
    pub fn abort(&self) {
        self.aborts.fetch_add(1, Ordering::Relaxed);
    }

    fn codes(&self) -> Vec<(u16, u64)> {
        let mut codes: Vec<(u16, u64)> = COMMON_CODES
            .iter()
            .zip(self.codes.iter())
            .map(|(code, n)| (*code, n.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        codes.extend(self.rare_codes.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).iter().copied());
        codes.sort_unstable();
        codes
    }
}

/// Decrements `apiserver_longrunning_requests` when dropped.
#[derive(Debug)]
pub struct LongRunning(Arc<Cell>);

impl Drop for LongRunning {
    fn drop(&mut self) {
        self.0.longrunning.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Everything recorded about one group/version/resource.
#[derive(Debug)]
pub struct ResourceSeries {
    pub group: Arc<str>,
    pub version: Arc<str>,
    pub resource: Arc<str>,
    pub kind: Arc<str>,
    /// The `subresource` label of each cell column: `SUBRESOURCES`, or a path for the
    /// non-resource endpoints Kubernetes instruments.
    subresources: [&'static str; SUBRESOURCES.len()],
    cells: OnceLock<Box<[OnceLock<Arc<Cell>>]>>,
    registered_watchers: AtomicI64,
    /// Whether a watch was ever opened (its gauge is exposed from then on).
    watched: AtomicBool,
    watch_events: AtomicU64,
    watch_event_sizes: OnceLock<AtomicHistogram>,
    terminated_watchers: AtomicU64,
}

impl ResourceSeries {
    fn new(group: &str, version: &str, resource: &str, kind: &str, subresources: [&'static str; 3]) -> Self {
        ResourceSeries {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            kind: kind.into(),
            subresources,
            cells: OnceLock::new(),
            registered_watchers: AtomicI64::new(0),
            watched: AtomicBool::new(false),
            watch_events: AtomicU64::new(0),
            watch_event_sizes: OnceLock::new(),
            terminated_watchers: AtomicU64::new(0),
        }
    }

    /// The cell of a request's labels, created on first use.
    pub fn cell(&self, labels: &RequestLabels) -> Option<&Arc<Cell>> {
        let table = self.cells.get_or_init(|| (0..CELLS).map(|_| OnceLock::new()).collect());
        Some(table.get(labels.index())?.get_or_init(|| Arc::new(Cell::new(labels))))
    }

    /// A watch of this resource started; the guard marks its end.
    pub fn watcher(self: &Arc<Self>) -> Watcher {
        self.registered_watchers.fetch_add(1, Ordering::Relaxed);
        self.watched.store(true, Ordering::Relaxed);
        Watcher(self.clone())
    }

    /// One watch event of `bytes` was handed to a client.
    pub fn watch_event(&self, bytes: usize) {
        self.watch_events.fetch_add(1, Ordering::Relaxed);
        self.watch_event_sizes
            .get_or_init(|| AtomicHistogram::new(&WATCH_EVENT_SIZE_BOUNDS, Unit::Plain))
            .observe(bytes as u64);
    }

    /// A watch of this resource was closed because its client did not keep up
    /// (`apiserver_terminated_watchers_total`).
    pub fn watcher_terminated(&self) {
        self.terminated_watchers.fetch_add(1, Ordering::Relaxed);
    }

    /// The used cells with their labels, in table order.
    fn used_cells(&self) -> impl Iterator<Item = (RequestLabels, &Arc<Cell>)> {
        let table = self.cells.get().map(|t| &t[..]).unwrap_or(&[]);
        table.iter().enumerate().filter_map(|(index, slot)| {
            let cell = slot.get()?;
            Some((labels_at(index, cell.sizes.is_some()), cell))
        })
    }
}

/// The labels of a table position (the inverse of `RequestLabels::index`).
fn labels_at(index: usize, records_size: bool) -> RequestLabels {
    use super::labels::{DryRun, Scope};
    let subresource = index % SUBRESOURCES.len();
    let rest = index / SUBRESOURCES.len();
    let dry_run = DryRun::ALL.get(rest % DryRun::ALL.len()).copied().unwrap_or(DryRun::No);
    let rest = rest / DryRun::ALL.len();
    let scope = Scope::ALL.get(rest % Scope::ALL.len()).copied().unwrap_or(Scope::None);
    let verb = Verb::ALL.get(rest / Scope::ALL.len()).copied().unwrap_or(Verb::Other);
    RequestLabels { verb, scope, dry_run, subresource, records_size }
}

/// Decrements `apiserver_registered_watchers` when dropped.
#[derive(Debug)]
pub struct Watcher(Arc<ResourceSeries>);

impl Drop for Watcher {
    fn drop(&mut self) {
        self.0.registered_watchers.fetch_sub(1, Ordering::Relaxed);
    }
}

type ByName<T> = HashMap<String, T, foldhash::fast::RandomState>;
/// Series by group, then version, then resource: looked up with borrowed names.
type Index = ByName<ByName<ByName<Arc<ResourceSeries>>>>;

/// Every resource's series, by group, version and resource.
#[derive(Debug, Default)]
pub struct Resources {
    /// Read without a lock; replaced whole (under `adding`) when a resource is first served.
    by_name: ArcSwap<Index>,
    adding: Mutex<()>,
    discovery: OnceLock<Arc<ResourceSeries>>,
}

impl Resources {
    /// The series of a served resource, created the first time a definition serves it and kept
    /// when definitions are loaded again.
    pub fn resource(&self, group: &str, version: &str, resource: &str, kind: &str) -> Arc<ResourceSeries> {
        if let Some(found) = self.lookup(group, version, resource) {
            return found;
        }
        let _adding = self.adding.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut index = Index::clone(&self.by_name.load());
        let series = index
            .entry(group.to_string())
            .or_default()
            .entry(version.to_string())
            .or_default()
            .entry(resource.to_string())
            .or_insert_with(|| Arc::new(ResourceSeries::new(group, version, resource, kind, SUBRESOURCES)))
            .clone();
        self.by_name.store(Arc::new(index));
        series
    }

    /// A series counted nowhere, for a definition that is not served (the candidate of an
    /// impact analysis): nothing it records is exposed, and `lookup` never finds it.
    pub fn unregistered(group: &str, version: &str, resource: &str, kind: &str) -> Arc<ResourceSeries> {
        Arc::new(ResourceSeries::new(group, version, resource, kind, SUBRESOURCES))
    }

    /// The series of a resource that is served, for requests refused before routing (429s,
    /// timeouts); `None` for anything else, so that made-up paths add no series.
    pub fn lookup(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceSeries>> {
        self.by_name.load().get(group)?.get(version)?.get(resource).cloned()
    }

    /// Aggregated discovery (`/apis` and `/api`), which Kubernetes instruments with the path as
    /// subresource and no group, version or resource.
    pub fn discovery(&self) -> &Arc<ResourceSeries> {
        self.discovery.get_or_init(|| Arc::new(ResourceSeries::new("", "", "", "", ["/apis", "/api", ""])))
    }

    /// A snapshot for one scrape, in a stable order.
    pub fn all(&self) -> Vec<Arc<ResourceSeries>> {
        let index = self.by_name.load();
        let mut all: Vec<Arc<ResourceSeries>> =
            index.values().flat_map(|versions| versions.values().flat_map(|r| r.values().cloned())).collect();
        all.sort_by(|a, b| (&a.group, &a.version, &a.resource).cmp(&(&b.group, &b.version, &b.resource)));
        self.discovery.get().into_iter().cloned().chain(all).collect()
    }
}

pub mod encode;

/// What served a request, so that it is counted under that resource's series (or an
/// instrumented endpoint); requests nothing claims are counted nowhere, as Kubernetes counts
/// only requests that reach a handler.
#[derive(Debug, Clone)]
pub enum Route {
    /// A served resource's handler took the request (or the in-flight limit refused a request
    /// to a served resource).
    Resource(Arc<ResourceSeries>),
    /// Aggregated discovery: 0 for `/apis`, 1 for `/api`.
    Discovery(usize),
}

impl Route {
    /// The route of a request refused before its handler, if it names a served resource.
    pub fn refused(info: &crate::core::request_info::RequestInfo) -> Option<Route> {
        if !info.is_resource_request {
            return None;
        }
        super::global().requests.lookup(&info.api_group, &info.api_version, &info.resource).map(Route::Resource)
    }
}

/// What the steps of one request said about it: its route, and whether its deadline passed;
/// and when the last timed step ended (so that each step reads the clock once).
#[derive(Debug, Default)]
pub struct Claimed {
    pub route: Option<Route>,
    pub aborted: bool,
    mark: Option<std::time::Instant>,
}

tokio::task_local! {
    /// The request being served on this task. A task-local rather than a response extension:
    /// setting it allocates nothing.
    static CLAIMED: std::cell::RefCell<Claimed>;
}

/// Runs a request's handling, begun at `begun`, and returns what its steps claimed about it.
pub async fn claimed<F: std::future::Future>(begun: std::time::Instant, handling: F) -> (F::Output, Claimed) {
    let start = Claimed { mark: Some(begun), ..Claimed::default() };
    CLAIMED
        .scope(std::cell::RefCell::new(start), async {
            let output = handling.await;
            let claimed = CLAIMED.try_with(|c| c.take()).unwrap_or_default();
            (output, claimed)
        })
        .await
}

/// Says which series the request being handled counts under.
pub fn claim(route: Route) {
    let _ = CLAIMED.try_with(|c| c.borrow_mut().route = Some(route));
}

/// The time since the previous timed step of the request being handled ended (or since it
/// began), and marks now as the end of this step; `None` outside a request. Steps that follow
/// one another (authentication, then authorization) so read the clock once each.
pub fn lap() -> Option<std::time::Duration> {
    CLAIMED
        .try_with(|c| {
            let now = std::time::Instant::now();
            let mut claimed = c.borrow_mut();
            let since = claimed.mark.map(|mark| now.saturating_duration_since(mark));
            claimed.mark = Some(now);
            since
        })
        .ok()
        .flatten()
}

/// Says that the request being handled ran out of time.
pub fn aborted() {
    let _ = CLAIMED.try_with(|c| c.borrow_mut().aborted = true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::labels::{DryRun, Scope};

    #[tokio::test]
    async fn handlers_claim_the_request_they_serve() {
        let series = Resources::default().resource("g", "v1", "things", "Thing");
        let begun = std::time::Instant::now();
        let (answer, said) = claimed(begun, async {
            assert!(lap().is_some_and(|d| d < Duration::from_secs(5)));
            claim(Route::Resource(series.clone()));
            aborted();
            42
        })
        .await;
        assert_eq!(answer, 42);
        assert!(matches!(said.route, Some(Route::Resource(s)) if Arc::ptr_eq(&s, &series)));
        assert!(said.aborted);
        // Outside a request, claiming does nothing (and does not panic).
        claim(Route::Discovery(0));
        assert!(lap().is_none());
        let (_, nothing) = claimed(begun, async {}).await;
        assert!(nothing.route.is_none() && !nothing.aborted);
    }

    #[test]
    fn table_positions_give_back_their_labels() {
        for index in 0..CELLS {
            assert_eq!(labels_at(index, false).index(), index);
        }
        let labels = RequestLabels {
            verb: Verb::Apply,
            scope: Scope::Namespace,
            dry_run: DryRun::All,
            subresource: 1,
            records_size: false,
        };
        assert_eq!(labels_at(labels.index(), false), labels);
    }

    #[test]
    fn series_are_shared_by_name_and_cells_count() {
        let resources = Resources::default();
        let a = resources.resource("stable.example.com", "v1", "crontabs", "CronTab");
        let b = resources.resource("stable.example.com", "v1", "crontabs", "CronTab");
        assert!(Arc::ptr_eq(&a, &b));
        assert!(resources.lookup("stable.example.com", "v1", "other").is_none());
        let labels = RequestLabels::non_resource(Verb::Get, 0);
        let cell = a.cell(&labels).unwrap();
        cell.record(200, Duration::from_millis(3), 0);
        cell.record(200, Duration::from_millis(3), 0);
        cell.record(418, Duration::from_millis(3), 0);
        assert_eq!(cell.codes(), vec![(200, 2), (418, 1)]);
        assert_eq!(a.used_cells().count(), 1);
    }
}
