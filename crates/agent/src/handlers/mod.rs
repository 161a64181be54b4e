//! Syscall handlers, one module per class (paths, exec, procfs/cwd, sockets). A handler looks
//! at a thread stopped at a seccomp stop and returns a [`Decision`]: let the call pass, rewrite
//! some arguments to point at data in the thread's scratch slot, fail it, or emulate it. The
//! tracer applies the decision; handlers never touch ptrace themselves.

pub mod chrooted;
pub mod embedded;
pub mod exec;
pub mod handle;
pub mod mount_points;
pub mod mounts_view;
pub mod path;
pub mod procfs;
pub mod socket;
pub mod virtual_ids;

use crate::arch::Regs;
use crate::arch::Sys;
use crate::call::Call;
use crate::memory;
use crate::syscalls::{Kind, CHROOT_PATH};
use crate::task::{AfterExit, CallerFs};
use roost_vfs::path::{has_dotdot, join};
use roost_vfs::Namespace;

pub use crate::decision::{Action, Arg, Decision, Scratch};

pub const AT_FDCWD: i64 = -100;

/// What a handler sees of the stopped thread.
pub struct Ctx<'a> {
    pub pid: i32,
    /// The trapped call, and what it asks decoded.
    pub sys: Sys,
    pub call: Call,
    pub regs: &'a Regs,
    pub ns: &'a Namespace,
    /// The caller's working directory (read when first used).
    pub fs: &'a CallerFs<'a>,
    /// The logical executable of the thread's process, when known.
    pub exe: Option<&'a [u8]>,
    /// Path arguments already read: (address, bytes), saving a second read of them.
    pub known_paths: &'a [(u64, Vec<u8>)],
    /// Whether a call let through as it is still needs its paths' logical names (for
    /// `--trace` and `--summary`); without, a name the kernel resolves alike is let through
    /// unnamed ([`path::kernel_resolves_alike`]).
    pub names_recorded: bool,
    /// The run's in-process fast path, which decides which programs load it.
    pub fast: Option<&'a crate::fastpath::FastPath>,
}

impl<'a> Ctx<'a> {
    /// What thread `pid` shows of call `sys` (its registers `regs`, decoded as `call`),
    /// with no path read yet.
    pub fn new(
        pid: i32,
        (sys, call, regs): (Sys, Call, &'a Regs),
        ns: &'a Namespace,
        fs: &'a CallerFs<'a>,
        exe: Option<&'a [u8]>,
    ) -> Ctx<'a> {
        Ctx {
            pid,
            sys,
            call,
            regs,
            ns,
            fs,
            exe,
            known_paths: &[],
            names_recorded: true,
            fast: None,
        }
    }

    /// As [`Ctx::new`], the call decoded here: for the delivery paths that have not decoded
    /// it yet (an exec's notification, a call only a ptrace stop could handle before).
    pub fn decoding(
        pid: i32,
        (sys, regs): (Sys, &'a Regs),
        ns: &'a Namespace,
        fs: &'a CallerFs<'a>,
        exe: Option<&'a [u8]>,
    ) -> Ctx<'a> {
        Ctx::new(pid, (sys, Call::decode(sys, regs, pid), regs), ns, fs, exe)
    }

    /// A syscall argument read as an `int` (dirfds, flags).
    pub fn int_arg(&self, i: usize) -> i64 {
        self.regs.arg(i) as i32 as i64
    }

    pub fn read_path(&self, ptr: u64) -> Result<Vec<u8>, i32> {
        if let Some((_, path)) = self.known_paths.iter().find(|(at, _)| *at == ptr) {
            return Ok(path.clone());
        }
        memory::read_cstr(self.pid, ptr, memory::PATH_MAX).map_err(memory::errno)
    }
}

