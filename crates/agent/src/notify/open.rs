//! Opens of mapped paths, performed by the supervisor: the file is opened here on its
//! physical path with the caller's flags, umask and file-system identity, then installed in
//! the caller's fd table with `SECCOMP_IOCTL_NOTIF_ADDFD`, and the notification answered
//! with the new descriptor's number.
//!
//! The supervisor never blocks: it opens with `O_NONBLOCK` added (which changes nothing but
//! waits, for regular files, directories and most devices) and clears the flag after. An
//! open that would have waited — a FIFO whose other end is missing, a file whose lease is
//! being broken — waits on a thread of its own ([`fifo`]), as the caller would in the
//! kernel, with its signals still delivered.

use super::fifo::{self, GroupStops};
use super::identity::{as_caller, prepare, Identity};
use super::{Notification, Reply};
use crate::call::Open;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

/// One open as the caller asked it: physical path, flags, creation mode and identity.
pub struct Request {
    pub physical: CString,
    pub flags: i32,
    pub mode: u32,
    pub who: Option<Identity>,
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
    fn changes_the_file(&self) -> bool {
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
    fn install_at(&self, n: Notification, fd: OwnedFd, at: Option<u32>) -> Reply {
        if self.blocks() {
            // SAFETY: plain fcntl calls on a descriptor we own.
            unsafe {
                let status = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, status & !libc::O_NONBLOCK);
            }
        }
        super::keep_awake::installing();
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

/// Whether thread `tid` has a free descriptor below its `RLIMIT_NOFILE`. The kernel checks
/// this before an open touches the file system; roost installs the descriptor only after
/// opening, so a creating or truncating open checks first, lest a caller at its limit get
/// EMFILE for an open that created or emptied a file. (Another thread of the caller opening
/// meanwhile can still take the last slot.)
fn has_room(tid: i32) -> bool {
    // SAFETY: the kernel fills the plain-data struct.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a query of another process's limit into a valid struct.
    if unsafe { libc::prlimit(tid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut limit) } != 0 {
        return true; // cannot tell: let the install say
    }
    let Ok(entries) = std::fs::read_dir(format!("/proc/{tid}/fd")) else {
        return true;
    };
    let below_limit = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .filter(|&fd| fd < limit.rlim_cur)
        .count() as u64;
    below_limit < limit.rlim_cur
}

/// Whether `fd` is a FIFO.
pub fn is_fifo(fd: &OwnedFd) -> bool {
    // SAFETY: the kernel fills the plain-data struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live descriptor and a stat buffer.
    unsafe {
        libc::fstat(fd.as_raw_fd(), &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO
    }
}

/// Performs `open` for thread `tid` on `physical` and answers notification `n`.
/// `into`: the range the descriptor goes to (a remote object's local copy), when it has
/// room. `other_identity`: the caller may not share roost's credentials. `stops`: the
/// processes now stopping, which an open that waits must let stop.
pub fn emulate(
    open: &Open,
    (tid, into): (i32, Option<&crate::vfd::Slots>),
    physical: &[u8],
    other_identity: bool,
    n: Notification,
    stops: &Arc<GroupStops>,
) -> Reply {
    let Ok(physical) = CString::new(physical) else {
        return Reply::errno(libc::EINVAL);
    };
    // O_TMPFILE includes O_DIRECTORY's bit: only both bits together create a file.
    let who = match prepare(tid, open.creates() || open.tmpfile(), other_identity) {
        Ok(who) => who,
        Err(e) => return Reply::errno(e),
    };
    let request = Request {
        physical,
        flags: open.flags,
        mode: open.mode,
        who,
    };
    if request.changes_the_file() && !has_room(tid) {
        return Reply::errno(libc::EMFILE);
    }
    if n.ensure_waiting().is_err() {
        return Reply::Answered;
    }
    let wait = match request.open_nonblocking() {
        // A FIFO's writer waits for a reader; an open that breaks a lease waits for it.
        Err(e) if request.blocks() && fifo::would_wait(&request, e) => fifo::Wait::Retry(e),
        Err(e) => return Reply::errno(e),
        Ok(fd) if request.blocks() && request.access_mode() == libc::O_RDONLY && is_fifo(&fd) => {
            fifo::Wait::Reader(fd)
        }
        Ok(fd) => {
            return match into {
                Some(slots) => slots.place(tid, |at| request.install_at(n, fd, at)),
                None => request.install(n, fd),
            }
        }
    };
    match fifo::wait_elsewhere(request, wait, (tid, n), Arc::clone(stops)) {
        Ok(()) => Reply::Answered,
        Err(e) => Reply::errno(e),
    }
}
