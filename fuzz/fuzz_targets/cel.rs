//! CEL rules: fuzzed expressions are compiled (checked, costed) as their definition loads,
//! then evaluated over fuzzed objects as a create or an update would: a refusal or a 4xx,
//! never a panic, a hang or an unbounded allocation.
#![no_main]

use crd_apiserver::api::strict::Tracked;
use crd_apiserver::api::write::FieldValidation;
use crd_apiserver::cli::validate::{Outcome, validate_one};
use crd_apiserver::definitions::{Registry, load};
use crd_apiserver_fuzz::rules::RuleInput;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: RuleInput| {
    let Ok(definition) = load::definition_from_value(input.manifest(), "fuzz") else { return };
    let (registry, problems) = Registry::build(vec![definition]);
    assert!(problems.is_empty());
    let served = registry.lookup("fuzz.example.com", "v1", "rules").expect("served").clone();
    let old = input.old_edits.as_ref().map(|edits| RuleInput::object(edits));
    let object = RuleInput::object(&input.edits);
    let tracked = Tracked { value: object, duplicates: Vec::new() };
    match validate_one(&served, tracked, old.as_ref(), FieldValidation::Warn) {
        Outcome::Stored(..) => {}
        Outcome::Refused(error, _) => assert!((400..500).contains(&error.code), "{error:?}"),
    }
});
