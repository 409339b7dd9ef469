//! A histogram that request paths can observe into without a lock: one atomic add per bucket,
//! count and sum. Values are kept as integers of a fixed unit (nanoseconds for durations, bytes
//! for sizes) so that the sum is an exact atomic add too; the exposition converts to the
//! metric's unit. Encoded through prometheus-client's encoder like any of its metrics.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// What one integer of an observation stands for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// Observations in nanoseconds, exposed in seconds.
    Nanoseconds,
    /// Observations exposed as they are (bytes, counts).
    Plain,
}

impl Unit {
    fn scale(self) -> f64 {
        match self {
            Unit::Nanoseconds => 1e-9,
            Unit::Plain => 1.0,
        }
    }
}

/// Bucket upper bounds, in the exposed unit, as Kubernetes declares them.
pub type Bounds = &'static [f64];

/// A fixed-bucket histogram with atomic cells.
#[derive(Debug)]
pub struct AtomicHistogram {
    bounds: Bounds,
    /// The bounds in observation units, compared without converting each observation.
    raw_bounds: Box<[u64]>,
    unit: Unit,
    /// Per bucket (not cumulative), plus the `+Inf` bucket last.
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl AtomicHistogram {
    pub fn new(bounds: Bounds, unit: Unit) -> AtomicHistogram {
        let scale = unit.scale();
        let raw_bounds = bounds.iter().map(|b| (b / scale).round() as u64).collect();
        let buckets = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        AtomicHistogram { bounds, raw_bounds, unit, buckets, sum: AtomicU64::new(0) }
    }

    /// Records one observation, in the histogram's observation unit.
    pub fn observe(&self, value: u64) {
        // `le` buckets: the first bound not below the value.
        let index = self.raw_bounds.partition_point(|bound| *bound < value);
        if let Some(bucket) = self.buckets.get(index) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// Records a duration.
    pub fn observe_duration(&self, elapsed: std::time::Duration) {
        self.observe(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// The sum in the exposed unit.
    pub fn sum(&self) -> f64 {
        self.sum.load(Ordering::Relaxed) as f64 * self.unit.scale()
    }

    /// `(upper bound, count)` per bucket, `+Inf` last, as the encoder takes them (it adds them
    /// up), and the total count, read once so that the two agree.
    fn buckets(&self) -> (Vec<(f64, u64)>, u64) {
        let bounds = self.bounds.iter().copied().chain(std::iter::once(f64::INFINITY));
        let pairs: Vec<(f64, u64)> =
            bounds.zip(self.buckets.iter()).map(|(b, n)| (b, n.load(Ordering::Relaxed))).collect();
        let count = pairs.iter().map(|(_, n)| n).sum();
        (pairs, count)
    }
}

impl TypedMetric for AtomicHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for AtomicHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (buckets, count) = self.buckets();
        encoder.encode_histogram::<NoLabelSet>(self.sum(), count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Kubernetes' `ExponentialBuckets(start, factor, count)`.
// Indexing is bounded by the loop (and checked at compile time where the function runs).
#[allow(clippy::indexing_slicing)]
pub const fn exponential<const N: usize>(start: f64, factor: f64) -> [f64; N] {
    let mut bounds = [0.0; N];
    let mut value = start;
    let mut i = 0;
    while i < N {
        bounds[i] = value;
        value *= factor;
        i += 1;
    }
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_le_buckets_and_sum_exactly() {
        static BOUNDS: [f64; 3] = [0.005, 0.025, 0.05];
        let histogram = AtomicHistogram::new(&BOUNDS, Unit::Nanoseconds);
        histogram.observe(5_000_000); // exactly on a bound: counted in it (le)
        histogram.observe(5_000_001);
        histogram.observe(60_000_000);
        let (buckets, count) = histogram.buckets();
        assert_eq!(buckets, vec![(0.005, 1), (0.025, 1), (0.05, 0), (f64::INFINITY, 1)]);
        assert_eq!(count, 3);
        assert!((histogram.sum() - 0.070000001).abs() < 1e-12);
    }

    #[test]
    fn exponential_bounds_match_kubernetes() {
        assert_eq!(exponential::<3>(1000.0, 10.0), [1000.0, 10000.0, 100000.0]);
    }
}
