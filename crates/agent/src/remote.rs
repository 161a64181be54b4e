//! Calls on remote objects (a path that resolved onto a driver the kernel cannot reach,
//! such as Chirp). The handler decides under the namespace lock that a call is remote and
//! hands over a [`RemoteCall`]; both delivery backends then make it here, with no lock
//! held, and apply the [`Action`] it returns as they apply any other:
//!
//! - lookups (stat family, access, readlink, statfs, the xattr reads) are answered from the
//!   driver, written into the caller's buffers as the kernel would (`Emulate`);
//! - changes (mkdir, unlink, rename, link, symlink, chmod, chown, truncate, utime, the
//!   xattr writes) are made through the driver (`Emulate` with the result, or `Fail`);
//! - opens, chdir and exec go to a local copy the driver makes ([`Driver::localize`]): the
//!   call is rewritten to its kernel path, so reads, writes, mmap and getdents run natively
//!   on a real descriptor (`Rewrite`).

use crate::arch::Regs;
use crate::arch::Sys;
use crate::handlers::{Action, Arg, Scratch, AT_FDCWD};
use crate::memory;
use roost_vfs::{Errno, Intent, Remote};

/// One path argument of a remote call.
#[derive(Debug)]
pub struct RemoteArg {
    /// The register holding the path, and the one holding its dirfd.
    pub path: usize,
    pub dirfd: Option<usize>,
    /// Whether the call follows a final symlink of this path.
    pub follow: bool,
    /// The program's path ended in `/`, which the walk drops: it names a directory only.
    pub trailing_slash: bool,
    /// The object, when it is remote (a local path mixed in fails before this is made).
    pub remote: Option<Remote>,
}

/// A call with at least one remote path, decided and waiting to be made.
#[derive(Debug)]
pub struct RemoteCall {
    pub sys: Sys,
    pub args: Vec<RemoteArg>,
}

impl RemoteCall {
    /// The remote object of the first path argument.
    fn first(&self) -> Result<&Remote, Errno> {
        self.args
            .first()
            .and_then(|a| a.remote.as_ref())
            .ok_or(libc::EXDEV)
    }

    fn second(&self) -> Result<&Remote, Errno> {
        self.args
            .get(1)
            .and_then(|a| a.remote.as_ref())
            .ok_or(libc::EXDEV)
    }
}

/// A call's return value and what it writes into the caller's memory, or its errno.
type Written = Result<(i64, Vec<(u64, Vec<u8>)>), Errno>;

/// What making a remote call came to: the action for the backend, and the kernel path of
/// a local copy when the call was rewritten to one.
pub struct Made {
    pub action: Action,
    pub physical: Option<Vec<u8>>,
}

impl Made {
    fn result(r: Result<i64, Errno>) -> Made {
        Made {
            action: match r {
                Ok(ret) => Action::Emulate {
                    ret,
                    writes: Vec::new(),
                },
                Err(e) => Action::Fail(e),
            },
            physical: None,
        }
    }

    fn writes(r: Written) -> Made {
        Made {
            action: match r {
                Ok((ret, writes)) => Action::Emulate { ret, writes },
                Err(e) => Action::Fail(e),
            },
            physical: None,
        }
    }
}

/// The bytes of a plain-data struct.
pub(crate) fn bytes_of<T: Copy>(value: &T) -> Vec<u8> {
    // SAFETY: T is plain data (a kernel struct); its bytes are initialised.
    unsafe {
        std::slice::from_raw_parts((value as *const T).cast::<u8>(), std::mem::size_of::<T>())
    }
    .to_vec()
}

