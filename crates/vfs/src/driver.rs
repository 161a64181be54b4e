//! The `Driver` interface: one method per name operation on a driver-relative path, each
//! answering ENOSYS unless the driver implements it (the cctools `pfs_service` idea). The local
//! driver is the first; remote ones (Chirp, HTTP) implement the same trait and answer
//! `is_local() == false`, so the agent localizes their files instead of handing paths to the
//! kernel.

use crate::Errno;
use std::ffi::CString;

/// The attributes the namespace needs from a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    pub mode: u32,
    pub size: u64,
}

impl Stat {
    pub fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }
    pub fn is_symlink(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFLNK
    }
}

/// A file opened through a driver, read at explicit offsets.
pub trait ReadAt {
    /// Up to `len` bytes at `offset`: fewer only where the file ends.
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, Errno>;
}

/// A file system reachable through the namespace. Paths are driver-relative byte strings.
pub trait Driver: Send + Sync {
    /// A short name for traces and errors ("local", "chirp", ...).
    fn name(&self) -> &'static str;
    /// True when a driver path is a kernel path the traced program may use directly.
    fn is_local(&self) -> bool {
        false
    }
    fn readlink(&self, _path: &[u8]) -> Result<Vec<u8>, Errno> {
        Err(libc::ENOSYS)
    }
    fn stat(&self, _path: &[u8]) -> Result<Stat, Errno> {
        Err(libc::ENOSYS)
    }
    fn lstat(&self, _path: &[u8]) -> Result<Stat, Errno> {
        Err(libc::ENOSYS)
    }
    fn access(&self, _path: &[u8], _mode: i32) -> Result<(), Errno> {
        Err(libc::ENOSYS)
    }
    /// A regular file opened for reading (exec reads `#!` lines and ELF headers this way).
    fn open_read(&self, _path: &[u8]) -> Result<Box<dyn ReadAt>, Errno> {
        Err(libc::ENOSYS)
    }
    fn mkdir(&self, _path: &[u8], _mode: u32) -> Result<(), Errno> {
        Err(libc::ENOSYS)
    }
    fn rmdir(&self, _path: &[u8]) -> Result<(), Errno> {
        Err(libc::ENOSYS)
    }
    fn unlink(&self, _path: &[u8]) -> Result<(), Errno> {
        Err(libc::ENOSYS)
    }
    fn rename(&self, _from: &[u8], _to: &[u8]) -> Result<(), Errno> {
        Err(libc::ENOSYS)
    }
    fn link(&self, _from: &[u8], _to: &[u8]) -> Result<(), Errno> {
        Err(libc::ENOSYS)
    }
    fn symlink(&self, _target: &[u8], _path: &[u8]) -> Result<(), Errno> {
        Err(libc::ENOSYS)
    }
    fn chmod(&self, _path: &[u8], _mode: u32) -> Result<(), Errno> {
        Err(libc::ENOSYS)
    }
    fn truncate(&self, _path: &[u8], _len: u64) -> Result<(), Errno> {
        Err(libc::ENOSYS)
    }
}

/// A local file open for reading.
struct LocalFile(std::fs::File);

impl ReadAt for LocalFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, Errno> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; len];
        let mut got = 0;
        while got < len {
            match self.0.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(errno_of(e)),
            }
        }
        buf.truncate(got);
        Ok(buf)
    }
}

fn errno_of(e: std::io::Error) -> Errno {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// The local file system, through ordinary system calls.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalDriver;

fn cpath(path: &[u8]) -> Result<CString, Errno> {
    CString::new(path).map_err(|_| libc::EINVAL)
}

fn check(rc: libc::c_int) -> Result<(), Errno> {
    if rc < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(())
    }
}

fn stat_with(path: &[u8], flags: libc::c_int) -> Result<Stat, Errno> {
    let c = cpath(path)?;
    // SAFETY: `st` is plain data written by the kernel; `c` is a valid C string.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatat(libc::AT_FDCWD, c.as_ptr(), &mut st, flags) })?;
    Ok(Stat {
        dev: st.st_dev,
        ino: st.st_ino,
        mode: st.st_mode,
        size: st.st_size as u64,
    })
}

