//! The read path alone, in process, for `hack/bench.sh`: microseconds per stored object read
//! through the general path (parse, coerce, default, convert, write) and from its stored bytes
//! (`api::verbatim`), for a CronTab as the server stores it (managedFields included), without
//! HTTP or storage.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::time::Instant;

use crd_apiserver::api::present::read_stored;
use crd_apiserver::api::verbatim;
use crd_apiserver::definitions::load::{definition_from_value, parse_documents};

const ROUNDS: usize = 20_000;

fn main() {
    let manifest = std::fs::read_to_string("manifests/examples/crontabs.yaml").expect("run from the repository root");
    let raw = parse_documents(&manifest).unwrap().into_iter().next().unwrap();
    let definition = definition_from_value(raw, "crontabs.yaml").unwrap();
    let version = definition.storage.clone();
    let stored = br#"{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"creationTimestamp":"2026-11-21T07:27:04Z","generation":1,"labels":{"app":"bench"},"managedFields":[{"apiVersion":"stable.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{".":{},"f:cronSpec":{},"f:image":{},"f:replicas":{}}},"manager":"unknown","operation":"Update","time":"2026-11-21T07:27:04Z"}],"name":"l0","namespace":"bench-list-2000","uid":"139905d7-ddfe-4187-a502-89149933ba98"},"spec":{"cronSpec":"*/5 * * * *","image":"registry.example.com/team/cron-runner:1.2.3","replicas":3}}"#;

    let start = Instant::now();
    let mut bytes = 0;
    for i in 0..ROUNDS {
        let object = read_stored(&definition, &version, stored, i as u64).unwrap();
        bytes += serde_json::to_vec(&object).unwrap().len();
    }
    let general = start.elapsed().as_secs_f64() * 1e6 / ROUNDS as f64;

    let start = Instant::now();
    let mut out = Vec::new();
    for i in 0..ROUNDS {
        out.clear();
        assert!(verbatim::render(&definition, &version, stored, i as u64, &mut out));
        bytes -= out.len();
    }
    let fast = start.elapsed().as_secs_f64() * 1e6 / ROUNDS as f64;
    assert_eq!(bytes, 0, "both paths write the same lengths");
    println!(
        "read one stored CronTab ({} bytes): general path {general:.2} µs, from stored bytes {fast:.2} µs ({:.0}x)",
        stored.len(),
        general / fast
    );
}
