//! The seccomp-bpf program, built from the agent's syscall table: check the architecture
//! first, refuse x32 and numbers newer than the reviewed table, then a search tree on the
//! syscall number leads to that number's rules (returning TRACE or a notification for the
//! trapped ones and ERRNO for the refused ones), and ALLOW for everything else. Arguments
//! are looked at only after a rule's number matched, so for every number no rule looks
//! into, the program depends only on the architecture and the number, and the kernel's
//! seccomp action cache answers those calls without running it.

use crate::arch;
use std::io;

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_JSET_K: u16 = 0x45;
const BPF_JA: u16 = 0x05;
const BPF_RET_K: u16 = 0x06;
/// The sign bit of an `int` argument's low half.
const NEGATIVE: u32 = 0x8000_0000;
/// Offsets in `struct seccomp_data`.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_IP_LOW: u32 = 8;
const OFFSET_IP_HIGH: u32 = 12;
/// The low 32 bits of argument `i` (little-endian), where `int` flags live.
const fn offset_arg_low(i: usize) -> u32 {
    16 + 8 * i as u32
}
/// The high 32 bits of argument `i`, which the kernel ignores where the argument is an
/// `int` or unused.
const fn offset_arg_high(i: usize) -> u32 {
    offset_arg_low(i) + 4
}

pub const RET_ALLOW: u32 = 0x7fff_0000;
pub const RET_TRACE: u32 = 0x7ff0_0000;
pub const RET_ERRNO: u32 = 0x0005_0000;

/// What the filter answers for one syscall number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// A ptrace seccomp stop.
    Trace,
    /// A user notification to roost's supervisor thread (no ptrace stop).
    Notify,
    /// A notification, unless the `int` argument `arg` has one of `bits` set: then a ptrace
    /// stop (an O_PATH open, whose descriptor the supervisor could not hand over).
    NotifyUnless {
        arg: usize,
        bits: u32,
    },
    /// A notification, unless the high half of argument `arg` is `value`: then a ptrace stop
    /// (a call roost sent back to take one).
    NotifyUnlessIs {
        arg: usize,
        value: u32,
    },
    /// A ptrace stop when the `int` argument `arg` has one of `bits` set, else allowed (a
    /// clone asking for an untraced child).
    TraceIf {
        arg: usize,
        bits: u32,
    },
    /// A notification when a descriptor in one of arguments `args` is `from` or above (a
    /// virtual descriptor's range; negative numbers such as mmap's -1 stay below), else
    /// allowed.
    NotifyIfFdFrom {
        args: &'static [usize],
        from: u32,
    },
    /// A notification when the `int` argument `arg` is one of `values`, else allowed
    /// (prctl's options that lower a process's capabilities).
    NotifyIfOneOf {
        arg: usize,
        values: &'static [u32],
    },
    Errno(i32),
    /// Allowed when made from instruction address `ip` (the in-process fast path's code
    /// page, [`crate::fastpath`]), whatever later rules for the number say; else on to them.
    AllowFrom {
        ip: u64,
    },
    /// `errno` when each `(argument, value)` holds (the low half), else allowed.
    ErrnoIf {
        args: &'static [(usize, u32)],
        errno: i32,
    },
    /// A call aimed at a process (`crate::guard`): EPERM when an `int` argument in `ids`
    /// is one of roost's own processes (the ids [`build`] is given), else `others`. With
    /// `only`, just for calls whose argument `only.0` is one of `only.1`; others are
    /// allowed.
    Aimed {
        ids: &'static [usize],
        only: Option<(usize, &'static [u32])>,
        others: Others,
    },
}

/// How a rule traps a call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Trap {
    Notify,
    Trace,
}

impl Trap {
    fn ret(self) -> u32 {
        match self {
            Trap::Notify => libc::SECCOMP_RET_USER_NOTIF,
            Trap::Trace => RET_TRACE,
        }
    }
}

/// What [`Verdict::Aimed`] answers a call that names none of roost's processes by id.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Others {
    Allow,
    /// Trapped when one of the ids is above 0 (a process or a thread, not a group).
    TrapIds(Trap),
    /// Trapped, whatever the arguments (a pidfd, a pointer).
    Trap(Trap),
    /// Trapped when argument `arg` has one of `bits` set.
    TrapIfBits {
        arg: usize,
        bits: u32,
        trap: Trap,
    },
}

/// Where a jump of a [`Block`] goes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum To {
    /// This many instructions on (0: the next one).
    On(u8),
    /// A return the block ends with.
    Ret(u32),
    /// Allowed: a return of ALLOW, or on to the next rule for the same number.
    Pass,
    /// Past the block: the next rule (a call of another number).
    Skip,
}

/// One rule's instructions, whose jumps name where they go; [`Block::finish`] places the
/// returns after them and turns the names into offsets.
#[derive(Default)]
struct Block(Vec<(u16, u32, To, To)>);

impl Block {
    fn load(&mut self, offset: u32) {
        self.0.push((BPF_LD_W_ABS, offset, To::On(0), To::On(0)));
    }

    fn jump(&mut self, code: u16, k: u32, jt: To, jf: To) {
        self.0.push((code, k, jt, jf));
    }

    fn goto(&mut self, to: To) {
        self.0.push((BPF_JA, 0, to, to));
    }

