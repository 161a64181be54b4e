//! Keeping the program off roost's own processes (docs/security.md, "roost run's
//! supervisor"). The agent holds the seccomp listener, traces the program and answers for
//! the namespace; a program that reached it could take the listener and answer its own
//! calls, or stop or kill its supervisor.
//!
//! **Not dumpable** ([`undumpable`]): every supervising process of roost clears its dumpable
//! flag before the program exists. The kernel then refuses every ptrace-access-checked call
//! aimed at it (ptrace, pidfd_getfd, process_vm_readv/writev, kcmp,
//! `/proc/PID/{mem,fd,environ,...}`) to a caller without `CAP_SYS_PTRACE` over it, whatever
//! its uid.

use std::io;

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
