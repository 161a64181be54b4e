//! The export as a jail: every client path is resolved beneath the exported directory, so no
//! `..`, absolute or relative symlink, or `/proc` magic link can lead outside it.
//!
//! Paths are first collapsed lexically (a client cannot name anything above `/`), then opened
//! with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to a descriptor of the
//! export root, so symlinks met on the way are followed only while they stay inside. On kernels
//! without `openat2` (before 5.6) a component-by-component walk with `O_NOFOLLOW` gives the
//! same guarantee. Operations on a name (unlink, rename, lstat, ...) work on a descriptor of the
//! parent directory plus the final name, so the final component is never followed by accident.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// The name of the per-directory ACL file; clients can never name it, nor anything starting
/// with it (the temporary file used to replace it atomically).
pub const ACL_FILE_NAME: &[u8] = b".__acl";

/// Symlinks followed in one resolution by the fallback walker (the kernel's own limit).
const MAX_SYMLINKS: usize = 40;

/// A client path collapsed to components beneath the export root; empty means the root.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct JailPath {
    components: Vec<Vec<u8>>,
}

impl JailPath {
    /// Collapses `path` lexically: empty and `.` components vanish, `..` never climbs above the
    /// root. Refuses NUL bytes and the reserved ACL file name.
    pub fn new(path: &[u8]) -> io::Result<JailPath> {
        let mut components: Vec<Vec<u8>> = Vec::new();
        for part in path.split(|&b| b == b'/') {
            match part {
                b"" | b"." => {}
                b".." => {
                    components.pop();
                }
                _ if part.contains(&0) => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
                _ if part.starts_with(ACL_FILE_NAME) => {
                    return Err(io::Error::from_raw_os_error(libc::EACCES))
                }
                _ => components.push(part.to_vec()),
            }
        }
        Ok(JailPath { components })
    }

    /// The root of the export.
    pub fn root() -> JailPath {
        JailPath {
            components: Vec::new(),
        }
    }

    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// The directory holding this path (the root is its own parent).
    pub fn parent(&self) -> JailPath {
        let mut components = self.components.clone();
        components.pop();
        JailPath { components }
    }

    /// The final component, if this is not the root.
    pub fn file_name(&self) -> Option<&[u8]> {
        self.components.last().map(|c| c.as_slice())
    }

    /// Whether `prefix` is this path or a directory above it.
    pub fn starts_with(&self, prefix: &JailPath) -> bool {
        self.components.starts_with(&prefix.components)
    }

    /// This path joined with one more component.
    pub fn join(&self, name: &[u8]) -> JailPath {
        let mut components = self.components.clone();
        components.push(name.to_vec());
        JailPath { components }
    }

    /// The path relative to the root, `.` for the root itself (for `*at` calls).
    fn relative(&self) -> CString {
        if self.components.is_empty() {
            return CString::new(".").expect("no NUL");
        }
        CString::new(self.components.join(&b'/')).expect("components hold no NUL")
    }

    /// The path as a client sees it, starting with `/`.
    pub fn display(&self) -> String {
        let mut s = String::from("/");
        s.push_str(&String::from_utf8_lossy(&self.components.join(&b'/')));
        s
    }
}

/// The exported directory, held open so renames of its path outside do not matter.
pub struct Jail {
    root: OwnedFd,
}

static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

impl Jail {
    /// Opens `dir` as the export root.
    pub fn open(dir: &Path) -> io::Result<Jail> {
        let c = CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a NUL-terminated path.
        let fd = cvt(unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        })?;
        Ok(Jail {
            // SAFETY: a descriptor the kernel just returned (cvt refused -1), owned by nobody else.
            root: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Opens `path`, following symlinks only while they stay inside the jail.
    pub fn open_path(&self, path: &JailPath, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        self.resolve(&path.relative(), flags | libc::O_CLOEXEC, mode)
    }

    /// Opens the directory holding `path` and returns it with the final name, for operations
    /// that must not follow the final component. The root has no parent name: `EBUSY`.
    pub fn parent(&self, path: &JailPath) -> io::Result<(OwnedFd, CString)> {
        let name = path
            .file_name()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EBUSY))?;
        let dir = self.open_path(&path.parent(), libc::O_PATH | libc::O_DIRECTORY, 0)?;
        Ok((dir, CString::new(name).expect("components hold no NUL")))
    }

