//! The supervisor threads for seccomp user notifications. The hottest trapped calls — the
//! lookups (stat family, access, readlink) and the opens — are delivered as notifications
//! instead of ptrace stops: with synchronous wake-ups a round trip stays on one CPU, where a
//! ptrace stop in a VM often crosses to the other (5-8x dearer). The same handlers decide; a
//! call that may pass is let through (`CONTINUE`), one on a mapped path is performed here on
//! its physical path ([`lookup`], [`open`]) and failures are answered with their errno. These
//! threads never call ptrace; there are more than one only while calls wait on a slow
//! server ([`pool`]).

mod attrs;
mod change;
mod copies;
mod direct;
pub mod exec;
mod fifo;
mod handover;
pub mod keep_awake;
mod locks;
mod lookup;
mod open;
mod paths;
mod pool;
mod ptrace_only;
mod rules;
pub mod send_back;
mod sockname;

use crate::arch::Regs;
use crate::arch::Sys;
use crate::call::Call;
use crate::handlers;
use crate::memory;
pub use crate::shared::Shared;
use crate::syscalls::Table;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

/// `SECCOMP_IOCTL_NOTIF_SET_FLAGS` (Linux 6.6; newer than the libc headers).
const SECCOMP_IOCTL_NOTIF_SET_FLAGS: libc::c_ulong = 0x4008_2104;
/// Wake the supervisor on the notifying thread's CPU, and that thread on the supervisor's.
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;

/// Starts the supervisor on `listener`.
pub fn start(listener: OwnedFd, shared: Arc<Shared>) {
    // In a VM, waking a thread on an idle CPU costs an IPI and a VM exit: 70-130 us per
    // round trip here, against ~10 us when the wake-ups stay on one CPU. Older kernels
    // refuse the flag (EINVAL) and keep the plain wake-ups.
    // SAFETY: the flag value is passed by value; the fd is the live listener.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    };
    pool::Pool::start(listener, shared);
}

/// Answers notification `id` unless that happened already.
fn send(listener: i32, id: u64, reply: Reply) {
    let Reply::Send(val, error, flags) = reply else {
        return;
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags: flags as u32,
    };
    // SAFETY: a plain-data reply; ENOENT means the caller was interrupted meanwhile.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) };
}

/// How a notification is answered.
pub enum Reply {
    /// Return value, negative errno, flags.
    Send(i64, i32, u64),
    /// Already answered, or nobody waits for an answer any more.
    Answered,
}

impl From<Result<i64, i32>> for Reply {
    /// A call's result or errno, as the caller gets it.
    fn from(result: Result<i64, i32>) -> Reply {
        match result {
            Ok(v) => Reply::value(v),
            Err(e) => Reply::errno(e),
        }
    }
}

impl Reply {
    fn value(v: i64) -> Reply {
        Reply::Send(v, 0, 0)
    }

    fn errno(e: i32) -> Reply {
        Reply::Send(0, -e, 0)
    }
}

/// A notification being answered: the listener it came on, its id and its call's number.
#[derive(Clone, Copy)]
pub struct Notification {
    pub listener: i32,
    pub id: u64,
    pub nr: i64,
}

impl Notification {
    /// Whether the caller still waits for this answer. Asked after roost has read what it
    /// needs from the caller (memory, /proc entries) and before it acts on it: a caller that
    /// was killed meanwhile is gone, and its pid may be another process's.
    pub fn ensure_waiting(&self) -> Result<(), i32> {
        // SAFETY: checks a notification id.
        let rc =
            unsafe { libc::ioctl(self.listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &self.id) };
        if rc == 0 {
            Ok(())
        } else {
            Err(libc::ENOENT)
        }
    }
}

pub(crate) const CONTINUE: Reply = Reply::Send(0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE);

/// Answers one notification: the rules by number, then (for a call of the table, decoded
/// once) the rules by call, then the main path: resolve, decide, perform.
fn answer(table: &Table, shared: &Shared, fd: i32, req: &libc::seccomp_notif) -> Reply {
    roost_vfs::call_starts();
    if let Some(reply) = rules::foreign_abi(req) {
        return reply;
    }
    let trap = Trap {
        shared,
        table,
        req,
        tid: req.pid as i32,
        regs: Regs::from_args(&req.data.args),
        n: Notification {
            listener: fd,
            id: req.id,
            nr: i64::from(req.data.nr),
        },
    };
    if let Some(reply) = rules::BY_NUMBER.iter().find_map(|rule| rule(&trap)) {
        return reply;
    }
    let Some(entry) = table.entry(trap.n.nr) else {
        return rules::untrapped(&trap);
    };
    let call = Call::decode(entry.sys, &trap.regs, trap.tid);
    let trapped = Trapped {
        trap: &trap,
        entry,
        call,
    };
    if let Some(reply) = rules::BY_CALL.iter().find_map(|rule| rule(&trapped)) {
        return reply;
    }
    paths::perform(&trapped)
}

/// One notification being answered: what every rule may look at.
pub(crate) struct Trap<'a> {
    pub shared: &'a Shared,
    pub table: &'a Table,
    pub req: &'a libc::seccomp_notif,
    pub tid: i32,
    pub regs: Regs,
    pub n: Notification,
}

/// A notification of a call in the syscall table, decoded.
pub(crate) struct Trapped<'a> {
    pub trap: &'a Trap<'a>,
    pub entry: crate::syscalls::Trapped,
    pub call: Call,
}

/// The answer to a call that fails with `errno`; ENOSYS (a call roost cannot translate) is
/// said once.
fn failed(sys: Sys, logical: Option<&[u8]>, errno: i32) -> Reply {
    if errno == libc::ENOSYS {
        handlers::report_untranslatable(sys.name(), logical);
    }
    Reply::errno(errno)
}

/// The answer to an emulated call: `writes` into the caller's memory, then `ret`. With `n`,
/// nothing is written unless the caller still waits for it.
fn emulated(tid: i32, n: Option<Notification>, ret: i64, writes: Vec<(u64, Vec<u8>)>) -> Reply {
    if n.is_some_and(|n| n.ensure_waiting().is_err()) {
        return Reply::Answered;
    }
    match memory::write_all(tid, &writes) {
        Ok(()) => Reply::value(ret),
        Err(_) => Reply::errno(libc::EFAULT),
    }
}
