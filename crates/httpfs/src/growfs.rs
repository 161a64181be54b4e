//! cctools' GROW-FS listing (`.growfsdir`, made by `make_growfs`): the whole tree below the
//! directory holding it, one line an entry, `TYPE NAME<TAB>MODE SIZE MTIME CHECKSUM
//! [LINK]`, with `D` entries followed by their contents and an `E` line; the first line is
//! the root (`D root ...`). Modes are decimal `st_mode`, times seconds after 2008-01-01
//! (cctools' `GROW_EPOCH`), checksums SHA-1 (`0` for none). An absolute link target inside
//! the tree is written relative to its root; here it becomes relative to the link, so it
//! resolves inside the tree wherever that is mounted; the root's own line is its `.`.
//! Parsing never panics.

use crate::index::{unhex, valid_name, Digest, Entry, Kind};
use std::collections::HashMap;

/// The listing file's name.
pub const GROWFS_NAME: &str = ".growfsdir";
/// cctools' `GROW_EPOCH`: listed times count from here.
pub const GROW_EPOCH: i64 = 1_199_163_600;

/// A parsed GROW-FS tree: each directory's entries by its path below the root (`/` for the
/// root itself, `/a/b` below it).
#[derive(Debug, Default)]
pub struct Tree {
    pub dirs: HashMap<Vec<u8>, Vec<Entry>>,
}

/// Parses a `.growfsdir`; the error names the line and what is wrong.
pub fn parse(text: &[u8]) -> Result<Tree, String> {
    let mut tree = Tree::default();
    // The directories open at this point: (path, entries so far).
    let mut open: Vec<(Vec<u8>, Vec<Entry>)> = Vec::new();
    let mut finished_root = false;
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let err = |what: &str| format!("line {}: {what}", i + 1);
        if line.is_empty() {
            continue;
        }
        if finished_root {
            return Err(err("text after the root's end"));
        }
        if line == b"E" {
            let (path, entries) = open
                .pop()
                .ok_or_else(|| err("an E with no open directory"))?;
            tree.dirs.insert(path, entries);
            finished_root = open.is_empty();
            continue;
        }
        let (entry, is_dir) = parse_line(line, open.len()).map_err(|e| err(&e))?;
        if open.is_empty() {
            if !is_dir {
                return Err(err("the first entry is not the root directory"));
            }
            let itself = Entry {
                name: b".".to_vec(),
                ..entry
            };
            open.push((b"/".to_vec(), vec![itself]));
            continue;
        }
        let parent = &open.last().expect("open").0;
        let path = crate::join(parent, &entry.name);
        let (_, siblings) = open.last_mut().expect("open");
        if siblings.iter().any(|e| e.name == entry.name) {
            return Err(err("a name listed twice"));
        }
        siblings.push(entry);
        if is_dir {
            if open.len() > 256 {
                return Err(err("directories nested too deep"));
            }
            open.push((path, Vec::new()));
        }
    }
    if !finished_root {
        return Err("the listing ends inside a directory".into());
    }
    Ok(tree)
}

/// One entry line; `depth` is how many directories are open (the root is depth 0, its
/// entries depth 1), to make absolute link targets relative.
fn parse_line(line: &[u8], depth: usize) -> Result<(Entry, bool), String> {
    let text = std::str::from_utf8(line).map_err(|_| "not UTF-8".to_string())?;
    let (head, rest) = text.split_once('\t').ok_or("no tab after the name")?;
    let (kind, name) = match head.split_once(' ') {
        Some(("F", n)) => (Kind::File, n),
        Some(("D", n)) => (Kind::Dir, n),
        Some(("L", n)) => (Kind::Link, n),
        _ => return Err("expected F, D or L and a name".into()),
    };
    let name = name.as_bytes().to_vec();
    if depth > 0 && !valid_name(&name) {
        return Err("bad name".into());
    }
    let mut fields = rest.splitn(5, ' ');
    let mut next = |what: &str| fields.next().ok_or_else(|| format!("no {what}"));
    let mode: u32 = next("mode")?.parse().map_err(|_| "bad mode")?;
    let size: u64 = next("size")?.parse().map_err(|_| "bad size")?;
    let mtime: i64 = next("time")?.parse().map_err(|_| "bad time")?;
    let checksum = next("checksum")?;
    let link = fields.next();
    let digest = match (kind, checksum) {
        (_, "0") => None,
        (Kind::File, c) => Some(Digest::Sha1(
            unhex(c)
                .and_then(|b| b.try_into().ok())
                .ok_or("bad checksum")?,
        )),
        _ => return Err("a checksum on a directory or link".into()),
    };
    let target = match (kind, link) {
        (Kind::Link, Some(t)) if !t.is_empty() => Some(relative_target(t.as_bytes(), depth)),
        (Kind::Link, _) => return Err("a link without a target".into()),
        (_, Some(_)) => return Err("a target on a file or directory".into()),
        (_, None) => None,
    };
    let entry = Entry {
        name,
        kind,
        mode: mode & 0o7777,
        size,
        mtime: mtime.checked_add(GROW_EPOCH).ok_or("bad time")?,
        nlink: if kind == Kind::Dir { 2 } else { 1 },
        digest,
        target,
        blocks: None,
    };
    Ok((entry, kind == Kind::Dir))
}

