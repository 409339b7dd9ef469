//! Writes to the served resources (create, update, every patch type, apply, status, scale,
//! delete options) built by editing valid documents: the answer is a 2xx or a 4xx Status.
#![no_main]

use crd_apiserver_fuzz::requests::WriteInput;
use crd_apiserver_fuzz::server::Harness;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: WriteInput| {
    input.run(Harness::shared());
});