/// The caller's umask, from `/proc/TID/status`.
pub(crate) fn umask(tid: i32) -> u32 {
    crate::notify::identity::Status::read(tid)
        .and_then(|s| s.umask())
        .unwrap_or(0o022)
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Makes `call` for thread `tid` whose registers are `regs`.
pub fn make(call: &RemoteCall, tid: i32, regs: &Regs) -> Made {
    match call.sys {
        Sys::Open | Sys::Openat | Sys::Creat | Sys::Openat2 => open(call, tid, regs),
        Sys::Chdir => enter(call),
        Sys::Stat | Sys::Lstat | Sys::Newfstatat | Sys::Statx => Made::writes(stat(call, regs)),
        Sys::Readlink | Sys::Readlinkat => Made::writes(readlink(call, regs)),
        Sys::Statfs => Made::writes(statfs(call, regs)),
        Sys::Getxattr | Sys::Lgetxattr | Sys::Listxattr | Sys::Llistxattr => {
            Made::writes(xattr_read(call, tid, regs))
        }
        _ => Made::result(change(call, tid, regs)),
    }
}

/// The open family: a local copy for reading or writing, and the call rewritten to it.
fn open(call: &RemoteCall, tid: i32, regs: &Regs) -> Made {
    let (flags, mode, how) = match call.sys {
        Sys::Open => (regs.arg(1), regs.arg(2), None),
        Sys::Creat => (
            (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64,
            regs.arg(1),
            None,
        ),
        Sys::Openat => (regs.arg(2), regs.arg(3), None),
        _ => match memory::read(tid, regs.arg(2), 24) {
            Ok(b) if b.len() == 24 => {
                let w = |i: usize| u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().expect("8"));
                (w(0), w(1), Some(w(2)))
            }
            _ => return Made::result(Err(libc::EFAULT)),
        },
    };
    let flags = flags as i32;
    if flags & libc::O_TMPFILE == libc::O_TMPFILE {
        return Made::result(Err(libc::EOPNOTSUPP));
    }
    let Ok(remote) = call.first() else {
        return Made::result(Err(libc::EXDEV));
    };
    if let Some(e) = names_a_directory_only(call, flags) {
        return Made::result(Err(e));
    }
    let writes = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
    let intent = if writes {
        Intent::Write {
            create: flags & libc::O_CREAT != 0,
            exclusive: flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0,
            truncate: flags & libc::O_TRUNC != 0,
            append: flags & libc::O_APPEND != 0,
            mode: mode as u32 & 0o7777 & !umask(tid),
        }
    } else if flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0 {
        // Read-only but exclusive: it must not exist, and then the copy is new.
        Intent::Write {
            create: true,
            exclusive: true,
            truncate: false,
            append: false,
            mode: mode as u32 & 0o7777 & !umask(tid),
        }
    } else {
        Intent::Read
    };
    let local = match remote.driver.localize(&remote.path, intent) {
        Ok(p) => p,
        Err(e) => return Made::result(Err(e)),
    };
    if flags & libc::O_DIRECTORY != 0 && !is_dir(&local) {
        return Made::result(Err(libc::ENOTDIR));
    }
    crate::copies::note(&remote.driver, &remote.path, &local, intent != Intent::Read);
    // The driver made the file (exclusively, where asked): the copy exists, so the kernel's
    // open of it must not insist on making it again.
    let kernel_flags = (flags & !libc::O_EXCL) as u64;
    let mut scratch = Scratch::default();
    let at = scratch.push_cstr(&local);
    let arg = &call.args[0];
    let mut args = vec![(arg.path, Arg::Scratch(at))];
    if let Some(d) = arg.dirfd {
        args.push((d, Arg::Value(AT_FDCWD as u64)));
    }
    match (call.sys, how) {
        (Sys::Open, _) => args.push((1, Arg::Value(kernel_flags))),
        (Sys::Openat, _) => args.push((2, Arg::Value(kernel_flags))),
        (_, Some(_)) => {
            let bytes: Vec<u8> = [kernel_flags, mode, 0]
                .iter()
                .flat_map(|w| w.to_ne_bytes())
                .collect();
            let how_at = scratch.push_bytes(&bytes);
            args.push((2, Arg::Scratch(how_at)));
        }
        _ => {}
    }
    Made {
        action: Action::Rewrite { scratch, args },
        physical: Some(local),
    }
}

/// An open whose path ends in `/` names a directory only, as the kernel has it: a file
/// there is ENOTDIR, a missing name ENOENT, or EISDIR when the open would create it (the
/// walk drops the slash; this puts its meaning back). `None`: no slash, or a directory.
pub(crate) fn names_a_directory_only(call: &RemoteCall, flags: i32) -> Option<Errno> {
    let arg = call.args.first()?;
    if !arg.trailing_slash {
        return None;
    }
    let remote = arg.remote.as_ref()?;
    match remote.driver.stat(&remote.path) {
        Ok(st) if st.is_dir() => None,
        Ok(_) => Some(libc::ENOTDIR),
        Err(libc::ENOENT) if flags & libc::O_CREAT != 0 => Some(libc::EISDIR),
        Err(e) => Some(e),
    }
}

fn is_dir(local: &[u8]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    std::fs::metadata(std::ffi::OsStr::from_bytes(local)).is_ok_and(|m| m.is_dir())
}

/// chdir: into the local copy of the directory (its entries listed), named logically by
/// the namespace's mirror mapping.
fn enter(call: &RemoteCall) -> Made {
    let Ok(remote) = call.first() else {
        return Made::result(Err(libc::EXDEV));
    };
    let local = match remote.driver.stat(&remote.path) {
        Ok(st) if st.is_dir() => remote.driver.localize(&remote.path, Intent::Read),
        Ok(_) => Err(libc::ENOTDIR),
        Err(e) => Err(e),
    };
    match local {
        Ok(local) => {
            crate::copies::note(&remote.driver, &remote.path, &local, false);
            let mut scratch = Scratch::default();
            let at = scratch.push_cstr(&local);
            Made {
                action: Action::Rewrite {
                    scratch,
                    args: vec![(call.args[0].path, Arg::Scratch(at))],
                },
                physical: Some(local),
            }
        }
        Err(e) => Made::result(Err(e)),
    }
}

/// The stat family, written as `struct stat` or `struct statx`.
fn stat(call: &RemoteCall, regs: &Regs) -> Written {
    let remote = call.first()?;
    let follow = call.args[0].follow;
    // A descriptor of a local copy answers with these too (`crate::copies`).
    let st = if follow {
        remote.driver.stat(&remote.path)?
    } else {
        remote.driver.lstat(&remote.path)?
    };
    let (buf, statx) = match call.sys {
        Sys::Stat | Sys::Lstat => (regs.arg(1), false),
        Sys::Newfstatat => (regs.arg(2), false),
        _ => (regs.arg(4), true),
    };
    let bytes = if statx {
        bytes_of(&st.to_statx())
    } else {
        bytes_of(&st.to_kernel())
    };
    Ok((0, vec![(buf, bytes)]))
}

fn readlink(call: &RemoteCall, regs: &Regs) -> Written {
    let remote = call.first()?;
    let (buf, size) = if call.sys == Sys::Readlink {
        (regs.arg(1), regs.arg(2))
    } else {
        (regs.arg(2), regs.arg(3))
    };
    if size as i32 <= 0 {
        return Err(libc::EINVAL);
    }
    let mut target = remote.driver.readlink(&remote.path)?;
    target.truncate(size as usize);
    Ok((target.len() as i64, vec![(buf, target)]))
}

fn statfs(call: &RemoteCall, regs: &Regs) -> Written {
    let remote = call.first()?;
    let fs = remote.driver.statfs(&remote.path)?;
    Ok((0, vec![(regs.arg(1), statfs_bytes(&fs))]))
}

/// `struct statfs` for a remote file system.
pub(crate) fn statfs_bytes(fs: &roost_vfs::StatFs) -> Vec<u8> {
    // SAFETY: plain data, every field that matters set below.
    let mut out: libc::statfs = unsafe { std::mem::zeroed() };
    out.f_type = fs.kind;
    out.f_bsize = fs.bsize;
    out.f_frsize = fs.bsize;
    out.f_blocks = fs.blocks;
    out.f_bfree = fs.bfree;
    out.f_bavail = fs.bavail;
    out.f_files = fs.files;
    out.f_ffree = fs.ffree;
    out.f_namelen = 255;
    bytes_of(&out)
}

/// A value for a buffer of `size` bytes: its length when `size` is 0 (the caller asks how
/// much room it needs), ERANGE when it does not fit.
pub(crate) fn into_buffer(value: Vec<u8>, buf: u64, size: u64) -> Written {
    if size == 0 {
        return Ok((value.len() as i64, Vec::new()));
    }
    if value.len() > size as usize {
        return Err(libc::ERANGE);
    }
    Ok((value.len() as i64, vec![(buf, value)]))
}

fn xattr_read(call: &RemoteCall, tid: i32, regs: &Regs) -> Written {
    let remote = call.first()?;
    let follow = matches!(call.sys, Sys::Getxattr | Sys::Listxattr);
    if matches!(call.sys, Sys::Getxattr | Sys::Lgetxattr) {
        let name = memory::read_cstr(tid, regs.arg(1), 256).map_err(memory::errno)?;
        let value = remote.driver.getxattr(&remote.path, &name, follow)?;
        into_buffer(value, regs.arg(2), regs.arg(3))
    } else {
        let list = remote.driver.listxattr(&remote.path, follow)?;
        into_buffer(list, regs.arg(1), regs.arg(2))
    }
}

/// Times for utime and friends: (atime, mtime) in seconds, `None` to leave one alone.
pub(crate) fn times(sys: Sys, tid: i32, regs: &Regs) -> Result<(Option<i64>, Option<i64>), Errno> {
    let words = |addr: u64, n: usize| -> Result<Vec<i64>, Errno> {
        let b = memory::read(tid, addr, n * 8).map_err(memory::errno)?;
        if b.len() < n * 8 {
            return Err(libc::EFAULT);
        }
        Ok(b.chunks_exact(8)
            .map(|w| i64::from_ne_bytes(w.try_into().expect("8")))
            .collect())
    };
    let (addr, spec) = match sys {
        Sys::Utime => (regs.arg(1), 0),
        Sys::Utimes => (regs.arg(1), 1),
        Sys::Futimesat => (regs.arg(2), 1),
        _ => (regs.arg(2), 2),
    };
    if addr == 0 {
        return Ok((Some(now()), Some(now())));
    }
    Ok(match spec {
        // struct utimbuf { actime, modtime }
        0 => {
            let w = words(addr, 2)?;
            (Some(w[0]), Some(w[1]))
        }
        // struct timeval[2]
        1 => {
            let w = words(addr, 4)?;
            (Some(w[0]), Some(w[2]))
        }
        // struct timespec[2] with UTIME_NOW / UTIME_OMIT
        _ => {
            let w = words(addr, 4)?;
            let one = |sec: i64, nsec: i64| match nsec {
                libc::UTIME_OMIT => None,
                libc::UTIME_NOW => Some(now()),
                _ => Some(sec),
            };
            (one(w[0], w[1]), one(w[2], w[3]))
        }
    })
}

/// The changes, made through the driver.
fn change(call: &RemoteCall, tid: i32, regs: &Regs) -> Result<i64, Errno> {
    let r = call.first()?;
    let (d, p) = (&r.driver, r.path.as_slice());
    let cstr =
        |i: usize, max: usize| memory::read_cstr(tid, regs.arg(i), max).map_err(memory::errno);
    match call.sys {
        Sys::Mkdir => d.mkdir(p, regs.arg(1) as u32 & 0o7777 & !umask(tid)),
        Sys::Mkdirat => d.mkdir(p, regs.arg(2) as u32 & 0o7777 & !umask(tid)),
        Sys::Rmdir => d.rmdir(p),
        Sys::Unlink => d.unlink(p),
        Sys::Unlinkat if regs.arg(2) & libc::AT_REMOVEDIR as u64 != 0 => d.rmdir(p),
        Sys::Unlinkat => d.unlink(p),
        Sys::Rename | Sys::Renameat | Sys::Renameat2 => {
            let flags = if call.sys == Sys::Renameat2 {
                regs.arg(4)
            } else {
                0
            };
            let to = call.second()?;
            if flags & libc::RENAME_EXCHANGE as u64 != 0
                || flags & libc::RENAME_WHITEOUT as u64 != 0
            {
                return Err(libc::EINVAL);
            }
            if flags & libc::RENAME_NOREPLACE as u64 != 0 && d.lstat(&to.path).is_ok() {
                return Err(libc::EEXIST);
            }
            d.rename(p, &to.path)
        }
        Sys::Link | Sys::Linkat => d.link(p, &call.second()?.path),
        Sys::Symlink | Sys::Symlinkat => {
            let target = cstr(0, memory::PATH_MAX)?;
            d.symlink(&target, p)
        }
        Sys::Chmod => d.chmod(p, regs.arg(1) as u32),
        Sys::Fchmodat | Sys::Fchmodat2 => {
            let nofollow = regs.arg(3) & libc::AT_SYMLINK_NOFOLLOW as u64 != 0;
            if call.sys == Sys::Fchmodat2 && nofollow && d.lstat(p)?.is_symlink() {
                return Err(libc::EOPNOTSUPP);
            }
            d.chmod(p, regs.arg(2) as u32)
        }
        Sys::Chown | Sys::Lchown => d.chown(
            p,
            regs.arg(1) as u32,
            regs.arg(2) as u32,
            call.args[0].follow,
        ),
        Sys::Fchownat => d.chown(
            p,
            regs.arg(2) as u32,
            regs.arg(3) as u32,
            call.args[0].follow,
        ),
        Sys::Truncate => {
            if (regs.arg(1) as i64) < 0 {
                return Err(libc::EINVAL);
            }
            d.truncate(p, regs.arg(1))
        }
        Sys::Utime | Sys::Utimes | Sys::Futimesat | Sys::Utimensat => {
            let (a, m) = times(call.sys, tid, regs)?;
            if a.is_none() && m.is_none() {
                return Ok(0);
            }
            // The walk followed every symlink it was told to: a symlink left is the object.
            if !call.args[0].follow && d.lstat(p)?.is_symlink() {
                d.lutime(p, a, m)
            } else {
                d.utime(p, a, m)
            }
        }
        Sys::Setxattr | Sys::Lsetxattr => {
            let name = cstr(1, 256)?;
            let value =
                memory::read(tid, regs.arg(2), regs.arg(3) as usize).map_err(memory::errno)?;
            d.setxattr(
                p,
                &name,
                &value,
                regs.arg(4) as i32,
                call.sys == Sys::Setxattr,
            )
        }
        Sys::Removexattr | Sys::Lremovexattr => {
            let name = cstr(1, 256)?;
            d.removexattr(p, &name, call.sys == Sys::Removexattr)
        }
        Sys::Access | Sys::Faccessat | Sys::Faccessat2 => {
            let mode = if call.sys == Sys::Access {
                regs.arg(1)
            } else {
                regs.arg(2)
            };
            d.access(p, mode as i32)
        }
        Sys::Mknod | Sys::Mknodat => {
            let mode = if call.sys == Sys::Mknod {
                regs.arg(1)
            } else {
                regs.arg(2)
            } as u32;
            match mode & libc::S_IFMT {
                0 | libc::S_IFREG => d
                    .localize(
                        p,
                        Intent::Write {
                            create: true,
                            exclusive: true,
                            truncate: false,
                            append: false,
                            mode: mode & 0o7777 & !umask(tid),
                        },
                    )
                    .map(drop),
                // A FIFO meets the run's processes here (see roost_vfs::nodes).
                libc::S_IFIFO => d.mkfifo(p, mode & 0o7777 & !umask(tid)),
                // A Chirp server holds files, directories and links only.
                _ => Err(libc::EPERM),
            }
        }
        // inotify, fanotify, file handles, chroot, sockets, ...: nothing remote to act on.
        _ => Err(libc::EOPNOTSUPP),
    }
    .map(|()| 0)
}