    /// The instructions; `last`: no later rule has this number, so a call allowed here
    /// returns ALLOW rather than going on to the next rule.
    fn finish(self, last: bool) -> Vec<libc::sock_filter> {
        let uses = |to: To| self.0.iter().any(|&(_, _, t, f)| t == to || f == to);
        let mut rets: Vec<u32> = Vec::new();
        for &(_, _, t, f) in &self.0 {
            for to in [t, f] {
                if let To::Ret(v) = to {
                    if !rets.contains(&v) {
                        rets.push(v);
                    }
                }
            }
        }
        let body = self.0.len();
        // The last instruction, where a pass goes: ALLOW, or the number loaded again for
        // the next rule (an argument is in its place); a call of another number may land
        // there too.
        let tail = uses(To::Pass);
        let end = body + rets.len() + usize::from(tail);
        let at = |to: To, i: usize| -> usize {
            match to {
                To::On(n) => i + 1 + usize::from(n),
                To::Ret(v) => body + rets.iter().position(|&r| r == v).expect("collected"),
                To::Pass => end - 1,
                To::Skip => end,
            }
        };
        let offset = |to: To, i: usize| -> u8 {
            u8::try_from(at(to, i) - i - 1).expect("a rule's block is short")
        };
        let mut p: Vec<libc::sock_filter> = self
            .0
            .iter()
            .enumerate()
            .map(|(i, &(code, k, jt, jf))| match code {
                BPF_JA => stmt(BPF_JA, u32::from(offset(jt, i))),
                BPF_LD_W_ABS => stmt(code, k),
                _ => jump(code, k, offset(jt, i), offset(jf, i)),
            })
            .collect();
        p.extend(rets.iter().map(|&v| stmt(BPF_RET_K, v)));
        if tail && last {
            p.push(stmt(BPF_RET_K, RET_ALLOW));
        } else if tail {
            p.push(stmt(BPF_LD_W_ABS, OFFSET_NR));
        }
        p
    }
}

/// The block of [`Verdict::Aimed`] for syscall `nr`, `own` being roost's process ids.
fn aimed(
    nr: u32,
    ids: &[usize],
    only: Option<(usize, &[u32])>,
    others: Others,
    own: &[u32],
) -> Block {
    let mut b = Block::default();
    b.jump(BPF_JEQ_K, nr, To::On(0), To::Skip);
    if let Some((arg, values)) = only {
        b.load(offset_arg_low(arg));
        for (i, &v) in values.iter().enumerate() {
            let past_the_rest = (values.len() - 1 - i) as u8 + 1;
            b.jump(BPF_JEQ_K, v, To::On(past_the_rest), To::On(0));
        }
        b.goto(To::Pass);
    }
    let eperm = To::Ret(RET_ERRNO | libc::EPERM as u32);
    for &arg in ids {
        b.load(offset_arg_low(arg));
        for &pid in own {
            b.jump(BPF_JEQ_K, pid, eperm, To::On(0));
        }
    }
    match others {
        Others::Allow => b.goto(To::Pass),
        Others::Trap(trap) => b.goto(To::Ret(trap.ret())),
        Others::TrapIds(trap) => {
            for &arg in ids {
                // 0 and below (the caller, a group, every process) go on to the next id.
                b.load(offset_arg_low(arg));
                b.jump(BPF_JSET_K, NEGATIVE, To::On(2), To::On(0));
                b.jump(BPF_JEQ_K, 0, To::On(1), To::On(0));
                b.goto(To::Ret(trap.ret()));
            }
            b.goto(To::Pass);
        }
        Others::TrapIfBits { arg, bits, trap } => {
            b.load(offset_arg_low(arg));
            b.jump(BPF_JSET_K, bits, To::Ret(trap.ret()), To::Pass);
        }
    }
    b
}

/// The block of [`Verdict::AllowFrom`] for syscall `nr`.
fn allow_from(nr: u32, ip: u64) -> Block {
    let mut b = Block::default();
    b.jump(BPF_JEQ_K, nr, To::On(0), To::Skip);
    b.load(OFFSET_IP_LOW);
    b.jump(BPF_JEQ_K, ip as u32, To::On(0), To::Pass);
    b.load(OFFSET_IP_HIGH);
    b.jump(BPF_JEQ_K, (ip >> 32) as u32, To::Ret(RET_ALLOW), To::Pass);
    b
}

/// The block of [`Verdict::ErrnoIf`] for syscall `nr`.
fn errno_if(nr: u32, args: &[(usize, u32)], errno: i32) -> Block {
    let mut b = Block::default();
    b.jump(BPF_JEQ_K, nr, To::On(0), To::Skip);
    for &(arg, value) in args {
        b.load(offset_arg_low(arg));
        b.jump(BPF_JEQ_K, value, To::On(0), To::Pass);
    }
    b.goto(To::Ret(RET_ERRNO | (errno as u32 & 0xffff)));
    b
}

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

fn ret(v: Verdict) -> libc::sock_filter {
    stmt(
        BPF_RET_K,
        match v {
            Verdict::Trace => RET_TRACE,
            Verdict::Notify => libc::SECCOMP_RET_USER_NOTIF,
            Verdict::NotifyUnless { .. }
            | Verdict::NotifyUnlessIs { .. }
            | Verdict::TraceIf { .. }
            | Verdict::NotifyIfFdFrom { .. }
            | Verdict::NotifyIfOneOf { .. }
            | Verdict::ErrnoIf { .. }
            | Verdict::AllowFrom { .. }
            | Verdict::Aimed { .. } => {
                unreachable!("expanded by build")
            }
            Verdict::Errno(e) => RET_ERRNO | (e as u32 & 0xffff),
        },
    )
}

