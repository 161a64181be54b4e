//! The property every relay-message decoder must have, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/group_decode.rs`) and the garbage test run with the suite: no input
//! makes a decoder panic, and whatever a decoder accepts encodes to bytes that decode and
//! encode again to the same bytes (so a relay forwards exactly what it understood).

use crate::blocks::Signature;
use crate::message::{OpRequest, OpenRequest, Reply};
use crate::node::{decode_open_reply, encode_open_reply};

/// Runs every decoder over `data`; panics if the property fails. Returns how many
/// decoders accepted it.
pub fn check_decoders(data: &[u8]) -> usize {
    let mut accepted = 0;
    if let Ok(m) = OpenRequest::decode(data) {
        let bytes = m.encode();
        let again = OpenRequest::decode(&bytes).expect("a re-encoded open request decodes");
        assert_eq!(again.encode(), bytes);
        accepted += 1;
    }
    if let Ok(m) = OpRequest::decode(data) {
        let bytes = m.encode();
        let again = OpRequest::decode(&bytes).expect("a re-encoded operation decodes");
        assert_eq!(again.encode(), bytes);
        accepted += 1;
    }
    if let Ok(m) = Reply::decode(data) {
        let bytes = m.encode();
        let again = Reply::decode(&bytes).expect("a re-encoded reply decodes");
        assert_eq!(again.encode(), bytes);
        accepted += 1;
    }
    if let Ok((gid, m)) = decode_open_reply(data) {
        let bytes = encode_open_reply(gid, &m);
        let (gid2, again) = decode_open_reply(&bytes).expect("a re-encoded open reply decodes");
        assert_eq!(encode_open_reply(gid2, &again), bytes);
        accepted += 1;
    }
    if let Ok(s) = Signature::decode(data) {
        let bytes = s.encode();
        let again = Signature::decode(&bytes).expect("a re-encoded signature decodes");
        assert_eq!(again.encode(), bytes);
        accepted += 1;
    }
    accepted
}