    /// Opens `path` only if no symlink lies on the way: `Ok(None)` if one does (or the kernel
    /// cannot tell). A path opened this way really is where its name says, which spares the
    /// caller from asking the kernel where it landed.
    pub fn open_path_literal(&self, path: &JailPath, flags: i32) -> io::Result<Option<OwnedFd>> {
        if NO_OPENAT2.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
        match self.openat2(&path.relative(), flags | libc::O_CLOEXEC, 0, resolve) {
            Ok(fd) => Ok(Some(fd)),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOSYS)) => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn openat2(&self, rel: &CStr, flags: i32, mode: u32, resolve: u64) -> io::Result<OwnedFd> {
        // SAFETY: `struct open_how` is plain data, valid all zeros (no resolve flags, no mode).
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = flags as u64;
        how.mode = if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 {
            mode as u64
        } else {
            0
        };
        how.resolve = resolve;
        // SAFETY: a descriptor we own, a NUL-terminated path, and `how` with its size, as openat2 reads.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                self.root.as_raw_fd(),
                rel.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor the kernel just returned, owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }

    fn resolve(&self, rel: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
            let err = match self.openat2(rel, flags, mode, resolve) {
                Ok(fd) => return Ok(fd),
                Err(err) => err,
            };
            match err.raw_os_error() {
                Some(libc::ENOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
                // An escape attempt: to the client, the target simply is not accessible.
                Some(libc::EXDEV) | Some(libc::ELOOP) if flags & libc::O_NOFOLLOW == 0 => {
                    return Err(escape_error(err))
                }
                _ => return Err(err),
            }
        }
        walk::resolve(&self.root, rel.to_bytes(), flags, mode)
    }
}

/// Maps the kernel's answer to an escape attempt onto what a client should see.
fn escape_error(err: io::Error) -> io::Error {
    match err.raw_os_error() {
        Some(libc::EXDEV) => io::Error::from_raw_os_error(libc::EACCES),
        _ => err,
    }
}

pub(crate) fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The fallback resolver for kernels without `openat2`: walks one component at a time with
/// `O_NOFOLLOW`, expanding symlinks by hand and refusing any that would leave the jail.
mod walk {
    use super::*;

