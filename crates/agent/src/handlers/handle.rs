//! open_by_handle_at: a file handle names an inode, not a path, so the namespace cannot see
//! what it opens. Where the mount list hides paths (`DENY`, `ENOENT`), roost first opens the
//! handle itself and refuses an object that one of its logical names hides, or whose name it
//! cannot tell; otherwise the kernel makes the call as given. (The call needs
//! `CAP_DAC_READ_SEARCH`: a program that may make it runs where roost may too.)

use super::{Ctx, Decision, AT_FDCWD};
use crate::memory;
use crate::sys;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;

/// The kernel's limit on `struct file_handle`'s `handle_bytes` (MAX_HANDLE_SZ).
const MAX_HANDLE_BYTES: usize = 128;

/// open_by_handle_at(mount_fd, handle, flags).
pub fn open_by_handle(ctx: &mut Ctx<'_>, mount_fd_arg: usize, handle_arg: usize) -> Decision {
    if !ctx.ns.table().hides_any() {
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
    let dir = match mount_fd {
        AT_FDCWD => std::fs::File::open(format!("/proc/{}/cwd", ctx.pid))
            .ok()
            .map(OwnedFd::from),
        fd if fd >= 0 => {
            let tgid = crate::notify::identity::tgid(ctx.pid).unwrap_or(ctx.pid);
            sys::take_fd(tgid, fd as i32).ok()
        }
        _ => None,
    };
    let Some(dir) = dir else {
        return Decision::fail(libc::EBADF);
    };
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
