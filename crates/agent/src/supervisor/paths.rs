//! The main path of a notified call on paths: trap (the router) → decode ([`Call`]) →
//! decide (`handlers::decide`, with the caller's cwd when a relative path needs it) →
//! perform: on a driver (`crate::remote`, or a direct-mode open), or here on the physical
//! path by the executor of the call's family ([`super::open`], [`super::lookup`],
//! [`super::attrs`], [`super::change`]), or let through (`CONTINUE`).

use super::{attrs, change, direct, emulated, failed, lookup, open, Reply, Trapped, CONTINUE};
use crate::arch::Regs;
use crate::call::Call;
use crate::decision::{Action, Decision};
use crate::handlers::{self, Ctx};
use crate::memory;
use crate::syscalls::{Kind, PathArg, Performed};
use crate::task::CallerFs;
use std::sync::atomic::Ordering;

/// The main path of a call on paths: its paths read and resolved, the handler's decision,
/// and the call performed — on a driver, or here on the physical path — or let through.
pub(super) fn perform(c: &Trapped<'_>) -> Reply {
    let t = c.trap;
    let (shared, tid, n) = (t.shared, t.tid, t.n);
    let (sys, kind) = (c.entry.sys, c.entry.kind);
    let performed = c.entry.notified.map(|n| n.performed);
    let paths = read_paths(tid, &t.regs, &kind);
    let mut decision = decide(c, &paths);
    let copy = matches!(decision.action, Action::Remote(_));
    if let Action::Remote(remote) = take_remote(&mut decision) {
        if n.ensure_waiting().is_err() {
            return Reply::Answered;
        }
        if let (Some(vfds), Some(Performed::Open)) = (&shared.vfds, performed) {
            let logical = decision.logical.as_deref().unwrap_or_default();
            if let Some(r) = direct::open(vfds, &remote, tid, logical, n) {
                return r;
            }
        }
        crate::remote::make_decided(&mut decision, &remote, tid, &shared.ns);
    }
    let other_identity = shared.credentials_changed.load(Ordering::Relaxed);
    // A change on a mapped path is made here, and so is one that may relink names even
    // when it passes (the cache is cleared after it, never between verdict and change).
    let made_here = match decision.action {
        Action::Pass => matches!(kind, Kind::Path { mutates: true, .. }),
        Action::Local(_) => performed == Some(Performed::Change),
        _ => false,
    };
    if made_here {
        return make_change(c, &paths, decision, other_identity);
    }
    match decision.action {
        Action::Pass => CONTINUE,
        Action::Remote(_) => unreachable!("remote calls are made above"),
        // Only a ptrace stop rewrites a call's memory (an exec's argv, a socket address).
        Action::Rewrite { .. } => Reply::errno(libc::ENOSYS),
        Action::Fail(e) => failed(sys, decision.logical.as_deref(), e),
        Action::Emulate { ret, writes } => emulated(tid, Some(n), ret, writes),
        Action::Local(local) => match local.paths.first() {
            Some(first) => perform_locally(c, &first.physical, copy, other_identity),
            None => Reply::errno(libc::EFAULT),
        },
    }
}

/// The kernel-side executor: makes call `c` here on `physical`, as the caller, by the
/// executor of its family. `copy`: `physical` is a remote object's local copy.
fn perform_locally(c: &Trapped<'_>, physical: &[u8], copy: bool, other_identity: bool) -> Reply {
    let (shared, tid, n) = (c.trap.shared, c.trap.tid, c.trap.n);
    if let Call::Open(open) = c.call {
        // A remote object's local copy goes to the copies' range.
        let open = if copy { open.of_copy() } else { open };
        let at = (tid, shared.copies.as_ref().filter(|_| copy));
        let poll_after = !shared
            .fast
            .as_ref()
            .is_some_and(|f| f.is_loader_list(physical));
        let target = (physical, poll_after);
        return open::emulate(&open, at, target, other_identity, n, &shared.stops);
    }
    let who = match crate::caller::prepare(tid, false, other_identity) {
        Ok(who) => who,
        Err(e) => return Reply::errno(e),
    };
    let performed = c.entry.notified.map(|n| n.performed);
    if performed == Some(Performed::Attr) {
        return Reply::from(attrs::emulate(&c.call, tid, physical, who.as_ref(), n));
    }
    if n.ensure_waiting().is_err() {
        return Reply::Answered;
    }
    Reply::from(lookup::emulate(&c.call, tid, physical, who.as_ref()))
}

