//! The metrics without per-resource labels: in-flight requests and 429s, authentication and
//! authorization attempts, the delegated reviews and their caches, conversion webhooks, CEL,
//! the store's group commit, the verbatim read path and the served definitions.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::histogram::{AtomicHistogram, Unit, exponential};

type Fmt = Result<(), std::fmt::Error>;

/// `ExponentialBuckets(0.001, 2, 15)`: authentication and authorization durations.
static AUTH_BOUNDS: [f64; 15] = exponential::<15>(0.001, 2.0);
/// The delegated review buckets of k8s.io/apiserver.
static DELEGATED_BOUNDS: [f64; 8] = [0.25, 0.5, 0.7, 1.0, 1.5, 3.0, 5.0, 10.0];
/// `ExponentialBuckets(0.001, 2, 15)`: `apiserver_crd_conversion_webhook_duration_seconds`.
static CRD_CONVERSION_BOUNDS: [f64; 15] = exponential::<15>(0.001, 2.0);
/// `apiserver_conversion_webhook_duration_seconds`.
static CONVERSION_BOUNDS: [f64; 15] =
    [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0];
/// Prometheus' default buckets, which Kubernetes' CEL histograms use.
static DEFAULT_BOUNDS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Writes per committed batch.
static BATCH_BOUNDS: [f64; 13] = exponential::<13>(1.0, 2.0);
/// One batch's flush and sync: 100 µs to about 3 s.
static FLUSH_BOUNDS: [f64; 16] = exponential::<16>(0.0001, 2.0);

fn seconds(bounds: &'static [f64]) -> AtomicHistogram {
    AtomicHistogram::new(bounds, Unit::Nanoseconds)
}

/// Requests in flight by kind (`--max-requests-inflight`, `--max-mutating-requests-inflight`).
#[derive(Debug, Default)]
pub struct Inflight {
    /// `[read-only, mutating]`: in flight now, and the most since the last scrape.
    current: [AtomicI64; 2],
    high_water: [AtomicI64; 2],
    dropped: [AtomicU64; 2],
}

const REQUEST_KINDS: [&str; 2] = ["readOnly", "mutating"];

impl Inflight {
    /// A request took an in-flight seat; the guard gives it back.
    pub fn enter(&self, mutating: bool) -> InflightSeat<'_> {
        let kind = usize::from(mutating);
        if let (Some(current), Some(high)) = (self.current.get(kind), self.high_water.get(kind)) {
            let now = current.fetch_add(1, Ordering::Relaxed) + 1;
            high.fetch_max(now, Ordering::Relaxed);
        }
        InflightSeat { inflight: self, kind }
    }

    /// A request was refused with 429 for want of a seat.
    pub fn dropped(&self, mutating: bool) {
        if let Some(counter) = self.dropped.get(usize::from(mutating)) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Gives an in-flight seat back when dropped.
#[derive(Debug)]
pub struct InflightSeat<'a> {
    inflight: &'a Inflight,
    kind: usize,
}

