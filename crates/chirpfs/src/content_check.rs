//! Checking a cached copy against the server's content digest.
//!
//! A cached copy is found by the remote file's (inode, size, mtime). Those can stay the same
//! while the content changes: a file rewritten in place at the same size whose mtime is set
//! back (`touch -d`, `cp --preserve`, a tar or rsync run onto the export). Its change time
//! (ctime) cannot be set back: the driver records the ctime a copy was made at beside it
//! ([`roost_vfs::cache::Cache::stamp`]), and a copy whose file's ctime has moved since is
//! checked here before it is used: the server's SHA-256 of the file (the `hash` RPC, one
//! round trip; the server reads the file to answer) against the copy's. The same content
//! (a chmod, a chown, a new link) keeps the copy under the new ctime; another content has
//! it fetched again. A copy is checked at most once a run. A server that does not answer
//! `hash` (cctools' `chirp_server`) is trusted on the version, as Parrot trusts the size.

use roost_base::errno_of;
use roost_vfs::Errno;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The copies this run has checked (or fetched itself), by path in the cache.
#[derive(Default)]
pub struct ContentCheck {
    checked: Mutex<HashSet<PathBuf>>,
}

/// What a server says of a file's digest.
pub enum ServerDigest {
    /// The SHA-256 (raw, or as hexadecimal text).
    Digest(Vec<u8>),
    /// The server has no `hash` RPC or no SHA-256.
    Unsupported,
}

impl ContentCheck {
    /// Remembers that `object` holds what the server had (it was just fetched).
    pub fn fetched(&self, object: &Path) {
        self.checked
            .lock()
            .expect("content check lock")
            .insert(object.to_path_buf());
    }

    /// Whether `object` may be used: `true` if it was checked or fetched in this run, if
    /// the server cannot say (`unsupported` is set then, so it is not asked again), or if
    /// its digest is the server's; `false` if the content differs.
    pub fn matches(
        &self,
        object: &Path,
        unsupported: &AtomicBool,
        ask: impl FnOnce() -> Result<ServerDigest, Errno>,
    ) -> Result<bool, Errno> {
        if unsupported.load(Ordering::Relaxed)
            || self
                .checked
                .lock()
                .expect("content check lock")
                .contains(object)
        {
            return Ok(true);
        }
        let theirs = match ask()? {
            ServerDigest::Digest(d) => d,
            ServerDigest::Unsupported => {
                unsupported.store(true, Ordering::Relaxed);
                return Ok(true);
            }
        };
        let ours = sha256_of(object)?;
        if same_digest(&theirs, &ours) {
            self.fetched(object);
            Ok(true)
        } else {
            Ok(false)
        }
    }
}

/// The SHA-256 of the file at `path`.
fn sha256_of(path: &Path) -> Result<[u8; 32], Errno> {
    let mut file = std::fs::File::open(path).map_err(errno_of)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(errno_of(e)),
        }
    }
    Ok(hasher.finalize().into())
}

/// Whether a server's answer names digest `ours`: 32 raw bytes (roost serve), or 64
/// hexadecimal digits in either case, with trailing white space.
fn same_digest(theirs: &[u8], ours: &[u8; 32]) -> bool {
    if theirs == ours {
        return true;
    }
    let text = theirs.trim_ascii_end();
    text.len() == 64 && text.eq_ignore_ascii_case(roost_vfs::hex(ours).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(tag: &str, content: &[u8]) -> PathBuf {
        let p = std::env::temp_dir().join(format!("roost-check-{tag}-{}", std::process::id()));
        std::fs::write(&p, content).unwrap();
        p
    }

    #[test]
    fn digests_are_compared_raw_or_as_hex_text() {
        let ours: [u8; 32] = Sha256::digest(b"abc").into();
        assert!(same_digest(&ours, &ours));
        let hex = roost_vfs::hex(&ours);
        assert!(same_digest(hex.as_bytes(), &ours));
        assert!(same_digest(
            format!("{}\n", hex.to_uppercase()).as_bytes(),
            &ours
        ));
        let mut other = ours;
        other[0] ^= 1;
        assert!(!same_digest(&other, &ours));
        assert!(!same_digest(&hex.as_bytes()[..63], &ours));
        assert!(!same_digest(b"", &ours));
    }

    #[test]
    fn a_copy_is_asked_about_once_and_a_different_one_is_refused() {
        let check = ContentCheck::default();
        let unsupported = AtomicBool::new(false);
        let good = file("good", b"content");
        let digest = Sha256::digest(b"content").to_vec();
        let asked = std::cell::Cell::new(0);
        let ask = || {
            asked.set(asked.get() + 1);
            Ok(ServerDigest::Digest(digest.clone()))
        };
        assert!(check.matches(&good, &unsupported, ask).unwrap());
        assert!(check.matches(&good, &unsupported, ask).unwrap());
        assert_eq!(asked.get(), 1);
        let stale = file("stale", b"CONTENT");
        assert!(!check.matches(&stale, &unsupported, ask).unwrap());
        assert!(!check.matches(&stale, &unsupported, ask).unwrap());
        assert_eq!(asked.get(), 3);
        check.fetched(&stale);
        assert!(check.matches(&stale, &unsupported, ask).unwrap());
        assert_eq!(asked.get(), 3);
        for p in [good, stale] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn a_server_without_the_digest_is_not_asked_again_and_errors_pass_through() {
        let check = ContentCheck::default();
        let unsupported = AtomicBool::new(false);
        let f = file("unsupported", b"x");
        assert_eq!(
            check.matches(&f, &unsupported, || Err(libc::EACCES)),
            Err(libc::EACCES)
        );
        assert!(!unsupported.load(Ordering::Relaxed));
        assert!(check
            .matches(&f, &unsupported, || Ok(ServerDigest::Unsupported))
            .unwrap());
        assert!(unsupported.load(Ordering::Relaxed));
        assert!(check
            .matches(&f, &unsupported, || panic!("asked again"))
            .unwrap());
        let _ = std::fs::remove_file(f);
    }
}
