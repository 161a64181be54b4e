//! Bounded line reading: a peer cannot make the client buffer without limit.

use std::io::{self, BufRead};

use roost_wire::WireError;

use crate::error::{Error, Result};

/// The longest reply line the client accepts (names in listings are at most a path long; a
/// stat line is under 300 bytes).
pub const REPLY_LINE_MAX: usize = 64 * 1024;

/// Reads one line, without its `\n`. End of stream before a newline is an
/// `UnexpectedEof` I/O error; a line longer than `max` is a protocol error.
pub fn read_line<R: BufRead + ?Sized>(reader: &mut R, max: usize) -> Result<Vec<u8>> {
    let mut line = Vec::new();
    loop {
        let buf = match reader.fill_buf() {
            // A signal (even a stop and continue) ends a read with a receive timeout early.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => other?,
        };
        if buf.is_empty() {
            return Err(Error::Io(io::Error::from(io::ErrorKind::UnexpectedEof)));
        }
        let (chunk, found) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if line.len() + chunk.len() > max {
            return Err(Error::Protocol(WireError::BadReply("line too long")));
        }
        line.extend_from_slice(chunk);
        let used = found.unwrap_or(buf.len());
        reader.consume(used);
        if found.is_some() {
            return Ok(line);
        }
    }
}

/// Reads a result line and returns its number.
pub fn read_result<R: BufRead + ?Sized>(reader: &mut R) -> Result<i64> {
    let line = read_line(reader, 64)?;
    Ok(roost_wire::reply::parse_result(&line)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn reads_lines_and_results() {
        let mut r = Cursor::new(b"abc\n-3\n\nrest".to_vec());
        assert_eq!(read_line(&mut r, 10).unwrap(), b"abc");
        assert_eq!(read_result(&mut r).unwrap(), -3);
        assert_eq!(read_line(&mut r, 10).unwrap(), b"");
        assert!(
            matches!(read_line(&mut r, 10), Err(Error::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof)
        );
    }

    #[test]
    fn refuses_overlong_lines_and_bad_results() {
        let mut r = Cursor::new(vec![b'x'; 100]);
        assert!(matches!(read_line(&mut r, 10), Err(Error::Protocol(_))));
        let mut r = Cursor::new(b"yes\n".to_vec());
        assert!(matches!(read_result(&mut r), Err(Error::Protocol(_))));
    }
}
