//! Per-directory access control lists with the Chirp rights.
//!
//! Each directory may hold an ACL file (`.__acl`, one `subject rights` entry a line); a
//! directory without one is governed by its nearest ancestor's, and the export root falls back
//! to the ACL given on the command line (or, with none, to the server's own unix user). Rights
//! on a name come from the directory holding it; rights on a directory's contents (listing,
//! its ACL) from the directory itself. New directories inherit a copy of their parent's ACL.
//! The ACL files are invisible to clients: the jail refuses their name.

use crate::jail::{cvt, Jail, JailPath, ACL_FILE_NAME};
use roost_wire::Rights;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One directory's list: subjects (with `*` wildcards) and their rights, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acl {
    pub entries: Vec<(String, Rights)>,
}

impl Acl {
    /// Parses the ACL file format; malformed lines are skipped, never fatal, so one bad edit
    /// by hand cannot lock everybody out of a whole tree.
    pub fn parse(text: &str) -> Acl {
        let entries = text
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let subject = words.next()?;
                let rights = Rights::parse(words.next()?).ok()?;
                Some((subject.to_string(), rights))
            })
            .collect();
        Acl { entries }
    }

    /// The union of the rights of every entry matching `subject`.
    pub fn rights_of(&self, subject: &str) -> Rights {
        self.entries
            .iter()
            .filter(|(pattern, _)| wildcard_match(pattern.as_bytes(), subject.as_bytes()))
            .fold(Rights::NONE, |acc, (_, r)| acc.union(*r))
    }

    /// Sets `subject`'s rights, removing the entry when `rights` is empty.
    pub fn set(&mut self, subject: &str, rights: Rights) {
        self.entries.retain(|(s, _)| s != subject);
        if !rights.is_empty() {
            self.entries.push((subject.to_string(), rights));
        }
    }

    /// The file format, also what `getacl` sends.
    pub fn to_text(&self) -> String {
        self.entries
            .iter()
            .map(|(s, r)| format!("{s} {}\n", r.to_text()))
            .collect()
    }
}

