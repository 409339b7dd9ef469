//! Patches built to amplify (self-feeding copies, thousands of operations, deep merge
//! patches): every answer is below 500, in bounded time and memory.
#![no_main]

use crd_apiserver_fuzz::amplify::Amplifier;
use crd_apiserver_fuzz::server::Harness;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: Amplifier| {
    input.run(Harness::shared());
});
