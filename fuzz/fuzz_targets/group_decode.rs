//! Fuzz target: the relay-message decoders of group operations (open requests, operations,
//! replies, block signatures) must never panic, and must round-trip what they accept.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    roost_group::fuzz_check::check_decoders(data);
});
