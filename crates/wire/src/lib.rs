//! The Chirp protocol as roost speaks it: requests, replies, stat lines, URL-encoding, the
//! authentication handshake messages and the one table mapping Chirp error codes to and from
//! errno. No I/O happens here: servers and clients read and write bytes, this crate says what
//! the bytes mean. `docs/protocol.md` describes the protocol in prose.
//!
//! - [`Request`]: one variant per RPC; [`Request::parse`] on the server, [`Request::to_line`]
//!   on the client; [`Request::payload`] and [`Request::reply_body`] say what travels after
//!   the request line and after the result line.
//! - [`reply`]: result lines; [`Stat`], [`StatFs`]: the lines after a stat reply;
//!   [`listing`]: directory and ACL listings.
//! - [`ErrorCode`]: Chirp error codes, with errno both ways through [`error::TABLE`].
//! - [`auth`]: the handshake lines, including roost's `hmac` shared-secret method.
//! - [`OpenFlags`], [`Rights`]: the letter sets of `open` and of ACLs.

pub mod acl;
pub mod auth;
pub mod error;
pub mod flags;
pub mod hex;
pub mod listing;
pub mod reply;
pub mod request;
pub mod stat;
pub mod url;

pub use acl::Rights;
pub use error::{ErrorCode, WireError};
pub use flags::OpenFlags;
pub use listing::{AclEntry, DirEntry};
pub use request::{Payload, ReplyBody, Request};
pub use stat::{Stat, StatFs};

/// The longest request line, newline included, in bytes.
pub const LINE_MAX: usize = 1024;

/// The default TCP port of a Chirp server.
pub const DEFAULT_PORT: u16 = 9094;

/// The largest data block a server hands back for one `pread`/`sread`, and the largest one it
/// accepts from one `pwrite`/`swrite` (larger writes are shortened, as in cctools).
pub const MAX_BLOCK: u64 = 16 * 1024 * 1024;

/// Strips one trailing `\n` and then one trailing `\r`, if present.
pub fn strip_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Parses a signed decimal number (optional sign, digits only).
pub fn parse_i64(word: &[u8]) -> Option<i64> {
    let digits = word
        .strip_prefix(b"-")
        .or_else(|| word.strip_prefix(b"+"))
        .unwrap_or(word);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(word).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_i64_accepts_signs_and_refuses_junk() {
        assert_eq!(parse_i64(b"42"), Some(42));
        assert_eq!(parse_i64(b"-42"), Some(-42));
        assert_eq!(parse_i64(b"+7"), Some(7));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+",
            b"1x",
            b" 1",
            b"0x10",
            b"9223372036854775808",
            b"--1",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn strip_newline_takes_one_lf_and_one_cr() {
        assert_eq!(strip_newline(b"a\r\n"), b"a");
        assert_eq!(strip_newline(b"a\n\n"), b"a\n");
        assert_eq!(strip_newline(b"a"), b"a");
    }
}
