//! The Landlock domain a program run by root starts in. Landlock's ptrace rule binds a
//! process in a domain whatever capabilities it holds: the kernel refuses it every
//! ptrace-checked access (ptrace, pidfd_getfd, process_vm_*, kcmp, `/proc/PID/mem`, the
//! magic links of `/proc/PID/fd`, `cwd`, `root` and `exe`) to any process outside the
//! domain, roost's included. A program holding `CAP_SYS_PTRACE` is then kept off roost by
//! the kernel as an ordinary user's program is by roost not being dumpable, and the fast
//! path's code page may open for it too (docs/security.md).
//!
//! A domain must restrict something: this one scopes abstract unix sockets (Landlock ABI 6,
//! Linux 6.12), so the program cannot connect to one made outside the run, the smallest
//! change Landlock offers. It handles no file right (those would also refuse mounts) and
//! does not scope signals (a shell's job control signals processes outside).

use crate::guard;

/// Landlock's `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET`.
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
/// The first ABI with scopes.
const SCOPES_ABI: i64 = 6;

/// `struct landlock_ruleset_attr` (ABI 6).
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// Whether this run's program gets a domain: it may hold `CAP_SYS_PTRACE` over roost
/// (roost runs as root), the kernel offers scopes, and `--no-landlock` was not given.
pub fn applies(refused: bool) -> bool {
    !refused && guard::may_hold_ptrace_capability() && abi() >= SCOPES_ABI
}

fn abi() -> i64 {
    // SAFETY: the version query takes no pointer.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    }
}

/// The calls [`enter`] makes, which its error indexes.
pub const STEPS: [&str; 2] = ["landlock_create_ruleset", "landlock_restrict_self"];

/// Puts the calling process in the domain, or says which step failed and its errno. Only
/// raw system calls: this runs in the forked child before exec. The caller has set
/// `PR_SET_NO_NEW_PRIVS` (or holds `CAP_SYS_ADMIN`), as Landlock requires.
pub fn enter() -> Result<(), (usize, i32)> {
    let attr = RulesetAttr {
        handled_access_fs: 0,
        handled_access_net: 0,
        scoped: SCOPE_ABSTRACT_UNIX_SOCKET,
    };
    // SAFETY: `attr` outlives the call, which is given its size.
    let ruleset = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if ruleset < 0 {
        return Err((0, errno()));
    }
    // SAFETY: a descriptor the kernel just made, closed once used.
    let restricted = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) };
    let failure = errno();
    // SAFETY: as above.
    unsafe { libc::close(ruleset as i32) };
    if restricted != 0 {
        return Err((1, failure));
    }
    Ok(())
}

fn errno() -> i32 {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() }
}