/// Shell-style matching where `*` matches any run of bytes.
pub fn wildcard_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            backtrack = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((bp, bt)) = backtrack {
            p = bp + 1;
            t = bt + 1;
            backtrack = Some((bp, bt + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// How long a cached ACL is trusted before its file is read again, so edits made to ACL
/// files behind the server's back are seen promptly.
const CACHE_TTL: Duration = Duration::from_secs(1);

/// A cached ACL: the list, when it was read, and the store generation it was read in.
type CacheEntry = (Arc<Acl>, Instant, u64);

/// The ACLs of one export, with a small cache in front of the files.
pub struct AclStore {
    default_root: Acl,
    cache: Mutex<HashMap<JailPath, CacheEntry>>,
    /// Bumped by every change this server makes that can alter which ACL governs a path.
    generation: AtomicU64,
}

impl AclStore {
    /// `default_root` governs the root when it has no ACL file.
    pub fn new(default_root: Acl) -> AclStore {
        AclStore {
            default_root,
            cache: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
        }
    }

    /// The ACL governing the contents of directory `dir`.
    pub fn effective(&self, jail: &Jail, dir: &JailPath) -> io::Result<Arc<Acl>> {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some((acl, at, g)) = self.cache.lock().expect("acl cache").get(dir) {
            if *g == generation && at.elapsed() < CACHE_TTL {
                return Ok(acl.clone());
            }
        }
        let acl = match read_acl_file(jail, dir)? {
            Some(acl) => Arc::new(acl),
            None if dir.is_root() => Arc::new(self.default_root.clone()),
            None => self.effective(jail, &dir.parent())?,
        };
        let mut cache = self.cache.lock().expect("acl cache");
        if cache.len() > 4096 {
            cache.clear();
        }
        cache.insert(dir.clone(), (acl.clone(), Instant::now(), generation));
        Ok(acl)
    }

    /// `subject`'s rights in directory `dir`.
    pub fn rights(&self, jail: &Jail, dir: &JailPath, subject: &str) -> io::Result<Rights> {
        Ok(self.effective(jail, dir)?.rights_of(subject))
    }

    /// Writes `acl` as the ACL of `dir` (atomically, via a temporary file and rename).
    pub fn store(&self, jail: &Jail, dir: &JailPath, acl: &Acl) -> io::Result<()> {
        let dirfd = jail.open_path(dir, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        let tmp = c".__acl.tmp";
        // SAFETY: a descriptor we own and a NUL-terminated name.
        let fd = cvt(unsafe {
            libc::openat(
                dirfd.as_raw_fd(),
                tmp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600,
            )
        })?;
        // SAFETY: a descriptor the kernel just returned (cvt refused -1), owned by nobody else.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        file.write_all(acl.to_text().as_bytes())?;
        file.sync_data()?;
        drop(file);
        let name = std::ffi::CString::new(ACL_FILE_NAME).expect("no NUL");
        // SAFETY: a descriptor we own and NUL-terminated names.
        cvt(unsafe {
            libc::renameat(
                dirfd.as_raw_fd(),
                tmp.as_ptr(),
                dirfd.as_raw_fd(),
                name.as_ptr(),
            )
        })?;
        self.invalidate();
        Ok(())
    }

    /// Forgets every cached ACL (after mkdir, rmdir, rename and ACL changes).
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// Reads `dir`'s own ACL file, `None` if it has none.
fn read_acl_file(jail: &Jail, dir: &JailPath) -> io::Result<Option<Acl>> {
    let dirfd = match jail.open_path(dir, libc::O_PATH | libc::O_DIRECTORY, 0) {
        Ok(fd) => fd,
        // A path that is not (or no longer) a directory has no ACL of its own.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR) | Some(libc::ENOENT)) => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let name = std::ffi::CString::new(ACL_FILE_NAME).expect("no NUL");
    // SAFETY: a descriptor we own and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dirfd.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return if err.raw_os_error() == Some(libc::ENOENT) {
            Ok(None)
        } else {
            Err(err)
        };
    }
    let mut text = String::new();
    // SAFETY: fd >= 0 here: a descriptor the kernel just returned, owned by nobody else.
    unsafe { std::fs::File::from_raw_fd(fd) }.read_to_string(&mut text)?;
    Ok(Some(Acl::parse(&text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_like_a_shell() {
        assert!(wildcard_match(
            b"hostname:*.example.org",
            b"hostname:a.b.example.org"
        ));
        assert!(!wildcard_match(
            b"hostname:*.example.org",
            b"hostname:example.org"
        ));
        assert!(wildcard_match(b"*", b"unix:alice"));
        assert!(wildcard_match(b"address:127.0.*", b"address:127.0.0.1"));
        assert!(!wildcard_match(b"unix:alice", b"unix:alicex"));
        assert!(wildcard_match(b"a*b*c", b"axxbyyc"));
    }

    #[test]
    fn rights_are_the_union_of_matching_entries() {
        let acl = Acl::parse("unix:* rl\naddress:127.0.0.1 w\nunix:alice da\nbogus\n");
        assert_eq!(acl.rights_of("unix:alice").to_text(), "rlda");
        assert_eq!(acl.rights_of("unix:bob").to_text(), "rl");
        assert_eq!(acl.rights_of("address:127.0.0.1").to_text(), "wp");
        assert!(acl.rights_of("hostname:x").is_empty());
    }

    #[test]
    fn set_replaces_and_removes() {
        let mut acl = Acl::parse("unix:a rl\n");
        acl.set("unix:a", Rights::parse("rwl").unwrap());
        acl.set("unix:b", Rights::new(Rights::READ));
        assert_eq!(acl.to_text(), "unix:a rwlp\nunix:b r\n");
        acl.set("unix:a", Rights::NONE);
        assert_eq!(acl.to_text(), "unix:b r\n");
    }
}
