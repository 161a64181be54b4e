//! The entries of a local directory as its index lists them (for `roost index`): the
//! directory itself as `.`, each file's SHA-256 (and a large file's block hashes, as
//! [`BlockPolicy`] says) computed in one pass, or taken from the previous index when its
//! size and time are unchanged; the index files themselves (and their signatures),
//! sockets, FIFOs and devices left out.

use crate::blocks::{Blocks, Hasher};
use crate::index::{Digest, Entry, Kind, INDEX_NAME};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Whether `name` is roost's own (an index, its signature `.roostindex.sig`, or a temporary
/// copy of either), never listed.
pub fn is_index_file(name: &[u8]) -> bool {
    name.starts_with(INDEX_NAME.as_bytes())
}

/// Which files get block hashes, and of what size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockPolicy {
    /// Files of at least this many bytes get them.
    pub threshold: u64,
    /// The block size (see [`crate::blocks::check_block_size`]).
    pub size: u64,
}

impl Default for BlockPolicy {
    fn default() -> BlockPolicy {
        BlockPolicy {
            threshold: crate::blocks::DEFAULT_THRESHOLD,
            size: crate::blocks::DEFAULT_BLOCK_SIZE,
        }
    }
}

impl BlockPolicy {
    /// The block size a file of `size` bytes is hashed in, `None` for none.
    pub fn block_size_for(&self, size: u64) -> Option<u64> {
        (size >= self.threshold).then_some(self.size)
    }
}

/// The SHA-256 of a file of `size` bytes and, with `block_size`, its block hashes,
/// reporting each chunk's length to `progress`. A file whose length is not `size` (it
/// changed meanwhile) is an error.
pub fn hash_file(
    path: &Path,
    size: u64,
    block_size: Option<u64>,
    progress: &mut dyn FnMut(u64),
) -> std::io::Result<([u8; 32], Option<Blocks>)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Hasher::new(block_size);
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
    if h.total() != size {
        return Err(std::io::Error::other(format!(
            "{}: changed while it was read ({} bytes, {size} before); run roost index again",
            path.display(),
            h.total()
        )));
    }
    Ok(h.finish())
}

/// The entry for `meta` (of `path`, named `name`); `previous` is its entry in the last
/// index, whose hash is kept when size and time still match.
fn entry_of(
    path: &Path,
    name: &[u8],
    meta: &std::fs::Metadata,
    previous: Option<&Entry>,
    policy: BlockPolicy,
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
        blocks: None,
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
            let block_size = policy.block_size_for(entry.size);
            // Kept only with the block hashes this policy wants (none, or of this size).
            let unchanged = previous.filter(|p| {
                p.kind == Kind::File
                    && p.size == entry.size
                    && p.mtime == entry.mtime
                    && p.blocks.as_ref().map(|b| b.size) == block_size
            });
            match unchanged.map(|p| (p.digest, &p.blocks)) {
                Some((Some(d @ Digest::Sha256(_)), blocks)) => {
                    entry.digest = Some(d);
                    entry.blocks = blocks.clone();
                }
                _ => {
                    let (whole, blocks) = hash_file(path, entry.size, block_size, progress)?;
                    entry.digest = Some(Digest::Sha256(whole));
                    entry.blocks = blocks.map(std::sync::Arc::new);
                }
            }
        }
        Kind::Dir => {}
    }
    Ok(Some(entry))
}

/// The entries of directory `dir` (and `.`, itself), given the entries its current index
/// lists, large files with block hashes as `policy` says.
pub fn scan_dir(
    dir: &Path,
    previous: &[Entry],
    policy: BlockPolicy,
    progress: &mut dyn FnMut(u64),
) -> std::io::Result<Vec<Entry>> {
    let before: std::collections::HashMap<&[u8], &Entry> =
        previous.iter().map(|e| (e.name.as_slice(), e)).collect();
    let itself = std::fs::metadata(dir)?;
    let mut out = Vec::new();
    out.extend(entry_of(dir, b".", &itself, None, policy, progress)?);
    for item in std::fs::read_dir(dir)? {
        let item = item?;
        let name = item.file_name();
        let name = name.as_bytes();
        if is_index_file(name) {
            continue;
        }
        let path = item.path();
        let meta = std::fs::symlink_metadata(&path)?;
        let previous = before.get(name).copied();
        if let Some(e) = entry_of(&path, name, &meta, previous, policy, progress)? {
            out.push(e);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest as _;

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
        let names: Vec<Vec<u8>> = scan_dir(dir.path(), &[], BlockPolicy::default(), &mut |_| {})
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, [b".".to_vec(), b"f".to_vec()]);
    }

    #[test]
    fn large_files_get_block_hashes_kept_while_size_time_and_policy_hold() {
        let dir = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("big"), &big).unwrap();
        std::fs::write(dir.path().join("small"), b"x").unwrap();
        let policy = BlockPolicy {
            threshold: 100_000,
            size: 65536,
        };
        let scan = |previous: &[Entry], policy| {
            let mut hashed = 0;
            let entries = scan_dir(dir.path(), previous, policy, &mut |n| hashed += n).unwrap();
            (entries, hashed)
        };
        let (first, hashed) = scan(&[], policy);
        assert_eq!(hashed, 200_001);
        let blocks = first[1].blocks.as_ref().unwrap();
        assert_eq!(
            (first[1].name.as_slice(), blocks.size),
            (&b"big"[..], 65536)
        );
        let sha = |d: &[u8]| -> [u8; 32] { sha2::Sha256::digest(d).into() };
        let want: Vec<[u8; 32]> = big.chunks(65536).map(sha).collect();
        assert_eq!(blocks.hashes, want);
        assert_eq!(first[1].digest, Some(Digest::Sha256(sha(&big))));
        assert_eq!(first[2].blocks, None);
        // Unchanged: nothing is read again.
        assert_eq!(scan(&first, policy), (first.clone(), 0));
        // Another block size, or a threshold over the file: hashed again.
        let (other, hashed) = scan(
            &first,
            BlockPolicy {
                size: 131072,
                ..policy
            },
        );
        assert_eq!(
            (other[1].blocks.as_ref().unwrap().hashes.len(), hashed),
            (2, 200_000)
        );
        let (none, hashed) = scan(&first, BlockPolicy::default());
        assert_eq!((none[1].blocks.is_none(), hashed), (true, 200_000));
        assert_eq!(none[1].digest, first[1].digest);
    }
}
