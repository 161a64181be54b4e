//! roost's per-directory index (`.roostindex`, see `docs/httpfs.md`): one small text file in
//! each served directory listing its entries with type, permission bits, size, modification
//! time, link count, content hash (SHA-256, files only) and symlink target, and the
//! directory itself as `.`; large files also carry their block hashes ([`crate::blocks`]),
//! which makes the index version 2. [`parse`] never panics: a malformed index is an error
//! naming the line; [`write`] is its inverse.

use crate::blocks::Blocks;
use std::fmt::Write as _;
use std::sync::Arc;

/// The file name of the index in each served directory.
pub const INDEX_NAME: &str = ".roostindex";
/// The first line of an index without block hashes (which every roost reads).
pub const HEADER: &str = "#roost-index 1";
/// The first line of an index with block hashes (`b` lines).
pub const HEADER_BLOCKS: &str = "#roost-index 2";

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Link,
}

impl Kind {
    /// The `S_IFMT` bits of this kind.
    pub fn ifmt(self) -> u32 {
        match self {
            Kind::File => libc::S_IFREG,
            Kind::Dir => libc::S_IFDIR,
            Kind::Link => libc::S_IFLNK,
        }
    }
    fn letter(self) -> char {
        match self {
            Kind::File => 'f',
            Kind::Dir => 'd',
            Kind::Link => 'l',
        }
    }
}

/// A content hash an index records for a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Digest {
    Sha256([u8; 32]),
    /// GROW-FS listings carry SHA-1.
    Sha1([u8; 20]),
}

impl Digest {
    /// The bytes of the hash.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Digest::Sha256(b) => b,
            Digest::Sha1(b) => b,
        }
    }
    /// Lower-case hexadecimal.
    pub fn hex(&self) -> String {
        hex(self.bytes())
    }
}

/// One entry of a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: Vec<u8>,
    pub kind: Kind,
    /// Permission bits (`0o7777`).
    pub mode: u32,
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
    pub nlink: u64,
    /// Files only (and optional there: GROW-FS may list none).
    pub digest: Option<Digest>,
    /// Symlinks only.
    pub target: Option<Vec<u8>>,
    /// Files only, and only large ones: the hash of each block.
    pub blocks: Option<Arc<Blocks>>,
}

/// Lower-case hexadecimal of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The bytes of an even-length hexadecimal string.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// A name as written in an index: bytes up to and including space, `%` and DEL as `%XX`.
pub fn escape(name: &[u8]) -> String {
    let mut out = String::with_capacity(name.len());
    for &b in name {
        if b <= b' ' || b == b'%' || b == 0x7f || b >= 0x80 {
            let _ = write!(out, "%{b:02X}");
        } else {
            out.push(b as char);
        }
    }
    out
}