/// Builds the program for `rules` (syscall number, verdict), `own` being the ids of roost's
/// processes ([`Verdict::Aimed`]). A number may have several rules: a call one of them
/// allows goes on to the next. Syscalls of another ABI (i386, x32) get `foreign`: refused,
/// or sent to the notification thread, which refuses them too but can say so.
///
/// After the checks of the architecture and the number's range, a search tree on the number
/// ([`dispatch`]) leads to that number's rules, kept in their order: a call meets a dozen
/// comparisons or so, where a chain of every rule made a call of a number listed late
/// (fcntl, getdents64) meet over a hundred, on every call the kernel's action cache cannot
/// answer (any number some rule looks into the arguments of).
pub fn build(rules: &[(u32, Verdict)], foreign: Verdict, own: &[u32]) -> Vec<libc::sock_filter> {
    let mut p = preamble(foreign);
    let mut groups: Vec<(u32, Vec<libc::sock_filter>)> = Vec::new();
    for (i, &(nr, verdict)) in rules.iter().enumerate() {
        let last = !rules[i + 1..].iter().any(|&(n, _)| n == nr);
        let code = rule(nr, verdict, last, own);
        match groups.iter_mut().find(|(n, _)| *n == nr) {
            Some((_, group)) => group.extend(code),
            None => groups.push((nr, code)),
        }
    }
    groups.sort_by_key(|&(nr, _)| nr);
    dispatch(&mut p, &groups);
    p
}

/// The checks every call meets first: the architecture (another ABI gets `foreign`), then
/// the number's range; leaves the number loaded.
fn preamble(foreign: Verdict) -> Vec<libc::sock_filter> {
    vec![
        stmt(BPF_LD_W_ABS, OFFSET_ARCH),
        jump(BPF_JEQ_K, arch::AUDIT_ARCH, 1, 0),
        ret(foreign),
        stmt(BPF_LD_W_ABS, OFFSET_NR),
        jump(BPF_JGE_K, arch::FOREIGN_SYSCALL_BIT, 0, 1),
        ret(foreign),
        // Newer than roost knows: failed with ENOSYS, said once (by the notification thread
        // when there is one, else by the tracer).
        jump(BPF_JGE_K, arch::REVIEWED_MAX + 1, 0, 1),
        ret(match foreign {
            Verdict::Notify => Verdict::Notify,
            _ => Verdict::Trace,
        }),
    ]
}

/// Numbers a leaf of the search tree compares one by one.
const LEAF: usize = 3;

/// Appends to `p` (the number loaded) a search tree on the syscall number over `groups`
/// (sorted by number), then the groups: each number's rules, reached by a `JA` from its
/// leaf (whose offset has 32 bits: a group may lie further than a conditional jump's 255);
/// a number with none is allowed at its leaf.
fn dispatch(p: &mut Vec<libc::sock_filter>, groups: &[(u32, Vec<libc::sock_filter>)]) {
    let base = p.len();
    let (code, to_group) = tree(groups, 0, groups.len());
    p.extend(code);
    let mut starts = Vec::with_capacity(groups.len());
    for (_, code) in groups {
        starts.push(p.len());
        p.extend_from_slice(code);
    }
    // Where a rule's jump for a call of another number would go (none comes this far): the
    // kernel refuses a program with a jump past its end.
    p.push(stmt(BPF_RET_K, RET_ALLOW));
    for (ja, group) in to_group {
        let at = base + ja;
        p[at].k = (starts[group] - at - 1) as u32;
    }
}

/// The search tree over `groups[lo..hi]`, and the `JA`s in it that are to go to a group
/// (index in the tree's code, the group's).
fn tree(
    groups: &[(u32, Vec<libc::sock_filter>)],
    lo: usize,
    hi: usize,
) -> (Vec<libc::sock_filter>, Vec<(usize, usize)>) {
    let mut code = Vec::new();
    let mut to_group = Vec::new();
    if hi - lo <= LEAF {
        for (g, &(nr, _)) in groups.iter().enumerate().take(hi).skip(lo) {
            code.push(jump(BPF_JEQ_K, nr, 0, 1));
            to_group.push((code.len(), g));
            code.push(stmt(BPF_JA, 0));
        }
        code.push(stmt(BPF_RET_K, RET_ALLOW));
        return (code, to_group);
    }
    let mid = lo + (hi - lo) / 2;
    let (lower, lower_jumps) = tree(groups, lo, mid);
    let (upper, upper_jumps) = tree(groups, mid, hi);
    // From `mid`'s number up: over the lower half, by the comparison itself where it
    // reaches.
    match u8::try_from(lower.len()) {
        Ok(over) => code.push(jump(BPF_JGE_K, groups[mid].0, over, 0)),
        Err(_) => {
            code.push(jump(BPF_JGE_K, groups[mid].0, 0, 1));
            code.push(stmt(BPF_JA, lower.len() as u32));
        }
    }
    for (jumps, part) in [(lower_jumps, lower), (upper_jumps, upper)] {
        let at = code.len();
        to_group.extend(jumps.into_iter().map(|(i, g)| (at + i, g)));
        code.extend(part);
    }
    (code, to_group)
}