impl Drop for InflightSeat<'_> {
    fn drop(&mut self) {
        if let Some(current) = self.inflight.current.get(self.kind) {
            current.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Authentication and authorization outcomes of requests, and the review caches.
#[derive(Debug)]
pub struct Auth {
    /// success, failure, error
    authentication: [(AtomicU64, AtomicHistogram); 3],
    /// allowed, denied, no-opinion, error
    authorization: [(AtomicU64, AtomicHistogram); 4],
    /// hit, miss
    token_cache: [AtomicU64; 2],
    authorization_cache: [AtomicU64; 2],
}

const AUTHENTICATION_RESULTS: [&str; 3] = ["success", "failure", "error"];
const AUTHORIZATION_RESULTS: [&str; 4] = ["allowed", "denied", "no-opinion", "error"];
const CACHE_STATUS: [&str; 2] = ["hit", "miss"];

impl Default for Auth {
    fn default() -> Self {
        let pair = || (AtomicU64::new(0), seconds(&AUTH_BOUNDS));
        Auth {
            authentication: [pair(), pair(), pair()],
            authorization: [pair(), pair(), pair(), pair()],
            token_cache: Default::default(),
            authorization_cache: Default::default(),
        }
    }
}

/// What authentication concluded.
#[derive(Debug, Clone, Copy)]
pub enum Authentication {
    Success,
    Failure,
    Error,
}

/// What authorization concluded.
#[derive(Debug, Clone, Copy)]
pub enum Authorization {
    Allowed,
    Denied,
    NoOpinion,
    Error,
}

fn count(pairs: &[(AtomicU64, AtomicHistogram)], index: usize, elapsed: Option<Duration>) {
    if let Some((counter, histogram)) = pairs.get(index) {
        counter.fetch_add(1, Ordering::Relaxed);
        if let Some(elapsed) = elapsed {
            histogram.observe_duration(elapsed);
        }
    }
}

impl Auth {
    /// Counts an authentication; `elapsed` is timed when the request is (see `requests::lap`).
    pub fn authenticated(&self, result: Authentication, elapsed: Option<Duration>) {
        count(&self.authentication, result as usize, elapsed);
    }

    pub fn authorized(&self, result: Authorization, elapsed: Option<Duration>) {
        count(&self.authorization, result as usize, elapsed);
    }

    /// A bearer token was found in the TokenReview cache, or not.
    pub fn token_cache(&self, hit: bool) {
        self.token_cache.get(usize::from(!hit)).map(|c| c.fetch_add(1, Ordering::Relaxed));
    }

    /// A SubjectAccessReview answer was found in the cache, or not.
    pub fn authorization_cache(&self, hit: bool) {
        self.authorization_cache.get(usize::from(!hit)).map(|c| c.fetch_add(1, Ordering::Relaxed));
    }
}

/// Requests counted and timed by a string label set; used where a network call dwarfs a lock.
#[derive(Debug)]
pub struct Timed<K> {
    bounds: &'static [f64],
    series: Mutex<BTreeMap<K, (u64, AtomicHistogram)>>,
}

impl<K: Ord> Timed<K> {
    fn new(bounds: &'static [f64]) -> Self {
        Timed { bounds, series: Mutex::new(BTreeMap::new()) }
    }

    pub fn observe(&self, key: K, elapsed: Duration) {
        let mut series = self.series.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (count, histogram) = series.entry(key).or_insert_with(|| (0, seconds(self.bounds)));
        *count += 1;
        histogram.observe_duration(elapsed);
    }

    fn each(&self, mut f: impl FnMut(&K, u64, &AtomicHistogram) -> Fmt) -> Fmt {
        let series = self.series.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        series.iter().try_for_each(|(key, (count, histogram))| f(key, *count, histogram))
    }
}

/// SubjectAccessReviews and TokenReviews sent to the main apiserver, by HTTP code.
#[derive(Debug)]
pub struct Delegated {
    pub authentication: Timed<String>,
    pub authorization: Timed<String>,
}

impl Default for Delegated {
    fn default() -> Self {
        Delegated { authentication: Timed::new(&DELEGATED_BOUNDS), authorization: Timed::new(&DELEGATED_BOUNDS) }
    }
}

/// Conversion webhook calls.
#[derive(Debug)]
pub struct Conversion {
    /// `(result, failure_type)`
    pub requests: Timed<(&'static str, &'static str)>,
    /// `(crd_name, from_version, to_version, succeeded)`, for conversions between versions.
    pub by_definition: Timed<(String, String, String, bool)>,
}

impl Default for Conversion {
    fn default() -> Self {
        Conversion { requests: Timed::new(&CONVERSION_BOUNDS), by_definition: Timed::new(&CRD_CONVERSION_BOUNDS) }
    }
}

/// CEL compilation (when definitions load) and evaluation (per validated object).
#[derive(Debug)]
pub struct Cel {
    pub compilation: AtomicHistogram,
    pub evaluation: AtomicHistogram,
}

impl Default for Cel {
    fn default() -> Self {
        Cel { compilation: seconds(&DEFAULT_BOUNDS), evaluation: seconds(&DEFAULT_BOUNDS) }
    }
}

/// The store's group commit: writes per batch, and how long a batch took to reach the disk.
#[derive(Debug)]
pub struct GroupCommit {
    pub batch_size: AtomicHistogram,
    pub flush: AtomicHistogram,
}

impl Default for GroupCommit {
    fn default() -> Self {
        GroupCommit { batch_size: AtomicHistogram::new(&BATCH_BOUNDS, Unit::Plain), flush: seconds(&FLUSH_BOUNDS) }
    }
}

/// Encodes the families above.
#[derive(Debug)]
pub struct SimpleCollector(pub &'static super::Metrics);

/// A counter written under its Kubernetes name exactly: a few of Kubernetes' counters
/// (`authentication_attempts`) have no `_total` suffix, which OpenMetrics counters must have,
/// so they are exposed untyped under their own name.
fn untyped<'a>(
    encoder: &'a mut DescriptorEncoder,
    name: &'a str,
    help: &str,
) -> Result<prometheus_client::encoding::MetricEncoder<'a>, std::fmt::Error> {
    encoder.encode_descriptor(name, help, None, MetricType::Unknown)
}

fn counter(encoder: &mut DescriptorEncoder, name: &str, help: &str, labels: &[(&str, &str)], value: u64) -> Fmt {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    family.encode_family(&labels)?.encode_counter::<NoLabelSet, _, u64>(&value, None)
}

impl Collector for SimpleCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Fmt {
        let m = self.0;
        inflight(&mut encoder, &m.inflight)?;
        auth(&mut encoder, &m.auth)?;
        delegated(&mut encoder, &m.delegated)?;
        conversion(&mut encoder, &m.conversion)?;
        let histograms = [
            (
                "apiserver_cel_compilation_duration_seconds",
                "[BETA] CEL compilation time in seconds.",
                &m.cel.compilation,
            ),
            ("apiserver_cel_evaluation_duration_seconds", "[BETA] CEL evaluation time in seconds.", &m.cel.evaluation),
            (
                "crd_apiserver_group_commit_batch_size",
                "Writes per batch the store committed at once.",
                &m.group_commit.batch_size,
            ),
            (
                "crd_apiserver_group_commit_flush_duration_seconds",
                "Time in seconds a committed batch took to reach stable storage.",
                &m.group_commit.flush,
            ),
        ];
        for (name, help, histogram) in histograms {
            histogram.encode(encoder.encode_descriptor(name, help, None, MetricType::Histogram)?)?;
        }
        let help = "Objects served from their stored bytes (hit) or through the general read path (miss).";
        let mut family = encoder.encode_descriptor("crd_apiserver_verbatim_reads", help, None, MetricType::Counter)?;
        for (result, value) in [("hit", &m.verbatim_hits), ("miss", &m.verbatim_misses)] {
            family
                .encode_family(&[("result", result)])?
                .encode_counter::<NoLabelSet, _, u64>(&value.load(Ordering::Relaxed), None)?;
        }
        let served = m.definitions_served.load(Ordering::Relaxed);
        let help = "CustomResourceDefinitions served now.";
        encoder
            .encode_descriptor("crd_apiserver_definitions_served", help, None, MetricType::Gauge)?
            .encode_gauge(&served)?;
        let errors = m.definition_load_errors.load(Ordering::Relaxed);
        let help = "Definitions that could not be served when loaded (invalid, or clashing with another).";
        counter(&mut encoder, "crd_apiserver_definition_load_errors", help, &[], errors)
    }
}