/// The remote call `decision` holds, taken out of it (`Pass` left in its place); any other
/// action stays.
fn take_remote(decision: &mut Decision) -> Action {
    match decision.action {
        Action::Remote(_) => std::mem::replace(&mut decision.action, Action::Pass),
        _ => Action::Pass,
    }
}

/// What the handler decides about call `c`, whose path arguments read are `paths`.
fn decide(c: &Trapped<'_>, paths: &[(u64, Vec<u8>)]) -> Decision {
    let (shared, tid, kind) = (c.trap.shared, c.trap.tid, c.entry.kind);
    if !matches!(kind, Kind::Path { .. } | Kind::Readlink { .. }) {
        return Decision::pass();
    }
    let names_proc = paths.is_empty() || paths.iter().any(|(_, p)| p.starts_with(b"/proc"));
    let regs = &c.trap.regs;
    let fs = CallerFs::of(&shared.ns, tid);
    // Only `/proc/.../exe` needs the logical executable (a /proc read to find it).
    let exe = match kind {
        Kind::Readlink { .. } if names_proc => {
            crate::procinfo::tgid(tid).and_then(|g| shared.execs.exe(g, tid))
        }
        _ => None,
    };
    let at = (c.entry.sys, c.call, regs);
    let mut ctx = Ctx::new(tid, at, &shared.ns, &fs, exe.as_deref());
    ctx.known_paths = paths;
    ctx.names_recorded = false;
    ctx.fast = shared.fast.as_deref();
    handlers::decide(&mut ctx, kind)
}

/// Reads the path arguments of a call: (address, bytes) of each one that could be read.
fn read_paths(tid: i32, regs: &Regs, kind: &Kind) -> Vec<(u64, Vec<u8>)> {
    let indices: Vec<usize> = match kind {
        Kind::Path { args, .. } => args.iter().map(|a| a.path).collect(),
        Kind::Readlink { path, .. } => vec![*path],
        _ => Vec::new(),
    };
    indices
        .into_iter()
        .filter_map(|i| {
            let at = regs.arg(i);
            let path = memory::read_cstr(tid, at, memory::PATH_MAX).ok()?;
            Some((at, path))
        })
        .collect()
}

/// Makes a change here (see [`change`]) and clears the names it touched from the cache.
fn make_change(
    c: &Trapped<'_>,
    read: &[(u64, Vec<u8>)],
    decision: Decision,
    other_identity: bool,
) -> Reply {
    let Kind::Path { args, .. } = c.entry.kind else {
        unreachable!("changes are path calls")
    };
    let (shared, regs, tid, n, call) = (c.trap.shared, &c.trap.regs, c.trap.tid, c.trap.n, c.call);
    let local = match &decision.action {
        Action::Local(local) => Some(local),
        _ => None,
    };
    let given_of = |arg: &PathArg| {
        if let Some(p) = local.and_then(|l| l.physical_of(arg.path)) {
            return change::Given::Physical(p);
        }
        let at = regs.arg(arg.path);
        let logical = decision.logicals.iter().find(|(i, _)| *i == arg.path);
        match (read.iter().find(|(a, _)| *a == at), logical) {
            (Some((_, path)), Some((_, logical))) => change::Given::Caller { path, logical },
            (Some((_, path)), None) => change::Given::Caller {
                path,
                logical: path,
            },
            _ => change::Given::Null,
        }
    };
    let given: Vec<(PathArg, change::Given<'_>)> = args.iter().map(|a| (*a, given_of(a))).collect();
    // A symlink's target: text stored as given, not a path to resolve.
    let target = match call {
        Call::Symlink { target } => match memory::read_cstr(tid, target, memory::PATH_MAX) {
            Ok(text) => Some(text),
            Err(_) => return Reply::errno(libc::EFAULT),
        },
        _ => None,
    };
    let c = change::Change {
        call,
        regs,
        tid,
        paths: &given,
        target: target.as_deref(),
    };
    let invalidate = || {
        let ns = &shared.ns;
        for (_, logical) in &decision.logicals {
            ns.invalidate_under(logical);
        }
    };
    match change::perform(&c, n, other_identity) {
        change::Outcome::Made(result) => {
            invalidate();
            Reply::from(result)
        }
        change::Outcome::Continue => {
            invalidate();
            CONTINUE
        }
    }
}
