//! Calls of a thread that chrooted: it has left the namespace (the kernel resolves its paths
//! inside its own root), but what the mount list hides (`DENY`, `ENOENT`) stays hidden. Each
//! path is resolved here as the kernel will, inside the thread's root (`openat2` with
//! `RESOLVE_IN_ROOT`), and a call whose object, or whose new name's directory, one of its
//! logical names hides fails as it would in the namespace. A symlink swapped between this
//! check and the kernel's own resolution is not seen (documented in docs/agent.md).

use crate::memory;
use crate::syscalls::{Follow, Kind, PathArg};
use roost_vfs::path::join;
use roost_vfs::MountTable;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::{o_path, AT_FDCWD};
use crate::arch::Regs;

const RESOLVE_IN_ROOT: u64 = 0x10;

/// The errno a chrooted thread's call must fail with because it reaches a hidden name, or
/// `None` to let the kernel make it.
pub fn refusal(table: &MountTable, tid: i32, regs: &Regs, kind: &Kind) -> Option<i32> {
    if !table.hides_any() {
        return None;
    }
    let args: Vec<PathArg> = match kind {
        Kind::Path { args, .. } => args.to_vec(),
        Kind::Exec { dirfd, path, .. } | Kind::Readlink { dirfd, path, .. } => vec![PathArg {
            dirfd: *dirfd,
            path: *path,
            follow: if matches!(kind, Kind::Exec { .. }) {
                Follow::Always
            } else {
                Follow::Never
            },
            empty_flag: None,
            null_ok: false,
        }],
        _ => return None,
    };
    let root = o_path(&format!("/proc/{tid}/root"))?;
    let root_name = link(&format!("/proc/{tid}/root"))?;
    args.iter().find_map(|arg| {
        let path = memory::read_cstr(tid, regs.arg(arg.path), memory::PATH_MAX).ok()?;
        if path.is_empty() {
            return None;
        }
        let inside = inside_root(tid, regs, arg, &path, &root_name)?;
        let follow = matches!(
            arg.follow,
            Follow::Always | Follow::OpenFlags(_) | Follow::OpenHow(_)
        );
        let physical = match resolve(&root, &inside, follow) {
            Some(p) => p,
            // A name still to be made: its directory decides.
            None => {
                let cut = inside.iter().rposition(|&b| b == b'/')?;
                let dir = resolve(&root, &inside[..cut.max(1)], true)?;
                join(&dir, &inside[cut + 1..])
            }
        };
        table.hidden(&physical)
    })
}

/// `path` as an absolute path inside the thread's root (`root_name` physically).
fn inside_root(
    tid: i32,
    regs: &Regs,
    arg: &PathArg,
    path: &[u8],
    root_name: &[u8],
) -> Option<Vec<u8>> {
    if path[0] == b'/' {
        return Some(path.to_vec());
    }
    let dirfd = arg.dirfd.map_or(AT_FDCWD, |i| regs.arg(i) as i32 as i64);
    let base = match dirfd {
        AT_FDCWD => link(&format!("/proc/{tid}/cwd"))?,
        fd => link(&format!("/proc/{tid}/fd/{fd}"))?,
    };
    let rel = roost_vfs::path::strip_prefix(&base, root_name)?;
    let rel = if rel.is_empty() { &b"/"[..] } else { rel };
    Some(join(rel, path))
}

/// The physical path of what `inside` names in `root`, resolved as the kernel resolves it
/// for a thread whose root that is.
fn resolve(root: &OwnedFd, inside: &[u8], follow: bool) -> Option<Vec<u8>> {
    let c = CString::new(inside).ok()?;
    let flags = libc::O_PATH | libc::O_CLOEXEC | if follow { 0 } else { libc::O_NOFOLLOW };
    let how: [u64; 3] = [flags as u64, 0, RESOLVE_IN_ROOT];
    // SAFETY: openat2 with a valid C string and a whole `struct open_how`.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            c.as_ptr(),
            how.as_ptr(),
            24usize,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    link(&format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

fn link(path: &str) -> Option<Vec<u8>> {
    std::fs::read_link(path)
        .ok()
        .map(|p| p.into_os_string().into_encoded_bytes())
}
