//! The seccomp-bpf program, built from the agent's syscall table: check the architecture
//! first, refuse x32 and numbers newer than the reviewed table, then one comparison per
//! listed syscall number (returning TRACE for the
//! trapped ones and ERRNO for the refused ones), and ALLOW for everything else. The program
//! depends only on the architecture and the syscall number, so the kernel's seccomp action
//! cache answers the allowed syscalls without running it.

use crate::arch;
use std::io;

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;
/// Offsets in `struct seccomp_data`.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
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
            | Verdict::NotifyIfOneOf { .. } => {
                unreachable!("expanded by build")
            }
            Verdict::Errno(e) => RET_ERRNO | (e as u32 & 0xffff),
        },
    )
}

/// Builds the program for `rules` (syscall number, verdict). Syscalls of another ABI (i386,
/// x32) get `foreign`: refused, or sent to the notification thread, which refuses them too
/// but can say so.
pub fn build(rules: &[(u32, Verdict)], foreign: Verdict) -> Vec<libc::sock_filter> {
    let mut p = vec![
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
    ];
    for &(nr, verdict) in rules {
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
            p.push(stmt(BPF_RET_K, RET_ALLOW));
            p.push(stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF));
        } else if let Verdict::NotifyIfFdFrom { args, from } = verdict {
            // Per argument: below the range, or negative, goes on to the next argument.
            p.push(jump(BPF_JEQ_K, nr, 0, 4 * args.len() as u8 + 1));
            for &arg in args {
                p.push(stmt(BPF_LD_W_ABS, offset_arg_low(arg)));
                p.push(jump(BPF_JGE_K, from, 0, 2));
                p.push(jump(BPF_JGE_K, 0x8000_0000, 1, 0));
                p.push(stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF));
            }
            p.push(stmt(BPF_RET_K, RET_ALLOW));
        } else if let Some((offset, test, k, if_set, otherwise)) = by_arg {
            p.push(jump(BPF_JEQ_K, nr, 0, 4));
            p.push(stmt(BPF_LD_W_ABS, offset));
            p.push(jump(test, k, 0, 1));
            p.push(stmt(BPF_RET_K, if_set));
            p.push(stmt(BPF_RET_K, otherwise));
        } else {
            p.push(jump(BPF_JEQ_K, nr, 0, 1));
            p.push(ret(verdict));
        }
    }
    p.push(stmt(BPF_RET_K, RET_ALLOW));
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
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let i = p[pc];
            match i.code {
                BPF_LD_W_ABS => {
                    acc = match i.k {
                        OFFSET_NR => nr,
                        OFFSET_ARCH => arch,
                        k => {
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
                BPF_RET_K => return i.k,
                c => panic!("unexpected opcode {c:#x}"),
            }
            pc += 1;
        }
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
        let p = build(&[(257, Verdict::Trace)], Verdict::Notify);
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
}
