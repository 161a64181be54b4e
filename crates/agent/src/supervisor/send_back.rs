//! Calls sent back from a notification to a ptrace stop. Only a ptrace stop can rewrite a
//! call's arguments (an exec of a mapped program, a chdir into a mapping, a connect to a
//! mapped socket) or see its result: the supervisor hands such a notification to the tracer
//! thread, which interrupts the caller (`PTRACE_INTERRUPT`, seizing it first when it is not
//! traced, see `crate::attach`) and answers the notification `ERESTARTNOINTR`; at the
//! interrupt's stop it marks the call ([`crate::syscalls::BY_PTRACE`] in the high half of
//! an argument register, [`crate::syscalls::mark_arg`]) and the kernel restarts it, now as a ptrace stop (the filter's
//! `Verdict::NotifyUnlessIs`).

use super::{Notification, Reply, Shared};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The kernel's "restart this call, signal or not" result.
pub const ERESTARTNOINTR: i32 = 513;

/// A notification the tracer must answer (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SendBack {
    pub tid: i32,
    pub id: u64,
    pub listener: i32,
    /// The call's number: only that call is marked when the thread stops.
    pub nr: i64,
}

/// Calls on their way from the supervisor to the tracer.
pub struct SentBack {
    queue: Mutex<Vec<SendBack>>,
    taken: Condvar,
    /// The tracer thread (woken with [`WAKE_SIGNAL`]).
    tracer: i32,
}

/// Interrupts the tracer's wait for the next stop (its handler does nothing).
pub const WAKE_SIGNAL: i32 = libc::SIGURG;

impl SentBack {
    /// For the tracer thread `tracer`, whose waits [`WAKE_SIGNAL`] interrupts.
    pub fn new(tracer: i32) -> SentBack {
        SentBack {
            queue: Mutex::new(Vec::new()),
            taken: Condvar::new(),
            tracer,
        }
    }

    /// Hands `s` to the tracer and returns once it took it. The tracer is woken again every
    /// millisecond: a wake-up that came while it was busy leaves it asleep in its next wait.
    fn send(&self, s: SendBack) {
        super::pool::may_block();
        let mut queue = self.queue.lock().expect("sent-back lock");
        queue.push(s);
        while queue.contains(&s) {
            // SAFETY: a signal to a thread of this process, whose handler does nothing.
            unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), self.tracer, WAKE_SIGNAL) };
            queue = self
                .taken
                .wait_timeout(queue, Duration::from_millis(1))
                .expect("sent-back lock")
                .0;
        }
    }

    /// Everything sent back since the last call (the tracer's side).
    pub fn take(&self) -> Vec<SendBack> {
        let mut queue = self.queue.lock().expect("sent-back lock");
        if queue.is_empty() {
            return Vec::new();
        }
        let all = std::mem::take(&mut *queue);
        self.taken.notify_all();
        all
    }
}

/// Sends notification `n` of thread `tid` back to take a ptrace stop (ENOSYS when roost has
/// no tracer thread for it).
pub(super) fn send_back(shared: &Shared, tid: i32, n: Notification) -> Reply {
    let Some(sent_back) = &shared.sent_back else {
        return Reply::errno(libc::ENOSYS);
    };
    sent_back.send(SendBack {
        tid,
        id: n.id,
        listener: n.listener,
        nr: n.nr,
    });
    Reply::Answered
}
