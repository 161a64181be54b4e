//! Lower-case hex encoding, used by the `hmac` authentication lines.

/// Lower-case hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Bytes of a hex string (either case); `None` for odd length or a non-hex digit.
pub fn decode(text: &[u8]) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    text.chunks(2)
        .map(|pair| Some(crate::url::hex_value(pair[0])? << 4 | crate::url::hex_value(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_all_bytes() {
        let all: Vec<u8> = (0..=255).collect();
        let text = encode(&all);
        assert!(text.starts_with("000102") && text.ends_with("feff"));
        assert_eq!(decode(text.as_bytes()).unwrap(), all);
        assert_eq!(decode(b"ABcd").unwrap(), vec![0xab, 0xcd]);
    }

    #[test]
    fn refuses_odd_length_and_bad_digits() {
        assert_eq!(decode(b"abc"), None);
        assert_eq!(decode(b"zz"), None);
    }
}
