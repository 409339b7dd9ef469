//! Reads of the served resources (get, list, watch, deletecollection as a dry run) with
//! fuzzed selectors, continue tokens, limits, resource versions and Accept headers (tables,
//! partial metadata, printer columns): the answer is a 2xx or a 4xx Status.
#![no_main]

use crd_apiserver_fuzz::requests::ReadInput;
use crd_apiserver_fuzz::server::Harness;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: ReadInput| {
    input.run(Harness::shared());
});
