//! Opens of mapped paths, performed by the supervisor: the file is opened here on its
//! physical path with the caller's flags, umask and file-system identity, then installed in
//! the caller's fd table with `SECCOMP_IOCTL_NOTIF_ADDFD`, which also answers the
//! notification with the new descriptor's number. A FIFO's open blocks until its other end
//! arrives, so it runs on a thread of its own and the supervisor goes on.

use super::identity::{as_caller, prepare, Identity};
use super::{send, Reply};
use crate::arch::Regs;
use crate::handlers::path::open_follows;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// True for the calls this module performs (openat2 and O_PATH opens take ptrace stops).
pub fn is_open(name: &str) -> bool {
    matches!(name, "open" | "creat" | "openat")
}

/// The caller's open flags and creation mode.
fn flags_and_mode(name: &str, regs: &Regs) -> (u64, u64) {
    match name {
        "open" => (regs.arg(1), regs.arg(2)),
        "creat" => (
            (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64,
            regs.arg(1),
        ),
        _ => (regs.arg(2), regs.arg(3)),
    }
}

/// Opens `physical` as the caller asked.
fn open_physical(physical: &CString, flags: u64, mode: u64) -> Result<OwnedFd, i32> {
    // Our copy never leaks into children and never becomes roost's controlling terminal;
    // the caller's close-on-exec flag is set on the installed descriptor.
    let flags = flags as i32 | libc::O_CLOEXEC | libc::O_NOCTTY;
    // SAFETY: a plain open with a valid C string.
    let fd = unsafe {
        libc::openat(
            libc::AT_FDCWD,
            physical.as_ptr(),
            flags,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(super::lookup::last_errno());
    }
    // SAFETY: a descriptor just returned by the kernel and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Installs `fd` in the caller, answering notification `id` with its number.
fn install(listener: i32, id: u64, fd: &OwnedFd, cloexec: bool) -> Reply {
    let addfd = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: a plain-data request on the live listener.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &addfd) } >= 0 {
        return Reply::Answered;
    }
    match super::lookup::last_errno() {
        // The caller is gone or was interrupted: nothing is waiting for an answer.
        libc::ENOENT => Reply::Answered,
        e => Reply::errno(e), // EMFILE and the like: the caller's own limits
    }
}

fn open_and_install(
    (listener, id): (i32, u64),
    physical: &CString,
    (flags, mode): (u64, u64),
    who: Option<&Identity>,
) -> Reply {
    match as_caller(who, || open_physical(physical, flags, mode)) {
        Ok(fd) => install(listener, id, &fd, flags & libc::O_CLOEXEC as u64 != 0),
        Err(e) => Reply::errno(e),
    }
}

fn is_fifo(physical: &CString, follow: bool) -> bool {
    // SAFETY: the kernel fills the plain-data struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
    // SAFETY: a valid C string and stat buffer.
    let rc = unsafe { libc::fstatat(libc::AT_FDCWD, physical.as_ptr(), &mut st, flags) };
    rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO
}

/// Performs open call `name` of thread `tid` on `physical` and answers `notification`
/// (listener fd, id). `other_identity`: the caller may not share roost's credentials.
pub fn emulate(
    name: &str,
    regs: &Regs,
    tid: i32,
    physical: &[u8],
    other_identity: bool,
    notification: (i32, u64),
) -> Reply {
    let (listener, id) = notification;
    let (flags, mode) = flags_and_mode(name, regs);
    let Ok(physical) = CString::new(physical) else {
        return Reply::errno(libc::EINVAL);
    };
    let creates = flags & (libc::O_CREAT | libc::O_TMPFILE) as u64 != 0;
    let who = match prepare(tid, creates, other_identity) {
        Ok(who) => who,
        Err(e) => return Reply::errno(e),
    };
    if is_fifo(&physical, open_follows(flags)) {
        // SAFETY: duplicating the live listener for the opener thread.
        let own = unsafe { libc::fcntl(listener, libc::F_DUPFD_CLOEXEC, 0) };
        if own < 0 {
            return Reply::errno(libc::EMFILE);
        }
        // SAFETY: the new descriptor is ours alone.
        let own = unsafe { OwnedFd::from_raw_fd(own) };
        let spawned = std::thread::Builder::new()
            .name("roost-fifo-open".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let notification = (own.as_raw_fd(), id);
                let reply = open_and_install(notification, &physical, (flags, mode), who.as_ref());
                send(own.as_raw_fd(), id, reply);
            });
        return match spawned {
            Ok(_) => Reply::Answered,
            Err(_) => Reply::errno(libc::EAGAIN),
        };
    }
    open_and_install(notification, &physical, (flags, mode), who.as_ref())
}
