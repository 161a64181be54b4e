//! Percent-encoding of the string arguments in a request line.
//!
//! Chirp separates arguments with spaces, so every string (paths above all) travels encoded.
//! The set of escaped bytes is the one cctools uses: control characters and space (`<= 0x20`),
//! `%`, `\`, `<`, `>`, `'`, `"`, and every byte above `z` (`{|}~`, DEL and all non-ASCII
//! bytes). Escapes are `%` and two upper-case hex digits. Unlike cctools, bytes of multi-byte
//! UTF-8 sequences are encoded one by one (`é` → `%C3%A9`); cctools' client sign-extends them
//! into `%FF`, which no server can undo.

use crate::error::WireError;

/// True if `b` must travel as a `%XX` escape.
fn needs_escape(b: u8) -> bool {
    b <= b' ' || b > b'z' || matches!(b, b'%' | b'\\' | b'<' | b'>' | b'\'' | b'"')
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Appends the encoded form of `raw` to `out`.
pub fn encode_into(raw: &[u8], out: &mut Vec<u8>) {
    for &b in raw {
        if needs_escape(b) {
            out.extend_from_slice(&[
                b'%',
                HEX_UPPER[usize::from(b >> 4)],
                HEX_UPPER[usize::from(b & 15)],
            ]);
        } else {
            out.push(b);
        }
    }
}

/// Returns the encoded form of `raw`.
pub fn encode(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    encode_into(raw, &mut out);
    out
}

/// The value of one hex digit, either case.
pub(crate) fn hex_value(d: u8) -> Option<u8> {
    match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        b'A'..=b'F' => Some(d - b'A' + 10),
        _ => None,
    }
}

/// Decodes `%XX` escapes. A `%` not followed by two hex digits is an error (cctools reads
/// garbage there). Any other byte is taken literally, so unencoded names still decode.
pub fn decode(encoded: &[u8]) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::with_capacity(encoded.len());
    let mut i = 0;
    while i < encoded.len() {
        let b = encoded[i];
        if b == b'%' {
            let hi = encoded.get(i + 1).copied().and_then(hex_value);
            let lo = encoded.get(i + 2).copied().and_then(hex_value);
            match (hi, lo) {
                (Some(hi), Some(lo)) => out.push(hi << 4 | lo),
                _ => return Err(WireError::BadEscape),
            }
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Ok(out)
}

/// Decodes a string argument and refuses NUL and newline, which no path or name may hold.
pub fn decode_field(encoded: &[u8]) -> Result<Vec<u8>, WireError> {
    let raw = decode(encoded)?;
    if raw.contains(&0) {
        return Err(WireError::ForbiddenByte(0));
    }
    if raw.contains(&b'\n') {
        return Err(WireError::ForbiddenByte(b'\n'));
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_through_unchanged() {
        assert_eq!(
            encode(b"/a/b-c_d.e+f=g,h(i)j:k@l"),
            b"/a/b-c_d.e+f=g,h(i)j:k@l"
        );
    }

    #[test]
    fn space_percent_and_quotes_are_escaped() {
        assert_eq!(
            encode(b"a b%c\"d'e<f>g\\h"),
            b"a%20b%25c%22d%27e%3Cf%3Eg%5Ch"
        );
    }

    #[test]
    fn bytes_above_z_are_escaped_one_by_one() {
        assert_eq!(encode("é{~".as_bytes()), b"%C3%A9%7B%7E");
    }

    #[test]
    fn decode_inverts_encode_for_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)).unwrap(), all);
    }

    #[test]
    fn decode_accepts_lower_case_hex() {
        assert_eq!(decode(b"%c3%a9").unwrap(), "é".as_bytes());
    }

    #[test]
    fn truncated_or_bad_escape_is_an_error() {
        for bad in [&b"%"[..], b"%4", b"a%zz", b"%4g"] {
            assert_eq!(decode(bad), Err(WireError::BadEscape), "{bad:?}");
        }
    }

    #[test]
    fn decoded_nul_and_newline_are_refused() {
        assert_eq!(decode_field(b"a%00b"), Err(WireError::ForbiddenByte(0)));
        assert_eq!(decode_field(b"a%0Ab"), Err(WireError::ForbiddenByte(b'\n')));
        assert_eq!(decode_field(b"a%0Db").unwrap(), b"a\rb");
    }
}
