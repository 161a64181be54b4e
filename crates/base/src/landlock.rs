//! The Landlock system calls roost's sandboxes are made of: which ABI the kernel offers, a
//! ruleset made, the calling process restricted. Raw calls that allocate nothing: they run
//! in forked children before exec too. What a sandbox handles and grants is its user's
//! business (a guest job's confinement in `roost serve`, a root program's domain in
//! `roost run`).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// What a domain's processes may not reach outside it (ABI 6).
pub mod scope {
    pub const ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
    pub const SIGNAL: u64 = 1 << 1;
}

/// `LANDLOCK_CREATE_RULESET_VERSION`.
const CREATE_RULESET_VERSION: u32 = 1;

/// `struct landlock_ruleset_attr` as ABI 6 has it; older kernels know a prefix of it.
#[repr(C)]
pub struct RulesetAttr {
    pub handled_access_fs: u64,
    pub handled_access_net: u64,
    pub scoped: u64,
}

/// The Landlock ABI version the kernel offers, `None` without Landlock.
pub fn abi() -> Option<i64> {
    // SAFETY: the version query takes no pointer.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    (v > 0).then_some(v)
}

/// A new ruleset of `attr`, given to the kernel as far as ABI `abi` knows it (the members
/// it lacks must be 0). Its descriptor is close-on-exec.
pub fn create_ruleset(attr: &RulesetAttr, abi: i64) -> io::Result<OwnedFd> {
    let size = match abi {
        ..=3 => std::mem::size_of::<u64>(),
        4 | 5 => 2 * std::mem::size_of::<u64>(),
        _ => std::mem::size_of::<RulesetAttr>(),
    };
    // SAFETY: attr outlives the call, size is at most its size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            attr as *const RulesetAttr,
            size,
            0u32,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just made for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Applies the ruleset open as `ruleset` to the calling process and everything it starts.
/// The caller must have set `PR_SET_NO_NEW_PRIVS` or hold `CAP_SYS_ADMIN`.
pub fn restrict_self(ruleset: RawFd) -> io::Result<()> {
    // SAFETY: a plain system call on a descriptor number.
    let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
