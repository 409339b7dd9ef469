//! What a scan adds up, in memory bounded whatever the number of objects: errors grouped by
//! field and message with a count and a few example objects, paths with their object counts,
//! and runtime costs in a fixed histogram. A group or path past the limits is counted, never
//! kept.
//!
//! Owns the aggregation only: it never reads objects or the store, and knows nothing of
//! schemas.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::core::field::{ErrorType, FieldError};

/// How much a tally keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Example objects kept per group.
    pub examples: usize,
    /// Groups (or paths) kept per list; more are counted in its overflow.
    pub groups: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { examples: 5, groups: 100 }
    }
}

/// A field path with list indices made `[*]`, so that the same field of every item of a list
/// is one group (`spec.ports[*].port`).
pub fn general_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(open) = rest.find('[') {
        let (before, after) = rest.split_at(open);
        out.push_str(before);
        let Some(inner_end) = after.find(']') else {
            // An unclosed bracket: the rest as it is.
            rest = after;
            break;
        };
        let inner = after.get(1..inner_end).unwrap_or_default();
        if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str("[*]");
        } else {
            out.push_str(after.get(..=inner_end).unwrap_or_default());
        }
        rest = after.get(inner_end + 1..).unwrap_or_default();
    }
    out.push_str(rest);
    out
}

/// One kind of error, as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorGroup {
    /// The field, list indices as `[*]` (`<nil>`: the object itself).
    pub field: String,
    /// The cause reason Kubernetes gives it (`FieldValueInvalid`, ...).
    pub reason: String,
    /// Kubernetes' message without the offending value (`Invalid value: ... should be less
    /// than or equal to 5`).
    pub message: String,
    /// Objects with this error.
    pub objects: u64,
    /// Of those, the objects where ratcheting tolerates it on an update that leaves the field
    /// unchanged.
    pub tolerated_by_ratcheting: u64,
    /// The first objects found with it (`namespace/name`).
    pub examples: Vec<String>,
    /// The whole message of the first example, value included.
    pub first_error: String,
}

/// Errors grouped, in the order their groups were first seen.
#[derive(Debug, Default)]
pub struct ErrorGroups {
    index: HashMap<(String, ErrorType, String), usize>,
    groups: Vec<ErrorGroup>,
    /// Objects with an error of no kept group.
    pub overflow_objects: u64,
}

/// One error of one object, and whether ratcheting tolerates it.
pub struct Finding<'a> {
    pub error: &'a FieldError,
    pub tolerated: bool,
}

impl ErrorGroups {
    /// Counts an object's errors: once per group, however many of its errors fall in it.
    pub fn add(&mut self, object: &str, findings: &[Finding<'_>], limits: &Limits) {
        let mut seen: Vec<usize> = Vec::new();
        let mut overflowed = false;
        for finding in findings {
            let error = finding.error;
            let key = (general_path(error.field.as_str()), error.kind, error.detail.clone());
            let position = match self.index.get(&key) {
                Some(position) => *position,
                None if self.groups.len() < limits.groups => {
                    let group = ErrorGroup {
                        field: if key.0.is_empty() { "<nil>".to_string() } else { key.0.clone() },
                        reason: error.kind.reason().to_string(),
                        message: without_value(error),
                        objects: 0,
                        tolerated_by_ratcheting: 0,
                        examples: Vec::new(),
                        first_error: error.to_string(),
                    };
                    self.groups.push(group);
                    self.index.insert(key, self.groups.len() - 1);
                    self.groups.len() - 1
                }
                None => {
                    overflowed = true;
                    continue;
                }
            };
            if seen.contains(&position) {
                continue;
            }
            seen.push(position);
            if let Some(group) = self.groups.get_mut(position) {
                group.objects += 1;
                if finding.tolerated {
                    group.tolerated_by_ratcheting += 1;
                }
                if group.examples.len() < limits.examples {
                    group.examples.push(object.to_string());
                }
            }
        }
        if overflowed && seen.is_empty() {
            self.overflow_objects += 1;
        }
    }

    pub fn into_groups(self) -> Vec<ErrorGroup> {
        self.groups
    }
}

/// Kubernetes' message of an error without its value: `Invalid value: <detail>`.
fn without_value(error: &FieldError) -> String {
    let words = error.kind.words();
    if error.detail.is_empty() { words.to_string() } else { format!("{words}: {}", error.detail) }
}

/// Paths and the number of objects each concerns, in the order first seen.
#[derive(Debug, Default)]
pub struct PathCounts {
    counts: Vec<(String, u64)>,
    index: HashMap<String, usize>,
    /// Objects with a path of no kept entry.
    pub overflow_objects: u64,
}

/// A path and how many objects it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathCount {
    pub path: String,
    pub objects: u64,
}