/// What to do with trapped call `kind`, by the handler of its class: the one decision both
/// delivery paths (a ptrace stop, a notification) apply.
pub fn decide(ctx: &mut Ctx<'_>, kind: Kind) -> Decision {
    // The walk below and the remote call made after it are one call's (`stat_in_call`).
    roost_vfs::call_starts();
    match kind {
        Kind::Path {
            args,
            mutates,
            cross,
        } => path::handle(ctx, args, mutates, cross),
        Kind::Exec {
            dirfd,
            path,
            argv,
            flags,
        } => exec::handle(ctx, dirfd, path, argv, flags),
        Kind::Readlink {
            dirfd,
            path,
            buf,
            size,
        } => procfs::readlink(ctx, dirfd, path, buf, size),
        Kind::Getcwd => procfs::getcwd(ctx),
        Kind::Chdir => procfs::chdir(ctx),
        Kind::Fchdir => procfs::fchdir(),
        Kind::SockAddr { addr, len, follow } => socket::sockaddr(ctx, addr, len, follow),
        Kind::SockName { addr, len, peer } => socket::sockname(ctx, addr, len, peer),
        Kind::SendMsg => socket::sendmsg(ctx),
        Kind::SendMmsg => socket::sendmmsg(ctx),
        Kind::Chroot => {
            let mut d = path::handle(ctx, CHROOT_PATH, false, false);
            d.after = Some(AfterExit::Chroot);
            d
        }
        Kind::Clone => {
            // The child of CLONE_UNTRACED would make its trapped calls with no tracer
            // (ENOSYS) and its others outside the namespace: it is traced all the same.
            let flags = ctx.regs.arg(0) & !(libc::CLONE_UNTRACED as u64);
            Decision::new(Action::Rewrite {
                scratch: Default::default(),
                args: vec![(0, Arg::Value(flags))],
            })
        }
        Kind::OpenByHandle { mount_fd, handle } => handle::open_by_handle(ctx, mount_fd, handle),
        Kind::Bpf => embedded::bpf(ctx),
        Kind::PerfEventOpen => embedded::perf_event_open(ctx),
        // Trapped only as notifications, which pass them.
        Kind::Credentials => Decision::pass(),
        Kind::Refuse(e) | Kind::RefuseIf { errno: e, .. } => Decision::fail(e),
        Kind::Aimed(aimed) => match crate::guard::check(ctx.pid, ctx.sys, ctx.regs, aimed) {
            Ok(()) => Decision::pass(),
            Err(e) => Decision::fail(e),
        },
        Kind::Identity => unreachable!("id queries are answered by `virtual_ids`"),
    }
}

/// Whether the kernel may interrupt call `name` and restart it after a signal (an `ERESTART*`
/// result), which would run it again with the arguments roost rewrote: a blocking open of
/// anything but a regular file or directory (a FIFO waits for its other end, a terminal for
/// carrier), a connect that waits for room in a listener's backlog, a send to a datagram
/// socket whose receiver's queue is full. Such calls get an exit stop that puts the
/// program's arguments back.
pub fn may_restart(sys: Sys, call: &Call, physical: Option<&[u8]>) -> bool {
    let open = match call {
        Call::Open(open) => open,
        _ => {
            return matches!(
                sys,
                Sys::Connect | Sys::Sendto | Sys::Sendmsg | Sys::Sendmmsg
            )
        }
    };
    if !open.may_block() {
        return false;
    }
    physical.is_some_and(|p| {
        use std::os::unix::ffi::OsStrExt;
        std::fs::metadata(std::ffi::OsStr::from_bytes(p)).is_ok_and(|m| !m.is_file() && !m.is_dir())
    })
}

/// Says on stderr, once per syscall for the whole session, that a call could not be
/// translated and fails with ENOSYS.
pub fn report_untranslatable(what: &str, path: Option<&[u8]>) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().expect("report lock");
    if said.iter().any(|n| n == what) {
        return;
    }
    said.push(what.to_string());
    let call = match path {
        Some(p) => format!("{what}({})", String::from_utf8_lossy(p)),
        None => what.to_string(),
    };
    eprintln!("roost: {call} cannot be translated: it fails with ENOSYS (said once)");
}

/// A path resolved in the namespace.
#[derive(Debug, PartialEq)]
pub enum Resolution {
    /// The kernel would find the right object with the path as given.
    Pass {
        logical: Vec<u8>,
    },
    /// The call must use this absolute physical path instead.
    Rewrite {
        logical: Vec<u8>,
        physical: Vec<u8>,
        followed_symlink: bool,
    },
    /// The object is on a remote driver: the call is made through it.
    Remote {
        logical: Vec<u8>,
        remote: roost_vfs::Remote,
    },
    Fail(i32),
}

