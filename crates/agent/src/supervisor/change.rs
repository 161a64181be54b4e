//! Name-space and attribute changes by notification: mkdir, mknod, rmdir, unlink, rename,
//! link, symlink, chmod, chown and truncate — the path calls whose other arguments are plain
//! numbers, so the supervisor can make the same change itself.
//!
//! A change on a mapped path is made here on the physical path. A change that may alter
//! which names are symlinks (rmdir, unlink, rename, link, symlink: the syscall table marks
//! them `mutates`) is made here even when its paths pass, so the resolution cache is
//! cleared after the change and never between the agent's verdict and the kernel's work,
//! where another thread could cache the old state for good. Its paths are then reached as the caller reaches them:
//! - relative paths through handles on the caller's cwd or dirfd (`/proc/TID/cwd`,
//!   `/proc/TID/fd/N`, opened `O_PATH` before the notification is re-validated, so a
//!   recycled pid can never lend its directories);
//! - paths whose resolution enters `/proc` (given so, or through `/dev/fd`, a symlink or a
//!   dirfd on /proc) by their resolved name with `/proc/self` made the caller's;
//! - other absolute paths as given, when the caller shares roost's root and mount
//!   namespace. After a `chroot` or `setns` the kernel must resolve them itself, so such a
//!   change is let through (`CONTINUE`, with the cache cleared before).
//!
//! Every call is made in its `*at` form, with the caller's paths and numbers read before
//! the notification is re-validated and never re-read after.

use super::lookup::last_errno;
use super::Notification;
use crate::arch::Regs;
use crate::arch::Sys;
use crate::call::Call;
use crate::caller::{as_caller, prepare};
use crate::handlers::AT_FDCWD;
use crate::syscalls::PathArg;
use roost_vfs::path::strip_prefix;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

/// How the handler left one path argument.
pub enum Given<'a> {
    /// Rewritten to this absolute physical path.
    Physical(&'a [u8]),
    /// Passed: the bytes the caller gave and their resolved logical name.
    Caller { path: &'a [u8], logical: &'a [u8] },
    /// A null pointer.
    Null,
}

/// One trapped change, with everything read from the caller.
pub struct Change<'a> {
    pub call: Call,
    pub regs: &'a Regs,
    pub tid: i32,
    /// The call's path arguments (from the syscall table), and how each was left.
    pub paths: &'a [(PathArg, Given<'a>)],
    /// A symlink's target, read from the caller.
    pub target: Option<&'a [u8]>,
}

/// What became of a change.
pub enum Outcome {
    /// Made here: the call's result or errno.
    Made(Result<i64, i32>),
    /// The kernel must make it (the caller's root or mount namespace is not roost's).
    Continue,
}

/// A path argument as handed to the kernel: relative to `dir` (a handle roost holds, or
/// AT_FDCWD for absolute paths).
struct Operand {
    dir: Option<OwnedFd>,
    path: CString,
}

impl Operand {
    fn absolute(path: &[u8]) -> Result<Operand, i32> {
        Ok(Operand {
            dir: None,
            path: CString::new(path).map_err(|_| libc::EINVAL)?,
        })
    }

    fn dirfd(&self) -> i64 {
        self.dir.as_ref().map_or(AT_FDCWD, |d| d.as_raw_fd().into())
    }

    fn ptr(&self) -> u64 {
        self.path.as_ptr() as u64
    }
}

/// (device, inode) of a file.
type FileId = (u64, u64);

/// The [`FileId`] of what `path` names.
fn identity_of(path: &str) -> Option<FileId> {
    roost_vfs::resolve::file_id(path.as_bytes())
}

/// Whether thread `tid` resolves absolute paths as roost does: the same root directory in
/// the same mount namespace.
fn shares_root(tid: i32) -> bool {
    static OWN: OnceLock<(Option<FileId>, Option<FileId>)> = OnceLock::new();
    let own = OWN.get_or_init(|| (identity_of("/"), identity_of("/proc/self/ns/mnt")));
    let theirs = (
        identity_of(&format!("/proc/{tid}/root")),
        identity_of(&format!("/proc/{tid}/ns/mnt")),
    );
    own.0.is_some() && own.1.is_some() && *own == theirs
}

/// The operand for a path the caller gave and the handler let pass.
fn caller_operand(
    c: &Change<'_>,
    arg: &PathArg,
    path: &[u8],
    logical: &[u8],
) -> Result<Operand, i32> {
    if path.is_empty() {
        return Err(libc::ENOENT); // AT_EMPTY_PATH changes never come here
    }
    if strip_prefix(logical, b"/proc").is_some() {
        return Operand::absolute(&crate::handlers::procfs::proc_self_as(c.tid, logical));
    }
    if path[0] == b'/' {
        return Operand::absolute(path);
    }
    let dirfd = arg.dirfd.map_or(AT_FDCWD, |i| c.regs.arg(i) as i32 as i64);
    let base = match dirfd {
        AT_FDCWD => format!("/proc/{}/cwd", c.tid),
        fd if fd >= 0 => format!("/proc/{}/fd/{fd}", c.tid),
        _ => return Err(libc::EBADF),
    };
    Ok(Operand {
        // A closed dirfd: the kernel says EBADF.
        dir: Some(crate::sys::open_path(&base).map_err(|_| libc::EBADF)?),
        path: CString::new(path).map_err(|_| libc::EINVAL)?,
    })
}

