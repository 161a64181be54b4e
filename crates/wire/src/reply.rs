//! Result lines: a signed decimal number and a newline, answering every request.
//!
//! A non-negative result is a success (a count, a descriptor, a length: see
//! [`crate::ReplyBody`] for what follows); a negative result is an [`ErrorCode`] and nothing
//! follows it.

use crate::error::{ErrorCode, WireError};

/// The result line for `n`, newline included.
pub fn format_result(n: i64) -> Vec<u8> {
    let mut line = n.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// The result line for an error.
pub fn error_line(code: ErrorCode) -> Vec<u8> {
    format_result(code.as_i64())
}

/// The result line for a failed system call, by errno.
pub fn errno_line(errno: i32) -> Vec<u8> {
    error_line(ErrorCode::from_errno(errno))
}

/// Parses a result line (with or without its newline) into its number.
pub fn parse_result(line: &[u8]) -> Result<i64, WireError> {
    crate::parse_i64(crate::strip_newline(line)).ok_or(WireError::BadReply("result line"))
}

/// Splits a result number into success (the non-negative value) or its error code.
pub fn check(n: i64) -> Result<u64, ErrorCode> {
    u64::try_from(n).map_err(|_| ErrorCode::from_result(n))
}

/// Parses a result line and splits it as [`check`] does. The outer error is a malformed
/// line, the inner one the server's answer.
pub fn parse_checked(line: &[u8]) -> Result<Result<u64, ErrorCode>, WireError> {
    parse_result(line).map(check)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_results() {
        assert_eq!(format_result(0), b"0\n");
        assert_eq!(format_result(-3), b"-3\n");
        assert_eq!(parse_result(b"17\n").unwrap(), 17);
        assert_eq!(parse_result(b"-127").unwrap(), -127);
        assert!(parse_result(b"yes\n").is_err());
        assert!(parse_result(b"\n").is_err());
        assert!(parse_result(b"1 2\n").is_err());
    }

    #[test]
    fn errors_use_the_code_table() {
        assert_eq!(errno_line(libc::ENOENT), b"-3\n");
        assert_eq!(error_line(ErrorCode::NotSupported), b"-23\n");
        assert_eq!(
            parse_checked(b"-2\n").unwrap(),
            Err(ErrorCode::NotAuthorized)
        );
        assert_eq!(parse_checked(b"5\n").unwrap(), Ok(5));
        assert_eq!(check(-1000), Err(ErrorCode::Unknown));
    }
}