impl Driver for LocalDriver {
    fn name(&self) -> &'static str {
        "local"
    }
    fn is_local(&self) -> bool {
        true
    }
    fn readlink(&self, path: &[u8]) -> Result<Vec<u8>, Errno> {
        let c = cpath(path)?;
        let mut buf = vec![0u8; 4096];
        // SAFETY: the buffer is valid for its length.
        let n = unsafe { libc::readlink(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO));
        }
        buf.truncate(n as usize);
        Ok(buf)
    }
    fn stat(&self, path: &[u8]) -> Result<Stat, Errno> {
        stat_with(path, 0)
    }
    fn lstat(&self, path: &[u8]) -> Result<Stat, Errno> {
        stat_with(path, libc::AT_SYMLINK_NOFOLLOW)
    }
    fn access(&self, path: &[u8], mode: i32) -> Result<(), Errno> {
        let c = cpath(path)?;
        // SAFETY: valid C string.
        check(unsafe { libc::access(c.as_ptr(), mode) })
    }
    /// Regular files only (EACCES otherwise, as exec answers): the agent reads executables
    /// here. The file is first named with `O_PATH` and only a regular file is opened for
    /// reading: opening a FIFO would wake a writer waiting for a reader (then hand it
    /// EPIPE), or wait for one; opening a device can have effects of its own.
    fn open_read(&self, path: &[u8]) -> Result<Box<dyn ReadAt>, Errno> {
        use std::os::fd::AsRawFd;
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::OpenOptionsExt;
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(path));
        let named = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(p)
            .map_err(errno_of)?;
        if !named.metadata().map_err(errno_of)?.is_file() {
            return Err(libc::EACCES);
        }
        // Non-blocking still: a file under another process's lease says EWOULDBLOCK rather
        // than holding up roost until the lease is given up.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(format!("/proc/self/fd/{}", named.as_raw_fd()))
            .map_err(errno_of)?;
        Ok(Box::new(LocalFile(file)))
    }
    fn mkdir(&self, path: &[u8], mode: u32) -> Result<(), Errno> {
        let c = cpath(path)?;
        // SAFETY: valid C string.
        check(unsafe { libc::mkdir(c.as_ptr(), mode) })
    }
    fn rmdir(&self, path: &[u8]) -> Result<(), Errno> {
        let c = cpath(path)?;
        // SAFETY: valid C string.
        check(unsafe { libc::rmdir(c.as_ptr()) })
    }
    fn unlink(&self, path: &[u8]) -> Result<(), Errno> {
        let c = cpath(path)?;
        // SAFETY: valid C string.
        check(unsafe { libc::unlink(c.as_ptr()) })
    }
    fn rename(&self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        let (a, b) = (cpath(from)?, cpath(to)?);
        // SAFETY: valid C strings.
        check(unsafe { libc::rename(a.as_ptr(), b.as_ptr()) })
    }
    fn link(&self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        let (a, b) = (cpath(from)?, cpath(to)?);
        // SAFETY: valid C strings.
        check(unsafe { libc::link(a.as_ptr(), b.as_ptr()) })
    }
    fn symlink(&self, target: &[u8], path: &[u8]) -> Result<(), Errno> {
        let (a, b) = (cpath(target)?, cpath(path)?);
        // SAFETY: valid C strings.
        check(unsafe { libc::symlink(a.as_ptr(), b.as_ptr()) })
    }
    fn chmod(&self, path: &[u8], mode: u32) -> Result<(), Errno> {
        let c = cpath(path)?;
        // SAFETY: valid C string.
        check(unsafe { libc::chmod(c.as_ptr(), mode) })
    }
    fn truncate(&self, path: &[u8], len: u64) -> Result<(), Errno> {
        let c = cpath(path)?;
        // SAFETY: valid C string.
        check(unsafe { libc::truncate(c.as_ptr(), len as libc::off_t) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_driver_name_operations() {
        let dir = std::env::temp_dir().join(format!("roost-vfs-drv-{}", std::process::id()));
        let d = dir.as_os_str().as_encoded_bytes().to_vec();
        let p = |s: &str| [d.as_slice(), s.as_bytes()].concat();
        let l = LocalDriver;
        l.mkdir(&d, 0o755).unwrap();
        assert!(l.stat(&d).unwrap().is_dir());
        std::fs::write(dir.join("f"), b"#!/bin/sh\n").unwrap();
        assert_eq!(l.open_read(&p("/f")).unwrap().read_at(0, 2).unwrap(), b"#!");
        assert_eq!(
            l.open_read(&p("/f")).unwrap().read_at(8, 9).unwrap(),
            b"h\n"
        );
        assert_eq!(l.open_read(&d).err(), Some(libc::EACCES));
        l.symlink(b"/abs/target", &p("/l")).unwrap();
        assert_eq!(l.readlink(&p("/l")).unwrap(), b"/abs/target");
        assert!(l.lstat(&p("/l")).unwrap().is_symlink());
        assert_eq!(l.readlink(&p("/f")), Err(libc::EINVAL));
        l.rename(&p("/f"), &p("/g")).unwrap();
        l.link(&p("/g"), &p("/h")).unwrap();
        l.truncate(&p("/h"), 1).unwrap();
        assert_eq!(l.stat(&p("/g")).unwrap().size, 1);
        l.chmod(&p("/g"), 0o600).unwrap();
        assert_eq!(l.stat(&p("/g")).unwrap().mode & 0o777, 0o600);
        assert_eq!(l.access(&p("/nope"), libc::F_OK), Err(libc::ENOENT));
        for f in ["/g", "/h", "/l"] {
            l.unlink(&p(f)).unwrap();
        }
        l.rmdir(&d).unwrap();
    }

    #[test]
    fn unimplemented_operations_answer_enosys() {
        struct Empty;
        impl Driver for Empty {
            fn name(&self) -> &'static str {
                "empty"
            }
        }
        assert_eq!(Empty.stat(b"/x"), Err(libc::ENOSYS));
        assert_eq!(Empty.rename(b"/x", b"/y"), Err(libc::ENOSYS));
        assert!(!Empty.is_local());
    }
}
