//! Advisory locks on virtual descriptors: `flock` and the `fcntl` record locks. Chirp has
//! no locks, and the placeholder socket each open gets would lock only against its own
//! copies, so two programs opening one remote file would both get an exclusive lock. So
//! every virtual descriptor opens its file's *lock object* (a local file per remote file,
//! shared by every run of the user on this host: [`roost_vfs::Driver::lock_object`]) and
//! the program's lock is taken there, by roost, as the kernel would take it:
//!
//! - `flock` as asked, on that open: descriptors copied by `dup` or `fork` share it, as
//!   they share the placeholder.
//! - `F_SETLK`, `F_SETLKW`, `F_GETLK` (and the `F_OFD_*` forms) as open-file-description
//!   locks on that open: byte ranges conflict between two opens of the file, in one
//!   process or two. Unlike POSIX record locks they are not dropped when the process
//!   closes another descriptor of the file, they are not split by process after `fork`,
//!   and `F_GETLK` reports the holder's pid as -1.
//!
//! A lock that must wait (`LOCK_EX` without `LOCK_NB`, `F_SETLKW`) is tried again every
//! few milliseconds, while the caller is watched as for a FIFO's open: a signal for it
//! restarts the call (or fails it with EINTR), as a lock wait is interrupted natively.
//! Locks hold between the programs of this host only: a program on another host, through
//! its own roost, does not see them.

use super::fifo::{look_at, Caller};
use super::{Notification, Reply};
use crate::memory;
use crate::shared::{GroupStops, ERESTARTSYS};
use crate::vfd::VFile;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// How often a waiting lock is tried again.
const RETRY: Duration = Duration::from_millis(5);

/// Runs `op` on `vf`'s open of its lock object (opened on first use) and returns its
/// result or errno.
fn on_lock_object(vf: &VFile, op: impl FnOnce(i32) -> libc::c_int) -> Result<libc::c_int, i32> {
    let mut held = vf.locks.lock().expect("locks lock");
    if held.is_none() {
        *held = Some(vf.driver.lock_object(vf.file.path())?);
    }
    let fd = held.as_ref().expect("opened above").as_raw_fd();
    let rc = op(fd);
    if rc < 0 {
        Err(crate::sys::last_errno())
    } else {
        Ok(rc)
    }
}

/// Tries `attempt` until it no longer answers EWOULDBLOCK/EAGAIN/EACCES (when `wait`),
/// watching the caller between tries.
fn until_taken(
    wait: bool,
    (tid, n, stops): (i32, Notification, &GroupStops),
    attempt: impl Fn() -> Result<libc::c_int, i32>,
) -> Reply {
    loop {
        match attempt() {
            Ok(v) => return Reply::value(v.into()),
            Err(libc::EWOULDBLOCK | libc::EACCES) if wait => {}
            Err(e) => return Reply::errno(e),
        }
        match look_at(tid, n, stops) {
            Caller::Waiting => {
                super::pool::may_block();
                std::thread::sleep(RETRY)
            }
            Caller::Signalled => return Reply::errno(ERESTARTSYS),
            Caller::Gone => return Reply::Answered,
        }
    }
}

/// `flock(fd, operation)` on virtual descriptor `vf`.
pub fn flock(vf: &VFile, operation: i32, caller: (i32, Notification, &GroupStops)) -> Reply {
    let wait = operation & libc::LOCK_NB == 0 && operation & libc::LOCK_UN == 0;
    until_taken(wait, caller, || {
        // SAFETY: a lock operation on a descriptor we own.
        on_lock_object(vf, |fd| unsafe {
            libc::flock(fd, operation | libc::LOCK_NB)
        })
    })
}

/// Whether `cmd` is one of `fcntl`'s record-lock commands.
pub fn is_record_lock(cmd: i32) -> bool {
    matches!(
        cmd,
        libc::F_GETLK
            | libc::F_SETLK
            | libc::F_SETLKW
            | libc::F_OFD_GETLK
            | libc::F_OFD_SETLK
            | libc::F_OFD_SETLKW
    )
}

/// `fcntl(fd, cmd, &flock)` for a record-lock `cmd` on virtual descriptor `vf`; the
/// `struct flock` is read from (and for the GETLK forms written back to) `at`.
pub fn record_lock(
    vf: &VFile,
    (cmd, at): (i32, u64),
    caller: (i32, Notification, &GroupStops),
) -> Reply {
    let tid = caller.0;
    let size = std::mem::size_of::<libc::flock>();
    let mut lock: libc::flock = match memory::read(tid, at, size) {
        // SAFETY: `flock` is plain data; the bytes are exactly its size.
        Ok(b) if b.len() == size => unsafe { std::ptr::read_unaligned(b.as_ptr().cast()) },
        _ => return Reply::errno(libc::EFAULT),
    };
    // Open-file-description locks take no pid (the kernel wants 0 there).
    lock.l_pid = 0;
    let (ofd_cmd, wait) = match cmd {
        libc::F_GETLK | libc::F_OFD_GETLK => (libc::F_OFD_GETLK, false),
        libc::F_SETLK | libc::F_OFD_SETLK => (libc::F_OFD_SETLK, false),
        _ => (libc::F_OFD_SETLKW, true),
    };
    let wanted = lock.l_type;
    if wanted == libc::F_WRLCK as i16 && !vf.writable()
        || wanted == libc::F_RDLCK as i16 && !vf.readable()
    {
        return Reply::errno(libc::EBADF); // as the kernel: a lock needs the access it names
    }
    let attempt_cmd = if ofd_cmd == libc::F_OFD_SETLKW {
        libc::F_OFD_SETLK
    } else {
        ofd_cmd
    };
    let cell = std::cell::Cell::new(lock);
    let reply = until_taken(wait, caller, || {
        let mut l = cell.get();
        // SAFETY: a lock command with a valid `struct flock` on a descriptor we own.
        let r = on_lock_object(vf, |fd| unsafe { libc::fcntl(fd, attempt_cmd, &mut l) });
        cell.set(l);
        r
    });
    if ofd_cmd == libc::F_OFD_GETLK && matches!(reply, Reply::Send(0, 0, 0)) {
        let answer = cell.get();
        // SAFETY: viewing a plain-data struct as its bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts((&answer as *const libc::flock).cast::<u8>(), size)
        };
        if memory::write(tid, at, bytes).is_err() {
            return Reply::errno(libc::EFAULT);
        }
    }
    reply
}
