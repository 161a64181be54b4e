//! The Landlock domain a program run by root starts in. Landlock's ptrace rule binds a
//! process in a domain whatever capabilities it holds: the kernel refuses it every
//! ptrace-checked access (ptrace, pidfd_getfd, process_vm_*, kcmp, `/proc/PID/mem`, the
//! magic links of `/proc/PID/fd`, `cwd`, `root` and `exe`) to any process outside the
//! domain, roost's included. Those calls a program holding `CAP_SYS_PTRACE` then fails as
//! an ordinary user's program fails them on roost, which is not dumpable, and the fast
//! path's code page may open for it too (docs/security.md; what uid 0 can do through the
//! system, outside the domain, it still can).
//!
//! A domain must restrict something: this one scopes abstract unix sockets (Landlock ABI 6,
//! Linux 6.12), so the program cannot connect to one made outside the run, the smallest
//! change Landlock offers. It handles no file right (those would also refuse mounts) and
//! does not scope signals (a shell's job control signals processes outside).

use crate::guard;
use roost_base::landlock::{self, scope, RulesetAttr};
use std::os::fd::AsRawFd;

/// The first ABI with scopes.
const SCOPES_ABI: i64 = 6;

/// Whether this run's program starts in a domain: it may hold `CAP_SYS_PTRACE` over roost
/// (roost runs as root), the kernel offers scopes, and `--no-landlock` was not given.
pub fn applies(no_landlock: bool) -> bool {
    !no_landlock
        && guard::may_hold_ptrace_capability()
        && landlock::abi().is_some_and(|abi| abi >= SCOPES_ABI)
}

/// The calls [`enter`] makes, which its error indexes.
pub const STEPS: [&str; 2] = ["landlock_create_ruleset", "landlock_restrict_self"];

/// Puts the calling process in the domain, or says which step failed ([`STEPS`]) and its
/// errno. Allocates nothing: this runs in the forked child before exec. The caller has set
/// `PR_SET_NO_NEW_PRIVS` (or holds `CAP_SYS_ADMIN`), as Landlock requires.
pub fn enter() -> Result<(), (usize, i32)> {
    let attr = RulesetAttr {
        handled_access_fs: 0,
        handled_access_net: 0,
        scoped: scope::ABSTRACT_UNIX_SOCKET,
    };
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(0);
    let ruleset = landlock::create_ruleset(&attr, SCOPES_ABI).map_err(|e| (0, errno(e)))?;
    landlock::restrict_self(ruleset.as_raw_fd()).map_err(|e| (1, errno(e)))
}