/// A target relative to the tree's root (`/x/y`) made relative to a link in a directory
/// `depth - 1` levels below the root.
fn relative_target(target: &[u8], depth: usize) -> Vec<u8> {
    let Some(inside) = target.strip_prefix(b"/") else {
        return target.to_vec();
    };
    let mut out = b"../".repeat(depth.saturating_sub(1));
    out.extend_from_slice(inside);
    if out.is_empty() {
        out.push(b'.');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What make_growfs 7.x wrote for a small tree (a file with a space, a relative and
    /// a followed absolute link).
    pub(super) const REAL: &[u8] = b"D root\t16877 4096 596379637 0\n\
D abs\t16877 4096 596379637 0\n\
D deep\t16877 4096 596379637 0\n\
F f\t33188 5 596379637 698a7985db24f12a6425f6ed97a6ef5df053f3fb\n\
E\nE\n\
L l\t41471 5 596379637 0 a.txt\n\
F sp ace\t33188 1 596379637 11f6ad8ec52a2984abaafd7c3b516503785c2072\n\
D sub\t16877 4096 596379637 0\n\
L up\t41471 4 596379637 0 /abs\n\
E\n\
F a.txt\t33188 3 596379637 55ca6286e3e4f4fba5d0448333fa99fc5a404a73\n\
E\n";

    #[test]
    fn make_growfs_output_parses() {
        let t = parse(REAL).unwrap();
        let root = &t.dirs[&b"/".to_vec()];
        let names: Vec<&[u8]> = root.iter().map(|e| e.name.as_slice()).collect();
        assert_eq!(
            names,
            [&b"."[..], b"abs", b"l", b"sp ace", b"sub", b"a.txt"]
        );
        let f = &t.dirs[&b"/abs/deep".to_vec()][0];
        assert_eq!((f.kind, f.mode, f.size), (Kind::File, 0o644, 5));
        assert_eq!(f.mtime, 596_379_637 + GROW_EPOCH);
        assert_eq!(
            f.digest.unwrap().hex(),
            "698a7985db24f12a6425f6ed97a6ef5df053f3fb"
        );
        assert_eq!(root[2].target.as_deref(), Some(&b"a.txt"[..]));
        assert_eq!((root[0].kind, root[0].mode), (Kind::Dir, 0o755));
        let up = &t.dirs[&b"/sub".to_vec()][0];
        assert_eq!(up.target.as_deref(), Some(&b"../abs"[..]));
    }

    #[test]
    fn malformed_listings_are_errors() {
        for bad in [
            &b""[..],
            b"D root\t16877 4096 1 0\n",
            b"F x\t1 1 1 0\nE\n",
            b"D root\t16877 4096 1 0\nE\nE\n",
            b"D root\t16877 4096 1 0\nF a/b\t33188 1 1 0\nE\n",
            b"D root\t16877 4096 1 0\nF a\t33188 1 1 zz\nE\n",
            b"D root 16877 4096 1 0\nE\n",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}

#[cfg(test)]
mod garbage {
    #[test]
    fn mutated_listings_never_panic() {
        let mut next = crate::fuzz_check::xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let mut data = super::tests::REAL.to_vec();
            for _ in 0..(1 + next() % 4) {
                let at = (next() as usize) % data.len();
                match next() % 3 {
                    0 => data[at] = b"\t\n E0/ D"[(next() % 8) as usize],
                    1 => data.truncate(at.max(1)),
                    _ => data.insert(at, next() as u8),
                }
            }
            crate::fuzz_check::check_parsers(&data);
        }
    }
}
