//! Storage-hours: who holds how many bytes in the export.
//!
//! Files have no owner in Chirp (the server's user owns them all), so the server marks each
//! file with the subject that created it through roost, in the extended attribute
//! [`CREATOR`]: a file created by `open` with `O_CREAT` gets the opener's mark, and a file
//! stored whole (`putfile`, `putstream`, a job's output, each a new file renamed into place)
//! its writer's. Clients may not set or remove `user.roost.` attributes. Every storage interval
//! the server walks the export (not following symlinks, not leaving its file system) and
//! adds up the allocated bytes of each creator's files; files without a mark (put there by
//! the owner, or on a file system without user attributes) are the owner's own and are not
//! charged.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The attribute naming a file's creator.
pub const CREATOR: &str = "user.roost.creator";
/// The prefix of the server's own attributes: clients may not change them, and do not see
/// them (listings leave them out, reading one finds nothing), as they do not see ACL files.
pub const RESERVED: &[u8] = b"user.roost.";

/// Whether the attribute `name` is the server's own.
pub fn reserved(name: &[u8]) -> bool {
    name.starts_with(RESERVED)
}

/// An attribute listing (NUL-terminated names) without the server's own attributes.
pub fn visible(list: Vec<u8>) -> Vec<u8> {
    if !list.windows(RESERVED.len()).any(|w| w == RESERVED) {
        return list;
    }
    list.split_inclusive(|&b| b == 0)
        .filter(|name| !reserved(name))
        .flatten()
        .copied()
        .collect()
}

fn creator_name() -> CString {
    CString::new(CREATOR).expect("no NUL")
}

/// Marks the new `file` as created by `subject`. A file system that refuses (no user
/// attributes) is logged once; the file then stays the owner's.
pub fn mark(file: &File, subject: &str) {
    if let Err(e) = set_mark(file, subject) {
        if !MARK_FAILED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            crate::log::event(
                crate::log::Level::Error,
                "storage-unmarked",
                &[
                    ("error", &e),
                    ("effect", &"files cannot be charged to their creators"),
                ],
            );
        }
    }
}

static MARK_FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn set_mark(file: &File, subject: &str) -> std::io::Result<()> {
    let name = creator_name();
    // SAFETY: a descriptor borrowed from `file`, a NUL-terminated name and `subject` readable for its length.
    let r = unsafe {
        libc::fsetxattr(
            file.as_raw_fd(),
            name.as_ptr(),
            subject.as_ptr().cast(),
            subject.len(),
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The creator recorded on the file at `path` (not following a symlink).
fn creator(path: &Path) -> Option<String> {
    let path = CString::new(path.as_os_str().as_bytes()).ok()?;
    let name = creator_name();
    let mut buf = [0u8; 1024];
    // SAFETY: NUL-terminated path and name, and `buf` writable for its length.
    let n = unsafe {
        libc::lgetxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    let n = usize::try_from(n).ok()?;
    String::from_utf8(buf[..n].to_vec()).ok()
}

/// The allocated bytes of each creator's regular files under `root`.
pub fn usage(root: &Path) -> BTreeMap<String, u64> {
    let mut totals = BTreeMap::new();
    let Ok(top) = std::fs::symlink_metadata(root) else {
        return totals;
    };
    let device = top.dev();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.dev() != device {
                continue;
            }
            if meta.is_dir() {
                dirs.push(path);
            } else if meta.is_file() {
                if let Some(who) = creator(&path) {
                    *totals.entry(who).or_insert(0) += meta.blocks() * 512;
                }
            }
        }
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_leave_the_server_s_attributes_out() {
        let list = b"user.a\0user.roost.creator\0user.roost\0user.b\0".to_vec();
        assert_eq!(visible(list), b"user.a\0user.roost\0user.b\0");
        assert_eq!(visible(b"user.roost.creator\0".to_vec()), b"");
        assert_eq!(visible(Vec::new()), b"");
    }

    #[test]
    fn marked_files_are_added_up_by_creator() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let write = |name: &str, size: usize| {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![7u8; size]).unwrap();
            File::options().write(true).open(path).unwrap()
        };
        let a = write("a", 8192);
        let b = write("sub/b", 4096);
        let _owner = write("c", 4096);
        if set_mark(&a, "hmac:alice").is_err() {
            eprintln!("no user attributes on this file system: skipped");
            return;
        }
        set_mark(&b, "hmac:bob").unwrap();
        let totals = usage(dir.path());
        let alloc = |name: &str| std::fs::metadata(dir.path().join(name)).unwrap().blocks() * 512;
        assert_eq!(totals.len(), 2, "{totals:?}");
        assert_eq!(totals["hmac:alice"], alloc("a"));
        assert_eq!(totals["hmac:bob"], alloc("sub/b"));
        set_mark(&a, "hmac:bob").unwrap();
        assert_eq!(usage(dir.path())["hmac:bob"], alloc("a") + alloc("sub/b"));
    }
}