/// Makes change `c` (answering notification `n`); `other_identity`: the caller may not
/// share roost's credentials.
pub fn perform(c: &Change<'_>, n: Notification, other_identity: bool) -> Outcome {
    let mut operands = Vec::with_capacity(c.paths.len());
    for (arg, given) in c.paths {
        let operand = match given {
            Given::Physical(p) => Operand::absolute(p),
            Given::Caller { path, logical } => caller_operand(c, arg, path, logical),
            Given::Null => Err(libc::EFAULT),
        };
        match operand {
            Ok(o) => operands.push(o),
            Err(e) => return Outcome::Made(Err(e)),
        }
    }
    // Every path of the caller's meets its root: absolute ones at once, relative ones at
    // `..` or an absolute symlink.
    let callers = |g: &Given<'_>| !matches!(g, Given::Physical(_));
    if c.paths.iter().any(|(_, g)| callers(g)) && !shares_root(c.tid) {
        let all_callers = c.paths.iter().all(|(_, g)| callers(g));
        // A mapped path cannot be handed to the kernel as given; one in another root
        // cannot be reached from here: as if on another file system.
        return if all_callers {
            Outcome::Continue
        } else {
            Outcome::Made(Err(libc::EXDEV))
        };
    }
    let target = match c.target.map(|t| CString::new(t).map_err(|_| libc::EINVAL)) {
        Some(Err(e)) => return Outcome::Made(Err(e)),
        t => t.and_then(Result::ok),
    };
    let who = match prepare(c.tid, c.call.applies_umask(), other_identity) {
        Ok(who) => who,
        Err(e) => return Outcome::Made(Err(e)),
    };
    if let Err(e) = n.ensure_waiting() {
        return Outcome::Made(Err(e));
    }
    let rc = as_caller(who.as_ref(), || call(&c.call, &operands, target.as_ref()));
    Outcome::Made(if rc < 0 { Err(last_errno()) } else { Ok(rc) })
}

/// Makes `call` in its `*at` form on `ops` (its path operands in order).
fn call(call: &Call, ops: &[Operand], target: Option<&CString>) -> i64 {
    let (d0, p0) = (ops[0].dirfd() as u64, ops[0].ptr());
    let second = || (ops[1].dirfd() as u64, ops[1].ptr());
    let raw = |nr: i64, args: [u64; 5]| {
        // SAFETY: every pointer is a NUL-terminated string owned by `ops` or `target`,
        // alive for the call; the other arguments are the caller's plain numbers.
        unsafe { libc::syscall(nr, args[0], args[1], args[2], args[3], args[4]) }
    };
    let int = |v: i32| u64::from(v as u32);
    match *call {
        Call::Unlink { flags } => raw(libc::SYS_unlinkat, [d0, p0, int(flags), 0, 0]),
        Call::Rename { flags } => {
            let (d1, p1) = second();
            raw(libc::SYS_renameat2, [d0, p0, d1, p1, u64::from(flags)])
        }
        Call::Link { flags } => {
            let (d1, p1) = second();
            raw(libc::SYS_linkat, [d0, p0, d1, p1, int(flags)])
        }
        Call::Symlink { .. } => {
            let t = target.map_or(0, |t| t.as_ptr() as u64);
            raw(libc::SYS_symlinkat, [t, d0, p0, 0, 0])
        }
        Call::Mkdir { mode } => raw(libc::SYS_mkdirat, [d0, p0, u64::from(mode), 0, 0]),
        Call::Mknod { mode, dev } => raw(libc::SYS_mknodat, [d0, p0, u64::from(mode), dev, 0]),
        // fchmodat has no flags; only fchmodat2 (Linux 6.6) takes them.
        Call::Chmod { mode, flags: 0 } => raw(libc::SYS_fchmodat, [d0, p0, u64::from(mode), 0, 0]),
        Call::Chmod { mode, flags } => raw(
            Sys::Fchmodat2.nr(),
            [d0, p0, u64::from(mode), int(flags), 0],
        ),
        Call::Chown { uid, gid, flags } => raw(
            libc::SYS_fchownat,
            [d0, p0, u64::from(uid), u64::from(gid), int(flags)],
        ),
        // truncate has no *at form; it is only made here on a rewritten (absolute) path.
        Call::Truncate { length } if ops[0].dir.is_none() => {
            raw(libc::SYS_truncate, [p0, length as u64, 0, 0, 0])
        }
        _ => {
            // SAFETY: sets this thread's errno for the caller's answer.
            unsafe { *libc::__errno_location() = libc::ENOSYS };
            -1
        }
    }
}