impl Resolution {
    pub fn logical(&self) -> Option<&[u8]> {
        match self {
            Resolution::Pass { logical }
            | Resolution::Rewrite { logical, .. }
            | Resolution::Remote { logical, .. } => Some(logical),
            Resolution::Fail(_) => None,
        }
    }
}

/// The path an open fd of `pid` names, if it is a path.
pub fn fd_path(pid: i32, fd: i64) -> Option<Vec<u8>> {
    let p = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
    let b = p.into_os_string().into_encoded_bytes();
    (b.first() == Some(&b'/')).then_some(b)
}

/// The logical name of a local physical path (for dirfds, `/proc/*/fd/N`, ...), as a bind
/// mount would show it ([`Namespace::logical_dir`]). The name maps back to the same
/// physical path, which is what resolution relative to it needs. Working directories are
/// named by [`Namespace::logical_cwd`] instead.
pub fn logical_of_physical(ns: &Namespace, physical: &[u8]) -> Vec<u8> {
    ns.logical_dir(physical)
}

/// Where the caller's relative names start: the logical and physical names of its cwd
/// (`dirfd` is `AT_FDCWD`) or of directory descriptor `dirfd`; `None` when the descriptor
/// has no path (a pipe, a memfd, a deleted file).
pub(crate) fn relative_start(ctx: &Ctx<'_>, dirfd: i64) -> Option<(Vec<u8>, Vec<u8>)> {
    if dirfd == AT_FDCWD {
        let fs = ctx.fs.get();
        return Some((fs.logical.clone(), fs.physical.clone()));
    }
    let physical = fd_path(ctx.pid, dirfd)?;
    Some((logical_of_physical(ctx.ns, &physical), physical))
}

/// Resolves `path` (relative to `dirfd`, or the cwd) for a call that follows a final
/// symlink or not. Every path is walked (warm: hash probes only), so a symlink outside the
/// mounts that points into one is followed logically; a walk that touched no mount lets the
/// call pass with its own pointer.
pub fn resolve_path(
    ctx: &mut Ctx<'_>,
    dirfd: Option<i64>,
    path: &[u8],
    follow: bool,
) -> Resolution {
    let dirfd = dirfd.unwrap_or(AT_FDCWD);
    // Where a relative path starts: the directory's logical and physical names.
    let base = if path.first() == Some(&b'/') {
        None
    } else {
        match relative_start(ctx, dirfd) {
            Some(start) => Some(start),
            None => {
                return Resolution::Pass {
                    logical: path.to_vec(),
                }
            }
        }
    };
    let start = base.as_ref().map_or(&b"/"[..], |(logical, _)| logical);
    if ctx.ns.table().is_empty() {
        // No mounts (tracing only): every name is the host's (but roost's `/proc/PID`).
        let logical = roost_vfs::path::normalize(&join(start, path));
        if crate::guard::names_own_process(&logical) {
            return Resolution::Fail(libc::EACCES);
        }
        return Resolution::Pass { logical };
    }
    let caller = procfs::CallerProc {
        pid: ctx.pid,
        fs: ctx.fs,
    };
    let walked = match ctx.ns.locate_as(start, path, follow, &caller) {
        Ok(w) => w,
        Err(e) => return Resolution::Fail(e),
    };
    // roost's own `/proc/PID`, however it was spelled (its magic links are not followed:
    // `procfs::CallerProc`, so the walk ends inside it).
    if walked.remote.is_none() && crate::guard::names_own_process(&walked.physical) {
        return Resolution::Fail(libc::EACCES);
    }
    // A mount list read (followed, not named itself) lists the mappings as mounts.
    if let Some(list) = follow
        .then(|| mounts_view::view(ctx.ns, ctx.pid, &walked.logical))
        .flatten()
    {
        return Resolution::Rewrite {
            logical: walked.logical,
            physical: list,
            followed_symlink: walked.followed_symlink,
        };
    }
    if let Some(remote) = walked.remote {
        return Resolution::Remote {
            logical: walked.logical,
            remote,
        };
    }
    let mut physical = walked.physical;
    if walked.via_proc_link {
        // Still in /proc after a magic link: roost may use this name itself (opens and
        // changes by notification), where `self` would be roost.
        physical = procfs::proc_self_as(ctx.pid, &physical);
    }
    if last_component(path) == Some(b".") {
        // The kernel still checks that what precedes it is a directory.
        physical = join(&physical, b".");
    } else if path.ends_with(b"/") && !physical.ends_with(b"/") {
        physical.push(b'/');
    }
    // No mount on the way and the kernel starts where the walk did: same object. A path
    // through a `/proc` magic link is always given to the kernel resolved: a change roost
    // makes for the caller would otherwise find roost's own `/proc/self`.
    let same_start = base.as_ref().map_or(true, |(l, p)| l == p);
    if !walked.via_mount && same_start && !walked.via_proc_link {
        return Resolution::Pass {
            logical: walked.logical,
        };
    }
    let base_physical = base.map(|(_, p)| p);
    // `./f` and `a//b` reach what `f` and `a/b` do.
    let kernel_view = match &base_physical {
        Some(base) => join(base, &roost_vfs::path::without_dots(path)),
        None => roost_vfs::path::without_dots(path),
    };
    if !walked.followed_symlink && !has_dotdot(path) && physical == kernel_view {
        return Resolution::Pass {
            logical: walked.logical,
        };
    }
    Resolution::Rewrite {
        logical: walked.logical,
        physical,
        followed_symlink: walked.followed_symlink,
    }
}