/// The instructions of one rule of syscall `nr`, entered with the number loaded: its
/// verdict, or, for a call it allows, ALLOW when it is the number's `last` rule, else the
/// number loaded again for the next (an argument was loaded in its place).
fn rule(nr: u32, verdict: Verdict, last: bool, own: &[u32]) -> Vec<libc::sock_filter> {
    // Allowed: ALLOW, or on to this number's next rule, with the number loaded again
    // (an argument was loaded in its place).
    let pass = if last {
        stmt(BPF_RET_K, RET_ALLOW)
    } else {
        stmt(BPF_LD_W_ABS, OFFSET_NR)
    };
    match verdict {
        Verdict::Aimed { ids, only, others } => {
            return aimed(nr, ids, only, others, own).finish(last)
        }
        Verdict::ErrnoIf { args, errno } => return errno_if(nr, args, errno).finish(last),
        Verdict::AllowFrom { ip } => return allow_from(nr, ip).finish(last),
        _ => {}
    }
    let mut p = Vec::new();
    // Only these syscalls' branches look at an argument: every other number stays
    // answerable from the syscall number alone.
    let by_arg = match verdict {
        Verdict::NotifyUnless { arg, bits } => Some((
            offset_arg_low(arg),
            BPF_JSET_K,
            bits,
            RET_TRACE,
            libc::SECCOMP_RET_USER_NOTIF,
        )),
        Verdict::NotifyUnlessIs { arg, value } => Some((
            offset_arg_high(arg),
            BPF_JEQ_K,
            value,
            RET_TRACE,
            libc::SECCOMP_RET_USER_NOTIF,
        )),
        Verdict::TraceIf { arg, bits } => {
            Some((offset_arg_low(arg), BPF_JSET_K, bits, RET_TRACE, RET_ALLOW))
        }
        _ => None,
    };
    if let Verdict::NotifyIfOneOf { arg, values } = verdict {
        // Past the comparisons: allow, then notify (each match jumps there).
        let n = values.len() as u8;
        p.push(jump(BPF_JEQ_K, nr, 0, n + 3));
        p.push(stmt(BPF_LD_W_ABS, offset_arg_low(arg)));
        for (i, &v) in values.iter().enumerate() {
            p.push(jump(BPF_JEQ_K, v, n - i as u8, 0));
        }
        p.push(if last { pass } else { stmt(BPF_JA, 1) });
        p.push(stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF));
        if !last {
            // Allowed: over the notification, to the number loaded again (where a
            // call of another number lands too).
            p.push(pass);
        }
    } else if let Verdict::NotifyIfFdFrom { args, from } = verdict {
        // Per argument: below the range, or negative, goes on to the next argument.
        p.push(jump(BPF_JEQ_K, nr, 0, 4 * args.len() as u8 + 1));
        for &arg in args {
            p.push(stmt(BPF_LD_W_ABS, offset_arg_low(arg)));
            p.push(jump(BPF_JGE_K, from, 0, 2));
            p.push(jump(BPF_JGE_K, 0x8000_0000, 1, 0));
            p.push(stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF));
        }
        p.push(pass);
    } else if let Some((offset, test, k, if_set, otherwise)) = by_arg {
        p.push(jump(BPF_JEQ_K, nr, 0, 4));
        p.push(stmt(BPF_LD_W_ABS, offset));
        p.push(jump(test, k, 0, 1));
        p.push(stmt(BPF_RET_K, if_set));
        p.push(if otherwise == RET_ALLOW {
            pass
        } else {
            stmt(BPF_RET_K, otherwise)
        });
    } else {
        p.push(jump(BPF_JEQ_K, nr, 0, 1));
        p.push(ret(verdict));
    }
    p
}

/// Installs `program` in the calling thread: `PR_SET_NO_NEW_PRIVS`, then the filter, asking
/// for a notification listener when `listener` is set (returns its fd). Only raw syscalls:
/// this runs in the forked child before exec.
pub fn install(program: &[libc::sock_filter], listener: bool) -> Result<i32, (&'static str, i32)> {
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut _,
    };
    // SAFETY: prctl/seccomp with plain integer and pointer arguments; `prog` outlives them.
    let set = |flags: libc::c_ulong| unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const libc::sock_fprog,
        )
    };
    // SAFETY: a plain prctl.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(("prctl(PR_SET_NO_NEW_PRIVS)", errno()));
    }
    // The flags asked for, then without those an older kernel refuses (EINVAL). Once roost
    // has received a notification, only a fatal signal may interrupt the caller: a change
    // made here must not be made again by a restarted call (`WAIT_KILLABLE_RECV`, Linux
    // 5.19; older kernels keep interruptible waits). `SPEC_ALLOW` (Linux 4.17): where the
    // kernel's speculative store bypass mitigation is `seccomp` (the default before Linux
    // 5.16), a filter would otherwise turn it on for the program, slowing a program that
    // only computes by several percent; the filter interposes, it does not fence off
    // untrusted code.
    let tries: &[libc::c_ulong] = if listener {
        &[
            NEW_LISTENER | WAIT_KILLABLE_RECV | SPEC_ALLOW,
            NEW_LISTENER | SPEC_ALLOW,
            NEW_LISTENER,
        ]
    } else {
        &[SPEC_ALLOW, 0]
    };
    let mut rc = -1;
    for &flags in tries {
        rc = set(flags);
        if rc >= 0 || errno() != libc::EINVAL {
            break;
        }
    }
    if rc < 0 {
        return Err(("seccomp filter", errno()));
    }
    Ok(rc as i32)
}