/// The inverse of [`escape`]; `None` for a malformed escape.
pub fn unescape(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hexed = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hexed, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Whether `name` may be an entry: not empty, `.`, `..`, and without `/` or NUL.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

/// Parses an index; the error names the line (1-based) and what is wrong with it.
pub fn parse(text: &[u8]) -> Result<Vec<Entry>, String> {
    let text = std::str::from_utf8(text).map_err(|_| "not UTF-8 text".to_string())?;
    let mut lines = text.split_terminator('\n');
    let with_blocks = match lines.next() {
        Some(HEADER) => false,
        Some(HEADER_BLOCKS) => true,
        Some(other) if other.starts_with("#roost-index ") => {
            return Err(format!("line 1: unknown index version {other:?}"))
        }
        _ => return Err(format!("line 1: expected {HEADER:?}")),
    };
    let mut out: Vec<Entry> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // Whether the line before was an entry (which a `b` line may follow).
    let mut after_entry = false;
    for (i, line) in lines.enumerate() {
        let at = |e: String| format!("line {}: {e}", i + 2);
        if let Some(fields) = line.strip_prefix("b ").or((line == "b").then_some("")) {
            let last = out.last_mut().filter(|_| after_entry);
            add_blocks(last, fields, with_blocks).map_err(at)?;
            after_entry = false;
            continue;
        }
        let entry = parse_line(line).map_err(at)?;
        if !seen.insert(entry.name.clone()) {
            return Err(at(format!("{} listed twice", escape(&entry.name))));
        }
        out.push(entry);
        after_entry = true;
    }
    Ok(out)
}

/// Gives `last` (the entry on the line before, if it was one) the block hashes of a `b`
/// line's `fields`.
fn add_blocks(last: Option<&mut Entry>, fields: &str, with_blocks: bool) -> Result<(), String> {
    if !with_blocks {
        return Err(format!(
            "block hashes in an index whose line 1 is not {HEADER_BLOCKS:?}"
        ));
    }
    let Some(entry) = last.filter(|e| e.kind == Kind::File) else {
        return Err("block hashes not right after a file's entry".into());
    };
    let fields: Vec<&str> = if fields.is_empty() {
        Vec::new()
    } else {
        fields.split(' ').collect()
    };
    entry.blocks = Some(Arc::new(Blocks::parse(&fields, entry.size)?));
    Ok(())
}

fn parse_line(line: &str) -> Result<Entry, String> {
    let fields: Vec<&str> = line.split(' ').collect();
    let (kind, count) = match fields.first().copied() {
        Some("f") => (Kind::File, 7),
        Some("d") => (Kind::Dir, 7),
        Some("l") => (Kind::Link, 8),
        _ => return Err("expected an entry type f, d or l".into()),
    };
    if fields.len() != count {
        return Err(format!("expected {count} fields, found {}", fields.len()));
    }
    let mode = u32::from_str_radix(fields[1], 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or("bad mode")?;
    let size: u64 = fields[2].parse().map_err(|_| "bad size")?;
    let mtime: i64 = fields[3].parse().map_err(|_| "bad modification time")?;
    let nlink: u64 = fields[4].parse().map_err(|_| "bad link count")?;
    let digest = match (kind, fields[5]) {
        (Kind::File, h) => {
            let b = unhex(h).filter(|b| b.len() == 32).ok_or("bad sha256")?;
            Some(Digest::Sha256(b.try_into().map_err(|_| "bad sha256")?))
        }
        (_, "-") => None,
        _ => return Err("a hash on a directory or symlink".into()),
    };
    let name = unescape(fields[6]).ok_or("bad escape in the name")?;
    let itself = kind == Kind::Dir && name == b".";
    if !valid_name(&name) && !itself {
        return Err("bad name".into());
    }
    let target = match kind {
        Kind::Link => {
            let t = unescape(fields[7]).ok_or("bad escape in the target")?;
            if t.is_empty() || t.contains(&0) {
                return Err("bad symlink target".into());
            }
            Some(t)
        }
        _ => None,
    };
    Ok(Entry {
        name,
        kind,
        mode,
        size,
        mtime,
        nlink,
        digest,
        target,
        blocks: None,
    })
}

/// The text of an index listing `entries`, sorted by name: version 2 when some file has
/// block hashes, else 1. Entries must be valid (names as [`valid_name`] says, a SHA-256 on
/// every file, a target on every symlink, block hashes on files only).
pub fn write(entries: &[Entry]) -> Vec<u8> {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let with_blocks = entries.iter().any(|e| e.blocks.is_some());
    let mut out = String::from(if with_blocks { HEADER_BLOCKS } else { HEADER });
    out.push('\n');
    for e in sorted {
        let hash = match (&e.kind, &e.digest) {
            (Kind::File, Some(d)) => d.hex(),
            _ => "-".into(),
        };
        let _ = write!(
            out,
            "{} {:04o} {} {} {} {hash} {}",
            e.kind.letter(),
            e.mode & 0o7777,
            e.size,
            e.mtime,
            e.nlink,
            escape(&e.name)
        );
        if let Some(t) = &e.target {
            let _ = write!(out, " {}", escape(t));
        }
        out.push('\n');
        if let Some(b) = &e.blocks {
            out += &b.line();
            out.push('\n');
        }
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Entry> {
        vec![
            Entry {
                name: b".".to_vec(),
                kind: Kind::Dir,
                mode: 0o755,
                size: 4096,
                mtime: 1_700_000_000,
                nlink: 3,
                digest: None,
                target: None,
                blocks: None,
            },
            Entry {
                name: b"sp ace%".to_vec(),
                kind: Kind::File,
                mode: 0o755,
                size: 12,
                mtime: 1_700_000_000,
                nlink: 1,
                digest: Some(Digest::Sha256([7; 32])),
                target: None,
                blocks: None,
            },
            Entry {
                name: b"d".to_vec(),
                kind: Kind::Dir,
                mode: 0o2755,
                size: 4096,
                mtime: -5,
                nlink: 3,
                digest: None,
                target: None,
                blocks: None,
            },
            Entry {
                name: "l\u{e9}".as_bytes().to_vec(),
                kind: Kind::Link,
                mode: 0o777,
                size: 9,
                mtime: 0,
                nlink: 1,
                digest: None,
                target: Some(b"../a b/c".to_vec()),
                blocks: None,
            },
        ]
    }

    /// [`sample`] and a large file with block hashes.
    fn sample_with_blocks() -> Vec<Entry> {
        let mut entries = sample();
        entries.push(Entry {
            name: b"big".to_vec(),
            kind: Kind::File,
            mode: 0o644,
            size: (2 << 20) + 5,
            mtime: 1_700_000_000,
            nlink: 1,
            digest: Some(Digest::Sha256([9; 32])),
            target: None,
            blocks: Some(Arc::new(Blocks {
                size: 1 << 20,
                hashes: vec![[1; 32], [2; 32], [3; 32]],
            })),
        });
        entries
    }

    #[test]
    fn written_indexes_parse_back() {
        let text = write(&sample());
        let mut want = sample();
        want.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(parse(&text).unwrap(), want);
        let s = String::from_utf8(text).unwrap();
        assert!(
            s.starts_with("#roost-index 1\nd 0755 4096 1700000000 3 - .\nd 2755 4096 -5 3 - d\n"),
            "{s}"
        );
        assert!(s.contains(" sp%20ace%25\n"), "{s}");
        assert!(s.contains("l 0777 9 0 1 - l%C3%A9 ../a%20b/c\n"), "{s}");
    }

    #[test]
    fn block_hashes_make_a_version_2_index_that_parses_back() {
        let text = write(&sample_with_blocks());
        let mut want = sample_with_blocks();
        want.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(parse(&text).unwrap(), want);
        let s = String::from_utf8(text).unwrap();
        let h = |b: u8| hex(&[b; 32]);
        let big = format!(
            "f 0644 2097157 1700000000 1 {} big\nb 1048576 {} {} {}\nd 2755 ",
            h(9),
            h(1),
            h(2),
            h(3)
        );
        assert!(s.starts_with("#roost-index 2\n"), "{s}");
        assert!(s.contains(&big), "{s}");
        // Without block hashes the same writer keeps version 1, which older roosts read.
        assert!(write(&sample()).starts_with(b"#roost-index 1\n"));
        // A version 2 index without any block line is read (and written back as 1).
        let v2 = String::from_utf8(write(&sample())).unwrap().replacen(
            "#roost-index 1",
            "#roost-index 2",
            1,
        );
        assert_eq!(parse(v2.as_bytes()).unwrap().len(), sample().len());
    }

    #[test]
    fn malformed_block_lines_are_errors_naming_the_line() {
        let h = hex(&[1; 32]);
        let f = "f 0644 70000 1 1 ".to_string() + &h;
        let bad: Vec<(String, &str)> = vec![
            (
                format!("#roost-index 1\n{f} a\nb 65536 {h} {h}\n"),
                "line 3: block hashes in an index whose line 1 is not \"#roost-index 2\"",
            ),
            (
                format!("#roost-index 2\nb 65536 {h}\n"),
                "line 2: block hashes not right after a file's entry",
            ),
            (
                format!("#roost-index 2\nd 0755 1 1 1 - d\nb 65536 {h}\n"),
                "line 3: block hashes not right after a file's entry",
            ),
            (
                format!("#roost-index 2\n{f} a\nb 65536 {h} {h}\nb 65536 {h} {h}\n"),
                "line 4: block hashes not right after a file's entry",
            ),
            (
                format!("#roost-index 2\n{f} a\nb 65536 {h}\n"),
                "line 3: expected 2 block hashes for 70000 bytes in blocks of 65536, found 1",
            ),
            (
                format!("#roost-index 2\n{f} a\nb 65536 {h} {h} {h}\n"),
                "line 3: expected 2 block hashes",
            ),
            (
                format!("#roost-index 2\n{f} a\nb 65535 {h} {h}\n"),
                "line 3: bad block size 65535 (expected a power of two",
            ),
            (
                format!("#roost-index 2\n{f} a\nb 65536 {h} x{}\n", &h[1..]),
                "line 3: bad sha256 of block 1",
            ),
            (
                format!("#roost-index 2\n{f} a\nb 65536 {h}  {h}\n"),
                "line 3: expected 2 block hashes",
            ),
            (
                format!("#roost-index 2\n{f} a\nb\n"),
                "line 3: expected a block size",
            ),
            (
                format!("#roost-index 2\n{f} a\nbb 65536 {h} {h}\n"),
                "line 3: expected an entry type",
            ),
        ];
        for (text, want) in &bad {
            let e = parse(text.as_bytes()).unwrap_err();
            assert!(e.contains(want), "{e:?} lacks {want:?}");
        }
    }

    #[test]
    fn malformed_indexes_are_errors_naming_the_line() {
        let bad: &[(&[u8], &str)] = &[
            (b"", "line 1"),
            (b"#roost-index 3\n", "unknown index version"),
            (
                b"#roost-index 1\nx 0644 1 1 1 - n\n",
                "line 2: expected an entry type",
            ),
            (
                b"#roost-index 1\nd 0755 1 1 1 - a\nf 0644 1 1 1 00 b\n",
                "line 3: bad sha256",
            ),
            (b"#roost-index 1\nd 9999 1 1 1 - a\n", "bad mode"),
            (b"#roost-index 1\nd 0755 1 1 1 - a/b\n", "bad name"),
            (b"#roost-index 1\nd 0755 1 1 1 - ..\n", "bad name"),
            (b"#roost-index 1\nl 0777 1 1 1 - . x\n", "bad name"),
            (b"#roost-index 1\nd 0755 1 1 1 - a%2\n", "bad escape"),
            (
                b"#roost-index 1\nd 0755 1 1 1 - a\nd 0755 1 1 1 - a\n",
                "twice",
            ),
            (b"#roost-index 1\nl 0777 1 1 1 - a\n", "expected 8 fields"),
            (b"#roost-index 1\n\xff\n", "UTF-8"),
        ];
        for (text, want) in bad {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{e:?} lacks {want:?}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        use crate::fuzz_check::{check_garbage, check_parsers};
        // Valid indexes mutated (field separators inserted among the rest), and random bytes.
        let valid = [write(&sample()), write(&sample_with_blocks())];
        check_garbage(
            0x2545_f491_4f6c_dd1d,
            &valid,
            b" \n%-0fb",
            200,
            check_parsers,
        );
    }
}
