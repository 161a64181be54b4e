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
pub(crate) mod identity;
pub mod keep_awake;
mod locks;
mod lookup;
mod open;
mod pool;
mod ptrace_only;
pub mod send_back;
mod sockname;

use crate::arch::Regs;
use crate::handlers::{self, Action, Arg, Ctx, Decision};
use crate::memory;
use crate::syscalls::{Kind, PathArg, Performed, Table, Unless};
use crate::task::Fs;
pub use fifo::{GroupStops, ERESTARTSYS};
pub use identity::{as_caller, tgid, Identity};
use roost_vfs::Namespace;
use std::collections::HashSet;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Threads whose root directory is no longer roost's (they, or a thread they share their
/// file-system attributes with or descend from, called chroot): the mount list does not
/// apply inside their new root, so their calls are left to the kernel.
#[derive(Default)]
pub struct Rerooted {
    any: AtomicBool,
    tids: Mutex<HashSet<i32>>,
}

impl Rerooted {
    pub fn add(&self, tid: i32) {
        self.tids.lock().expect("rerooted lock").insert(tid);
        self.any.store(true, Ordering::Release);
    }
    pub fn remove(&self, tid: i32) {
        if self.any.load(Ordering::Acquire) {
            self.tids.lock().expect("rerooted lock").remove(&tid);
        }
    }
    pub fn contains(&self, tid: i32) -> bool {
        self.any.load(Ordering::Acquire) && self.tids.lock().expect("rerooted lock").contains(&tid)
    }
}

/// State the supervisor shares with the ptrace thread.
pub struct Shared {
    pub ns: Namespace,
    /// The open files of direct-mode mounts (None: no such mount, or no notifications).
    pub vfds: Option<Arc<crate::vfd::Vfds>>,
    /// Each process's program and exec count.
    pub execs: crate::execs::Execs,
    /// Calls the supervisor sends back to take a ptrace stop (None: no notifications).
    pub sent_back: Option<send_back::SentBack>,
    /// Set once any tracee changed its credentials: from then on, opens performed here
    /// take on the caller's file-system identity.
    pub credentials_changed: AtomicBool,
    /// The processes in a group stop (kept by the ptrace thread).
    pub stops: Arc<GroupStops>,
    /// The threads that changed their root (kept by the ptrace thread).
    pub rerooted: Rerooted,
    /// The identity id queries and uname report (`--uid`, ...).
    pub ids: crate::handlers::virtual_ids::VirtualIds,
    /// The descriptor numbers local copies of remote objects are installed at, where their
    /// fstat and getdents are notified (`crate::copies`; None: no notifications).
    pub copies: Option<crate::vfd::Slots>,
}

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

