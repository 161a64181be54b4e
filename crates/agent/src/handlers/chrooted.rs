//! Calls of a thread that chrooted: it has left the namespace (the kernel resolves its paths
//! inside its own root), but what the mount list hides (`DENY`, `ENOENT`) stays hidden, and
//! so do roost's own `/proc/PID` directories (`crate::guard`). Each
//! path is resolved here as the kernel will (`openat2` with `RESOLVE_IN_ROOT` from the
//! thread's root; from its cwd or dirfd when those lie outside the root, as after a chroot
//! with no chdir), following a final symlink exactly when the call does, and a call whose
//! object, or whose new name's directory, one of its logical names hides fails as it would
//! in the namespace. What cannot be resolved here (a `/proc` magic link, which
//! `RESOLVE_IN_ROOT` refuses, or an unreadable directory on the way) fails with EACCES: roost
//! cannot show it is not hidden. A symlink swapped between this check and the kernel's own
//! resolution is not seen (docs/mount-list.md lists the races).

use super::path::follows;
use super::procfs::kernel_link;
use super::AT_FDCWD;
use crate::arch::Regs;
use crate::call::Call;
use crate::memory;
use crate::sys;
use crate::syscalls::{Follow, Kind, PathArg};
use roost_vfs::path::join;
use roost_vfs::MountTable;
use std::os::fd::OwnedFd;

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_IN_ROOT: u64 = 0x10;

/// A path argument as the checks need it: where it is and whether a final symlink counts.
struct Named {
    dirfd: Option<usize>,
    path: Vec<u8>,
    follow: bool,
}

/// The errno a chrooted thread's call must fail with because it reaches a hidden name, or
/// `None` to let the kernel make it.
pub fn refusal(
    table: &MountTable,
    tid: i32,
    (regs, call): (&Regs, &Call),
    kind: &Kind,
) -> Option<i32> {
    // roost's own `/proc/PID` is refused too, where the kernel would not refuse it.
    if !table.hides_any() && !crate::guard::privileged() {
        return None;
    }
    let names = named_paths(tid, (regs, call), kind)?;
    let root = sys::open_path(&format!("/proc/{tid}/root")).ok()?;
    let root_name = kernel_link(tid, "root")?;
    names
        .iter()
        .find_map(|n| match locate(tid, regs, n, &root, &root_name) {
            Ok(Some(physical)) if crate::guard::names_own_process(&physical) => Some(libc::EACCES),
            Ok(Some(physical)) => table.hidden(&physical),
            Ok(None) => None,
            Err(e) => Some(e),
        })
}

/// The path arguments of a call, read from the thread's memory (an unreadable one is the
/// kernel's EFAULT to give).
fn named_paths(tid: i32, (regs, call): (&Regs, &Call), kind: &Kind) -> Option<Vec<Named>> {
    let read = |arg: usize| memory::read_cstr(tid, regs.arg(arg), memory::PATH_MAX).ok();
    let spec = |dirfd, path, follow| {
        vec![PathArg {
            dirfd,
            path,
            follow,
            empty_flag: None,
            null_ok: false,
        }]
    };
    let args: Vec<PathArg> = match kind {
        Kind::Path { args, .. } => args.to_vec(),
        Kind::Exec { dirfd, path, .. } => spec(*dirfd, *path, Follow::Always),
        Kind::Readlink { dirfd, path, .. } => spec(*dirfd, *path, Follow::Never),
        Kind::SockAddr { addr, len, follow } => {
            let path = unix_socket_path(tid, regs.arg(*addr), regs.arg(*len))?;
            return Some(vec![Named {
                dirfd: None,
                path,
                follow: *follow,
            }]);
        }
        _ => return None,
    };
    let mut names = Vec::new();
    for arg in args {
        if regs.arg(arg.path) == 0 {
            continue;
        }
        let path = read(arg.path)?;
        if path.is_empty() {
            continue;
        }
        let follow = follows(call, regs, arg.follow).ok()?;
        names.push(Named {
            dirfd: arg.dirfd,
            path,
            follow,
        });
    }
    Some(names)
}

