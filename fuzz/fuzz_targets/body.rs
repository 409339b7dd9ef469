//! Raw request bodies (any bytes, as JSON, YAML or a patch type) to create, update and patch
//! the served resources: the decoder refuses what it cannot read with a 4xx Status.
#![no_main]

use crd_apiserver_fuzz::server::{Call, Harness};
use http::Method;
use libfuzzer_sys::fuzz_target;

const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "application/strategic-merge-patch+json",
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else { return };
    let content_type = CONTENT_TYPES[usize::from(selector & 7) % CONTENT_TYPES.len()];
    let gadget = selector & 8 != 0;
    let collection = if gadget {
        "/apis/fuzz.example.com/v1/namespaces/fuzz/gadgets"
    } else {
        "/apis/stable.example.com/v1/namespaces/fuzz/crontabs"
    };
    let (method, path) = match (content_type, selector >> 4 & 1) {
        ("application/json" | "application/yaml", 0) => (Method::POST, collection.to_string()),
        ("application/json" | "application/yaml", _) => (Method::PUT, format!("{collection}/base")),
        _ => (Method::PATCH, format!("{collection}/base")),
    };
    let target = format!("{path}?dryRun=All&fieldManager=fuzz");
    Harness::shared().send(&Call::new(method, target).body(content_type, body.to_vec()));
});
