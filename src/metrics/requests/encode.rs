//! Writes the request and watch series at scrape time, one metric family after another, with
//! Kubernetes' names and label sets.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::{ResourceSeries, Resources};
use crate::metrics::labels::RequestLabels;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The request and watch families of every resource.
#[derive(Debug)]
pub struct RequestCollector(pub &'static Resources);

const COMPONENT: &str = "apiserver";

type Fmt = Result<(), std::fmt::Error>;

/// The `verb, dry_run, group, version, resource, subresource, scope, component` labels.
fn full<'a>(series: &'a ResourceSeries, labels: &RequestLabels) -> [(&'static str, &'a str); 8] {
    [
        ("verb", labels.verb.as_str()),
        ("dry_run", labels.dry_run.as_str()),
        ("group", &series.group),
        ("version", &series.version),
        ("resource", &series.resource),
        ("subresource", series.subresources.get(labels.subresource).copied().unwrap_or("")),
        ("scope", labels.scope.as_str()),
        ("component", COMPONENT),
    ]
}

/// The same without `dry_run` (response sizes, long-running requests).
fn without_dry_run<'a>(series: &'a ResourceSeries, labels: &RequestLabels) -> [(&'static str, &'a str); 7] {
    let [verb, _, group, version, resource, subresource, scope, component] = full(series, labels);
    [verb, group, version, resource, subresource, scope, component]
}

impl Collector for RequestCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Fmt {
        let all = self.0.all();
        request_total(&mut encoder, &all)?;
        durations(&mut encoder, &all)?;
        sizes(&mut encoder, &all)?;
        long_running(&mut encoder, &all)?;
        aborts(&mut encoder, &all)?;
        watches(&mut encoder, &all)
    }
}

fn request_total(encoder: &mut DescriptorEncoder, all: &[Arc<ResourceSeries>]) -> Fmt {
    let help = "[STABLE] Requests answered, by verb, dry run, group, version, resource, subresource, scope, \
                component and HTTP status code.";
    let mut family = encoder.encode_descriptor("apiserver_request", help, None, MetricType::Counter)?;
    for series in all {
        for (labels, cell) in series.used_cells() {
            for (code, count) in cell.codes() {
                let code = code.to_string();
                let [a, b, c, d, e, f, g, h] = full(series, &labels);
                let set = [a, b, c, d, e, f, g, h, ("code", code.as_str())];
                family.encode_family(&set)?.encode_counter::<NoLabelSet, _, u64>(&count, None)?;
            }
        }
    }
    Ok(())
}

fn durations(encoder: &mut DescriptorEncoder, all: &[Arc<ResourceSeries>]) -> Fmt {
    let help = "[STABLE] Response latency in seconds, by verb, dry run, group, version, resource, subresource, \
                scope and component.";
    let mut family =
        encoder.encode_descriptor("apiserver_request_duration_seconds", help, None, MetricType::Histogram)?;
    for series in all {
        for (labels, cell) in series.used_cells() {
            let set = full(series, &labels);
            cell.duration.encode(family.encode_family(&set)?)?;
        }
    }
    Ok(())
}

fn sizes(encoder: &mut DescriptorEncoder, all: &[Arc<ResourceSeries>]) -> Fmt {
    let help = "[STABLE] Response size in bytes of gets and lists, by verb, group, version, resource, \
                subresource, scope and component.";
    let mut family = encoder.encode_descriptor("apiserver_response_sizes", help, None, MetricType::Histogram)?;
    for series in all {
        for (labels, cell) in series.used_cells() {
            if let Some(sizes) = &cell.sizes {
                let set = without_dry_run(series, &labels);
                sizes.encode(family.encode_family(&set)?)?;
            }
        }
    }
    Ok(())
}

fn long_running(encoder: &mut DescriptorEncoder, all: &[Arc<ResourceSeries>]) -> Fmt {
    let help = "[STABLE] Long-running requests (watches) open now, by verb, group, version, resource, \
                subresource, scope and component.";
    let mut family = encoder.encode_descriptor("apiserver_longrunning_requests", help, None, MetricType::Gauge)?;
    for series in all {
        for (labels, cell) in series.used_cells() {
            if labels.verb == crate::metrics::labels::Verb::Watch {
                let set = without_dry_run(series, &labels);
                let open = cell.longrunning.load(Ordering::Relaxed);
                family.encode_family(&set)?.encode_gauge(&open)?;
            }
        }
    }
    Ok(())
}

fn aborts(encoder: &mut DescriptorEncoder, all: &[Arc<ResourceSeries>]) -> Fmt {
    let help = "[ALPHA] Requests the server gave up on (deadline passed), by verb, group, version, resource, \
                subresource and scope.";
    let mut family = encoder.encode_descriptor("apiserver_request_aborts", help, None, MetricType::Counter)?;
    for series in all {
        for (labels, cell) in series.used_cells() {
            let aborted = cell.aborts.load(Ordering::Relaxed);
            if aborted > 0 {
                let [verb, _, group, version, resource, subresource, scope, _] = full(series, &labels);
                let set = [verb, group, version, resource, subresource, scope];
                family.encode_family(&set)?.encode_counter::<NoLabelSet, _, u64>(&aborted, None)?;
            }
        }
    }
    Ok(())
}

fn watches(encoder: &mut DescriptorEncoder, all: &[Arc<ResourceSeries>]) -> Fmt {
    let watched = || all.iter().filter(|s| s.watched.load(Ordering::Relaxed));
    {
        let help = "[ALPHA] Watches open now, by group, version and kind.";
        let mut family = encoder.encode_descriptor("apiserver_registered_watchers", help, None, MetricType::Gauge)?;
        for series in watched() {
            let set = [("group", &*series.group), ("version", &*series.version), ("kind", &*series.kind)];
            family.encode_family(&set)?.encode_gauge(&series.registered_watchers.load(Ordering::Relaxed))?;
        }
    }
    {
        let help = "[ALPHA] Watch events sent to clients, by group, version and resource.";
        let mut family = encoder.encode_descriptor("apiserver_watch_events", help, None, MetricType::Counter)?;
        for series in watched() {
            let set = [("group", &*series.group), ("version", &*series.version), ("resource", &*series.resource)];
            let sent = series.watch_events.load(Ordering::Relaxed);
            family.encode_family(&set)?.encode_counter::<NoLabelSet, _, u64>(&sent, None)?;
        }
    }
    {
        let help = "[ALPHA] Counter of watchers closed due to unresponsiveness broken by resource type.";
        let mut family = encoder.encode_descriptor("apiserver_terminated_watchers", help, None, MetricType::Counter)?;
        for series in watched() {
            let terminated = series.terminated_watchers.load(Ordering::Relaxed);
            if terminated > 0 {
                let set = [("group", &*series.group), ("resource", &*series.resource)];
                family.encode_family(&set)?.encode_counter::<NoLabelSet, _, u64>(&terminated, None)?;
            }
        }
    }
    let help = "[ALPHA] Size in bytes of the watch events sent, by group, version and resource.";
    let mut family = encoder.encode_descriptor("apiserver_watch_events_sizes", help, None, MetricType::Histogram)?;
    for series in all {
        if let Some(sizes) = series.watch_event_sizes.get() {
            let set = [("group", &*series.group), ("version", &*series.version), ("resource", &*series.resource)];
            sizes.encode(family.encode_family(&set)?)?;
        }
    }
    Ok(())
}
