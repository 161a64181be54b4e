//! The `Driver` interface: one method per name operation on a driver-relative path, each
//! answering ENOSYS unless the driver implements it (the cctools `pfs_service` idea), or
//! EROFS for a change to a driver that says it is [`Driver::read_only`]. The local driver is
//! the first; remote ones (Chirp in `roost-chirpfs`, HTTP in `roost-httpfs`) implement the
//! same trait and answer `is_local() == false`, so the agent localizes their files instead
//! of handing paths to the kernel.

use crate::Errno;
use roost_base::{errno_of, last_errno};
use std::ffi::CString;

/// A file's attributes, as `struct stat` carries them (times in seconds and nanoseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    pub mode: u32,
    pub nlink: u64,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub size: u64,
    pub blksize: i64,
    pub blocks: i64,
    pub atime: (i64, i64),
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

/// A file system's capacity, as `struct statfs` carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatFs {
    pub kind: i64,
    pub bsize: i64,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
}

/// What a program will do with a file it opens, so a remote driver knows what local copy
/// to make (see [`Driver::localize`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intent {
    /// Read it (or list it, for a directory), or execute it.
    Read,
    /// Write it: the copy is the program's own until it is closed, then written back.
    Write {
        create: bool,
        exclusive: bool,
        truncate: bool,
        /// `O_APPEND`: what the program adds to the copy goes back as an append to the
        /// file as it then is, never replacing what others appended meanwhile.
        append: bool,
        mode: u32,
    },
}

impl Stat {
    /// The attributes of a local file, from the kernel's `struct stat`.
    pub fn from_kernel(st: &libc::stat) -> Stat {
        Stat {
            dev: st.st_dev,
            ino: st.st_ino,
            mode: st.st_mode,
            nlink: st.st_nlink,
            uid: st.st_uid,
            gid: st.st_gid,
            rdev: st.st_rdev,
            size: st.st_size as u64,
            blksize: st.st_blksize,
            blocks: st.st_blocks,
            atime: (st.st_atime, st.st_atime_nsec),
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
        }
    }

    /// The kernel's `struct stat` for these attributes (what a stat call writes).
    pub fn to_kernel(&self) -> libc::stat {
        // SAFETY: plain data; every field that matters is set below.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        st.st_dev = self.dev;
        st.st_ino = self.ino;
        st.st_mode = self.mode;
        st.st_nlink = self.nlink;
        st.st_uid = self.uid;
        st.st_gid = self.gid;
        st.st_rdev = self.rdev;
        st.st_size = self.size as i64;
        st.st_blksize = self.blksize;
        st.st_blocks = self.blocks;
        (st.st_atime, st.st_atime_nsec) = self.atime;
        (st.st_mtime, st.st_mtime_nsec) = self.mtime;
        (st.st_ctime, st.st_ctime_nsec) = self.ctime;
        st
    }

    /// The kernel's `struct statx` for these attributes, with the basic fields marked valid.
    pub fn to_statx(&self) -> libc::statx {
        // SAFETY: plain data; every field that matters is set below.
        let mut sx: libc::statx = unsafe { std::mem::zeroed() };
        sx.stx_mask = libc::STATX_BASIC_STATS;
        sx.stx_blksize = self.blksize as u32;
        sx.stx_nlink = self.nlink as u32;
        sx.stx_uid = self.uid;
        sx.stx_gid = self.gid;
        sx.stx_mode = self.mode as u16;
        sx.stx_ino = self.ino;
        sx.stx_size = self.size;
        sx.stx_blocks = self.blocks as u64;
        let set = |t: &mut libc::statx_timestamp, (sec, nsec): (i64, i64)| {
            t.tv_sec = sec;
            t.tv_nsec = nsec as u32;
        };
        set(&mut sx.stx_atime, self.atime);
        set(&mut sx.stx_mtime, self.mtime);
        set(&mut sx.stx_ctime, self.ctime);
        sx.stx_rdev_major = libc::major(self.rdev);
        sx.stx_rdev_minor = libc::minor(self.rdev);
        sx.stx_dev_major = libc::major(self.dev);
        sx.stx_dev_minor = libc::minor(self.dev);
        sx
    }

