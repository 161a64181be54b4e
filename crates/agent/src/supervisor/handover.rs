//! Handing a descriptor roost opened to the caller: one open as the caller asked it
//! ([`Request`]), installed in the caller's descriptor table with
//! `SECCOMP_IOCTL_NOTIF_ADDFD` — at the next free number, or at a given one.

use super::{Notification, Reply};
use crate::caller::{as_caller, Identity};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// One open as the caller asked it: physical path, flags, creation mode and identity.
pub struct Request {
    pub physical: CString,
    pub flags: i32,
    pub mode: u32,
    pub who: Option<Identity>,
    /// Keep a CPU awake after installing ([`super::keep_awake`]): not for a lone open that
    /// no loop of others follows (the loader's read of its preload list, once per exec).
    pub poll_after: bool,
}

impl Request {
    /// Opens without waiting for a FIFO's other end.
    pub fn open_nonblocking(&self) -> Result<OwnedFd, i32> {
        // Our copy never leaks into children and never becomes roost's controlling
        // terminal; the caller's close-on-exec flag is set on the installed descriptor.
        let flags = self.flags | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK;
        // SAFETY: a plain open with a valid C string.
        let fd = as_caller(self.who.as_ref(), || unsafe {
            libc::openat(libc::AT_FDCWD, self.physical.as_ptr(), flags, self.mode)
        });
        if fd < 0 {
            return Err(super::lookup::last_errno());
        }
        // SAFETY: a descriptor just returned by the kernel and owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    pub fn blocks(&self) -> bool {
        self.flags & libc::O_NONBLOCK == 0
    }

    /// Whether the open itself may change the file system (create or truncate a file).
    pub fn changes_the_file(&self) -> bool {
        self.flags & (libc::O_CREAT | libc::O_TRUNC) != 0
    }

    pub fn access_mode(&self) -> i32 {
        self.flags & libc::O_ACCMODE
    }

    /// Hands `fd` to the caller with the file status flags it asked for. roost's own copy is
    /// closed before the caller is answered, so from then on the caller's descriptor is the
    /// only one: a FIFO has no phantom reader or writer, the file is not busy for exec
    /// (ETXTBSY) and its close is the last one, as if the caller had opened it itself.
    pub fn install(&self, n: Notification, fd: OwnedFd) -> Reply {
        self.install_at(n, fd, None)
    }

    /// [`Request::install`] at number `at` (free), or the lowest free one.
    pub fn install_at(&self, n: Notification, fd: OwnedFd, at: Option<u32>) -> Reply {
        if self.blocks() {
            // SAFETY: plain fcntl calls on a descriptor we own.
            unsafe {
                let status = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, status & !libc::O_NONBLOCK);
            }
        }
        if self.poll_after {
            super::keep_awake::installing();
        }
        hand_over(n, fd, self.flags & libc::O_CLOEXEC != 0, at)
    }
}

/// Installs `fd` in the caller of notification `n` (at number `at`, replacing what is
/// there, or at the lowest free one) and answers the call with its number. roost's copy is
/// closed before the answer.
pub fn hand_over(n: Notification, fd: OwnedFd, cloexec: bool, at: Option<u32>) -> Reply {
    // Without killable waits (kernels before 5.19) a signal between installing and
    // answering would leave the descriptor behind for a restarted call: install and
    // answer in one step there.
    let at_once = !crate::filter::waits_killably();
    let mut flags = if at_once {
        libc::SECCOMP_ADDFD_FLAG_SEND as u32
    } else {
        0
    };
    if at.is_some() {
        flags |= libc::SECCOMP_ADDFD_FLAG_SETFD as u32;
    }
    let (installed, failure) = add_fd(n, &fd, flags, at.unwrap_or(0), cloexec);
    drop(fd);
    if installed >= 0 && at_once {
        return Reply::Answered;
    }
    if installed >= 0 {
        // The caller waits killably, so it is still there to take its descriptor.
        return Reply::value(installed.into());
    }
    match failure {
        // The caller is gone or was interrupted: nothing is waiting for an answer.
        libc::ENOENT => Reply::Answered,
        // A number at or above the caller's descriptor limit.
        libc::EBADF if at.is_some() => Reply::errno(libc::EMFILE),
        e => Reply::errno(e), // EMFILE and the like: the caller's own limits
    }
}

/// Installs a copy of `fd` in the caller of notification `n` (`SECCOMP_IOCTL_NOTIF_ADDFD`
/// with `flags`, at `newfd` with SETFD): the number installed, or -1 and the errno.
fn add_fd(n: Notification, fd: &OwnedFd, flags: u32, newfd: u32, cloexec: bool) -> (i32, i32) {
    let addfd = libc::seccomp_notif_addfd {
        id: n.id,
        flags,
        srcfd: fd.as_raw_fd() as u32,
        newfd,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: a plain-data request on the live listener.
    let installed = unsafe { libc::ioctl(n.listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &addfd) };
    (installed, super::lookup::last_errno())
}

/// Installs `fd` at number `at` of the caller of notification `n` in place of what is
/// there, and lets the call go on (`CONTINUE`) on it.
pub fn replace_then_continue(n: Notification, fd: OwnedFd, cloexec: bool, at: u32) -> Reply {
    let setfd = libc::SECCOMP_ADDFD_FLAG_SETFD as u32;
    let (installed, failure) = add_fd(n, &fd, setfd, at, cloexec);
    drop(fd);
    match (installed, failure) {
        (r, _) if r >= 0 => super::CONTINUE,
        (_, libc::ENOENT) => Reply::Answered,
        (_, e) => Reply::errno(e),
    }
}
