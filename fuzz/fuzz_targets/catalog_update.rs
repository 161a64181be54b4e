//! Fuzz target: the catalog's update parser (JSON objects, key-value lines, either behind
//! cctools' zlib marker) and its JSON parser must never panic on what a datagram carries.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = roost_catalog::update::parse_update(data);
    let _ = roost_catalog::json::parse(data);
});
