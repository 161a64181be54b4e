//! The feature rules the notification router asks in turn before a call's paths are
//! resolved. Each looks at one concern — another ABI, a local copy's identity, a call aimed
//! at roost, a direct-mode descriptor, a credential change, a virtual id, an exec, a changed
//! root, a call that needs a ptrace stop, a socket's name — and either answers the call or
//! lets the next rule look. A new concern is one more function in [`BY_NUMBER`] or
//! [`BY_CALL`], not an arm inside the router.

use super::{direct, emulated, exec, ptrace_only, sockname, Reply, Trap, Trapped, CONTINUE};
use crate::decision::Action;
use crate::handlers;
use crate::syscalls::{Kind, Performed, Unless};
use std::sync::atomic::Ordering;

/// A rule asked with the call's number only (it may not be in the syscall table).
pub(crate) type ByNumber = fn(&Trap<'_>) -> Option<Reply>;

/// A rule asked with a call of the table, decoded.
pub(crate) type ByCall = fn(&Trapped<'_>) -> Option<Reply>;

/// In order: the first that answers wins.
pub(crate) const BY_NUMBER: &[ByNumber] = &[copy_identity, aimed, direct_descriptor];

/// In order, after [`BY_NUMBER`]; a call none answers takes the main path.
pub(crate) const BY_CALL: &[ByCall] = &[
    credentials,
    virtual_ids,
    exec,
    rerooted,
    by_ptrace,
    socket_name,
    direct_descriptor_itself,
];

/// Another ABI's call (i386 `int 0x80`, x32): its numbers are not the table's, so it
/// fails with ENOSYS (said once).
pub(crate) fn foreign_abi(req: &libc::seccomp_notif) -> Option<Reply> {
    let abi = if req.data.arch != crate::arch::AUDIT_ARCH {
        "i386"
    } else if req.data.nr as u32 & crate::arch::FOREIGN_SYSCALL_BIT != 0 {
        "x32"
    } else {
        return None;
    };
    let nr = req.data.nr as u32 & !crate::arch::FOREIGN_SYSCALL_BIT;
    handlers::report_untranslatable(&format!("{abi} syscall {nr}"), None);
    Some(Reply::errno(libc::ENOSYS))
}

/// A call the table does not hold: let through, unless it is newer than roost knows (it
/// might take a path).
pub(crate) fn untrapped(t: &Trap<'_>) -> Reply {
    let nr = t.n.nr;
    if nr > i64::from(crate::arch::REVIEWED_MAX) {
        handlers::report_untranslatable(&format!("syscall {nr}"), None);
        return Reply::errno(libc::ENOSYS);
    }
    CONTINUE
}

/// fstat, getdents, fchmod and fchown of a remote object's local copy answer with the
/// remote object's identity (`crate::copies`).
fn copy_identity(t: &Trap<'_>) -> Option<Reply> {
    let sys = crate::copies::call_of(t.n.nr)?;
    Some(match crate::copies::on_descriptor(t.tid, sys, &t.regs)? {
        Ok((ret, writes)) => emulated(t.tid, Some(t.n), ret, writes),
        Err(e) => Reply::errno(e),
    })
}

/// A call aimed at roost's processes is refused (fcntl may also be a direct-mode
/// descriptor's call: it goes on to that rule).
fn aimed(t: &Trap<'_>) -> Option<Reply> {
    let Some((sys, Kind::Aimed(aimed))) = t.table.get(t.n.nr) else {
        return None;
    };
    if let Err(e) = crate::guard::check(t.tid, sys, &t.regs, aimed) {
        return Some(Reply::errno(e));
    }
    t.table.on_descriptor(t.n.nr).is_none().then_some(CONTINUE)
}

/// A call on descriptors served by a direct-mode driver (a virtual descriptor), or a dup
/// of a local copy into the copies' range.
fn direct_descriptor(t: &Trap<'_>) -> Option<Reply> {
    let (vfds, call) = (t.shared.vfds.as_ref()?, t.table.on_descriptor(t.n.nr)?);
    if let Some(slots) = &t.shared.copies {
        if let Some(reply) = direct::dup_copy(slots, t.tid, call.0, &t.regs, t.n) {
            return Some(reply);
        }
    }
    Some(direct::answer(
        vfds,
        call,
        (t.tid, &t.regs),
        t.n,
        &t.shared.stops,
    ))
}

/// A credential change passes; unless it keeps roost's identity, roost acts from now on
/// with each caller's own (see `crate::caller`).
fn credentials(c: &Trapped<'_>) -> Option<Reply> {
    let Kind::Credentials = c.entry.kind else {
        return None;
    };
    let t = c.trap;
    if !crate::caller::leaves_own_identity(c.entry.sys, &t.req.data.args, t.tid) {
        t.shared.credentials_changed.store(true, Ordering::Relaxed);
    }
    Some(CONTINUE)
}

/// An id query or uname, answered with the virtual identity.
fn virtual_ids(c: &Trapped<'_>) -> Option<Reply> {
    let Kind::Identity = c.entry.kind else {
        return None;
    };
    let t = c.trap;
    let decision = handlers::virtual_ids::answer(c.entry.sys, &t.regs, &t.shared.ids);
    Some(match decision.action {
        Action::Emulate { ret, writes } => emulated(t.tid, None, ret, writes),
        Action::Fail(e) => Reply::errno(e),
        _ => CONTINUE,
    })
}

/// An exec: let through when nothing in it is mapped, else sent back to a ptrace stop.
fn exec(c: &Trapped<'_>) -> Option<Reply> {
    let notified = c.entry.notified?;
    (notified.performed == Performed::Exec).then(|| {
        let t = c.trap;
        exec::answer(t.shared, (c.entry.sys, c.entry.kind), t.tid, &t.regs, t.n)
    })
}

/// A thread whose root is no longer roost's: the kernel resolves its names; only hidden
/// ones stay refused.
fn rerooted(c: &Trapped<'_>) -> Option<Reply> {
    let t = c.trap;
    if !t.shared.rerooted.contains(t.tid) {
        return None;
    }
    let table = t.shared.ns.table();
    let refusal = handlers::chrooted::refusal(table, t.tid, (&t.regs, &c.call), &c.entry.kind);
    Some(refusal.map_or(CONTINUE, Reply::errno))
}

/// A call that takes a ptrace stop (always, or with these arguments): notified only in a
/// process roost does not trace, and answered as well as a notification can.
fn by_ptrace(c: &Trapped<'_>) -> Option<Reply> {
    let t = c.trap;
    let by_ptrace = match c.entry.notified.map(|d| d.unless) {
        None => true,
        Some(Some(Unless::AnyBit { arg, bits })) => t.regs.arg(arg) as u32 & bits != 0,
        Some(_) => false,
    };
    by_ptrace.then(|| {
        let at = (c.entry.sys, c.entry.kind);
        ptrace_only::answer(t.shared, at, t.tid, &t.regs, t.n)
    })
}

/// getsockname/getpeername: an AF_UNIX name on a mapped path is answered logically.
fn socket_name(c: &Trapped<'_>) -> Option<Reply> {
    let Kind::SockName { addr, len, peer } = c.entry.kind else {
        return None;
    };
    let t = c.trap;
    Some(sockname::answer(
        &t.shared.ns,
        t.tid,
        &t.regs,
        (addr, len, peer),
        t.n,
    ))
}

/// newfstatat, statx and utimensat naming a virtual descriptor itself.
fn direct_descriptor_itself(c: &Trapped<'_>) -> Option<Reply> {
    let t = c.trap;
    let vfds = t.shared.vfds.as_ref()?;
    direct::on_descriptor_itself(vfds, (c.entry.sys, &c.call), (t.tid, &t.regs), t.n)
}