    pub fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }
    pub fn is_symlink(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFLNK
    }
}

/// How [`Driver::open_file`] opens a file: the open(2) flags that reach the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenMode {
    pub read: bool,
    pub write: bool,
    pub create: bool,
    pub exclusive: bool,
    pub truncate: bool,
    /// `O_APPEND`: the server writes every write at the end ([`OpenFile::append`]).
    pub append: bool,
    /// Permission bits for a file the open creates (the caller's umask applied).
    pub mode: u32,
}

/// A file open on a server and used in place (a *direct*-mode mount): every call is a
/// request to the server, so writes made elsewhere are seen at once. The agent keeps the
/// offset and applies `O_APPEND`; a lost connection is re-established and the file opened
/// again, and a file replaced or removed meanwhile fails every later call with ESTALE.
/// Closed when dropped.
pub trait OpenFile: Send + Sync {
    /// Up to `len` bytes at `offset`: fewer only where the file ends.
    fn pread(&self, offset: u64, len: usize) -> Result<Vec<u8>, Errno>;
    /// Writes `data` at `offset`; returns the count written.
    fn pwrite(&self, data: &[u8], offset: u64) -> Result<usize, Errno>;
    fn fstat(&self) -> Result<Stat, Errno>;
    fn ftruncate(&self, len: u64) -> Result<(), Errno>;
    fn fsync(&self) -> Result<(), Errno>;
    fn fchmod(&self, mode: u32) -> Result<(), Errno>;
    fn fchown(&self, uid: u32, gid: u32) -> Result<(), Errno>;
    fn fstatfs(&self) -> Result<StatFs, Errno>;
    /// The driver path the file was opened by.
    fn path(&self) -> &[u8];
    /// Writes `data` at the end of the file as it is when the write is made (`O_APPEND`);
    /// returns the count written and where the file then ends. Here: the end learnt first,
    /// then a write there (two steps: another writer's may fall in between); a driver that
    /// can append in one step does.
    fn append(&self, data: &[u8]) -> Result<(usize, u64), Errno> {
        let at = self.fstat()?.size;
        let n = self.pwrite(data, at)?;
        Ok((n, at + n as u64))
    }
    /// The program turned `O_APPEND` on or off (`fcntl(F_SETFL)`).
    fn set_append(&self, _on: bool) -> Result<(), Errno> {
        Ok(())
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
    /// True for a driver that changes nothing (a web server): the changes it does not
    /// implement answer EROFS instead of ENOSYS ([`refused`]), so it declares this once
    /// rather than overriding each of them.
    fn read_only(&self) -> bool {
        false
    }
    /// A mount target naming this driver (see [`crate::registry`]): `rest` is what follows
    /// `SCHEME://` or `/SCHEME/` (`HOST[:PORT]/PATH` and any suffix the driver takes),
    /// `direct` the mode of a target that names none. The driver path and whether its
    /// files are used in place; `None`: `rest` names nothing this driver serves.
    fn mount_target(&self, _rest: &str, _direct: bool) -> Option<(Vec<u8>, bool)> {
        None
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
        Err(refused(self))
    }
    fn rmdir(&self, _path: &[u8]) -> Result<(), Errno> {
        Err(refused(self))
    }
    fn unlink(&self, _path: &[u8]) -> Result<(), Errno> {
        Err(refused(self))
    }
    fn rename(&self, _from: &[u8], _to: &[u8]) -> Result<(), Errno> {
        Err(refused(self))
    }
    fn link(&self, _from: &[u8], _to: &[u8]) -> Result<(), Errno> {
        Err(refused(self))
    }
    fn symlink(&self, _target: &[u8], _path: &[u8]) -> Result<(), Errno> {
        Err(refused(self))
    }
    fn chmod(&self, _path: &[u8], _mode: u32) -> Result<(), Errno> {
        Err(refused(self))
    }
    fn truncate(&self, _path: &[u8], _len: u64) -> Result<(), Errno> {
        Err(refused(self))
    }
    /// `follow`: whether a final symlink is followed (chown) or changed itself (lchown).
    fn chown(&self, _path: &[u8], _uid: u32, _gid: u32, _follow: bool) -> Result<(), Errno> {
        Err(refused(self))
    }
    /// Sets access and modification times (seconds); `None` leaves one as it is.
    fn utime(&self, _path: &[u8], _atime: Option<i64>, _mtime: Option<i64>) -> Result<(), Errno> {
        Err(refused(self))
    }
    /// Makes a FIFO (`mknod` with `S_IFIFO`, `mkfifo`) with these permission bits exactly.
    fn mkfifo(&self, _path: &[u8], _mode: u32) -> Result<(), Errno> {
        Err(libc::EPERM)
    }
    /// The local name where the AF_UNIX socket of `path` lives: for `bind`, a fresh one
    /// the kernel is to make; else the one bound (ECONNREFUSED for a file that is none).
    fn unix_socket(&self, _path: &[u8], _bind: bool) -> Result<Vec<u8>, Errno> {
        Err(libc::EOPNOTSUPP)
    }
    /// [`Driver::utime`] of a final symlink itself, not its target: EOPNOTSUPP where the
    /// driver cannot.
    fn lutime(&self, _path: &[u8], _atime: Option<i64>, _mtime: Option<i64>) -> Result<(), Errno> {
        Err(libc::EOPNOTSUPP)
    }
    fn statfs(&self, _path: &[u8]) -> Result<StatFs, Errno> {
        Err(libc::ENOSYS)
    }
    /// The names in a directory with their file types (`S_IFMT` bits), `.` and `..` left out.
    fn readdir(&self, _path: &[u8]) -> Result<Vec<(Vec<u8>, u32)>, Errno> {
        Err(libc::ENOSYS)
    }
    fn getxattr(&self, _path: &[u8], _name: &[u8], _follow: bool) -> Result<Vec<u8>, Errno> {
        Err(libc::ENOSYS)
    }
    /// The attribute names, each NUL-terminated, as listxattr returns them.
    fn listxattr(&self, _path: &[u8], _follow: bool) -> Result<Vec<u8>, Errno> {
        Err(libc::ENOSYS)
    }
    fn setxattr(
        &self,
        _path: &[u8],
        _name: &[u8],
        _value: &[u8],
        _flags: i32,
        _follow: bool,
    ) -> Result<(), Errno> {
        Err(refused(self))
    }
    fn removexattr(&self, _path: &[u8], _name: &[u8], _follow: bool) -> Result<(), Errno> {
        Err(refused(self))
    }
    /// For a driver the kernel cannot reach: a local copy of the object at `path` for a
    /// program to open, execute or enter, as `intent` says (a file fetched, a directory's
    /// entries listed), at `mirror() + path`. Written copies go back when closed.
    fn localize(&self, _path: &[u8], _intent: Intent) -> Result<Vec<u8>, Errno> {
        Err(libc::ENOSYS)
    }
    /// A regular file opened in place on the server, for a direct-mode mount (ENOSYS: this
    /// driver only makes local copies). A directory answers EISDIR, so the caller can list
    /// it through [`Driver::localize`] instead.
    fn open_file(&self, _path: &[u8], _how: OpenMode) -> Result<Box<dyn OpenFile>, Errno> {
        Err(libc::ENOSYS)
    }
    /// A local file standing for `path` in advisory locks (`flock`, `fcntl`) taken on
    /// descriptors of files used in place: one per remote file, shared by every run of the
    /// user on this host, so that two opens of one file lock against each other. ENOLCK:
    /// this driver has none.
    fn lock_object(&self, _path: &[u8]) -> Result<std::fs::File, Errno> {
        Err(libc::ENOLCK)
    }
    /// The local directory under which [`Driver::localize`] places its copies (`mirror +
    /// path`), so a kernel path there (a descriptor's, the cwd's) names its object again.
    fn mirror(&self) -> Option<&[u8]> {
        None
    }
    /// Which of the driver's file systems holds `path` (a Chirp driver reaches many servers,
    /// each a file system of its own); renames and links never cross two.
    fn volume<'p>(&self, _path: &'p [u8]) -> &'p [u8] {
        b""
    }
    /// Makes every change this driver has accepted visible to other clients (write-backs
    /// of closed files); called before the program's exit is reported.
    fn flush(&self) {}
    /// The run is over: sends back what is pending, stops the driver's own threads and
    /// removes this agent's local copies. Called once, when the agent is done.
    fn close(&self) {}
    /// What this driver did, for `roost run --summary` (servers, calls, time, cache use);
    /// `None` when it has nothing to say.
    fn report(&self) -> Option<String> {
        None
    }
}

