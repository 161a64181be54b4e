//! The property every relay-message decoder must have, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/group_decode.rs`) and the garbage test run with the suite: no input
//! makes a decoder panic, and whatever a decoder accepts encodes to bytes that decode and
//! encode again to the same bytes (so a relay forwards exactly what it understood).
//! [`Rng`] is the generator the garbage tests draw from (the job parsers' in roost-server
//! too, and test data in roost's own tests).

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

/// A small deterministic generator (xorshift) for the garbage tests, here and in other
/// crates: the same seed gives the same garbage, so a failure replays.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next number (the seed must not be 0).
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n` (which must not be 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}