fn inflight(encoder: &mut DescriptorEncoder, inflight: &Inflight) -> Fmt {
    let help = "[STABLE] Most requests in flight per request kind since the last scrape.";
    let mut family = encoder.encode_descriptor("apiserver_current_inflight_requests", help, None, MetricType::Gauge)?;
    for ((kind, current), high) in REQUEST_KINDS.iter().zip(&inflight.current).zip(&inflight.high_water) {
        // The high-water mark restarts from what is in flight now.
        let most = high.swap(current.load(Ordering::Relaxed), Ordering::Relaxed);
        family.encode_family(&[("request_kind", *kind)])?.encode_gauge(&most)?;
    }
    let help = "[ALPHA] Requests refused with 429 for want of an in-flight seat, per request kind.";
    let mut family = encoder.encode_descriptor("apiserver_dropped_requests", help, None, MetricType::Counter)?;
    for (kind, dropped) in REQUEST_KINDS.iter().zip(&inflight.dropped) {
        family
            .encode_family(&[("request_kind", *kind)])?
            .encode_counter::<NoLabelSet, _, u64>(&dropped.load(Ordering::Relaxed), None)?;
    }
    Ok(())
}

fn auth(encoder: &mut DescriptorEncoder, auth: &Auth) -> Fmt {
    let help = "[ALPHA] Authentication attempts by result.";
    let mut family = untyped(encoder, "authentication_attempts", help)?;
    for (result, (n, _)) in AUTHENTICATION_RESULTS.iter().zip(&auth.authentication) {
        family.encode_family(&[("result", *result)])?.encode_gauge(&n.load(Ordering::Relaxed))?;
    }
    let help = "[ALPHA] Authentication duration in seconds by result.";
    let mut family = encoder.encode_descriptor("authentication_duration_seconds", help, None, MetricType::Histogram)?;
    for (result, (_, histogram)) in AUTHENTICATION_RESULTS.iter().zip(&auth.authentication) {
        histogram.encode(family.encode_family(&[("result", *result)])?)?;
    }
    let help = "[ALPHA] Authorization attempts by result: allowed, denied, no-opinion or error.";
    let mut family = encoder.encode_descriptor("authorization_attempts", help, None, MetricType::Counter)?;
    for (result, (n, _)) in AUTHORIZATION_RESULTS.iter().zip(&auth.authorization) {
        family
            .encode_family(&[("result", *result)])?
            .encode_counter::<NoLabelSet, _, u64>(&n.load(Ordering::Relaxed), None)?;
    }
    let help = "[ALPHA] Authorization duration in seconds by result.";
    let mut family = encoder.encode_descriptor("authorization_duration_seconds", help, None, MetricType::Histogram)?;
    for (result, (_, histogram)) in AUTHORIZATION_RESULTS.iter().zip(&auth.authorization) {
        histogram.encode(family.encode_family(&[("result", *result)])?)?;
    }
    let caches = [
        (
            "authentication_token_cache_request",
            "[ALPHA] Bearer tokens looked up in the TokenReview cache.",
            &auth.token_cache,
        ),
        (
            "crd_apiserver_authorization_cache_requests",
            "Authorization decisions looked up in the SubjectAccessReview cache.",
            &auth.authorization_cache,
        ),
    ];
    for (name, help, counts) in caches {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (status, n) in CACHE_STATUS.iter().zip(counts) {
            family
                .encode_family(&[("status", *status)])?
                .encode_counter::<NoLabelSet, _, u64>(&n.load(Ordering::Relaxed), None)?;
        }
    }
    Ok(())
}

