//! Keeping the program off roost's own processes (docs/security.md, "roost run's
//! supervisor"). The agent holds the seccomp listener, traces the program and answers for
//! the namespace; a program that reached it could take the listener and answer its own
//! calls, or stop or kill its supervisor. Three layers keep it out:
//!
//! - **Not dumpable** ([`undumpable`]): every supervising process of roost clears its
//!   dumpable flag before the program exists. The kernel then refuses every
//!   ptrace-access-checked call aimed at it (ptrace, pidfd_getfd, process_vm_readv/writev,
//!   kcmp, `/proc/PID/{mem,fd,environ,...}`) to a caller without `CAP_SYS_PTRACE` over it,
//!   whatever its uid.
//! - **The filter** ([`rules`], from the table's [`Kind::Aimed`] entries): a call naming
//!   one of roost's processes by id (kill, tgkill, pidfd_open, ptrace's attach, kcmp, ...) is
//!   refused with EPERM by comparisons placed after the syscall number's own, so other
//!   calls pay nothing. The ids of roost's threads come after the filter is installed, so
//!   a call that may name a thread by its id, or names a process by a pidfd or through
//!   memory, is trapped and decided by [`check`] — tkill, prlimit64, pidfd_send_signal and
//!   the file-owner calls always (the same user may make them), ptrace-checked calls only
//!   when the program may hold `CAP_SYS_PTRACE` — but kill and rt_sigqueueinfo, too common
//!   to trap, are compared only. `SO_PEERPIDFD` (a socket's peer as a pidfd; roost is the
//!   peer of a direct-mode file's placeholder socket) is refused outright.
//! - **Paths** ([`names_own_process`]): a path call that resolves into `/proc/PID` (or
//!   `/proc/PID/task/TID`) of roost's, by any spelling the namespace resolves, fails with
//!   EACCES; the `/proc` magic links of roost's processes are neither followed nor read for
//!   the program (`handlers::procfs`), nor opened by file handle (`handlers::handle`).
//!
//! Ids are compared as roost's pid namespace numbers them: a program in a pid namespace of
//! its own cannot name roost at all (roost lies outside it), so a call from there is let
//! through even when its number equals one of roost's.

use crate::arch::Regs;
use crate::arch::Sys;
use crate::filter::{Others, Trap, Verdict};
use crate::memory;
use crate::sys;
use crate::syscalls::{Aim, Aimed, Kind, Table, TrapWhen, FCNTL_OWNERS};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

/// `CAP_SYS_PTRACE`'s bit.
const CAP_SYS_PTRACE: u32 = 19;
/// `F_OWNER_PGRP` of `struct f_owner_ex`: a process group, never roost alone.
const F_OWNER_PGRP: i32 = 2;

/// Makes this process not dumpable (`PR_SET_DUMPABLE` 0): its `/proc/PID` files belong to
/// root and the kernel's ptrace access check refuses it to callers without
/// `CAP_SYS_PTRACE`. Inherited across fork; a child that must be traced (the program,
/// before its exec resets the flag) sets it back ([`dumpable`]). A change of the process's
/// effective or file-system ids sets it to `fs.suid_dumpable` (0 by default), never to
/// dumpable unless that sysctl is 1.
pub fn undumpable() -> io::Result<()> {
    set_dumpable(0)
}

/// Makes this process dumpable again (the forked program, before roost seizes it).
/// Async-signal-safe.
pub fn dumpable() -> io::Result<()> {
    set_dumpable(1)
}

