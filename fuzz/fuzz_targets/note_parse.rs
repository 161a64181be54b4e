//! Fuzz target: the parser of directory indexes kept in the cache for later runs must
//! never panic, and what it accepts must round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    roost_httpfs::fuzz_check::check_note_parser(data);
});
