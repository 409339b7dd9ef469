//! What `/metrics` exposes: k8s.io/apiserver's metric names, labels and buckets where one
//! exists, and `crd_apiserver_*` for what only this server has (see README's Metrics section).
//!
//! One process-wide set ([`global`]), as Kubernetes components keep theirs, so that the store,
//! CEL, conversion and authentication record without being handed a registry. The exposition
//! (Prometheus text 0.0.4, or OpenMetrics when asked) is prometheus-client's; the metrics on
//! request paths are lock-free types of ours ([`histogram`], [`requests`]) encoded through its
//! traits, resolved once per label set so that recording allocates and locks nothing.
//! Labels are bounded: served resources, verbs, codes; never names, namespaces or users.
//!
//! Invariant: a leaf like `core`: no HTTP serving, storage, or API types; recording never
//! fails and never blocks a request.

pub mod histogram;
pub mod labels;
mod process;
pub mod requests;
pub mod simple;
pub mod storage;
pub mod watch_cache;

use std::sync::LazyLock;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use prometheus_client::registry::Registry;

pub use simple::{Auth, Cel, Conversion, Delegated, GroupCommit, Inflight};

/// Every metric of the process.
#[derive(Debug, Default)]
pub struct Metrics {
    pub requests: requests::Resources,
    pub inflight: Inflight,
    pub auth: Auth,
    pub delegated: Delegated,
    pub conversion: Conversion,
    pub cel: Cel,
    pub group_commit: GroupCommit,
    pub storage: storage::Storage,
    pub watch_cache: watch_cache::WatchCache,
    /// Objects served from their stored bytes (`hit`) or through the general read path.
    pub verbatim_hits: AtomicU64,
    pub verbatim_misses: AtomicU64,
    pub definitions_served: AtomicI64,
    pub definition_load_errors: AtomicU64,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::default);

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
    let mut registry = Registry::default();
    let metrics = global();
    registry.register_collector(Box::new(requests::encode::RequestCollector(&metrics.requests)));
    registry.register_collector(Box::new(simple::SimpleCollector(metrics)));
    registry.register_collector(Box::new(storage::StorageCollector(&metrics.storage)));
    registry.register_collector(Box::new(watch_cache::WatchCacheCollector(&metrics.watch_cache)));
    registry.register_collector(Box::new(process::ProcessCollector));
    registry
});

/// The process's metrics.
pub fn global() -> &'static Metrics {
    &METRICS
}

/// The exposition formats of `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`, what kube-apiserver serves.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`, for scrapers that ask for it.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names it, else the
    /// Prometheus text format.
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(accept) if accept.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// One scrape.
pub fn render(format: Format) -> String {
    let mut text = String::with_capacity(64 * 1024);
    let written = match format {
        Format::Prometheus => prometheus_client::encoding::prometheus_text::encode(&mut text, &REGISTRY),
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut text, &REGISTRY),
    };
    if written.is_err() {
        // Writing to a String cannot fail; a collector that did is reported in the output.
        text.push_str("# crd-apiserver: a metric family failed to encode\n");
    }
    text
}

/// Counts an object served from its stored bytes or not.
pub fn verbatim(hit: bool) {
    let counter = if hit { &global().verbatim_hits } else { &global().verbatim_misses };
    counter.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_negotiated_from_accept() {
        assert_eq!(Format::negotiate(None), Format::Prometheus);
        assert_eq!(Format::negotiate(Some("text/plain;version=0.0.4;q=0.5,*/*;q=0.1")), Format::Prometheus);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;version=1.0.0,text/plain;q=0.5")),
            Format::OpenMetrics
        );
    }

    #[test]
    fn both_formats_render_kubernetes_names() {
        let prometheus = render(Format::Prometheus);
        assert!(prometheus.contains("# TYPE apiserver_request_total counter\n"), "{prometheus}");
        assert!(prometheus.contains("# TYPE authentication_attempts untyped\n"), "{prometheus}");
        assert!(!prometheus.contains("# EOF"));
        let open = render(Format::OpenMetrics);
        assert!(open.contains("# TYPE apiserver_request counter\n"), "{open}");
        assert!(open.ends_with("# EOF\n"));
    }
}
