//! Fuzz target: the job RPCs' parsers (descriptions, id lists, stored records) never panic,
//! and an accepted description reads back unchanged from the record stored for it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    roost_server::jobs::fuzz_check::check_job_parsers(data);
});
