//! The ledger file: records appended, never rewritten, each line checked by its own CRC.
//!
//! **Writing.** The server holds the file open with `O_APPEND` and an exclusive `flock` (a
//! second server on the same ledger refuses to start). A batch of records is one `write`
//! of whole lines followed by `fdatasync`: a process crash (even `kill -9`) after the write
//! loses nothing of it (the data is in the kernel); a power loss before the `fdatasync`
//! returns can lose the batch or leave its last line cut short, never an earlier one.
//!
//! **Recovery.** When the server opens a ledger whose last line has no newline (a write cut
//! short by a crash), it cuts that piece off before appending, so the next record starts on
//! a line of its own; the cut is logged.
//!
//! **Reading** ([`read`]): every complete line must be a record whose checksum holds. A bad
//! last line, or a last piece without a newline, is a *torn* record: skipped and said, the
//! normal aftermath of a crash. A bad line with good ones after it is *corrupt*: skipped and
//! reported as an error naming its line; records before and after it still count.

use super::record::{Record, LINE_MAX};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// An open, locked ledger.
pub struct Ledger {
    file: File,
    path: PathBuf,
}

/// What [`Ledger::open`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Opened {
    /// Bytes of a torn last record that were cut off, and its line number.
    pub torn: Option<(u64, usize)>,
}

impl Ledger {
    /// Opens (making it and its directory if needed) and locks the ledger at `path`, cutting
    /// off a torn last record.
    pub fn open(path: &Path) -> io::Result<(Ledger, Opened)> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)?;
        crate::lock::hold(&file, "this ledger")?;
        let opened = Opened {
            torn: cut_torn_tail(&mut file)?,
        };
        Ok((
            Ledger {
                file,
                path: path.to_path_buf(),
            },
            opened,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `records` in one write and waits until they are on disk.
    pub fn append(&mut self, records: &[Record]) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let text: String = records.iter().map(Record::to_line).collect();
        self.file.write_all(text.as_bytes())?;
        self.file.sync_data()
    }

    /// Up to `length` bytes of the ledger from `offset`, ending after the last whole line
    /// among them (so a record being appended is never handed out half), empty at the end.
    /// A full page without a whole line (`length` shorter than a record) is `InvalidInput`,
    /// never an empty page that would look like the end.
    pub fn read_at(&self, offset: u64, length: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; length];
        let mut done = 0;
        while done < length {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(done);
        let whole = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if whole == 0 && done == length && length > 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the page is shorter than the record at this offset",
            ));
        }
        buf.truncate(whole);
        Ok(buf)
    }
}

/// Cuts a last piece without a newline off `file`; its length and line number.
fn cut_torn_tail(file: &mut File) -> io::Result<Option<(u64, usize)>> {
    let size = file.seek(SeekFrom::End(0))?;
    if size == 0 {
        return Ok(None);
    }
    // A record is shorter than LINE_MAX, so the last newline, if any, is within reach.
    let window = size.min(LINE_MAX as u64 + 1);
    let mut tail = vec![0u8; window as usize];
    file.read_exact_at(&mut tail, size - window)?;
    if tail.last() == Some(&b'\n') {
        return Ok(None);
    }
    let keep = match tail.iter().rposition(|&b| b == b'\n') {
        Some(i) => size - window + i as u64 + 1,
        None if size <= LINE_MAX as u64 => 0,
        // No newline in the last LINE_MAX bytes: that is no record at all; the whole tail
        // cannot be told apart from data, so nothing is cut (the reader reports it).
        None => return Ok(None),
    };
    let line = count_lines(file, keep)? + 1;
    file.set_len(keep)?;
    file.sync_data()?;
    Ok(Some((size - keep, line)))
}

/// Newlines in the first `end` bytes of `file`.
fn count_lines(file: &mut File, end: u64) -> io::Result<usize> {
    file.seek(SeekFrom::Start(0))?;
    let mut count = 0;
    let mut buf = vec![0u8; 64 * 1024];
    let mut left = end;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            break;
        }
        count += buf[..n].iter().filter(|&&b| b == b'\n').count();
        left -= n as u64;
    }
    Ok(count)
}

/// The records of a ledger's bytes, with what was wrong.
#[derive(Debug, Default)]
pub struct Reading {
    pub records: Vec<Record>,
    /// A torn last record: its line number and why it is not a record.
    pub torn: Option<(usize, String)>,
    /// Corrupt lines (with good records after them): line number and why.
    pub corrupt: Vec<(usize, String)>,
}