/// What a change the driver does not implement answers: EROFS from a read-only driver,
/// ENOSYS from any other.
pub fn refused<D: Driver + ?Sized>(driver: &D) -> Errno {
    if driver.read_only() {
        libc::EROFS
    } else {
        libc::ENOSYS
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

/// The local file system, through ordinary system calls.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalDriver;

fn cpath(path: &[u8]) -> Result<CString, Errno> {
    CString::new(path).map_err(|_| libc::EINVAL)
}

fn check(rc: libc::c_int) -> Result<(), Errno> {
    if rc < 0 {
        Err(last_errno())
    } else {
        Ok(())
    }
}

fn stat_with(path: &[u8], flags: libc::c_int) -> Result<Stat, Errno> {
    let c = cpath(path)?;
    // SAFETY: `struct stat` is plain data, valid all zeros.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a writable `struct stat`.
    check(unsafe { libc::fstatat(libc::AT_FDCWD, c.as_ptr(), &mut st, flags) })?;
    Ok(Stat::from_kernel(&st))
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
            return Err(last_errno());
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

    /// Every change a driver can be asked for, each with what it answered.
    fn changes(d: &dyn Driver) -> Vec<(&'static str, Result<(), Errno>)> {
        vec![
            ("mkdir", d.mkdir(b"/x", 0o755)),
            ("rmdir", d.rmdir(b"/x")),
            ("unlink", d.unlink(b"/x")),
            ("rename", d.rename(b"/x", b"/y")),
            ("link", d.link(b"/x", b"/y")),
            ("symlink", d.symlink(b"t", b"/x")),
            ("chmod", d.chmod(b"/x", 0o644)),
            ("truncate", d.truncate(b"/x", 0)),
            ("chown", d.chown(b"/x", 0, 0, true)),
            ("utime", d.utime(b"/x", Some(1), None)),
            ("setxattr", d.setxattr(b"/x", b"user.a", b"v", 0, true)),
            ("removexattr", d.removexattr(b"/x", b"user.a", true)),
        ]
    }

    #[test]
    fn a_read_only_driver_refuses_every_change_with_erofs() {
        struct Shelf;
        impl Driver for Shelf {
            fn name(&self) -> &'static str {
                "shelf"
            }
            fn read_only(&self) -> bool {
                true
            }
        }
        for (call, answer) in changes(&Shelf) {
            assert_eq!(answer, Err(libc::EROFS), "{call}");
        }
        // Reads it does not implement are still unimplemented, not refused.
        assert_eq!(Shelf.stat(b"/x"), Err(libc::ENOSYS));
        struct Empty;
        impl Driver for Empty {
            fn name(&self) -> &'static str {
                "empty"
            }
        }
        for (call, answer) in changes(&Empty) {
            assert_eq!(answer, Err(libc::ENOSYS), "{call}");
        }
    }
}
