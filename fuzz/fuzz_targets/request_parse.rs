//! Fuzz target: every parser that reads bytes from the network must not panic, and whatever
//! the request parser accepts must be written back and parsed again to the same request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roost_wire::{auth, listing, reply, url, OpenFlags, Request, Rights, Stat, StatFs};

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
    if let Ok(flags) = OpenFlags::from_letters(data) {
        assert_eq!(
            OpenFlags::from_letters(flags.to_letters().as_bytes()),
            Ok(flags)
        );
    }
    if let Ok(decoded) = url::decode(data) {
        assert_eq!(url::decode(&url::encode(&decoded)).as_ref(), Ok(&decoded));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(rights) = Rights::parse(text) {
            assert_eq!(Rights::parse(&rights.to_text()), Ok(rights));
        }
        let _ = auth::Subject::parse(text);
    }
});
