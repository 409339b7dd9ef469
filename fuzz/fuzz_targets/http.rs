//! Raw bytes on a client connection, in virtual time: the connection ends within the server's
//! timeouts and every answer is well-formed HTTP, hyper's own refusals with a Status.
#![no_main]

use crd_apiserver_fuzz::http_bytes::Session;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: Session| {
    input.run();
});