impl PathCounts {
    /// Counts one object's paths (each general path once).
    pub fn add(&mut self, paths: &[String], limits: &Limits) {
        let mut seen: Vec<usize> = Vec::new();
        let mut overflowed = false;
        for path in paths {
            let path = general_path(path);
            let position = match self.index.get(&path) {
                Some(position) => *position,
                None if self.counts.len() < limits.groups => {
                    self.counts.push((path.clone(), 0));
                    self.index.insert(path, self.counts.len() - 1);
                    self.counts.len() - 1
                }
                None => {
                    overflowed = true;
                    continue;
                }
            };
            if seen.contains(&position) {
                continue;
            }
            seen.push(position);
            if let Some(entry) = self.counts.get_mut(position) {
                entry.1 += 1;
            }
        }
        if overflowed && seen.is_empty() {
            self.overflow_objects += 1;
        }
    }

    pub fn into_counts(self) -> Vec<PathCount> {
        self.counts.into_iter().map(|(path, objects)| PathCount { path, objects }).collect()
    }
}

/// Values below this are counted exactly.
const EXACT: u64 = 64;
/// Sub-buckets per power of two above [`EXACT`]: values are kept to within 1/32 (3%).
const SUB_BUCKETS: u64 = 32;
const BUCKETS: usize = (EXACT + (64 - 6) * SUB_BUCKETS) as usize;

/// Runtime costs of many objects in fixed memory: exact below 64, within 3% above.
#[derive(Debug, Clone)]
pub struct CostHistogram {
    counts: Box<[u64; BUCKETS]>,
    count: u64,
    max: u64,
}

impl Default for CostHistogram {
    fn default() -> Self {
        CostHistogram { counts: Box::new([0; BUCKETS]), count: 0, max: 0 }
    }
}

/// Maximum and 99th percentile of the costs of the objects looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CostSummary {
    pub max: u64,
    /// At most 3% above the true 99th percentile (never above `max`).
    pub p99: u64,
}

impl CostHistogram {
    fn bucket(value: u64) -> usize {
        if value < EXACT {
            return value as usize;
        }
        let exponent = 63 - u64::from(value.leading_zeros());
        let shift = exponent - 5;
        let sub = (value >> shift) - SUB_BUCKETS;
        (EXACT + (exponent - 6) * SUB_BUCKETS + sub) as usize
    }

    /// The largest value of a bucket.
    fn upper(bucket: usize) -> u64 {
        let bucket = bucket as u64;
        if bucket < EXACT {
            return bucket;
        }
        let exponent = (bucket - EXACT) / SUB_BUCKETS + 6;
        let sub = (bucket - EXACT) % SUB_BUCKETS + SUB_BUCKETS;
        let shift = exponent - 5;
        // The last bucket's bound is 2^64 - 1: shifted in 128 bits, not to lose its top bit.
        let next = u128::from(sub + 1) << shift;
        u64::try_from(next - 1).unwrap_or(u64::MAX)
    }

    pub fn add(&mut self, value: u64) {
        if let Some(count) = self.counts.get_mut(Self::bucket(value)) {
            *count += 1;
        }
        self.count += 1;
        self.max = self.max.max(value);
    }

    pub fn summary(&self) -> Option<CostSummary> {
        if self.count == 0 {
            return None;
        }
        // The smallest value at or above which 1% of the objects lie.
        let rank = self.count - self.count / 100;
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(CostSummary { max: self.max, p99: Self::upper(bucket).min(self.max) });
            }
        }
        Some(CostSummary { max: self.max, p99: self.max })
    }
}