/// Reads a ledger's bytes (see the module's documentation for torn and corrupt lines).
pub fn read(bytes: &[u8]) -> Reading {
    let mut reading = Reading::default();
    let mut pending: Option<(usize, String)> = None;
    let mut rest = bytes;
    let mut number = 0;
    while !rest.is_empty() {
        number += 1;
        let (line, whole) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..i], true),
            None => (rest, false),
        };
        rest = &rest[(line.len() + usize::from(whole)).min(rest.len())..];
        let parsed = if whole {
            Record::parse(line)
        } else {
            Err("no newline: the record was cut short".into())
        };
        match parsed {
            Ok(record) => {
                reading.corrupt.extend(pending.take());
                reading.records.push(record);
            }
            Err(why) => {
                reading.corrupt.extend(pending.take());
                pending = Some((number, why));
            }
        }
    }
    reading.torn = pending;
    reading
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::record::tests::samples;
    use roost_group::fuzz_check::Rng;

    fn text() -> String {
        samples().iter().map(Record::to_line).collect()
    }

    #[test]
    fn a_torn_last_record_is_skipped_and_the_earlier_ones_kept() {
        let full = text();
        let n = samples().len();
        let reading = read(full.as_bytes());
        assert_eq!(reading.records, samples());
        assert!(reading.torn.is_none() && reading.corrupt.is_empty());
        let last_start = full.trim_end().rfind('\n').unwrap() + 1;
        for cut in last_start + 1..full.len() - 1 {
            let reading = read(&full.as_bytes()[..cut]);
            assert_eq!(reading.records, samples()[..n - 1], "cut at {cut}");
            assert_eq!(reading.torn.as_ref().map(|t| t.0), Some(n), "cut at {cut}");
            assert!(reading.corrupt.is_empty());
        }
    }

    #[test]
    fn a_corrupt_record_is_named_and_the_others_still_count() {
        let full = text();
        let second = full.find('\n').unwrap() + 5;
        let mut bytes = full.clone().into_bytes();
        bytes[second] ^= 0x01;
        let reading = read(&bytes);
        assert_eq!(reading.records.len(), samples().len() - 1);
        assert_eq!(reading.corrupt.len(), 1);
        assert_eq!(reading.corrupt[0].0, 2);
        assert!(
            reading.corrupt[0].1.contains("checksum"),
            "{:?}",
            reading.corrupt
        );
        assert!(reading.torn.is_none());
    }

    #[test]
    fn opening_cuts_a_torn_tail_and_appends_on_a_line_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/ledger");
        let (mut ledger, opened) = Ledger::open(&path).unwrap();
        assert_eq!(opened, Opened::default());
        ledger.append(&samples()[..2]).unwrap();
        assert!(Ledger::open(&path).is_err(), "a second opener is refused");
        drop(ledger);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"t=17640 h=1 use user=x rp").unwrap();
        drop(f);
        let (mut ledger, opened) = Ledger::open(&path).unwrap();
        assert_eq!(opened.torn, Some((25, 3)));
        ledger.append(&samples()[2..]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let reading = read(&bytes);
        assert_eq!(reading.records, samples());
        assert!(reading.torn.is_none() && reading.corrupt.is_empty());
        // Read in pages as roost accounting does, the pages make up the file.
        let mut paged = Vec::new();
        loop {
            let page = ledger.read_at(paged.len() as u64, 150).unwrap();
            if page.is_empty() {
                break;
            }
            assert!(page.ends_with(b"\n") && page.len() <= 150);
            paged.extend_from_slice(&page);
        }
        assert_eq!(paged, bytes);
        let short = ledger.read_at(0, 10).unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::InvalidInput);
        // A record being appended (no newline yet) at the end is not handed out.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"t=17640 h=1 use").unwrap();
        assert_eq!(ledger.read_at(bytes.len() as u64, 100).unwrap(), b"");
    }

    #[test]
    fn garbage_ledgers_never_panic() {
        let mut rng = Rng(0x5eed_1ed9);
        let full = text().into_bytes();
        for round in 0..5_000 {
            let mut bytes = full.clone();
            for _ in 0..1 + round % 4 {
                let i = rng.below(bytes.len());
                bytes[i] = rng.next_u64() as u8;
            }
            bytes.truncate(rng.below(bytes.len() + 1));
            let reading = read(&bytes);
            assert!(reading.records.len() <= samples().len());
        }
    }
}
