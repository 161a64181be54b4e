//! Fuzz target: the directory-index parsers of HTTP as a file system (roost's `.roostindex`,
//! cctools' `.growfsdir`) must never panic, and what roost's accepts must round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    roost_httpfs::fuzz_check::check_parsers(data);
});
