//! Definition manifests: any text, or the everything-definition with fuzzed edits, goes
//! through parsing, the create-time checks, schema and CEL compilation, the registry and the
//! discovery and OpenAPI documents. A broken manifest is refused, never a crash.
#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use crd_apiserver::api::Catalog;
use crd_apiserver::definitions::{Registry, load};
use crd_apiserver_fuzz::json::Edit;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

#[derive(Debug, Arbitrary)]
enum Input {
    Text(String),
    Edited(Vec<Edit>),
}

fn everything() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| load::parse_documents(crd_apiserver_fuzz::EVERYTHING).expect("parses").remove(0))
}

fn load_all(docs: Vec<Value>) {
    let definitions: Vec<_> = docs.into_iter().filter_map(|d| load::definition_from_value(d, "fuzz").ok()).collect();
    let (registry, _problems) = Registry::build(definitions);
    let _ = Catalog::new(registry);
}

fuzz_target!(|input: Input| {
    match input {
        Input::Text(text) => {
            if let Ok(docs) = load::parse_documents(&text) {
                load_all(docs);
            }
        }
        Input::Edited(edits) => load_all(vec![crd_apiserver_fuzz::json::edited(everything().clone(), &edits)]),
    }
});
