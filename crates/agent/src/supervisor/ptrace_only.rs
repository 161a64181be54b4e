//! The calls whose rewriting or result only a ptrace stop can handle — chdir and fchdir,
//! getcwd, chroot, bind/connect/sendto/sendmsg/sendmmsg, open_by_handle_at, bpf,
//! perf_event_open, O_PATH opens, linkat of a descriptor — when they come as notifications,
//! as every trapped call of a process roost does not trace does (`crate::attach`). The usual
//! handler decides here: what passes is let through, failures and emulated answers (getcwd
//! in a mapping) are given here, and only what must be rewritten or watched to its end is
//! sent back to a ptrace stop, which attaches roost to the caller for that one call.

use super::send_back::send_back;
use super::{Notification, Reply, Shared, CONTINUE};
use crate::arch::Regs;
use crate::arch::Sys;
use crate::handlers::{self, Action, Ctx};
use crate::syscalls::Kind;
use crate::task::{AfterExit, CallerFs};

/// Answers a notified call of `kind` that only a ptrace stop could handle before.
pub(super) fn answer(
    shared: &Shared,
    (sys, kind): (Sys, Kind),
    tid: i32,
    regs: &Regs,
    n: Notification,
) -> Reply {
    let ns = &shared.ns;
    match kind {
        // Traced only for CLONE_UNTRACED, which means nothing to a process not traced.
        Kind::Clone => return CONTINUE,
        // What they did shows only in their result.
        Kind::Fchdir | Kind::Chroot => return send_back(shared, tid, n),
        _ => {}
    }
    let fs = CallerFs::of(ns, tid);
    // The executable, for a path through `/proc/self/exe`, costs three /proc reads: only a
    // path argument (an O_PATH open, linkat) may name it. A socket's address, a working
    // directory or a bpf object cannot be that file (without it such a name is still read
    // from the kernel's link).
    let exe = match kind {
        Kind::Path { .. } => crate::procinfo::tgid(tid).and_then(|g| shared.execs.exe(g, tid)),
        _ => None,
    };
    let decision = {
        let mut ctx = Ctx::decoding(tid, (sys, regs), ns, &fs, exe.as_deref());
        ctx.fast = shared.fast.as_deref();
        handlers::decide(&mut ctx, kind)
    };
    match (decision.action, decision.after) {
        (Action::Pass, None | Some(AfterExit::Record)) => CONTINUE,
        (Action::Pass, Some(AfterExit::Chdir(Some(logical)))) => {
            handlers::procfs::entering(ns, &logical);
            CONTINUE
        }
        (Action::Fail(e), _) => super::failed(sys, decision.logical.as_deref(), e),
        (Action::Emulate { ret, writes }, None | Some(AfterExit::Record)) => {
            super::emulated(tid, Some(n), ret, writes)
        }
        _ => send_back(shared, tid, n),
    }
}
