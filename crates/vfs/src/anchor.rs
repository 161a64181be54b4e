//! A local mapping's target held open, so the mapping keeps the directory (or file) it was
//! given when that is renamed, as a bind mount does: `mv PHYS PHYS2` leaves the mount point
//! showing the original data, and a new directory made at `PHYS` is not it.
//!
//! The target is opened `O_PATH` when the mount list is loaded; its path is read back from
//! the kernel (`/proc/self/fd/N`, which follows renames) when it may have changed: when a
//! traced call changed a name at or above it ([`Anchor::may_have_moved`]) and at the latest
//! after [`crate::resolve::TTL`], for a rename roost does not see. Between those the path
//! is kept, so mapping a name costs no system call. A dev/ino check would cost a stat per
//! mapping and could only tell that the target moved, not where to.

use crate::resolve::TTL;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// One local target, open.
pub struct Anchor {
    fd: OwnedFd,
    /// The target's path when last read, and when.
    known: Mutex<(Vec<u8>, Instant)>,
    /// Set when a traced call may have moved it: the path is read again before it is used.
    stale: AtomicBool,
}

impl Anchor {
    /// Holds `path` open; `None` when it does not exist (yet): such a target is found by its
    /// path each time, as before it existed.
    pub fn open(path: &[u8]) -> Option<Anchor> {
        let c = std::ffi::CString::new(path).ok()?;
        // SAFETY: a plain open of a C string; the descriptor is owned below.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a descriptor just returned by the kernel and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let anchor = Anchor {
            fd,
            known: Mutex::new((path.to_vec(), Instant::now())),
            stale: AtomicBool::new(true),
        };
        anchor.path();
        Some(anchor)
    }

    /// Where the target is now. A deleted target keeps the kernel's name for it (`PATH
    /// (deleted)`), which names nothing: every name under the mapping is then absent.
    pub fn path(&self) -> Vec<u8> {
        let mut known = self.known.lock().expect("anchor lock");
        let now = Instant::now();
        if self.stale.swap(false, Ordering::AcqRel) || now.duration_since(known.1) >= TTL {
            let link = format!("/proc/self/fd/{}", self.fd.as_raw_fd());
            if let Ok(p) = std::fs::read_link(link) {
                known.0 = p.into_os_string().into_encoded_bytes();
            }
            known.1 = now;
        }
        known.0.clone()
    }

    /// Says that a traced call changed a name at or above the target (a rename, say).
    pub fn may_have_moved(&self) {
        self.stale.store(true, Ordering::Release);
    }
}

impl std::fmt::Debug for Anchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let known = self.known.lock().expect("anchor lock");
        write!(f, "anchor({})", String::from_utf8_lossy(&known.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_anchor_follows_its_directory_through_a_rename() {
        let base = std::env::temp_dir().join(format!("roost-vfs-anchor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("d")).unwrap();
        let bytes = |p: std::path::PathBuf| p.into_os_string().into_encoded_bytes();
        let anchor = Anchor::open(&bytes(base.join("d"))).unwrap();
        assert_eq!(anchor.path(), bytes(base.join("d")));
        std::fs::rename(base.join("d"), base.join("e")).unwrap();
        std::fs::create_dir(base.join("d")).unwrap();
        assert_eq!(
            anchor.path(),
            bytes(base.join("d")),
            "kept until told or expired"
        );
        anchor.may_have_moved();
        assert_eq!(anchor.path(), bytes(base.join("e")));
        assert!(Anchor::open(&bytes(base.join("missing"))).is_none());
        std::fs::remove_dir_all(base).unwrap();
    }
}
