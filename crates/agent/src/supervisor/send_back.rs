//! Calls sent back from a notification to a ptrace stop. Only a ptrace stop can rewrite a
//! call's arguments (an exec of a mapped program, a chdir into a mapping, a connect to a
//! mapped socket) or see its result: the supervisor hands such a notification to the tracer
//! thread, which interrupts the caller (`PTRACE_INTERRUPT`, seizing it first when it is not
//! traced, see `crate::attach`) and answers the notification `ERESTARTNOINTR`; at the
//! interrupt's stop it marks the call ([`crate::syscalls::BY_PTRACE`] in the high half of
//! an argument register, [`crate::syscalls::mark_arg`]) and the kernel restarts it, now as a ptrace stop (the filter's
//! `Verdict::NotifyUnlessIs`).

use super::{Notification, Reply, Shared};
use crate::shared::SendBack;

/// Sends notification `n` of thread `tid` back to take a ptrace stop (ENOSYS when roost has
/// no tracer thread for it).
pub(super) fn send_back(shared: &Shared, tid: i32, n: Notification) -> Reply {
    let Some(sent_back) = &shared.sent_back else {
        return Reply::errno(libc::ENOSYS);
    };
    super::pool::may_block();
    sent_back.send(SendBack {
        tid,
        id: n.id,
        listener: n.listener,
        nr: n.nr,
    });
    Reply::Answered
}
