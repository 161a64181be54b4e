//! File digests for the `md5` and `hash` RPCs.

use md5::Digest as _;

/// A running digest of one of the algorithms clients may ask for.
pub enum Hasher {
    Md5(md5::Md5),
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl Hasher {
    /// `md5`, `sha1` or `sha256` (case-insensitive); `None` for anything else.
    pub fn new(algorithm: &str) -> Option<Hasher> {
        match algorithm.to_ascii_lowercase().as_str() {
            "md5" => Some(Hasher::Md5(md5::Md5::new())),
            "sha1" => Some(Hasher::Sha1(sha1::Sha1::new())),
            "sha256" => Some(Hasher::Sha256(sha2::Sha256::new())),
            _ => None,
        }
    }

    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(data),
            Hasher::Sha1(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
        }
    }

    /// The raw digest bytes.
    pub fn finish(self) -> Vec<u8> {
        match self {
            Hasher::Md5(h) => h.finalize().to_vec(),
            Hasher::Sha1(h) => h.finalize().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        let mut h = Hasher::new("MD5").unwrap();
        h.update(b"abc");
        assert_eq!(
            roost_wire::hex::encode(&h.finish()),
            "900150983cd24fb0d6963f7d28e17f72"
        );
        let mut h = Hasher::new("sha1").unwrap();
        h.update(b"abc");
        assert_eq!(
            roost_wire::hex::encode(&h.finish()),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert!(Hasher::new("crc32").is_none());
    }
}