    pub fn resolve(root: &OwnedFd, rel: &[u8], flags: i32, mode: u32) -> io::Result<OwnedFd> {
        // Pending components, innermost last; symlink targets are spliced in front.
        let mut pending: Vec<Vec<u8>> = rel
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty())
            .rev()
            .map(|c| c.to_vec())
            .collect();
        // Descriptors of the directories walked so far, so `..` can step back without escaping.
        let mut stack: Vec<OwnedFd> = vec![root.try_clone()?];
        let mut links = 0;
        while let Some(name) = pending.pop() {
            if name == b"." {
                continue;
            }
            if name == b".." {
                if stack.len() == 1 {
                    return Err(io::Error::from_raw_os_error(libc::EACCES));
                }
                stack.pop();
                continue;
            }
            let last = pending.is_empty();
            let dir = stack.last().expect("root stays").as_fd();
            let cname =
                CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            let step_flags = if last {
                flags | libc::O_NOFOLLOW
            } else {
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC
            };
            // SAFETY: a descriptor borrowed from the stack and a NUL-terminated name.
            match cvt(unsafe { libc::openat(dir.as_raw_fd(), cname.as_ptr(), step_flags, mode) }) {
                Ok(fd) => {
                    // SAFETY: a descriptor the kernel just returned, owned by nobody else.
                    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                    let follow = !last || flags & libc::O_NOFOLLOW == 0;
                    if follow && is_symlink(&fd)? {
                        links += 1;
                        splice_link(dir, &cname, &mut pending, links)?;
                    } else if last {
                        return Ok(fd);
                    } else {
                        stack.push(fd);
                    }
                }
                // The final component is a symlink the caller wants followed.
                Err(e)
                    if e.raw_os_error() == Some(libc::ELOOP) && flags & libc::O_NOFOLLOW == 0 =>
                {
                    links += 1;
                    splice_link(dir, &cname, &mut pending, links)?;
                }
                Err(e) => return Err(e),
            }
        }
        // The path named a directory already walked (e.g. the root itself).
        let dir = stack.pop().expect("root stays");
        // SAFETY: a descriptor we own and a NUL-terminated name.
        let fd = cvt(unsafe { libc::openat(dir.as_raw_fd(), c".".as_ptr(), flags, mode) })?;
        // SAFETY: a descriptor the kernel just returned, owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn splice_link(
        dir: BorrowedFd<'_>,
        name: &CStr,
        pending: &mut Vec<Vec<u8>>,
        links: usize,
    ) -> io::Result<()> {
        if links > MAX_SYMLINKS {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: a descriptor borrowed for the call, a NUL-terminated name, and `buf`
        // writable for its length.
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        if buf.starts_with(b"/") {
            // Absolute targets point outside the export by construction.
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        pending.extend(
            buf.split(|&b| b == b'/')
                .filter(|c| !c.is_empty())
                .rev()
                .map(|c| c.to_vec()),
        );
        Ok(())
    }

    fn is_symlink(fd: &OwnedFd) -> io::Result<bool> {
        // SAFETY: `struct stat` is plain data, valid all zeros.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a descriptor we own and a writable `struct stat`.
        cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
        Ok(st.st_mode & libc::S_IFMT == libc::S_IFLNK)
    }

    #[cfg(test)]
    pub fn force_fallback(on: bool) {
        super::NO_OPENAT2.store(on, Ordering::Relaxed);
    }
}

#[cfg(test)]
/// A tiny self-cleaning temporary directory for the crate's unit tests (keeps the crate free
/// of test-only dependencies).
pub(crate) mod tempdir {
    pub struct TempDir(std::path::PathBuf);
    impl TempDir {
        pub fn new() -> TempDir {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "roost-jail-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        pub fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jail::tempdir;
    use std::fs;

    fn export() -> (tempdir::TempDir, Jail) {
        let dir = tempdir::TempDir::new();
        let jail = Jail::open(dir.path()).unwrap();
        (dir, jail)
    }

    fn read(jail: &Jail, p: &str) -> io::Result<Vec<u8>> {
        let fd = jail.open_path(&JailPath::new(p.as_bytes())?, libc::O_RDONLY, 0)?;
        let mut f = fs::File::from(fd);
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut v)?;
        Ok(v)
    }

    #[test]
    fn collapses_dot_dot_at_the_root() {
        assert_eq!(
            JailPath::new(b"/../../a/./b/../c").unwrap(),
            JailPath::new(b"a/c").unwrap()
        );
        assert!(JailPath::new(b"/..").unwrap().is_root());
    }

    #[test]
    fn refuses_the_acl_file_and_nul() {
        assert_eq!(
            JailPath::new(b"/d/.__acl").unwrap_err().raw_os_error(),
            Some(libc::EACCES)
        );
        assert_eq!(
            JailPath::new(b"/a\0b").unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
    }

    fn check_symlink_escapes(fallback: bool) {
        let (dir, jail) = export();
        walk::force_fallback(fallback);
        fs::write(dir.path().join("inside"), b"ok").unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("abs")).unwrap();
        std::os::unix::fs::symlink("../../../../etc/passwd", dir.path().join("sub/rel")).unwrap();
        std::os::unix::fs::symlink("../inside", dir.path().join("sub/good")).unwrap();
        std::os::unix::fs::symlink("good", dir.path().join("sub/chain")).unwrap();
        std::os::unix::fs::symlink("/proc/self/root/etc/passwd", dir.path().join("magic")).unwrap();
        assert_eq!(read(&jail, "/sub/good").unwrap(), b"ok");
        assert_eq!(read(&jail, "/sub/chain").unwrap(), b"ok");
        for bad in ["/abs", "/sub/rel", "/magic"] {
            let err = read(&jail, bad).unwrap_err();
            assert_eq!(
                err.raw_os_error(),
                Some(libc::EACCES),
                "{bad} (fallback={fallback})"
            );
        }
        walk::force_fallback(false);
    }

    #[test]
    fn symlinks_cannot_escape() {
        check_symlink_escapes(false);
    }

    #[test]
    fn symlinks_cannot_escape_without_openat2() {
        check_symlink_escapes(true);
    }
}