/// Resolves `path` for a call that creates or removes the name (mkdir, unlink, rename's
/// operands, ...). The kernel never follows such a name, trailing slash or not: it resolves
/// what precedes the name, then checks the name's own spelling and a trailing slash against
/// what it finds. So the name is located without following it and its spelling kept: a
/// final `.` or `..` (refused by spelling: EINVAL, ENOTEMPTY, EISDIR, EEXIST, EBUSY) and a
/// trailing slash (ENOTDIR on a symlink or a file) reach the kernel as given.
pub fn resolve_entry(ctx: &mut Ctx<'_>, dirfd: Option<i64>, path: &[u8]) -> Resolution {
    let trimmed = &path[..path.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1)];
    match last_component(path) {
        Some(last @ (b"." | b"..")) => {
            let prefix = match &trimmed[..trimmed.len() - last.len()] {
                b"" => &b"."[..],
                p => p,
            };
            let r = resolve_path(ctx, dirfd, prefix, true);
            keep_spelling(r, |l| join(l, last), |p| join(p, last))
        }
        _ if !trimmed.is_empty() && trimmed.len() < path.len() => {
            let r = resolve_path(ctx, dirfd, trimmed, false);
            keep_spelling(r, <[u8]>::to_vec, |p| join(p, b""))
        }
        _ => resolve_path(ctx, dirfd, path, false),
    }
}

/// A resolution of part of a path, with the rest of its spelling put back: `logical` and
/// `physical` build the names from the part's.
fn keep_spelling(
    part: Resolution,
    logical: impl Fn(&[u8]) -> Vec<u8>,
    physical: impl Fn(&[u8]) -> Vec<u8>,
) -> Resolution {
    match part {
        Resolution::Pass { logical: l } => Resolution::Pass {
            logical: logical(&l),
        },
        Resolution::Rewrite {
            logical: l,
            physical: p,
            followed_symlink,
        } => Resolution::Rewrite {
            logical: logical(&l),
            physical: physical(&p),
            followed_symlink,
        },
        Resolution::Remote { logical: l, remote } => Resolution::Remote {
            logical: logical(&l),
            remote,
        },
        fail => fail,
    }
}

/// The final component of `path`, ignoring trailing slashes.
fn last_component(path: &[u8]) -> Option<&[u8]> {
    roost_vfs::path::components(path).next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_relocates_pointer_words() {
        let mut s = Scratch::default();
        let a = s.push_cstr(b"ab");
        let arr = s.push_words(&[Arg::Scratch(a), Arg::Value(7)], true);
        assert_eq!(arr % 8, 0);
        let bytes = s.finish(0x1000);
        let word =
            |i: usize| u64::from_ne_bytes(bytes[arr + 8 * i..arr + 8 * i + 8].try_into().unwrap());
        assert_eq!(word(0), 0x1000 + a as u64);
        assert_eq!(word(1), 7);
        assert_eq!(word(2), 0);
    }
}
