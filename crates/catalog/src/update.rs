//! Catalog updates as servers send them, in cctools' formats:
//!
//! - a JSON object: `{"type":"chirp","name":"fs7","port":9094,...}`;
//! - the older `key value` lines (`port 9094\nowner alice\n`), values typed as cctools
//!   types them (integers, floats, true/false/null, JSON arrays and objects, else strings);
//! - either of them zlib-compressed, marked by a leading byte 0x1A (Control-Z).

use crate::json::{self, Value};

/// The largest update accepted once uncompressed (cctools' catalog: 1 MiB).
pub const MAX_UPDATE: usize = 1024 * 1024;
/// Most members kept from one update.
pub const MAX_FIELDS: usize = 256;
/// Longest member name kept.
pub const MAX_KEY: usize = 128;

/// Why an update was ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateError {
    Empty,
    TooLarge,
    BadCompression,
    BadJson(json::ParseError),
    NotAnObject,
    NoFields,
}

impl std::fmt::Display for UpdateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpdateError::Empty => write!(f, "empty update"),
            UpdateError::TooLarge => write!(f, "update larger than {MAX_UPDATE} bytes"),
            UpdateError::BadCompression => write!(f, "invalid compressed data"),
            UpdateError::BadJson(e) => write!(f, "invalid JSON: {e}"),
            UpdateError::NotAnObject => write!(f, "JSON update is not an object"),
            UpdateError::NoFields => write!(f, "no 'key value' lines"),
        }
    }
}

impl std::error::Error for UpdateError {}

/// Parses one update (a datagram, or everything read from a TCP update connection) into an
/// object. Never panics, whatever the bytes.
pub fn parse_update(raw: &[u8]) -> Result<Value, UpdateError> {
    parse_text(&decode(raw)?)
}