/// The path of the AF_UNIX pathname address at `addr` (none for other families or abstract
/// names).
fn unix_socket_path(tid: i32, addr: u64, len: u64) -> Option<Vec<u8>> {
    if addr == 0 || !(3..=110).contains(&len) {
        return None;
    }
    let sa = memory::read(tid, addr, len as usize).ok()?;
    super::socket::unix_path(&sa).map(<[u8]>::to_vec)
}

/// The physical path of what `n` names for the thread (or, for a name still to be made, of
/// its directory joined with the name), resolved as the kernel resolves it; `None` when
/// nothing can be reached there (the kernel fails the call itself, ENOENT or ENOTDIR).
fn locate(
    tid: i32,
    regs: &Regs,
    n: &Named,
    root: &OwnedFd,
    root_name: &[u8],
) -> Result<Option<Vec<u8>>, i32> {
    // A trailing slash names a directory: resolve the name itself, following it.
    let trimmed = match n.path.iter().rposition(|&b| b != b'/') {
        Some(end) => &n.path[..=end],
        None => &b"/"[..],
    };
    let follow = n.follow || trimmed.len() < n.path.len();
    let (start, inside, flags): (Option<OwnedFd>, Vec<u8>, u64) = if trimmed[0] == b'/' {
        (None, trimmed.to_vec(), RESOLVE_IN_ROOT)
    } else {
        let dirfd = n.dirfd.map_or(AT_FDCWD, |i| regs.arg(i) as i32 as i64);
        let base_link = match dirfd {
            AT_FDCWD => "cwd".to_string(),
            fd => format!("fd/{fd}"),
        };
        let base = kernel_link(tid, &base_link).ok_or(libc::EBADF)?;
        match roost_vfs::path::strip_prefix(&base, root_name) {
            // Inside the root: the same name from the root, `..` clamped there.
            Some(rel) => (
                None,
                join(if rel.is_empty() { b"/" } else { rel }, trimmed),
                RESOLVE_IN_ROOT,
            ),
            // Outside it (a chroot with no chdir): from the directory itself, unclamped.
            None => (
                Some(sys::open_path(&format!("/proc/{tid}/{base_link}")).map_err(|_| libc::EBADF)?),
                trimmed.to_vec(),
                RESOLVE_NO_MAGICLINKS,
            ),
        }
    };
    let at = start.as_ref().unwrap_or(root);
    let unreachable = |e: i32| matches!(e, libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG);
    match resolve(at, &inside, follow, flags) {
        Ok(p) => Ok(Some(p)),
        // A name still to be made: its directory decides.
        Err(libc::ENOENT) => {
            let cut = inside.iter().rposition(|&b| b == b'/');
            let (dir, name) = match cut {
                Some(0) => (&b"/"[..], &inside[1..]),
                Some(c) => (&inside[..c], &inside[c + 1..]),
                None => (&b"."[..], &inside[..]),
            };
            match resolve(at, dir, true, flags) {
                Ok(dir) => Ok(Some(join(&dir, name))),
                Err(e) if unreachable(e) => Ok(None),
                Err(_) => Err(libc::EACCES),
            }
        }
        Err(e) if unreachable(e) || e == libc::ELOOP => Ok(None),
        Err(_) => Err(libc::EACCES),
    }
}

/// The physical path of `path` resolved from `at` with `resolve` flags.
fn resolve(at: &OwnedFd, path: &[u8], follow: bool, resolve: u64) -> Result<Vec<u8>, i32> {
    let flags = libc::O_PATH | if follow { 0 } else { libc::O_NOFOLLOW };
    let fd = sys::openat2(at, path, flags, resolve)?;
    sys::path_of(&fd).map_err(|_| libc::EACCES)
}