/// Whether the path argument at address `at` is relative to the cwd (not to a descriptor).
fn from_cwd(kind: &Kind, regs: &Regs, at: u64) -> bool {
    let Kind::Path { args, .. } = kind else {
        return true;
    };
    args.iter().filter(|a| regs.arg(a.path) == at).any(|a| {
        a.dirfd
            .map_or(true, |i| regs.arg(i) as i32 == libc::AT_FDCWD)
    })
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

pub(crate) const CONTINUE: Reply = Reply::Send(0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE);

/// Answers one notification.
fn answer(table: &Table, shared: &Shared, fd: i32, req: &libc::seccomp_notif) -> Reply {
    roost_vfs::call_starts();
    let tid = req.pid as i32;
    let nr = i64::from(req.data.nr);
    // Another ABI's call (i386 int 0x80, x32): its numbers are not this table's.
    let foreign_abi = if req.data.arch != crate::arch::AUDIT_ARCH {
        Some("i386")
    } else if req.data.nr as u32 & crate::arch::FOREIGN_SYSCALL_BIT != 0 {
        Some("x32")
    } else {
        None
    };
    if let Some(abi) = foreign_abi {
        let nr = req.data.nr as u32 & !crate::arch::FOREIGN_SYSCALL_BIT;
        handlers::report_untranslatable(&format!("{abi} syscall {nr}"), None);
        return Reply::errno(libc::ENOSYS);
    }
    let n = Notification {
        listener: fd,
        id: req.id,
        nr,
    };
    if let Some(name) = crate::copies::call_name(nr) {
        let regs = Regs::from_args(&req.data.args);
        match crate::copies::on_descriptor(tid, name, &regs) {
            Some(Ok((ret, writes))) => return emulated(tid, Some(n), ret, writes),
            Some(Err(e)) => return Reply::errno(e),
            None => {}
        }
    }
    // A call aimed at roost's processes is refused first (fcntl may be a direct-mode
    // descriptor's call too).
    if let Some((name, Kind::Aimed(aimed))) = table.get(nr) {
        let regs = Regs::from_args(&req.data.args);
        if let Err(e) = crate::guard::check(tid, name, &regs, aimed) {
            return Reply::errno(e);
        }
        if table.on_descriptor(nr).is_none() {
            return CONTINUE;
        }
    }
    if let (Some(vfds), Some(call)) = (&shared.vfds, table.on_descriptor(nr)) {
        let regs = Regs::from_args(&req.data.args);
        if let Some(slots) = &shared.copies {
            if let Some(reply) = direct::dup_copy(slots, tid, call.0, &regs, n) {
                return reply;
            }
        }
        return direct::answer(vfds, call, (tid, &regs), n, &shared.stops);
    }
    let Some(entry) = table.entry(nr) else {
        if nr > i64::from(crate::arch::REVIEWED_MAX) {
            // A syscall newer than roost knows: it might take a path.
            handlers::report_untranslatable(&format!("syscall {nr}"), None);
            return Reply::errno(libc::ENOSYS);
        }
        return CONTINUE;
    };
    let (name, kind) = (entry.name, entry.kind);
    let performed = entry.notified.map(|n| n.performed);
    if let Kind::Credentials = kind {
        // Unless the call keeps roost's identity, roost acts from now on with each
        // caller's own (see `identity`).
        if !identity::leaves_own_identity(name, &req.data.args, tid) {
            shared.credentials_changed.store(true, Ordering::Relaxed);
        }
        return CONTINUE;
    }
    if let Kind::Identity = kind {
        let regs = Regs::from_args(&req.data.args);
        let decision = handlers::virtual_ids::answer(name, &regs, &shared.ids);
        return match decision.action {
            Action::Emulate { ret, writes } => emulated(tid, None, ret, writes),
            Action::Fail(e) => Reply::errno(e),
            _ => CONTINUE,
        };
    }
    if performed == Some(Performed::Exec) {
        let regs = Regs::from_args(&req.data.args);
        return exec::answer(shared, (name, kind), tid, &regs, n);
    }
    if shared.rerooted.contains(tid) {
        let ns = &shared.ns;
        let regs = Regs::from_args(&req.data.args);
        return match handlers::chrooted::refusal(ns.table(), tid, &regs, &kind) {
            Some(e) => Reply::errno(e),
            None => CONTINUE,
        };
    }
    let regs = Regs::from_args(&req.data.args);
    let by_ptrace_before = match entry.notified.map(|d| d.unless) {
        None => true,
        Some(Some(Unless::AnyBit { arg, bits })) => regs.arg(arg) as u32 & bits != 0,
        Some(_) => false,
    };
    if by_ptrace_before {
        // Only in a process roost does not trace: elsewhere these take ptrace stops.
        return ptrace_only::answer(shared, (name, kind), tid, &regs, n);
    }
    if let Kind::SockName { addr, len, peer } = kind {
        return sockname::answer(&shared.ns, tid, &regs, (addr, len, peer), n);
    }
    if let Some(vfds) = &shared.vfds {
        if let Some(reply) = direct::on_descriptor_itself(vfds, name, (tid, &regs), n) {
            return reply;
        }
    }
    let paths = read_paths(tid, &regs, &kind);
    // The cwd costs a /proc lookup: only relative paths and /proc magic links need it (an
    // empty one, as `fstat` gives with AT_EMPTY_PATH, names its dirfd).
    let names_proc = paths.is_empty() || paths.iter().any(|(_, p)| p.starts_with(b"/proc"));
    let needs_cwd = names_proc
        || matches!(kind, Kind::Path { args, .. } if args.len() > paths.len())
        || paths.iter().any(|&(at, ref p)| {
            p.first().is_some_and(|&c| c != b'/') && from_cwd(&kind, &regs, at)
        });
    let fs = caller_fs(&shared.ns, tid, needs_cwd);
    let mut decision = {
        let ns = &shared.ns;
        // Only `/proc/.../exe` needs the logical executable (a /proc read to find it).
        let exe = match kind {
            Kind::Readlink { .. } if names_proc => {
                identity::tgid(tid).and_then(|g| shared.execs.exe(g, tid))
            }
            _ => None,
        };
        let mut ctx = Ctx::new(tid, (name, &regs), ns, &fs, exe.as_deref());
        ctx.known_paths = &paths;
        ctx.names_recorded = false;
        match kind {
            Kind::Path { .. } | Kind::Readlink { .. } => handlers::decide(&mut ctx, kind),
            _ => Decision::pass(),
        }
    };
    let copy = matches!(decision.action, Action::Remote(_));
    let (decision, regs) = match std::mem::replace(&mut decision.action, Action::Pass) {
        Action::Remote(call) => {
            if n.ensure_waiting().is_err() {
                return Reply::Answered;
            }
            if let (Some(vfds), Some(Performed::Open)) = (&shared.vfds, performed) {
                let logical = decision.logical.as_deref().unwrap_or_default();
                if let Some(r) = direct::open(vfds, &call, (tid, &regs), logical, n) {
                    return r;
                }
            }
            make_remote(shared, &call, tid, regs, decision)
        }
        action => {
            decision.action = action;
            (decision, regs)
        }
    };
    let other_identity = shared.credentials_changed.load(Ordering::Relaxed);
    let physical = match (&decision.action, &decision.physical) {
        (Action::Rewrite { .. }, Some(p)) => Some(p.clone()),
        _ => None,
    };
    // A change on a mapped path is made here, and so is one that may relink names even
    // when it passes (the cache is cleared after it, never between verdict and change).
    let made_here = match decision.action {
        Action::Pass => matches!(kind, Kind::Path { mutates: true, .. }),
        Action::Rewrite { .. } => performed == Some(Performed::Change),
        _ => false,
    };
    if made_here {
        return make_change(
            shared,
            (name, &kind),
            (&regs, tid),
            &paths,
            decision,
            n,
            other_identity,
        );
    }
    match decision.action {
        Action::Pass => CONTINUE,
        Action::Remote(_) => unreachable!("remote calls are made above"),
        Action::Fail(e) => failed(name, decision.logical.as_deref(), e),
        Action::Emulate { ret, writes } => emulated(tid, Some(n), ret, writes),
        Action::Rewrite { .. } => {
            let Some(p) = physical else {
                return Reply::errno(libc::EFAULT);
            };
            if performed == Some(Performed::Open) {
                let into = shared.copies.as_ref().filter(|_| copy);
                let at = (&regs, tid, into);
                return open::emulate(name, at, &p, other_identity, n, &shared.stops);
            }
            let who = match identity::prepare(tid, false, other_identity) {
                Ok(who) => who,
                Err(e) => return Reply::errno(e),
            };
            if performed == Some(Performed::Attr) {
                return Reply::from(attrs::emulate(name, &regs, tid, &p, who.as_ref(), n));
            }
            if n.ensure_waiting().is_err() {
                return Reply::Answered;
            }
            Reply::from(lookup::emulate(name, &regs, tid, &p, who.as_ref()))
        }
    }
}

/// The answer to a call that fails with `errno`; ENOSYS (a call roost cannot translate) is
/// said once.
fn failed(name: &str, logical: Option<&[u8]>, errno: i32) -> Reply {
    if errno == libc::ENOSYS {
        handlers::report_untranslatable(name, logical);
    }
    Reply::errno(errno)
}

/// The answer to an emulated call: `writes` into the caller's memory, then `ret`. With `n`,
/// nothing is written unless the caller still waits for it.
fn emulated(tid: i32, n: Option<Notification>, ret: i64, writes: Vec<(u64, Vec<u8>)>) -> Reply {
    if n.is_some_and(|n| n.ensure_waiting().is_err()) {
        return Reply::Answered;
    }
    for (addr, bytes) in writes {
        if memory::write(tid, addr, &bytes).is_err() {
            return Reply::errno(libc::EFAULT);
        }
    }
    Reply::value(ret)
}

/// The caller's working directory, physical (what the kernel holds) and logical, when
/// `needed` (a /proc read); empty otherwise.
fn caller_fs(ns: &Namespace, tid: i32, needed: bool) -> Fs {
    if !needed {
        return Fs {
            logical: Vec::new(),
            physical: Vec::new(),
        };
    }
    let physical = std::fs::read_link(format!("/proc/{tid}/cwd"))
        .map(|p| p.into_os_string().into_encoded_bytes())
        .unwrap_or_else(|_| b"/".to_vec());
    Fs {
        logical: ns.logical_cwd(&physical),
        physical,
    }
}

/// Makes a call on remote objects (no lock held) and says what is left to do: answer, or
/// open the local copy with the registers the rewrite gave (an exclusive create was made
/// by the driver, so the copy is opened without `O_EXCL`).
fn make_remote(
    shared: &Shared,
    call: &crate::remote::RemoteCall,
    tid: i32,
    mut regs: Regs,
    mut decision: Decision,
) -> (Decision, Regs) {
    let made = crate::remote::make(call, tid, &regs);
    if let Some(crate::task::AfterExit::Invalidate(names)) = &decision.after {
        let ns = &shared.ns;
        for name in names {
            ns.invalidate_under(name);
        }
    }
    if let Action::Rewrite { args, .. } = &made.action {
        for (i, a) in args {
            if let Arg::Value(v) = a {
                regs.set_arg(*i, *v);
            }
        }
    }
    decision.action = made.action;
    if made.physical.is_some() {
        decision.physical = made.physical;
    }
    (decision, regs)
}

/// Makes a change here (see [`change`]) and clears the names it touched from the cache.
fn make_change(
    shared: &Shared,
    (name, kind): (&str, &Kind),
    (regs, tid): (&Regs, i32),
    read: &[(u64, Vec<u8>)],
    decision: Decision,
    n: Notification,
    other_identity: bool,
) -> Reply {
    let Kind::Path { args, .. } = kind else {
        unreachable!("changes are path calls")
    };
    let rewritten: Vec<(usize, &[u8])> = match &decision.action {
        Action::Rewrite { scratch, args } => args
            .iter()
            .filter_map(|(i, a)| match a {
                Arg::Scratch(off) => {
                    let s = &scratch.bytes[*off..];
                    Some((*i, &s[..s.iter().position(|&b| b == 0)?]))
                }
                Arg::Value(_) => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let given_of = |arg: &PathArg| {
        if let Some((_, p)) = rewritten.iter().find(|(i, _)| *i == arg.path) {
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
    let target = change::target_arg(name)
        .and_then(|i| memory::read_cstr(tid, regs.arg(i), memory::PATH_MAX).ok());
    if change::target_arg(name).is_some() && target.is_none() {
        return Reply::errno(libc::EFAULT);
    }
    let c = change::Change {
        name,
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