fn delegated(encoder: &mut DescriptorEncoder, delegated: &Delegated) -> Fmt {
    for (prefix, what, timed) in [
        ("apiserver_delegated_authn_request", "TokenReview", &delegated.authentication),
        ("apiserver_delegated_authz_request", "SubjectAccessReview", &delegated.authorization),
    ] {
        let help = format!("[ALPHA] {what} requests to the main apiserver by HTTP code.");
        let mut family = encoder.encode_descriptor(prefix, &help, None, MetricType::Counter)?;
        timed.each(|code, n, _| {
            family.encode_family(&[("code", code.as_str())])?.encode_counter::<NoLabelSet, _, u64>(&n, None)
        })?;
        let name = format!("{prefix}_duration_seconds");
        let help = format!("[ALPHA] {what} request latency in seconds by HTTP code.");
        let mut family = encoder.encode_descriptor(&name, &help, None, MetricType::Histogram)?;
        timed.each(|code, _, histogram| histogram.encode(family.encode_family(&[("code", code.as_str())])?))?;
    }
    Ok(())
}

fn conversion(encoder: &mut DescriptorEncoder, conversion: &Conversion) -> Fmt {
    let help = "[ALPHA] Conversion webhook requests by result and failure type.";
    let mut family =
        encoder.encode_descriptor("apiserver_conversion_webhook_request", help, None, MetricType::Counter)?;
    conversion.requests.each(|(result, failure), n, _| {
        let labels = [("result", *result), ("failure_type", *failure)];
        family.encode_family(&labels)?.encode_counter::<NoLabelSet, _, u64>(&n, None)
    })?;
    let help = "[ALPHA] Conversion webhook request latency in seconds by result and failure type.";
    let mut family = encoder.encode_descriptor(
        "apiserver_conversion_webhook_duration_seconds",
        help,
        None,
        MetricType::Histogram,
    )?;
    conversion.requests.each(|(result, failure), _, histogram| {
        histogram.encode(family.encode_family(&[("result", *result), ("failure_type", *failure)])?)
    })?;
    let help = "[ALPHA] Webhook conversion of custom resources between versions, in seconds.";
    let mut family = encoder.encode_descriptor(
        "apiserver_crd_conversion_webhook_duration_seconds",
        help,
        None,
        MetricType::Histogram,
    )?;
    conversion.by_definition.each(|(crd, from, to, succeeded), _, histogram| {
        let succeeded = if *succeeded { "true" } else { "false" };
        let labels = [("crd_name", crd.as_str()), ("from_version", from), ("to_version", to), ("succeeded", succeeded)];
        histogram.encode(family.encode_family(&labels)?)
    })
}
