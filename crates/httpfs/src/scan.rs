//! The entries of a local directory as its index lists them (for `roost index`): the
//! directory itself as `.`, each file's SHA-256 computed, or taken from the previous index
//! when its size and time are unchanged; the index files themselves (and their signatures),
//! sockets, FIFOs and devices left out.

use crate::index::{Digest, Entry, Kind, INDEX_NAME};
use sha2::Digest as _;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Whether `name` is roost's own (an index, its signature `.roostindex.sig`, or a temporary
/// copy of either), never listed.
pub fn is_index_file(name: &[u8]) -> bool {
    name.starts_with(INDEX_NAME.as_bytes())
}

/// The SHA-256 of a file, reporting each chunk's length to `progress`.
pub fn sha256_file(path: &Path, progress: &mut dyn FnMut(u64)) -> std::io::Result<[u8; 32]> {
    let mut f = std::fs::File::open(path)?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf[..n]);
        progress(n as u64);
    }
    Ok(h.finalize().into())
}

/// The entry for `meta` (of `path`, named `name`); `previous` is its entry in the last
/// index, whose hash is kept when size and time still match.
fn entry_of(
    path: &Path,
    name: &[u8],
    meta: &std::fs::Metadata,
    previous: Option<&Entry>,
    progress: &mut dyn FnMut(u64),
) -> std::io::Result<Option<Entry>> {
    let ft = meta.file_type();
    let kind = if ft.is_dir() {
        Kind::Dir
    } else if ft.is_symlink() {
        Kind::Link
    } else if ft.is_file() {
        Kind::File
    } else {
        return Ok(None);
    };
    let mut entry = Entry {
        name: name.to_vec(),
        kind,
        mode: meta.mode() & 0o7777,
        size: meta.size(),
        mtime: meta.mtime(),
        nlink: meta.nlink(),
        digest: None,
        target: None,
    };
    match kind {
        Kind::Link => {
            entry.target = Some(
                std::fs::read_link(path)?
                    .into_os_string()
                    .into_encoded_bytes(),
            )
        }
        Kind::File => {
            let unchanged = previous
                .filter(|p| p.kind == Kind::File && p.size == entry.size && p.mtime == entry.mtime);
            entry.digest = match unchanged.and_then(|p| p.digest) {
                Some(d @ Digest::Sha256(_)) => Some(d),
                _ => Some(Digest::Sha256(sha256_file(path, progress)?)),
            };
        }
        Kind::Dir => {}
    }
    Ok(Some(entry))
}

/// The entries of directory `dir` (and `.`, itself), given the entries its current index
/// lists.
pub fn scan_dir(
    dir: &Path,
    previous: &[Entry],
    progress: &mut dyn FnMut(u64),
) -> std::io::Result<Vec<Entry>> {
    let before: std::collections::HashMap<&[u8], &Entry> =
        previous.iter().map(|e| (e.name.as_slice(), e)).collect();
    let itself = std::fs::metadata(dir)?;
    let mut out = Vec::new();
    out.extend(entry_of(dir, b".", &itself, None, progress)?);
    for item in std::fs::read_dir(dir)? {
        let item = item?;
        let name = item.file_name();
        let name = name.as_bytes();
        if is_index_file(name) {
            continue;
        }
        let path = item.path();
        let meta = std::fs::symlink_metadata(&path)?;
        if let Some(e) = entry_of(&path, name, &meta, before.get(name).copied(), progress)? {
            out.push(e);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_and_signatures_are_never_entries() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            ".roostindex",
            ".roostindex.sig",
            ".roostindex.sig.tmp.7",
            "f",
        ] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let names: Vec<Vec<u8>> = scan_dir(dir.path(), &[], &mut |_| {})
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, [b".".to_vec(), b"f".to_vec()]);
    }
}
