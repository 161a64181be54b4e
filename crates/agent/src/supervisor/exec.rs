//! execve / execveat delivered as notifications. Most execs name nothing mapped (`/bin/sh`,
//! `/usr/bin/cc`, a failed try along `PATH`): roost lets them through (`CONTINUE`) and
//! records the program in [`crate::programs`], so a fork + exec costs the tracer no stop but
//! the fork's own two. An exec roost must rewrite (a mapped program, interpreter or loader)
//! is *sent back*: the tracer interrupts the caller (`PTRACE_INTERRUPT`) and answers the
//! notification with `ERESTARTNOINTR`; at the interrupt's stop it marks the call
//! ([`crate::syscalls::BY_PTRACE`], `supervisor::send_back`) and the kernel
//! restarts it, now taking a ptrace stop where the usual exec handler rewrites it.
//! A thread that is not its process's leader is always sent back: its exec changes its id,
//! which only the exec event tells.

use super::send_back::send_back;
use super::{Notification, Reply, Shared, CONTINUE};
use crate::arch::Regs;
use crate::arch::Sys;
use crate::handlers::{exec, Action, Ctx};
use crate::memory;
use crate::task::CallerFs;

/// Whether `tid` leads its thread group (a signal-0 check, no /proc read).
fn is_leader(tid: i32) -> bool {
    // SAFETY: signal 0 only checks that thread `tid` is in thread group `tid`.
    unsafe { libc::syscall(libc::SYS_tgkill, tid, tid, 0) == 0 }
}

/// Answers an exec notification (`kind` is `Kind::Exec`).
pub fn answer(
    shared: &Shared,
    (sys, kind): (Sys, crate::syscalls::Kind),
    tid: i32,
    regs: &Regs,
    n: Notification,
) -> Reply {
    let crate::syscalls::Kind::Exec {
        dirfd,
        path,
        argv,
        flags,
    } = kind
    else {
        unreachable!("an exec")
    };
    let back = || send_back(shared, tid, n);
    // After chroot the kernel resolves on its own; only the exec event tells what ran.
    if !is_leader(tid) || shared.rerooted.contains(tid) {
        return back();
    }
    let given = match memory::read_cstr(tid, regs.arg(path), memory::PATH_MAX) {
        Ok(p) => p,
        Err(e) => return Reply::errno(memory::errno(e)),
    };
    // The executable, for a name through `/proc/self/exe`, costs three /proc reads.
    let may_name_exe =
        given.first() != Some(&b'/') || given.starts_with(b"/proc") || given.starts_with(b"/dev");
    let ns = &shared.ns;
    let fs = CallerFs::of(ns, tid);
    let exe = may_name_exe.then(|| shared.execs.exe(tid, tid)).flatten();
    let known = [(regs.arg(path), given)];
    let mut ctx = Ctx::decoding(tid, (sys, regs), ns, &fs, exe.as_deref());
    ctx.known_paths = &known;
    ctx.fast = shared.fast.as_deref();
    let d = exec::handle(&mut ctx, dirfd, path, argv, flags);
    match d.action {
        Action::Pass => {
            let (Some(exe), Some(physical)) = (d.exe, d.physical) else {
                // No name to know the program by (a memfd, a deleted file): the exec event
                // will tell.
                return back();
            };
            shared.execs.expect(tid, exe, &physical);
            if n.ensure_waiting().is_err() {
                return Reply::Answered;
            }
            CONTINUE
        }
        Action::Fail(e) => super::failed(sys, d.logical.as_deref(), e),
        Action::Local(_) | Action::Rewrite { .. } | Action::Emulate { .. } | Action::Remote(_) => {
            back()
        }
    }
}
