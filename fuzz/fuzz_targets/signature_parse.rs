//! Fuzz target: the parsers of signed indexes (`.roostindex.sig`, public key lines) must
//! never panic, and what they accept must round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    roost_httpfs::fuzz_check::check_signature_parsers(data);
});
