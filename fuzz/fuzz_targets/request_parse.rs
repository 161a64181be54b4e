//! Fuzz target: every parser that reads bytes from the network must not panic, and whatever
//! the request parser accepts must be written back and parsed again to the same request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roost_wire::{auth, listing, reply, Request, Stat, StatFs};

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = Request::parse(data) {
        let _ = req.payload();
        let _ = req.reply_body();
        if let Ok(line) = req.to_line() {
            assert_eq!(Request::parse(&line).as_ref(), Ok(&req));
        }
    }
    let _ = reply::parse_result(data);
    let _ = Stat::parse(data);
    let _ = StatFs::parse(data);
    let _ = listing::AclEntry::parse(data);
    let _ = auth::parse_response(data);
    let _ = auth::parse_nonce_line(data);
    let _ = auth::parse_challenge(data);
});
