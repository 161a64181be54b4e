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
use crate::handlers::{self, embedded, path, procfs, socket, Action, Ctx};
use crate::memory;
use crate::syscalls::Kind;
use crate::task::AfterExit;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// Answers a notified call of `kind` that only a ptrace stop could handle before.
pub(super) fn answer(
    shared: &Shared,
    (name, kind): (&'static str, Kind),
    tid: i32,
    regs: &Regs,
    n: Notification,
) -> Reply {
    let ns = &shared.ns;
    let fs = super::caller_fs(ns, tid, true);
    let exe = super::identity::tgid(tid).and_then(|g| shared.execs.exe(g, tid));
    let mut ctx = Ctx {
        pid: tid,
        name,
        regs,
        ns,
        fs: &fs,
        exe: exe.as_deref(),
        known_paths: &[],
    };
    let decision = match kind {
        Kind::Path {
            args,
            mutates,
            cross,
        } => path::handle(&mut ctx, args, mutates, cross),
        Kind::Getcwd => procfs::getcwd(&mut ctx),
        Kind::Chdir => procfs::chdir(&mut ctx),
        Kind::SockAddr { addr, len, follow } => socket::sockaddr(&mut ctx, addr, len, follow),
        Kind::SendMsg => socket::sendmsg(&mut ctx),
        Kind::SendMmsg => socket::sendmmsg(&mut ctx),
        Kind::OpenByHandle { mount_fd, handle } => {
            handlers::handle::open_by_handle(&mut ctx, mount_fd, handle)
        }
        Kind::Bpf => embedded::bpf(&mut ctx),
        Kind::PerfEventOpen => embedded::perf_event_open(&mut ctx),
        // Traced only for CLONE_UNTRACED, which means nothing to a process not traced.
        Kind::Clone => return CONTINUE,
        // fchdir and chroot: what they did shows only in their result.
        _ => return send_back(shared, tid, n),
    };
    match (decision.action, decision.after) {
        (Action::Pass, None | Some(AfterExit::Record)) => CONTINUE,
        (Action::Pass, Some(AfterExit::Chdir(Some(logical)))) => {
            // Entered by a name no mapping covers: that name is the directory's from now on
            // (what the exit stop would note), whatever name it had before.
            if let Ok(physical) = std::fs::canonicalize(OsStr::from_bytes(&logical)) {
                ns.entered(physical.as_os_str().as_bytes(), &logical);
            }
            CONTINUE
        }
        (Action::Fail(libc::ENOSYS), _) => {
            handlers::report_untranslatable(name, decision.logical.as_deref());
            Reply::errno(libc::ENOSYS)
        }
        (Action::Fail(e), _) => Reply::errno(e),
        (Action::Emulate { ret, writes }, None | Some(AfterExit::Record)) => {
            if n.ensure_waiting().is_err() {
                return Reply::Answered;
            }
            for (addr, bytes) in writes {
                if memory::write(tid, addr, &bytes).is_err() {
                    return Reply::errno(libc::EFAULT);
                }
            }
            Reply::value(ret)
        }
        _ => send_back(shared, tid, n),
    }
}
