//! Name-space and attribute changes by notification: mkdir, mknod, rmdir, unlink, rename,
//! link, symlink, chmod, chown and truncate — the path calls whose other arguments are plain
//! numbers, so the supervisor can make the same call itself. A call on a mapped path is
//! made here on the physical paths. A call that may change which names are symlinks
//! (rmdir, unlink, rename, link, symlink) is made here even when its paths pass, so the
//! resolution cache is cleared after the change and never between the agent's verdict and
//! the kernel's work, where another thread could cache the old state for good. Its
//! relative paths are reached through `/proc/TID/cwd` and `/proc/TID/fd/N`, the caller's
//! own directories.

use super::identity::{as_caller, prepare};
use super::tgid;
use crate::arch::Regs;
use crate::handlers::{Arg, Scratch, AT_FDCWD};
use crate::memory;
use crate::syscalls::PathArg;
use roost_vfs::path::join;
use std::ffi::CString;

/// The calls this module makes.
pub const CHANGES: &[&str] = &[
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "rmdir",
    "unlink",
    "unlinkat",
    "rename",
    "renameat",
    "renameat2",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "chmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "lchown",
    "fchownat",
    "truncate",
];

pub fn is_change(name: &str) -> bool {
    CHANGES.contains(&name)
}

/// Calls that apply the caller's umask.
fn applies_umask(name: &str) -> bool {
    matches!(name, "mkdir" | "mkdirat" | "mknod" | "mknodat")
}

/// The argument holding a symlink's target: text stored as given, not a path to resolve.
fn target_arg(name: &str) -> Option<usize> {
    matches!(name, "symlink" | "symlinkat").then_some(0)
}

/// One trapped change.
pub struct Change<'a> {
    pub nr: i64,
    pub name: &'a str,
    pub regs: &'a Regs,
    pub tid: i32,
    /// The call's path arguments (from the syscall table).
    pub paths: &'a [PathArg],
}

/// The caller's own name for a path it passed: absolute as given (with `/proc/self` made
/// the caller's), relative through its cwd or dirfd. Also says which dirfd was used.
fn callers_path(c: &Change<'_>, arg: &PathArg, path: &[u8]) -> Result<(Vec<u8>, Option<i64>), i32> {
    if path.is_empty() {
        return Err(libc::ENOENT); // none of these calls takes AT_EMPTY_PATH here
    }
    if path[0] == b'/' {
        return Ok((proc_self_as(c.tid, path), None));
    }
    let dirfd = arg.dirfd.map_or(AT_FDCWD, |i| c.regs.arg(i) as i32 as i64);
    let base = match dirfd {
        AT_FDCWD => format!("/proc/{}/cwd", c.tid),
        fd if fd >= 0 => format!("/proc/{}/fd/{fd}", c.tid),
        _ => return Err(libc::EBADF),
    };
    Ok((
        join(base.as_bytes(), path),
        (dirfd != AT_FDCWD).then_some(dirfd),
    ))
}

/// `/proc/self` and `/proc/thread-self` as the caller means them.
fn proc_self_as(tid: i32, path: &[u8]) -> Vec<u8> {
    let swap = |prefix: &[u8], with: String| {
        let rest = &path[prefix.len()..];
        (rest.is_empty() || rest[0] == b'/').then(|| [with.as_bytes(), rest].concat())
    };
    let tgid = || tgid(tid).unwrap_or(tid);
    path.strip_prefix(b"/proc/thread-self")
        .and_then(|_| swap(b"/proc/thread-self", format!("/proc/{}/task/{tid}", tgid())))
        .or_else(|| {
            path.strip_prefix(b"/proc/self")
                .and_then(|_| swap(b"/proc/self", format!("/proc/{}", tgid())))
        })
        .unwrap_or_else(|| path.to_vec())
}

/// Makes change `c`, with `rewrite` (the handler's physical paths and AT_FDCWD dirfds)
/// applied; the caller's other paths are reached as the caller would. Returns the call's
/// result or errno.
pub fn perform(
    c: &Change<'_>,
    rewrite: Option<(Scratch, Vec<(usize, Arg)>)>,
    other_identity: bool,
) -> Result<i64, i32> {
    let mut args: [u64; 6] = std::array::from_fn(|i| c.regs.arg(i));
    let mut replaced = [false; 6];
    let scratch = match rewrite {
        Some((scratch, changes)) => {
            for (i, a) in changes {
                args[i] = match a {
                    Arg::Value(v) => v,
                    Arg::Scratch(off) => {
                        replaced[i] = true;
                        scratch.bytes[off..].as_ptr() as u64
                    }
                };
            }
            Some(scratch)
        }
        None => None,
    };
    // Local copies of the strings the call reads; they outlive the call below.
    let mut owned: Vec<CString> = Vec::new();
    let mut dirfds_used = Vec::new();
    let mut own = |args: &mut [u64; 6], i: usize, bytes: Vec<u8>| -> Result<(), i32> {
        let s = CString::new(bytes).map_err(|_| libc::EINVAL)?;
        args[i] = s.as_ptr() as u64;
        owned.push(s);
        Ok(())
    };
    for arg in c.paths {
        if replaced[arg.path] || args[arg.path] == 0 {
            continue;
        }
        let path = memory::read_cstr(c.tid, args[arg.path], memory::PATH_MAX)
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EFAULT))?;
        let (full, dirfd) = callers_path(c, arg, &path)?;
        dirfds_used.extend(dirfd);
        own(&mut args, arg.path, full)?;
        if let Some(d) = arg.dirfd {
            args[d] = AT_FDCWD as u64;
        }
    }
    if let Some(t) = target_arg(c.name) {
        let target = memory::read_cstr(c.tid, c.regs.arg(t), memory::PATH_MAX)
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EFAULT))?;
        own(&mut args, t, target)?;
    }
    let who = prepare(c.tid, applies_umask(c.name), other_identity)?;
    let rc = as_caller(who.as_ref(), || {
        // SAFETY: every pointer argument now points at a NUL-terminated string owned here
        // (`owned`, `scratch`); the others are the caller's plain numbers.
        unsafe { libc::syscall(c.nr, args[0], args[1], args[2], args[3], args[4], args[5]) }
    });
    drop(scratch);
    if rc >= 0 {
        return Ok(rc);
    }
    let e = super::lookup::last_errno();
    // A dirfd that is not open: the kernel says EBADF, the /proc path ENOENT.
    let closed = |fd: &i64| !std::path::Path::new(&format!("/proc/{}/fd/{fd}", c.tid)).exists();
    if e == libc::ENOENT && dirfds_used.iter().any(closed) {
        return Err(libc::EBADF);
    }
    Err(e)
}