fn set_dumpable(value: libc::c_ulong) -> io::Result<()> {
    // SAFETY: a plain prctl on this process.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, value, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// roost's supervising processes, as this run knows them.
struct Own {
    /// The agent (this process) first, then the others (the front of `roost run`).
    tgids: Vec<i32>,
    /// Where procfs is mounted (`/proc`, and any other mount of it).
    proc_mounts: Vec<Vec<u8>>,
    /// This process's pid namespace (`/proc/self/ns/pid`).
    pid_ns: Option<Vec<u8>>,
    /// Whether the program may hold `CAP_SYS_PTRACE` over roost.
    privileged: bool,
}

static OWN: OnceLock<Own> = OnceLock::new();

/// Guards this process and `others` (roost's other processes) for the rest of the run:
/// from now on [`check`], [`names_own_process`] and [`is_own`] know them.
pub fn protect(others: &[i32]) {
    OWN.get_or_init(|| {
        // SAFETY: a plain id query.
        let mut tgids = vec![unsafe { libc::getpid() }];
        tgids.extend(others.iter().copied().filter(|&p| p > 0));
        Own {
            tgids,
            proc_mounts: proc_mounts(),
            pid_ns: link("/proc/self/ns/pid"),
            privileged: may_hold_ptrace_capability(),
        }
    });
}

/// The ids of roost's processes, for the filter's comparisons.
pub fn own_ids() -> Vec<u32> {
    OWN.get()
        .map(|o| o.tgids.iter().map(|&p| p as u32).collect())
        .unwrap_or_default()
}

/// Whether the program roost starts may hold `CAP_SYS_PTRACE` over roost: whether roost's
/// own permitted set has it (the program inherits roost's credentials, and with
/// `PR_SET_NO_NEW_PRIVS` no exec gives it more; a user namespace it makes gives it
/// capabilities only inside). Found once: roost never changes its permitted set.
pub fn may_hold_ptrace_capability() -> bool {
    static HOLDS: OnceLock<bool> = OnceLock::new();
    *HOLDS.get_or_init(|| {
        // SAFETY: a plain id query.
        crate::procinfo::Status::read(unsafe { libc::getpid() })
            .and_then(|status| status.hex("CapPrm:"))
            // Unreadable: assume the stronger program.
            .map_or(true, |caps| caps & (1 << CAP_SYS_PTRACE) != 0)
    })
}

/// The filter's rules for the table's calls aimed at processes and its conditional
/// refusals; `trap` says how a call the agent must decide reaches it. A ptrace-checked
/// call is left to the kernel (no rule beyond the comparisons of ids) unless the program
/// may hold `CAP_SYS_PTRACE` ([`protect`] found out; false before it).
pub fn rules(table: &Table, trap: Trap) -> Vec<(u32, Verdict)> {
    let privileged = privileged();
    table
        .entries()
        .filter_map(|(nr, entry)| match entry.kind {
            Kind::RefuseIf { args, errno } => Some((nr, Verdict::ErrnoIf { args, errno })),
            Kind::Aimed(aimed) => verdict(aimed, trap, privileged).map(|v| (nr, v)),
            _ => None,
        })
        .collect()
}

/// The rule for one call aimed at processes (`None`: no rule, allowed).
fn verdict(aimed: Aimed, trap: Trap, privileged: bool) -> Option<Verdict> {
    let trapped = match aimed.trapped {
        TrapWhen::Never => false,
        TrapWhen::WithPtraceCapability => privileged,
        TrapWhen::Always | TrapWhen::IfBits(..) => true,
    };
    let (ids, others) = match aimed.aim {
        Aim::Ids(ids) => {
            let others = match aimed.trapped {
                TrapWhen::IfBits(arg, bits) => Others::TrapIfBits { arg, bits, trap },
                _ if trapped => Others::TrapIds(trap),
                _ => Others::Allow,
            };
            (ids, others)
        }
        Aim::Pidfd(_) | Aim::Owner if trapped => (&[][..], Others::Trap(trap)),
        Aim::Pidfd(_) | Aim::Owner => return None,
    };
    Some(Verdict::Aimed {
        ids,
        only: aimed.only,
        others,
    })
}

/// Whether [`protect`] was called: roost's processes are to be kept out of reach.
pub fn protecting() -> bool {
    OWN.get().is_some()
}

/// Whether the program may hold `CAP_SYS_PTRACE` over roost (as [`protect`] found), so
/// that the kernel's own checks do not keep it off roost's processes.
pub fn privileged() -> bool {
    OWN.get().is_some_and(|o| o.privileged)
}

/// Whether process or thread `id` (as roost's pid namespace numbers it) is one of roost's
/// supervising processes or one of their threads.
pub fn is_own(id: i32) -> bool {
    let Some(own) = OWN.get() else {
        return false;
    };
    if id <= 0 {
        return false;
    }
    own.tgids.contains(&id)
        || own.tgids.iter().enumerate().any(|(i, tgid)| {
            // The agent's threads by its own /proc/self, which names them whatever pid
            // namespace /proc was mounted for.
            let task = match i {
                0 => format!("/proc/self/task/{id}"),
                _ => format!("/proc/{tgid}/task/{id}"),
            };
            std::fs::symlink_metadata(task).is_ok()
        })
}

/// The EPERM a trapped call of `name` aimed at processes (`aimed`, registers `regs`) of
/// thread `tid` gets when it is aimed at one of roost's; `Ok` to let the kernel make it.
/// (A descriptor or memory the call names may change between this check and the kernel's
/// use: docs/security.md says so.)
pub fn check(tid: i32, sys: Sys, regs: &Regs, aimed: Aimed) -> Result<(), i32> {
    if let Some((arg, values)) = aimed.only {
        if !values.contains(&(regs.arg(arg) as u32)) {
            return Ok(());
        }
    }
    let aims_at_own = match aimed.aim {
        Aim::Ids(args) => args.iter().any(|&a| is_own(regs.arg(a) as i32)),
        Aim::Pidfd(arg) => pidfd_target(tid, regs.arg(arg) as i32).is_some_and(is_own),
        Aim::Owner => owner(tid, sys, regs).is_some_and(is_own),
    };
    if aims_at_own && in_own_pid_namespace(tid) {
        return Err(libc::EPERM);
    }
    Ok(())
}

/// The process the caller's descriptor `fd` stands for: a pidfd's (its fdinfo's `Pid:`)
/// or a `/proc/PID` directory's.
fn pidfd_target(tid: i32, fd: i32) -> Option<i32> {
    if fd < 0 {
        return None;
    }
    let copy = sys::take_thread_fd(tid, fd).ok()?;
    process_of(&copy)
}

/// The process a descriptor of roost's stands for: a pidfd's, or a `/proc/PID`
/// directory's (pidfd_send_signal takes both).
pub fn process_of(fd: &OwnedFd) -> Option<i32> {
    let info = crate::procinfo::read_file(&format!("/proc/self/fdinfo/{}", fd.as_raw_fd()));
    if let Some(pid) = info.and_then(|i| {
        i.lines()
            .find_map(|l| l.strip_prefix("Pid:"))?
            .trim()
            .parse()
            .ok()
    }) {
        return Some(pid);
    }
    proc_id(&sys::path_of(fd).ok()?)
}

/// The process a file's signals are to go to, as fcntl's `F_SETOWN`/`F_SETOWN_EX` or
/// ioctl's `FIOSETOWN`/`SIOCSPGRP` names it (`None`: a group, or unreadable).
fn owner(tid: i32, sys: Sys, regs: &Regs) -> Option<i32> {
    let read_i32s = |n: usize| -> Option<Vec<i32>> {
        let bytes = memory::read(tid, regs.arg(2), 4 * n).ok()?;
        (bytes.len() == 4 * n).then(|| {
            bytes
                .chunks(4)
                .map(|c| i32::from_ne_bytes(c.try_into().expect("4 bytes")))
                .collect()
        })
    };
    match (sys, regs.arg(1) as u32) {
        (Sys::Fcntl, cmd) if cmd == FCNTL_OWNERS[0] => Some(regs.arg(2) as i32),
        (Sys::Fcntl, _) => match read_i32s(2)?.as_slice() {
            &[kind, pid] if kind != F_OWNER_PGRP => Some(pid),
            _ => None,
        },
        _ => read_i32s(1)?.first().copied(),
    }
}

/// Whether thread `tid` numbers processes as roost does (a program in a pid namespace of
/// its own cannot name roost's processes at all).
fn in_own_pid_namespace(tid: i32) -> bool {
    let own = OWN.get().and_then(|o| o.pid_ns.as_ref());
    match (own, link(&format!("/proc/{tid}/ns/pid"))) {
        (Some(own), Some(its)) => *own == its,
        _ => true,
    }
}

/// Whether `path` (absolute, normalised, as the kernel will resolve it) lies in the
/// `/proc` directory of one of roost's processes or threads: `/proc/PID`, below it, or
/// `/proc/PID/task/TID...`.
pub fn names_own_process(path: &[u8]) -> bool {
    OWN.get().is_some() && proc_id(path).is_some_and(is_own)
}

/// The process or thread whose `/proc` directory `path` is in.
fn proc_id(path: &[u8]) -> Option<i32> {
    let rest = match OWN.get() {
        Some(own) => own
            .proc_mounts
            .iter()
            .find_map(|m| roost_vfs::path::strip_prefix(path, m))?,
        None => roost_vfs::path::strip_prefix(path, b"/proc")?,
    };
    let first = roost_vfs::path::components(rest).next()?;
    std::str::from_utf8(first).ok()?.parse().ok()
}

/// Every mount point of procfs in this mount namespace, `/proc` always among them.
pub(crate) fn proc_mounts() -> Vec<Vec<u8>> {
    let mut mounts = vec![b"/proc".to_vec()];
    let table = std::fs::read("/proc/self/mountinfo").unwrap_or_default();
    for line in table.split(|&b| b == b'\n') {
        let text = String::from_utf8_lossy(line);
        let Some((before, after)) = text.split_once(" - ") else {
            continue;
        };
        if after.split(' ').next() != Some("proc") {
            continue;
        }
        if let Some(point) = before.split(' ').nth(4) {
            let point = unescape(point);
            if !mounts.contains(&point) {
                mounts.push(point);
            }
        }
    }
    mounts
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).and_then(|d| {
            let s = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(s, 8).ok()
        });
        match (b[i], octal) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The target of a symlink, as bytes.
fn link(path: &str) -> Option<Vec<u8>> {
    std::fs::read_link(path)
        .ok()
        .map(|p| p.into_os_string().into_encoded_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/a\040b"), b"/a b");
        assert_eq!(unescape(r"/plain"), b"/plain");
        assert_eq!(unescape(r"/end\"), b"/end\\");
    }

    #[test]
    fn procfs_is_found_mounted() {
        assert!(proc_mounts().contains(&b"/proc".to_vec()));
    }

    #[test]
    fn a_proc_path_names_its_process() {
        assert_eq!(proc_id(b"/proc/12/mem"), Some(12));
        assert_eq!(proc_id(b"/proc/12"), Some(12));
        assert_eq!(proc_id(b"/proc/12/task/13/mem"), Some(12));
        assert_eq!(proc_id(b"/proc/self/mem"), None);
        assert_eq!(proc_id(b"/proc"), None);
        assert_eq!(proc_id(b"/procfoo/12"), None);
        assert_eq!(proc_id(b"/tmp/12"), None);
    }

    #[test]
    fn a_pidfd_and_a_proc_directory_name_their_process() {
        // SAFETY: a plain pidfd_open of this process, owned at once.
        let me = std::process::id() as i32;
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, me, 0) };
        assert!(pidfd >= 0);
        // SAFETY: the descriptor was just returned and is owned by nobody else.
        let pidfd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pidfd as i32) };
        assert_eq!(process_of(&pidfd), Some(me));
        let dir = std::fs::File::open(format!("/proc/{me}")).unwrap();
        assert_eq!(process_of(&OwnedFd::from(dir)), Some(me));
        let other = std::fs::File::open("/proc/self/status").unwrap();
        assert_eq!(process_of(&OwnedFd::from(other)), Some(me));
        let not_proc = std::fs::File::open("/").unwrap();
        assert_eq!(process_of(&OwnedFd::from(not_proc)), None);
    }

    #[test]
    fn rules_compare_ids_and_trap_only_what_the_filter_cannot_know() {
        let table = Table::new();
        let rules = rules(&table, Trap::Notify);
        let rule = |sys: Sys| {
            let nr = sys.nr() as u32;
            rules.iter().find(|(n, _)| *n == nr).map(|&(_, v)| v)
        };
        // tkill: ids compared, any other positive id trapped (a thread's).
        assert!(matches!(
            rule(Sys::Tkill),
            Some(Verdict::Aimed {
                ids: &[0],
                only: None,
                others: Others::TrapIds(Trap::Notify)
            })
        ));
        // tgkill names a whole process, kill is too common to trap: compared only.
        for name in [Sys::Tgkill, Sys::Kill] {
            assert!(matches!(
                rule(name),
                Some(Verdict::Aimed {
                    others: Others::Allow,
                    ..
                })
            ));
        }
        assert!(matches!(
            rule(Sys::Getsockopt),
            Some(Verdict::ErrnoIf { .. })
        ));
        assert!(matches!(
            rule(Sys::PidfdSendSignal),
            Some(Verdict::Aimed {
                ids: &[],
                others: Others::Trap(Trap::Notify),
                ..
            })
        ));
        assert_eq!(rule(Sys::Openat), None);
    }
}