/// Objects per version they are stored in.
pub type VersionCounts = BTreeMap<String, u64>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::field::Path;

    #[test]
    fn list_indices_are_general_and_keys_stay() {
        assert_eq!(general_path("spec.ports[3].port"), "spec.ports[*].port");
        assert_eq!(general_path("spec.labels[app]"), "spec.labels[app]");
        assert_eq!(general_path("a[1][22].b[x1]"), "a[*][*].b[x1]");
        assert_eq!(general_path(""), "");
        assert_eq!(general_path("broken[1"), "broken[1");
    }

    #[test]
    fn errors_group_by_field_and_message_once_per_object() {
        let limits = Limits { examples: 2, groups: 2 };
        let mut groups = ErrorGroups::default();
        let too_big = |i: usize, v: i64| {
            FieldError::invalid(Path::new("spec").child("items").index(i), v, "must be less than or equal to 5")
        };
        let (a, b) = (too_big(0, 7), too_big(1, 9));
        groups.add(
            "ns/one",
            &[Finding { error: &a, tolerated: true }, Finding { error: &b, tolerated: true }],
            &limits,
        );
        groups.add("ns/two", &[Finding { error: &b, tolerated: false }], &limits);
        groups.add("ns/three", &[Finding { error: &a, tolerated: false }], &limits);
        let required = FieldError::required(Path::new("spec").child("image"), "");
        groups.add("ns/four", &[Finding { error: &required, tolerated: false }], &limits);
        let third = FieldError::forbidden(Path::nil(), "nope");
        groups.add("ns/five", &[Finding { error: &third, tolerated: false }], &limits);
        assert_eq!(groups.overflow_objects, 1);
        let groups = groups.into_groups();
        assert_eq!(groups.len(), 2);
        assert_eq!(
            groups[0],
            ErrorGroup {
                field: "spec.items[*]".into(),
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: must be less than or equal to 5".into(),
                objects: 3,
                tolerated_by_ratcheting: 1,
                examples: vec!["ns/one".into(), "ns/two".into()],
                first_error: "spec.items[0]: Invalid value: 7: must be less than or equal to 5".into(),
            }
        );
        assert_eq!((groups[1].field.as_str(), groups[1].message.as_str()), ("spec.image", "Required value"));
    }

    #[test]
    fn paths_are_counted_once_per_object_within_the_limit() {
        let limits = Limits { examples: 1, groups: 2 };
        let mut paths = PathCounts::default();
        paths.add(&["spec.a[0].x".into(), "spec.a[1].x".into()], &limits);
        paths.add(&["spec.a[4].x".into(), "spec.b".into()], &limits);
        paths.add(&["spec.c".into()], &limits);
        assert_eq!(paths.overflow_objects, 1);
        assert_eq!(
            paths.into_counts(),
            [PathCount { path: "spec.a[*].x".into(), objects: 2 }, PathCount { path: "spec.b".into(), objects: 1 }]
        );
    }

    #[test]
    fn cost_percentiles_are_exact_when_small_and_close_when_large() {
        let mut small = CostHistogram::default();
        for cost in 1..=100 {
            small.add(cost % 50);
        }
        assert_eq!(small.summary(), Some(CostSummary { max: 49, p99: 49 }));
        let mut large = CostHistogram::default();
        for cost in 1..=10_000u64 {
            large.add(cost * 1000);
        }
        let summary = large.summary().unwrap();
        assert_eq!(summary.max, 10_000_000);
        // The 99th percentile is 9,900,000 (the 9,900th value); kept within 1/32.
        assert!((9_900_000..=9_900_000 + 9_900_000 / 32).contains(&summary.p99), "{summary:?}");
        assert_eq!(CostHistogram::default().summary(), None);
        let mut huge = CostHistogram::default();
        huge.add(u64::MAX);
        assert_eq!(huge.summary(), Some(CostSummary { max: u64::MAX, p99: u64::MAX }));
        for value in [0, 63, 64, 65, 127, 128, 1 << 40, u64::MAX] {
            let bucket = CostHistogram::bucket(value);
            assert!(bucket < BUCKETS, "{value}");
            assert!(CostHistogram::upper(bucket) >= value, "{value}");
        }
    }
}