/// An update's text: uncompressed (cctools' 0x1A marker), cut at a NUL as cctools' C
/// strings are, at most [`MAX_UPDATE`] bytes.
pub fn decode(raw: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, UpdateError> {
    let bytes = match raw.first() {
        None => return Err(UpdateError::Empty),
        Some(0x1a) => std::borrow::Cow::Owned(
            miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(&raw[1..], MAX_UPDATE)
                .map_err(|_| UpdateError::BadCompression)?,
        ),
        Some(_) if raw.len() > MAX_UPDATE => return Err(UpdateError::TooLarge),
        Some(_) => std::borrow::Cow::Borrowed(raw),
    };
    Ok(match bytes.iter().position(|&b| b == 0) {
        Some(end) => match bytes {
            std::borrow::Cow::Borrowed(b) => std::borrow::Cow::Borrowed(&b[..end]),
            std::borrow::Cow::Owned(mut b) => {
                b.truncate(end);
                std::borrow::Cow::Owned(b)
            }
        },
        None => bytes,
    })
}

/// Parses an update's text (see [`decode`]): a JSON object or `key value` lines.
pub fn parse_text(bytes: &[u8]) -> Result<Value, UpdateError> {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .ok_or(UpdateError::Empty)?;
    let value = if bytes[start] == b'{' {
        match json::parse(bytes).map_err(UpdateError::BadJson)? {
            Value::Object(members) => Value::Object(members),
            _ => return Err(UpdateError::NotAnObject),
        }
    } else {
        parse_lines(bytes)?
    };
    Ok(tidy(value))
}

/// The `key value` form: a name, one space, and the rest of the line as the value.
fn parse_lines(bytes: &[u8]) -> Result<Value, UpdateError> {
    let text = String::from_utf8_lossy(bytes);
    let mut object = Value::Object(Vec::new());
    for line in text.lines() {
        let line = line.trim_start_matches(' ');
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        let value = value.trim_end_matches('\r');
        object.set(key, typed(value));
    }
    match &object {
        Value::Object(m) if m.is_empty() => Err(UpdateError::NoFields),
        _ => Ok(object),
    }
}

/// A `key value` line's value, typed as cctools does.
pub fn typed(value: &str) -> Value {
    match value {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "null" => return Value::Null,
        _ => {}
    }
    if let Ok(i) = value.parse::<i64>() {
        return Value::Int(i);
    }
    let numeric = value
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'));
    if numeric {
        if let Ok(f) = value.parse::<f64>() {
            if f.is_finite() {
                return Value::Float(f);
            }
        }
    }
    if value.starts_with('[') || value.starts_with('{') {
        if let Ok(v) = json::parse(value.as_bytes()) {
            return v;
        }
    }
    Value::String(value.to_string())
}

/// Keeps at most [`MAX_FIELDS`] members with sane names, the last of each name.
pub(crate) fn tidy(value: Value) -> Value {
    let Value::Object(members) = value else {
        return value;
    };
    let mut out = Value::Object(Vec::new());
    for (key, value) in members {
        if key.is_empty() || key.len() > MAX_KEY || key.chars().any(|c| c.is_control()) {
            continue;
        }
        out.set(&key, value);
        if matches!(&out, Value::Object(m) if m.len() >= MAX_FIELDS) {
            break;
        }
    }
    out
}

/// Compresses an update as cctools does for large ones: 0x1A, then zlib data.
pub fn compress_update(text: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1a];
    out.extend(miniz_oxide::deflate::compress_to_vec_zlib(text, 6));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_lines_and_compressed() {
        let j =
            parse_update(br#"{"type":"chirp","port":9094,"load1":0.5,"owner":"alice"}"#).unwrap();
        assert_eq!(j.get("port"), Some(&Value::Int(9094)));
        assert_eq!(j.get("load1"), Some(&Value::Float(0.5)));
        let l = parse_update(b"type chirp\nport 9094\nload1 0.5\nowner alice\nurl chirp://a b\n")
            .unwrap();
        assert_eq!(l.get("port"), Some(&Value::Int(9094)));
        assert_eq!(l.get("load1"), Some(&Value::Float(0.5)));
        assert_eq!(l.get("url").unwrap().as_str(), Some("chirp://a b"));
        let c = parse_update(&compress_update(br#"{"port":7,"name":"z"}"#)).unwrap();
        assert_eq!(c.get("port"), Some(&Value::Int(7)));
    }

    #[test]
    fn garbage_is_refused_not_fatal() {
        assert!(parse_update(b"").is_err());
        assert!(parse_update(b"{\"port\":").is_err());
        assert!(parse_update(b"[1,2]").is_ok() || parse_update(b"[1,2]").is_err());
        assert!(parse_update(b"\x1a\x00\x01garbage").is_err());
        assert!(parse_update(b"   \n\n").is_err());
        assert!(parse_update(b"noline").is_err());
    }

    /// Fuzz-style: random bytes, mutations and truncations of good updates never panic.
    #[test]
    fn random_bytes_never_panic() {
        let good = br#"{"type":"chirp","name":"h","port":9094,"avail":123,"d":[1,{"x":"\u0041"}]}"#;
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for cut in 0..good.len() {
            let _ = parse_update(&good[..cut]);
            let _ = parse_update(&compress_update(&good[..cut]));
        }
        for _ in 0..20_000 {
            let mut bytes = good.to_vec();
            for _ in 0..(next() % 6) {
                let i = (next() as usize) % bytes.len();
                bytes[i] = next() as u8;
            }
            let len = (next() as usize) % (bytes.len() + 1);
            let _ = parse_update(&bytes[..len]);
            let random: Vec<u8> = (0..(next() % 64)).map(|_| next() as u8).collect();
            let _ = parse_update(&random);
            let mut compressed = compress_update(&bytes);
            let i = (next() as usize) % compressed.len();
            compressed[i] ^= next() as u8;
            let _ = parse_update(&compressed);
        }
    }
}
