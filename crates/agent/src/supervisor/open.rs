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

use super::fifo;
use super::handover::Request;
use super::{Notification, Reply};
use crate::call::Open;
use crate::caller::prepare;
use crate::shared::GroupStops;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

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
/// processes now stopping, which an open that waits must let stop. `poll_after`: see
/// [`Request::poll_after`].
pub fn emulate(
    open: &Open,
    (tid, into): (i32, Option<&crate::vfd::Slots>),
    (physical, poll_after): (&[u8], bool),
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
        poll_after,
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