/// Whether this kernel makes a received notification wait killably
/// (`SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`, which [`install`] asks for). Probed once with a
/// null program: a kernel that knows the flag gets as far as reading the program (EFAULT),
/// one that does not refuses the flags (EINVAL). Nothing is installed either way.
pub fn waits_killably() -> bool {
    static KILLABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KILLABLE.get_or_init(|| {
        // SAFETY: a seccomp call with a null program, which the kernel rejects.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                NEW_LISTENER | WAIT_KILLABLE_RECV,
                std::ptr::null::<libc::sock_fprog>(),
            )
        };
        rc < 0 && errno() == libc::EFAULT
    })
}

const NEW_LISTENER: libc::c_ulong = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
const SPEC_ALLOW: libc::c_ulong = libc::SECCOMP_FILTER_FLAG_SPEC_ALLOW;
/// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` (newer than the libc crate).
const WAIT_KILLABLE_RECV: libc::c_ulong = 1 << 5;

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_kernel_waits_killably() {
        // Linux 5.19 and later (the project's machines run 6.x).
        assert!(waits_killably());
    }

    /// A tiny interpreter for the instructions `build` emits.
    fn run(p: &[libc::sock_filter], arch: u32, nr: u32) -> u32 {
        run_with(p, arch, nr, [0; 6])
    }

    fn run_args(p: &[libc::sock_filter], nr: u32, first: &[u64]) -> u32 {
        let mut args = [0; 6];
        args[..first.len()].copy_from_slice(first);
        run_with(p, arch::AUDIT_ARCH, nr, args)
    }

    fn run_with(p: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        run_reading(p, arch, nr, args).0
    }

    /// The answer for call `nr` made from instruction address `ip`.
    fn run_from(p: &[libc::sock_filter], nr: u32, args: [u64; 6], ip: u64) -> u32 {
        execute(p, arch::AUDIT_ARCH, nr, args, ip).0
    }

    /// Whether the program looks at an argument of call `nr` (if not, the kernel's action
    /// cache can answer it from the number alone).
    fn reads_arguments(p: &[libc::sock_filter], nr: u32) -> bool {
        run_reading(p, arch::AUDIT_ARCH, nr, [0; 6]).1
    }

    /// The program's answer, and whether it loaded an argument on the way.
    fn run_reading(p: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> (u32, bool) {
        let (ret, read, _) = execute(p, arch, nr, args, 0);
        (ret, read)
    }

    /// The program's answer, whether it loaded an argument, and how many instructions it
    /// ran.
    fn execute(
        p: &[libc::sock_filter],
        arch: u32,
        nr: u32,
        args: [u64; 6],
        ip: u64,
    ) -> (u32, bool, usize) {
        let mut acc = 0u32;
        let mut pc = 0usize;
        let mut read = false;
        let mut steps = 0;
        loop {
            let i = p[pc];
            steps += 1;
            match i.code {
                BPF_LD_W_ABS => {
                    acc = match i.k {
                        OFFSET_NR => nr,
                        OFFSET_ARCH => arch,
                        OFFSET_IP_LOW => ip as u32,
                        OFFSET_IP_HIGH => (ip >> 32) as u32,
                        k => {
                            read = true;
                            let arg = args[(k as usize - 16) / 8];
                            if k % 8 == 4 {
                                (arg >> 32) as u32
                            } else {
                                arg as u32
                            }
                        }
                    }
                }
                BPF_JEQ_K | BPF_JGE_K | BPF_JSET_K => {
                    let taken = match i.code {
                        BPF_JEQ_K => acc == i.k,
                        BPF_JGE_K => acc >= i.k,
                        _ => acc & i.k != 0,
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                BPF_JA => pc += i.k as usize,
                BPF_RET_K => return (i.k, read, steps),
                c => panic!("unexpected opcode {c:#x}"),
            }
            pc += 1;
        }
    }

    #[test]
    fn calls_from_the_fast_paths_page_alone_pass_untrapped() {
        let ip = 0x1234_5678_9002;
        let openat2 = 437;
        let p = build(
            &[
                (openat2, Verdict::AllowFrom { ip }),
                (openat2, Verdict::Notify),
                (257, Verdict::Notify),
            ],
            Verdict::Errno(libc::ENOSYS),
            &[],
        );
        assert_eq!(run_from(&p, openat2, [0; 6], ip), RET_ALLOW);
        // Anywhere else, even an address that differs in one half only, the trap.
        for other in [0, ip + 1, ip ^ (1 << 40), ip & 0xffff_ffff] {
            assert_eq!(
                run_from(&p, openat2, [0; 6], other),
                libc::SECCOMP_RET_USER_NOTIF
            );
        }
        // Other numbers made from the page are trapped as before.
        assert_eq!(run_from(&p, 257, [0; 6], ip), libc::SECCOMP_RET_USER_NOTIF);
        assert_eq!(run_from(&p, 39, [0; 6], ip), RET_ALLOW);
    }

    #[test]
    fn traps_listed_allows_rest_refuses_foreign() {
        let enosys = Verdict::Errno(libc::ENOSYS);
        let p = build(
            &[
                (257, Verdict::Trace),
                (4, Verdict::Notify),
                (425, Verdict::Errno(libc::ENOSYS)),
            ],
            enosys,
            &[],
        );
        assert_eq!(run(&p, arch::AUDIT_ARCH, 4), libc::SECCOMP_RET_USER_NOTIF);
        assert_eq!(run(&p, arch::AUDIT_ARCH, 257), RET_TRACE);
        assert_eq!(run(&p, arch::AUDIT_ARCH, 39), RET_ALLOW);
        assert_eq!(
            run(&p, arch::AUDIT_ARCH, 425),
            RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(run(&p, 0x4000_0003, 257), RET_ERRNO | libc::ENOSYS as u32);
        assert_eq!(
            run(&p, arch::AUDIT_ARCH, 0x4000_0000 | 257),
            RET_ERRNO | libc::ENOSYS as u32
        );
        let newer = arch::REVIEWED_MAX + 1;
        assert_eq!(run(&p, arch::AUDIT_ARCH, newer), RET_TRACE);
        assert_eq!(run(&p, arch::AUDIT_ARCH, arch::REVIEWED_MAX), RET_ALLOW);
        // With notifications, another ABI's calls go to the notification thread.
        let p = build(&[(257, Verdict::Trace)], Verdict::Notify, &[]);
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        assert_eq!(run(&p, 0x4000_0003, 5), notify);
        assert_eq!(run(&p, arch::AUDIT_ARCH, 0x4000_0000 | 2), notify);
        assert_eq!(run(&p, arch::AUDIT_ARCH, 39), RET_ALLOW);
    }

    #[test]
    fn only_the_listed_values_of_an_argument_are_notified() {
        let p = build(
            &[
                (
                    157,
                    Verdict::NotifyIfOneOf {
                        arg: 0,
                        values: &[24, 28],
                    },
                ),
                (4, Verdict::Notify),
            ],
            Verdict::Errno(libc::ENOSYS),
            &[],
        );
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        assert_eq!(run_args(&p, 157, &[24]), notify);
        assert_eq!(run_args(&p, 157, &[28]), notify);
        assert_eq!(run_args(&p, 157, &[15]), RET_ALLOW); // PR_SET_NAME
        assert_eq!(run_args(&p, 157, &[24 | 1 << 40]), notify); // an int: low half only
                                                                // The rules after it are still reached.
        assert_eq!(run(&p, arch::AUDIT_ARCH, 4), notify);
        assert_eq!(run(&p, arch::AUDIT_ARCH, 5), RET_ALLOW);
    }

    #[test]
    fn an_argument_bit_turns_a_notification_into_a_stop() {
        let o_path = libc::O_PATH as u32;
        let p = build(
            &[
                (
                    2,
                    Verdict::NotifyUnless {
                        arg: 1,
                        bits: o_path,
                    },
                ),
                (
                    257,
                    Verdict::NotifyUnless {
                        arg: 2,
                        bits: o_path,
                    },
                ),
                (4, Verdict::Notify),
            ],
            Verdict::Errno(libc::ENOSYS),
            &[],
        );
        let a = arch::AUDIT_ARCH;
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        assert_eq!(run_with(&p, a, 257, [0, 0, 0o2, 0, 0, 0]), notify);
        let with_path = [0, 0, (libc::O_PATH | libc::O_CLOEXEC) as u64, 0, 0, 0];
        assert_eq!(run_with(&p, a, 257, with_path), RET_TRACE);
        assert_eq!(
            run_with(&p, a, 2, [0, libc::O_PATH as u64, 0, 0, 0, 0]),
            RET_TRACE
        );
        assert_eq!(
            run_with(&p, a, 2, [0, 0, libc::O_PATH as u64, 0, 0, 0]),
            notify
        );
        // The numbers after the argument checks are still matched on the number alone.
        assert_eq!(run_with(&p, a, 4, with_path), notify);
        assert_eq!(run_with(&p, a, 39, with_path), RET_ALLOW);
    }

    #[test]
    fn a_marked_exec_takes_a_stop() {
        let mark = crate::syscalls::BY_PTRACE;
        let p = build(
            &[(
                59,
                Verdict::NotifyUnlessIs {
                    arg: 5,
                    value: mark,
                },
            )],
            Verdict::Errno(libc::ENOSYS),
            &[],
        );
        let a = arch::AUDIT_ARCH;
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        assert_eq!(run_with(&p, a, 59, [1, 2, 3, 0, 0, 0]), notify);
        assert_eq!(run_with(&p, a, 59, [1, 2, 3, 0, 0, mark as u64]), notify);
        assert_eq!(
            run_with(&p, a, 59, [1, 2, 3, 0, 0, (mark as u64 + 1) << 32]),
            notify
        );
        let marked = [1, 2, 3, 0, 0, ((mark as u64) << 32) | 7];
        assert_eq!(run_with(&p, a, 59, marked), RET_TRACE);
        assert_eq!(run_with(&p, a, 39, marked), RET_ALLOW);
    }

    #[test]
    fn descriptor_rules_notify_only_the_reserved_range() {
        let from = 768;
        let p = build(
            &[
                (0, Verdict::NotifyIfFdFrom { args: &[0], from }),
                (9, Verdict::NotifyIfFdFrom { args: &[4], from }),
                (
                    275,
                    Verdict::NotifyIfFdFrom {
                        args: &[0, 2],
                        from,
                    },
                ),
                (257, Verdict::Notify),
            ],
            Verdict::Errno(libc::ENOSYS),
            &[],
        );
        let a = arch::AUDIT_ARCH;
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        assert_eq!(run_with(&p, a, 0, [3, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run_with(&p, a, 0, [767, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run_with(&p, a, 0, [768, 0, 0, 0, 0, 0]), notify);
        assert_eq!(run_with(&p, a, 0, [1023, 0, 0, 0, 0, 0]), notify);
        // mmap's anonymous -1 and other negative numbers are no descriptor of the range.
        assert_eq!(run_with(&p, a, 9, [0, 0, 0, 0x22, u64::MAX, 0]), RET_ALLOW);
        assert_eq!(run_with(&p, a, 9, [0, 0, 0, 0x2, 1000, 0]), notify);
        assert_eq!(run_with(&p, a, 9, [0, 0, 0, 0x2, 5, 0]), RET_ALLOW);
        assert_eq!(run_with(&p, a, 257, [0; 6]), notify);
        assert_eq!(run_with(&p, a, 1, [1000, 0, 0, 0, 0, 0]), RET_ALLOW);
        // splice: either descriptor may be virtual.
        assert_eq!(run_with(&p, a, 275, [3, 0, 4, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run_with(&p, a, 275, [900, 0, 4, 0, 0, 0]), notify);
        assert_eq!(run_with(&p, a, 275, [3, 0, 900, 0, 0, 0]), notify);
        assert_eq!(run_with(&p, a, 275, [u64::MAX, 0, 900, 0, 0, 0]), notify);
        assert_eq!(
            run_with(&p, a, 275, [u64::MAX, 0, u64::MAX, 0, 0, 0]),
            RET_ALLOW
        );
    }

    #[test]
    fn calls_aimed_at_roost_are_refused_by_id_and_the_others_trapped_or_allowed() {
        let own = [100, 200];
        let (notify, eperm) = (libc::SECCOMP_RET_USER_NOTIF, RET_ERRNO | libc::EPERM as u32);
        let aimed = |ids, only, others| Verdict::Aimed { ids, only, others };
        let p = build(
            &[
                (62, aimed(&[0], None, Others::TrapIds(Trap::Notify))),
                (234, aimed(&[0], None, Others::Allow)),
                (
                    101,
                    aimed(&[1], Some((0, &[16, 0x4206])), Others::TrapIds(Trap::Trace)),
                ),
                (312, aimed(&[0, 1], None, Others::Allow)),
                (
                    434,
                    aimed(
                        &[0],
                        None,
                        Others::TrapIfBits {
                            arg: 1,
                            bits: 0x80,
                            trap: Trap::Notify,
                        },
                    ),
                ),
                (424, aimed(&[], None, Others::Trap(Trap::Notify))),
                (4, Verdict::Notify),
            ],
            Verdict::Errno(libc::ENOSYS),
            &own,
        );
        let minus = |n: i32| n as u32 as u64;
        // kill: roost's ids refused, any other process or thread trapped, groups allowed.
        assert_eq!(run_args(&p, 62, &[100]), eperm);
        assert_eq!(run_args(&p, 62, &[200, 9]), eperm);
        assert_eq!(run_args(&p, 62, &[200 | 1 << 40]), eperm); // a pid_t: the low half
        assert_eq!(run_args(&p, 62, &[300]), notify);
        assert_eq!(run_args(&p, 62, &[0]), RET_ALLOW);
        assert_eq!(run_args(&p, 62, &[minus(-1)]), RET_ALLOW);
        assert_eq!(run_args(&p, 62, &[minus(-100)]), RET_ALLOW);
        // tgkill: compared only.
        assert_eq!(run_args(&p, 234, &[200, 5]), eperm);
        assert_eq!(run_args(&p, 234, &[300, 5]), RET_ALLOW);
        // ptrace: only the requests that attach.
        assert_eq!(run_args(&p, 101, &[16, 100]), eperm);
        assert_eq!(run_args(&p, 101, &[0x4206, 300]), RET_TRACE);
        assert_eq!(run_args(&p, 101, &[12, 100]), RET_ALLOW);
        // kcmp: either id.
        assert_eq!(run_args(&p, 312, &[5, 200]), eperm);
        assert_eq!(run_args(&p, 312, &[100, 5]), eperm);
        assert_eq!(run_args(&p, 312, &[5, 6]), RET_ALLOW);
        // pidfd_open: a thread's id is trapped.
        assert_eq!(run_args(&p, 434, &[100, 0]), eperm);
        assert_eq!(run_args(&p, 434, &[300, 0]), RET_ALLOW);
        assert_eq!(run_args(&p, 434, &[300, 0x80]), notify);
        // pidfd_send_signal: a descriptor, trapped.
        assert_eq!(run_args(&p, 424, &[3]), notify);
        // The other numbers: as before, and from the number alone.
        assert_eq!(run(&p, arch::AUDIT_ARCH, 4), notify);
        assert_eq!(run(&p, arch::AUDIT_ARCH, 39), RET_ALLOW);
        for nr in [4, 39, 0, 257] {
            assert!(!reads_arguments(&p, nr), "{nr}");
        }
        assert!(reads_arguments(&p, 62));
    }

    #[test]
    fn a_number_with_two_rules_goes_on_to_the_second_when_the_first_allows() {
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let setown = Verdict::Aimed {
            ids: &[],
            only: Some((1, &[8, 15])),
            others: Others::Trap(Trap::Notify),
        };
        let p = build(
            &[
                (
                    72,
                    Verdict::NotifyIfFdFrom {
                        args: &[0],
                        from: 768,
                    },
                ),
                (
                    157,
                    Verdict::NotifyIfOneOf {
                        arg: 0,
                        values: &[24],
                    },
                ),
                (257, Verdict::Notify),
                (72, setown),
                (
                    157,
                    Verdict::ErrnoIf {
                        args: &[(0, 15)],
                        errno: libc::EPERM,
                    },
                ),
            ],
            Verdict::Errno(libc::ENOSYS),
            &[],
        );
        assert_eq!(run_args(&p, 72, &[800, 1]), notify); // the first rule's
        assert_eq!(run_args(&p, 72, &[3, 8]), notify); // the second's
        assert_eq!(run_args(&p, 72, &[3, 1]), RET_ALLOW);
        // The number, not the argument loaded last, meets the rules in between.
        assert_eq!(run_args(&p, 72, &[257, 1]), RET_ALLOW);
        assert_eq!(run_args(&p, 157, &[24]), notify);
        assert_eq!(run_args(&p, 157, &[16, 257]), RET_ALLOW);
        assert_eq!(run_args(&p, 157, &[15]), RET_ERRNO | libc::EPERM as u32);
        assert_eq!(run_args(&p, 157, &[16]), RET_ALLOW);
        assert_eq!(run(&p, arch::AUDIT_ARCH, 257), notify);
        assert_eq!(run(&p, arch::AUDIT_ARCH, 39), RET_ALLOW);
    }

    #[test]
    fn a_conditional_refusal_needs_every_argument() {
        let p = build(
            &[(
                55,
                Verdict::ErrnoIf {
                    args: &[(1, 1), (2, 77)],
                    errno: libc::ENOPROTOOPT,
                },
            )],
            Verdict::Errno(libc::ENOSYS),
            &[],
        );
        let refused = RET_ERRNO | libc::ENOPROTOOPT as u32;
        assert_eq!(run_args(&p, 55, &[3, 1, 77]), refused);
        assert_eq!(run_args(&p, 55, &[3, 1, 17]), RET_ALLOW);
        assert_eq!(run_args(&p, 55, &[3, 6, 77]), RET_ALLOW);
    }

    #[test]
    fn the_search_tree_answers_as_the_chain_of_every_rule_and_soon() {
        // Rules of every kind on numbers spread over the table, some numbers with several.
        let ip = 0x7000_0000_1000;
        let from = 768;
        let kinds = |i: u32| -> Verdict {
            match i % 9 {
                0 => Verdict::Notify,
                1 => Verdict::Trace,
                2 => Verdict::NotifyIfFdFrom {
                    args: &[0, 2],
                    from,
                },
                3 => Verdict::NotifyUnless {
                    arg: 2,
                    bits: 0o10000000,
                },
                4 => Verdict::AllowFrom { ip },
                5 => Verdict::ErrnoIf {
                    args: &[(1, 7)],
                    errno: libc::EPERM,
                },
                6 => Verdict::NotifyIfOneOf {
                    arg: 0,
                    values: &[24, 28],
                },
                7 => Verdict::Aimed {
                    ids: &[0],
                    only: None,
                    others: Others::TrapIds(Trap::Notify),
                },
                _ => Verdict::Errno(libc::ENOSYS),
            }
        };
        // Every third number with rules of every kind, then every number with the small
        // ones (within BPF_MAXINSNS): there the tree's upper halves lie past a conditional
        // jump's reach.
        for step in [3, 1] {
            let kind = |i: u32| if step == 1 { kinds(i % 3) } else { kinds(i) };
            let mut rules: Vec<(u32, Verdict)> = (0..arch::REVIEWED_MAX)
                .step_by(step)
                .enumerate()
                .map(|(i, nr)| (nr, kind(i as u32)))
                .collect();
            // Second and third rules for some numbers, after others.
            rules.extend(
                (0..arch::REVIEWED_MAX)
                    .step_by(21)
                    .map(|nr| (nr, kinds(nr / 21 + 1))),
            );
            rules.extend(
                (0..arch::REVIEWED_MAX)
                    .step_by(42)
                    .map(|nr| (nr, kinds(nr / 42 + 5))),
            );
            let own = [100];
            let tree = build(&rules, Verdict::Notify, &own);
            // The same rules as one chain in the order given.
            let mut chain = preamble(Verdict::Notify);
            for (i, &(nr, verdict)) in rules.iter().enumerate() {
                let last = !rules[i + 1..].iter().any(|&(n, _)| n == nr);
                chain.extend(rule(nr, verdict, last, &own));
            }
            chain.push(stmt(BPF_RET_K, RET_ALLOW));
            let argsets: [[u64; 6]; 5] = [
                [0; 6],
                [100, 7, 0o10000000, 0, 0, 0],
                [900, 1, 900, 0, 0, 0],
                [24, 7, 3, 0, 0, 0],
                [u64::MAX, 0, 5, 0, 0, 0],
            ];
            let mut longest = 0;
            for nr in 0..=arch::REVIEWED_MAX + 1 {
                for args in argsets {
                    for at in [0, ip] {
                        let (want, want_read, _) = execute(&chain, arch::AUDIT_ARCH, nr, args, at);
                        let (got, got_read, steps) = execute(&tree, arch::AUDIT_ARCH, nr, args, at);
                        assert_eq!(
                            (got, got_read),
                            (want, want_read),
                            "nr {nr} {args:?} {at:#x}"
                        );
                        // Against a program with this number's rules only: the tree's cost.
                        let own_rules: Vec<_> =
                            rules.iter().filter(|r| r.0 == nr).copied().collect();
                        let alone = build(&own_rules, Verdict::Notify, &own);
                        let (_, _, direct) = execute(&alone, arch::AUDIT_ARCH, nr, args, at);
                        longest = longest.max(steps - direct);
                    }
                }
            }
            // A comparison per level of the tree (~log2(n / LEAF)) and a leaf's, where a chain
            // of the rules before a number's own made it run hundreds.
            assert!(
                longest <= 12,
                "{longest} instructions more to reach a number's rules"
            );
            assert!(tree.len() < 4096, "within the kernel's BPF_MAXINSNS");
        }
    }
}
