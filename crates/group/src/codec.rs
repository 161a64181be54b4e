//! The byte encoding of relay messages: a sequence of fields, each a signed decimal number
//! followed by one space, or a blob written `LENGTH:BYTES` followed by one space.
//!
//! Plain enough to read in a packet capture, binary-safe for file data, and strict: a
//! decoder refuses anything but exactly this form.

use crate::ranges::{IndexSet, Range};

/// Why a message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed group message: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

/// Appends fields to a message.
#[derive(Default)]
pub struct Encoder {
    pub out: Vec<u8>,
}

impl Encoder {
    pub fn new() -> Encoder {
        Encoder::default()
    }

    pub fn int(&mut self, n: i64) -> &mut Encoder {
        self.out.extend_from_slice(n.to_string().as_bytes());
        self.out.push(b' ');
        self
    }

    pub fn uint(&mut self, n: u64) -> &mut Encoder {
        self.out.extend_from_slice(n.to_string().as_bytes());
        self.out.push(b' ');
        self
    }

    pub fn blob(&mut self, bytes: &[u8]) -> &mut Encoder {
        self.out
            .extend_from_slice(bytes.len().to_string().as_bytes());
        self.out.push(b':');
        self.out.extend_from_slice(bytes);
        self.out.push(b' ');
        self
    }

    pub fn text(&mut self, s: &str) -> &mut Encoder {
        self.blob(s.as_bytes())
    }

    /// An index set: the number of ranges, then start, stride, count for each.
    pub fn set(&mut self, set: &IndexSet) -> &mut Encoder {
        self.uint(set.ranges().len() as u64);
        for r in set.ranges() {
            self.uint(r.start.into())
                .uint(r.stride.into())
                .uint(r.count.into());
        }
        self
    }

    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

/// Most member indices the sets of one message may name together: a few bytes of ranges can
/// name a million members, so the expansion is bounded per message, not only per set.
pub const MAX_INDICES_PER_MESSAGE: usize = 16 * crate::MAX_MEMBERS;

/// Reads fields from a message.
pub struct Decoder<'a> {
    rest: &'a [u8],
    /// Indices named by the sets read so far.
    indices: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(bytes: &'a [u8]) -> Decoder<'a> {
        Decoder {
            rest: bytes,
            indices: 0,
        }
    }

    fn digits(&mut self, end: u8) -> Result<&'a [u8], DecodeError> {
        let at = self
            .rest
            .iter()
            .position(|&b| b == end)
            .ok_or(DecodeError("truncated"))?;
        let (word, rest) = self.rest.split_at(at);
        self.rest = &rest[1..];
        if word.is_empty() || word.len() > 20 {
            return Err(DecodeError("bad number"));
        }
        Ok(word)
    }

    pub fn int(&mut self) -> Result<i64, DecodeError> {
        let word = self.digits(b' ')?;
        std::str::from_utf8(word)
            .ok()
            .filter(|w| {
                w.bytes()
                    .enumerate()
                    .all(|(i, b)| b.is_ascii_digit() || (i == 0 && b == b'-'))
            })
            .and_then(|w| w.parse().ok())
            .ok_or(DecodeError("bad number"))
    }

    pub fn uint(&mut self) -> Result<u64, DecodeError> {
        let word = self.digits(b' ')?;
        std::str::from_utf8(word)
            .ok()
            .filter(|w| w.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|w| w.parse().ok())
            .ok_or(DecodeError("bad number"))
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.uint()?).map_err(|_| DecodeError("number too large"))
    }

    pub fn blob(&mut self) -> Result<&'a [u8], DecodeError> {
        let word = self.digits(b':')?;
        let len: usize = std::str::from_utf8(word)
            .ok()
            .filter(|w| w.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|w| w.parse().ok())
            .ok_or(DecodeError("bad length"))?;
        if self.rest.len() < len + 1 || self.rest[len] != b' ' {
            return Err(DecodeError("truncated blob"));
        }
        let (bytes, rest) = self.rest.split_at(len);
        self.rest = &rest[1..];
        Ok(bytes)
    }

    pub fn text(&mut self) -> Result<String, DecodeError> {
        String::from_utf8(self.blob()?.to_vec()).map_err(|_| DecodeError("text is not UTF-8"))
    }

    /// A count of items that follow, refused if it could not fit in the rest of the
    /// message (each item takes at least two bytes), so a lying count cannot make the
    /// decoder reserve memory.
    pub fn count(&mut self) -> Result<usize, DecodeError> {
        let n = self.uint()?;
        if n > self.rest.len() as u64 / 2 {
            return Err(DecodeError("count larger than the message"));
        }
        Ok(n as usize)
    }

    pub fn set(&mut self) -> Result<IndexSet, DecodeError> {
        let n = self.count()?;
        let mut ranges = Vec::with_capacity(n);
        for _ in 0..n {
            ranges.push(Range {
                start: self.u32()?,
                stride: self.u32()?,
                count: self.u32()?,
            });
        }
        let set = IndexSet::from_ranges(&ranges).ok_or(DecodeError("bad index range"))?;
        self.indices += set.len();
        if self.indices > MAX_INDICES_PER_MESSAGE {
            return Err(DecodeError("too many member indices"));
        }
        Ok(set)
    }

    /// Whether every byte has been read (optional trailing fields are absent).
    pub fn at_end(&self) -> bool {
        self.rest.is_empty()
    }

    /// Fails unless every byte has been read.
    pub fn end(&self) -> Result<(), DecodeError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(DecodeError("trailing bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let mut e = Encoder::new();
        e.int(-5)
            .uint(7)
            .blob(b"a b:\n\0")
            .text("x")
            .set(&IndexSet::from_indices([1, 2, 3, 9]));
        let bytes = e.finish();
        assert_eq!(&bytes[..10], b"-5 7 6:a b");
        let mut d = Decoder::new(&bytes);
        assert_eq!(d.int().unwrap(), -5);
        assert_eq!(d.uint().unwrap(), 7);
        assert_eq!(d.blob().unwrap(), b"a b:\n\0");
        assert_eq!(d.text().unwrap(), "x");
        assert_eq!(d.set().unwrap(), IndexSet::from_indices([1, 2, 3, 9]));
        d.end().unwrap();
    }

    #[test]
    fn malformed_messages_are_refused() {
        for bad in [
            &b"5"[..],
            b"+5 ",
            b"- ",
            b"3:ab ",
            b"2:abc",
            b"99999999999 ",
            b"1a ",
        ] {
            let mut d = Decoder::new(bad);
            assert!(d.int().is_err() || d.blob().is_err(), "{bad:?}");
        }
        assert!(Decoder::new(b"4000000 ").count().is_err());
        assert!(Decoder::new(b"1 0 0 5 ").set().is_err());
        assert!(Decoder::new(b"1 ").end().is_err());
        // Many sets of a million members each: refused once the message names too many.
        let big = IndexSet::from_indices(0..crate::MAX_MEMBERS as u32);
        let mut e = Encoder::new();
        for _ in 0..17 {
            e.set(&big);
        }
        let bytes = e.finish();
        let mut d = Decoder::new(&bytes);
        let read: Vec<_> = std::iter::from_fn(|| d.set().ok()).collect();
        assert_eq!(read.len(), 16);
    }
}
