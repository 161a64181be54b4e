//! open_by_handle_at: a file handle names an inode, not a path, so the namespace cannot see
//! what it opens. roost first opens the handle itself and refuses a pidfd of one of its own
//! processes (pidfs handles carry a process's number, which anyone may guess:
//! `crate::guard`) and, where the mount list hides paths (`DENY`, `ENOENT`), an object that
//! one of its logical names hides, or whose name it cannot tell; otherwise the kernel makes
//! the call as given. (Other file systems' handles need `CAP_DAC_READ_SEARCH`: a program
//! that may make them runs where roost may too.)

use super::{Ctx, Decision, AT_FDCWD};
use crate::memory;
use crate::sys;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;

/// The kernel's limit on `struct file_handle`'s `handle_bytes` (MAX_HANDLE_SZ).
const MAX_HANDLE_BYTES: usize = 128;

/// open_by_handle_at(mount_fd, handle, flags).
pub fn open_by_handle(ctx: &mut Ctx<'_>, mount_fd_arg: usize, handle_arg: usize) -> Decision {
    let hides = ctx.ns.table().hides_any();
    if !hides && !crate::guard::protecting() {
        return Decision::pass();
    }
    let at = ctx.regs.arg(handle_arg);
    let header = match memory::read(ctx.pid, at, 8) {
        Ok(h) if h.len() == 8 => h,
        Ok(_) => return Decision::fail(libc::EFAULT),
        Err(e) => return Decision::fail(memory::errno(e)),
    };
    let bytes = u32::from_ne_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    if bytes == 0 || bytes > MAX_HANDLE_BYTES {
        return Decision::pass(); // the kernel's EINVAL
    }
    let handle = match memory::read(ctx.pid, at, 8 + bytes) {
        Ok(h) if h.len() == 8 + bytes => h,
        Ok(_) => return Decision::fail(libc::EFAULT),
        Err(e) => return Decision::fail(memory::errno(e)),
    };
    // The caller's mount descriptor itself (the kernel refuses an O_PATH one) names the
    // file system for roost's own open of the handle.
    let mount_fd = ctx.int_arg(mount_fd_arg);
    if mount_fd == FD_PIDFS_ROOT {
        return pidfs_handle(&Raw(FD_PIDFS_ROOT as i32), &handle);
    }
    let dir = match mount_fd {
        AT_FDCWD => std::fs::File::open(format!("/proc/{}/cwd", ctx.pid))
            .ok()
            .map(OwnedFd::from),
        fd if fd >= 0 => {
            let tgid = crate::procinfo::tgid(ctx.pid).unwrap_or(ctx.pid);
            sys::take_fd(tgid, fd as i32).ok()
        }
        _ => None,
    };
    let Some(dir) = dir else {
        return Decision::fail(libc::EBADF);
    };
    if on_pidfs(&dir) {
        return pidfs_handle(&dir, &handle);
    }
    if !hides {
        return Decision::pass();
    }
    // The kernel would refuse the caller the same way (EPERM, ESTALE, EINVAL); where the
    // caller could do more than roost, refusing is still the safe answer.
    let object = match sys::open_by_handle(&dir, &handle, libc::O_PATH | libc::O_CLOEXEC) {
        Ok(fd) => fd,
        Err(errno) => return Decision::fail(errno),
    };
    match hidden(ctx, &object) {
        Some(errno) => {
            let mut d = Decision::fail(errno);
            d.logical = Some(b"(file handle)".to_vec());
            d
        }
        None => Decision::pass(),
    }
}

/// `PIDFS_MAGIC`, the file system of pidfds.
const PIDFS_MAGIC: i64 = 0x5049_4446;
/// `FD_PIDFS_ROOT` (Linux 6.14): a mount descriptor standing for pidfs.
const FD_PIDFS_ROOT: i64 = -10002;

/// A descriptor number that is no open file (`FD_PIDFS_ROOT`).
struct Raw(i32);

impl AsRawFd for Raw {
    fn as_raw_fd(&self) -> i32 {
        self.0
    }
}

/// Whether `dir` is on pidfs (a pidfd, whose file handles name processes).
fn on_pidfs(dir: &OwnedFd) -> bool {
    // SAFETY: the kernel fills the plain-data struct for a descriptor we own.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::fstatfs(dir.as_raw_fd(), &mut fs) == 0 && fs.f_type as i64 == PIDFS_MAGIC }
}

/// A pidfs handle names a process by a number anyone may guess: refused (EPERM) when it
/// names one of roost's ([`crate::guard`]), found by opening it (pidfs refuses `O_PATH`;
/// a readable pidfd has no effect of its own); otherwise the kernel opens it as given. A
/// pidfd names no path, so `DENY` and `ENOENT` have nothing to hide here.
fn pidfs_handle(mount: &impl AsRawFd, handle: &[u8]) -> Decision {
    let pidfd = sys::open_by_handle(mount, handle, libc::O_RDONLY | libc::O_CLOEXEC);
    match pidfd.ok().and_then(|p| crate::guard::process_of(&p)) {
        Some(pid) if crate::guard::is_own(pid) => Decision::fail(libc::EPERM),
        _ => Decision::pass(),
    }
}

/// The errno that hides `object` (EACCES under `DENY`, ENOENT under `ENOENT`), or `None`
/// when no logical name of it is hidden. An object whose path the kernel cannot name (a
/// disconnected or deleted file) is refused with EACCES: nothing shows it lies outside.
fn hidden(ctx: &Ctx<'_>, object: &OwnedFd) -> Option<i32> {
    let Ok(path) = sys::path_of(object) else {
        return Some(libc::EACCES);
    };
    let same =
        |a: &std::fs::Metadata, b: &std::fs::Metadata| a.dev() == b.dev() && a.ino() == b.ino();
    let by_name = std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(&path));
    let held = std::fs::File::from(object.try_clone().ok()?).metadata();
    let named = matches!((by_name, held), (Ok(a), Ok(b)) if same(&a, &b));
    if !named {
        return Some(libc::EACCES);
    }
    ctx.ns.table().hidden(&path)
}
