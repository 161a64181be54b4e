//! What a call that removes, renames or links names answers where a mount point is in the
//! way, as the kernel answers for a bind mount: a name's mount is the one that holds its
//! parent directory, and a rename or link between two mounts fails with EXDEV before
//! anything else is looked at; a mount point is busy (EBUSY) only after the checks the
//! kernel makes first (a directory's unlink is EISDIR, a rename into its own subtree
//! EINVAL, onto an ancestor ENOTEMPTY, file onto directory EISDIR...). The one departure:
//! renaming a directory that holds a mount point is refused (EBUSY) where the kernel
//! moves the mount with it, since a mapping cannot move.

use super::{Ctx, Resolution};
use crate::call::Call;
use crate::syscalls::PathArg;
use roost_vfs::path::{parent, strip_prefix};

const RENAME_NOREPLACE: u32 = libc::RENAME_NOREPLACE;
const RENAME_EXCHANGE: u32 = libc::RENAME_EXCHANGE;

/// The errno the call answers instead of being made (None: it goes on). `resolved` holds
/// its path arguments; `cross`: a rename or link.
pub(super) fn refusal(
    ctx: &Ctx<'_>,
    resolved: &[(PathArg, Resolution)],
    cross: bool,
) -> Option<i32> {
    let logical = |i: usize| resolved.get(i).and_then(|(_, r)| r.logical());
    if cross {
        let (old, new) = (logical(0)?, logical(1)?);
        let renames = matches!(ctx.call, Call::Rename { .. });
        // A rename's two names are on their parents' mounts; a link's source is on the
        // mount that holds it (a `/proc/PID/fd/N` one, on the mount it was opened through,
        // is left to the kernel).
        let source = if renames {
            parent(old)
        } else if strip_prefix(old, b"/proc").is_some() {
            return None;
        } else {
            old
        };
        if !one_mount(ctx, (old, source), new) {
            return Some(libc::EXDEV);
        }
        return if renames { rename(ctx, old, new) } else { None };
    }
    let Call::Unlink { flags } = ctx.call else {
        return None;
    };
    let rmdir = flags & libc::AT_REMOVEDIR != 0;
    remove(ctx, logical(0)?, rmdir)
}

/// Whether the call's source `old` (on the mount that holds `source`) and its new name
/// `new` lie on one mount: the same mapping (or none) for local names; a remote driver's
/// names share a file system with the same server's only.
fn one_mount(ctx: &Ctx<'_>, (old, source): (&[u8], &[u8]), new: &[u8]) -> bool {
    let (a, b) = (ctx.ns.map(old), ctx.ns.map(new));
    if a.local_path().is_some() && b.local_path().is_some() {
        let table = ctx.ns.table();
        return table.mount_of(source) == table.mount_of(parent(new));
    }
    a.may_share_file_system(&b)
}

/// A name that holds a mount point below it (not one itself).
fn holds_below(ctx: &Ctx<'_>, logical: &[u8]) -> bool {
    let table = ctx.ns.table();
    table.holds_mount(logical) && !table.is_mount_point(logical)
}

/// unlink (`rmdir` false) or rmdir of `logical`.
fn remove(ctx: &Ctx<'_>, logical: &[u8], rmdir: bool) -> Option<i32> {
    let table = ctx.ns.table();
    if table.is_mount_point(logical) {
        let dir = ctx.ns.is_dir(logical).ok()?;
        return Some(match (rmdir, dir) {
            (true, false) => libc::ENOTDIR,
            (false, true) => libc::EISDIR,
            _ => libc::EBUSY,
        });
    }
    if holds_below(ctx, logical) {
        // A directory, and never empty: it holds the mount point.
        return Some(if rmdir { libc::ENOTEMPTY } else { libc::EISDIR });
    }
    None
}

/// A rename of `old` to `new` on one mount, in the kernel's order of checks.
fn rename(ctx: &Ctx<'_>, old: &[u8], new: &[u8]) -> Option<i32> {
    let table = ctx.ns.table();
    if !table.holds_mount(old) && !table.holds_mount(new) {
        return None;
    }
    let Call::Rename { flags } = ctx.call else {
        return None;
    };
    let exchange = flags & RENAME_EXCHANGE != 0;
    let old_dir = match ctx.ns.is_dir(old) {
        Ok(d) => d,
        Err(e) => return Some(e),
    };
    let new_dir = match ctx.ns.is_dir(new) {
        Ok(d) => Some(d),
        Err(_) if holds_below(ctx, new) => Some(true),
        Err(_) if exchange => return Some(libc::ENOENT),
        Err(_) => None,
    };
    if flags & RENAME_NOREPLACE != 0 && new_dir.is_some() {
        return Some(libc::EEXIST);
    }
    let below = |a: &[u8], b: &[u8]| strip_prefix(a, b).is_some_and(|rest| !rest.is_empty());
    if below(new, old) {
        return Some(libc::EINVAL);
    }
    if below(old, new) {
        return Some(if exchange {
            libc::EINVAL
        } else {
            libc::ENOTEMPTY
        });
    }
    if !exchange {
        match (old_dir, new_dir) {
            (true, Some(false)) => return Some(libc::ENOTDIR),
            (false, Some(true)) => return Some(libc::EISDIR),
            _ => {}
        }
    }
    if table.is_mount_point(old) || table.is_mount_point(new) || table.holds_mount(old) {
        return Some(libc::EBUSY);
    }
    // `new` holds a mount point below it: a directory never empty.
    Some(if exchange {
        libc::EBUSY
    } else {
        libc::ENOTEMPTY
    })
}
