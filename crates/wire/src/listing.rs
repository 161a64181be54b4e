//! The line lists that follow `getdir`, `getlongdir` and `getacl` results.
//!
//! After the result `0` the server writes entries and ends the list with an empty line.
//! Names travel raw (not percent-encoded, as in cctools): a name holding a newline cannot be
//! listed, so servers skip such names. `getdir` and `getlongdir` include `.` and `..` as cctools
//! does. A `getlongdir` entry is the name line followed by its stat line; a `getacl` entry is
//! `subject rights`.

use crate::error::WireError;
use crate::stat::Stat;

/// The line that ends every list.
pub const END: &[u8] = b"\n";

/// True if `line` (with or without its newline) ends a list.
pub fn is_end(line: &[u8]) -> bool {
    crate::strip_newline(line).is_empty()
}

/// One directory entry; `stat` is present in `getlongdir` listings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name (raw bytes).
    pub name: Vec<u8>,
    /// Its properties, for `getlongdir`.
    pub stat: Option<Stat>,
}

/// The `getdir` line for `name`, newline included; `None` if the name cannot be listed
/// (empty, or holding a newline).
pub fn name_line(name: &[u8]) -> Option<Vec<u8>> {
    if name.is_empty() || name.contains(&b'\n') {
        return None;
    }
    let mut line = Vec::with_capacity(name.len() + 1);
    line.extend_from_slice(name);
    line.push(b'\n');
    Some(line)
}

/// The two `getlongdir` lines for an entry; `None` if the name cannot be listed.
pub fn long_entry_lines(name: &[u8], stat: &Stat) -> Option<Vec<u8>> {
    let mut lines = name_line(name)?;
    lines.extend_from_slice(&stat.to_line());
    Some(lines)
}

/// A name line read back from a listing (its newline removed). Only the newline is
/// stripped: a name may end with `\r`.
pub fn parse_name_line(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\n").unwrap_or(line)
}

/// One ACL entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclEntry {
    /// The subject pattern, e.g. `unix:alice` or `hostname:*.example.org`.
    pub subject: String,
    /// The rights letters, e.g. `rwl` or `rwlv(rwl)`.
    pub rights: String,
}

impl AclEntry {
    /// The `getacl` line, newline included; `None` if the subject or rights hold whitespace
    /// (which would make the line ambiguous) or are empty.
    pub fn to_line(&self) -> Option<Vec<u8>> {
        let clean = |s: &str| !s.is_empty() && !s.bytes().any(|b| b.is_ascii_whitespace());
        if !clean(&self.subject) || !clean(&self.rights) {
            return None;
        }
        Some(format!("{} {}\n", self.subject, self.rights).into_bytes())
    }

    /// Parses a `getacl` line.
    pub fn parse(line: &[u8]) -> Result<AclEntry, WireError> {
        let text = std::str::from_utf8(crate::strip_newline(line))
            .map_err(|_| WireError::BadReply("acl line"))?;
        let mut words = text.split_ascii_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(subject), Some(rights), None) => Ok(AclEntry {
                subject: subject.to_string(),
                rights: rights.to_string(),
            }),
            _ => Err(WireError::BadReply("acl line")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_lines_are_raw_and_refuse_newlines() {
        assert_eq!(name_line(b"a b").unwrap(), b"a b\n");
        assert_eq!(name_line("é".as_bytes()).unwrap(), "é\n".as_bytes());
        assert_eq!(name_line(b"a\nb"), None);
        assert_eq!(name_line(b""), None);
        assert_eq!(parse_name_line(b"a\r\n"), b"a\r");
    }

    #[test]
    fn long_entry_is_name_then_stat_line() {
        let st = Stat {
            size: 5,
            mode: 0o100644,
            ..Stat::default()
        };
        let lines = long_entry_lines(b"f", &st).unwrap();
        assert_eq!(lines, b"f\n0 0 33188 0 0 0 0 5 0 0 0 0 0\n");
    }

    #[test]
    fn acl_lines_round_trip() {
        let e = AclEntry {
            subject: "address:127.0.0.1".into(),
            rights: "rwldpax".into(),
        };
        let line = e.to_line().unwrap();
        assert_eq!(line, b"address:127.0.0.1 rwldpax\n");
        assert_eq!(AclEntry::parse(&line).unwrap(), e);
        assert!(AclEntry::parse(b"onlyone\n").is_err());
        assert!(AclEntry {
            subject: "a b".into(),
            rights: "r".into()
        }
        .to_line()
        .is_none());
    }

    #[test]
    fn end_is_an_empty_line() {
        assert!(is_end(END));
        assert!(is_end(b""));
        assert!(!is_end(b"x\n"));
    }
}
