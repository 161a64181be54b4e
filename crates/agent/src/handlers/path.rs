//! The generic path class: every syscall whose spec lists path arguments (open family, stat
//! family, access, mkdir, unlink, rename, link, symlink, chmod, chown, utime, xattr, statfs,
//! inotify, fanotify, name_to_handle_at, ...). Each path is resolved; a call on mapped
//! paths is to be performed locally on their physical names ([`Local`]).

use super::{resolve_entry, resolve_path, Action, Ctx, Decision, Resolution};
use crate::arch::Regs;
use crate::arch::Sys;
use crate::call::{Call, Open, OpenSpelling};
use crate::decision::{Local, LocalPath};
use crate::syscalls::{Follow, PathArg};
use crate::task::AfterExit;

const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;
const RESOLVE_IN_ROOT: u64 = 0x10;

/// Whether a final symlink is followed, for `open`-style flags.
pub(crate) fn open_follows(flags: u64) -> bool {
    let excl = (libc::O_CREAT | libc::O_EXCL) as u64;
    flags & libc::O_NOFOLLOW as u64 == 0 && flags & excl != excl
}

/// Whether `call` follows a final symlink of a path argument whose spec says `f`.
pub(crate) fn follows(call: &Call, regs: &Regs, f: Follow) -> Result<bool, i32> {
    Ok(match f {
        Follow::Always => true,
        Follow::Never | Follow::Entry | Follow::Removes => false,
        Follow::UnlessFlag(arg, flag) => regs.arg(arg) & flag == 0,
        Follow::IfFlag(arg, flag) => regs.arg(arg) & flag != 0,
        Follow::Open => match call {
            Call::Open(open) => open_follows(open.flags as u64),
            Call::Unreadable(e) => return Err(*e),
            _ => true,
        },
    })
}

/// Handles a call whose spec lists `args`.
pub fn handle(ctx: &mut Ctx<'_>, args: &[PathArg], mutates: bool, cross: bool) -> Decision {
    let mut resolved: Vec<(PathArg, Resolution)> = Vec::with_capacity(args.len());
    // Per path argument: whether a final symlink is followed, and whether the path ended
    // in `/` (which the walk drops).
    let mut follows_of: Vec<(bool, bool)> = Vec::with_capacity(args.len());
    for &arg in args {
        let ptr = ctx.regs.arg(arg.path);
        if ptr == 0 {
            // NULL: names the dirfd where allowed, EFAULT otherwise; the kernel decides.
            continue;
        }
        let path = match ctx.read_path(ptr) {
            Ok(p) => p,
            Err(e) => return Decision::fail(e),
        };
        if ctx
            .fast
            .is_some_and(|f| f.declines_list(ctx.pid, &path, || list_call(ctx)))
        {
            // A loader not offered the fast path's object opens the host's own list.
            continue;
        }
        if path.is_empty() {
            // AT_EMPTY_PATH names the dirfd itself; otherwise the kernel answers ENOENT.
            // A stat of a remote object's local copy answers with the remote identity.
            if let Some(made) = crate::copies::stat_itself(ctx.pid, ctx.sys, ctx.regs) {
                return match made {
                    Ok((ret, writes)) => Decision::new(Action::Emulate { ret, writes }),
                    Err(e) => Decision::fail(e),
                };
            }
            continue;
        }
        let follow = match follows(&ctx.call, ctx.regs, arg.follow) {
            Ok(f) => f,
            Err(e) => return Decision::fail(e),
        };
        let dirfd = arg.dirfd.map(|i| ctx.int_arg(i));
        if !mutates && !follow && !ctx.names_recorded && kernel_resolves_alike(ctx, dirfd, &path) {
            continue;
        }
        let r = match arg.follow {
            Follow::Entry | Follow::Removes => resolve_entry(ctx, dirfd, &path),
            _ => resolve_path(ctx, dirfd, &path, follow),
        };
        if let Resolution::Fail(e) = r {
            return Decision::fail(e);
        }
        if let (Follow::Open, Some(logical)) = (arg.follow, r.logical()) {
            ctx.ns.note_reached(logical);
        }
        resolved.push((arg, r));
        follows_of.push((follow, path.ends_with(b"/")));
    }
    if let Some(e) = super::mount_points::refusal(ctx, &resolved, cross) {
        return Decision::fail(e);
    }
    let mut d = Decision::pass();
    if mutates {
        let names = resolved
            .iter()
            .filter_map(|(_, r)| r.logical())
            .map(<[u8]>::to_vec);
        d.after = Some(AfterExit::Invalidate(names.collect()));
    }
    d.logicals = resolved
        .iter()
        .filter_map(|(arg, r)| Some((arg.path, r.logical()?.to_vec())))
        .collect();
    if let Some((_, r)) = resolved.first() {
        d.logical = r.logical().map(<[u8]>::to_vec);
        d.physical = match r {
            Resolution::Rewrite { physical, .. } => Some(physical.clone()),
            _ => d.logical.clone(),
        };
    }
    if resolved
        .iter()
        .any(|(_, r)| matches!(r, Resolution::Remote { .. }))
    {
        // For traces: where the first path went (`chirp:/host:port/path`).
        d.physical = resolved.iter().find_map(|(_, r)| match r {
            Resolution::Remote { remote, .. } => Some(format!("{remote:?}").into_bytes()),
            _ => None,
        });
        d.action = Action::Remote(Box::new(remote_call(
            (ctx.sys, ctx.call),
            resolved,
            &follows_of,
        )));
        return d;
    }
    let mut local = Local::default();
    for (arg, r) in &resolved {
        if let Resolution::Rewrite {
            physical,
            followed_symlink,
            ..
        } = r
        {
            local.paths.push(LocalPath {
                arg: arg.path,
                dirfd: arg.dirfd,
                physical: physical.clone(),
            });
            if let Call::Open(
                open @ Open {
                    spelt: OpenSpelling::How(how_arg),
                    ..
                },
            ) = ctx.call
            {
                match rewrite_open_how(ctx, &open, *followed_symlink) {
                    Ok(Some(words)) => local.how = Some((how_arg, words)),
                    Ok(None) => {}
                    Err(e) => return Decision::fail(e),
                }
            }
        }
    }
    if !local.paths.is_empty() {
        d.action = Action::Local(local);
    }
    d
}

/// What call `ctx` is, as the fast path's offer of its object tells calls on the preload list
/// apart ([`crate::fastpath::offers`]): the loader asks `access(R_OK)`, then opens it to read
/// (`O_RDONLY`, creating and truncating nothing: a `creat` is no loader's).
fn list_call(ctx: &Ctx<'_>) -> crate::fastpath::offers::ListCall {
    use crate::fastpath::offers::ListCall;
    let changes = libc::O_ACCMODE | libc::O_CREAT | libc::O_TRUNC;
    match ctx.call {
        crate::call::Call::Open(open) if open.flags & changes == 0 && ctx.sys != Sys::Creat => {
            ListCall::Open
        }
        _ if ctx.sys == Sys::Access && ctx.regs.arg(1) == libc::R_OK as u64 => ListCall::Access,
        _ => ListCall::Other,
    }
}

/// Whether the kernel, resolving `path` from directory descriptor `dirfd` as given, finds
/// what the namespace would, so that a call that changes nothing and follows no final
/// symlink passes with no look at the descriptor (a `/proc` read) or the namespace: one
/// name (no `/`, no `..`), not the last name of a mount point (nor of a `DENY`/`ENOENT`
/// mapping, nor of a local mapping's physical directory, whose opens name descriptors: see
/// `Namespace::note_reached`), nor a number (a `/proc` entry, perhaps roost's own), while no
/// remote object has been met (a descriptor may then be on a local copy). Inside a mapping
/// the name is where the kernel finds it; outside, the namespace is the host's. `find`,
/// `du` and `fts` in general make most of their calls so (`openat(fd, name, O_NOFOLLOW)`,
/// `fstatat(fd, name, AT_SYMLINK_NOFOLLOW)`).
pub(crate) fn kernel_resolves_alike(ctx: &Ctx<'_>, dirfd: Option<i64>, path: &[u8]) -> bool {
    dirfd.is_some_and(|fd| fd >= 0)
        && !path.is_empty()
        && path != b"."
        && path != b".."
        && !path.contains(&b'/')
        && !path.iter().all(u8::is_ascii_digit)
        && !ctx.ns.remote_met()
        && !ctx.ns.table().names_a_mount(path)
}

/// The call to make through a remote driver: each path argument with its remote object
/// (a local one mixed in has failed with EXDEV already).
fn remote_call(
    (sys, call): (Sys, crate::call::Call),
    resolved: Vec<(PathArg, Resolution)>,
    follows: &[(bool, bool)],
) -> crate::decision::RemoteCall {
    let args = resolved
        .into_iter()
        .zip(follows)
        .map(
            |((arg, r), &(follow, trailing_slash))| crate::decision::RemoteArg {
                path: arg.path,
                dirfd: arg.dirfd,
                follow,
                trailing_slash,
                remote: match r {
                    Resolution::Remote { remote, .. } => Some(remote),
                    _ => None,
                },
            },
        )
        .collect();
    crate::decision::RemoteCall { sys, call, args }
}

/// Whether a relative path, read as written, never climbs above where it starts
/// (`sub/../f` stays, `sub/../../f` does not).
fn stays_beneath(path: &[u8]) -> bool {
    let mut depth = 0usize;
    for part in path.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            _ => depth += 1,
        }
    }
    true
}

/// openat2 with a rewritten (absolute) path: RESOLVE_BENEATH/IN_ROOT would refuse it, so the
/// agent checks them itself and hands the kernel a copy of `open_how` without them.
fn rewrite_open_how(
    ctx: &Ctx<'_>,
    open: &Open,
    followed_symlink: bool,
) -> Result<Option<[u64; 3]>, i32> {
    let resolve = open.resolve;
    if resolve & RESOLVE_NO_SYMLINKS != 0 && followed_symlink {
        return Err(libc::ELOOP);
    }
    if resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT) == 0 {
        return Ok(None);
    }
    let path = ctx.read_path(ctx.regs.arg(1))?;
    // What the agent cannot check cheaply is refused, as the kernel refuses an escape: an
    // absolute path, a `..` that climbs above the start, any symlink on the way.
    if path.first() == Some(&b'/') || !stays_beneath(&path) || followed_symlink {
        return Err(libc::EXDEV);
    }
    let resolve = resolve & !(RESOLVE_BENEATH | RESOLVE_IN_ROOT);
    Ok(Some([open.how_flags(), u64::from(open.mode), resolve]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Regs;
    use crate::handlers::AT_FDCWD;

    #[test]
    fn dotdot_stays_beneath_until_it_climbs_above_the_start() {
        for ok in ["f", "sub/../f", "./a/b/../../f", "a/./../b/"] {
            assert!(stays_beneath(ok.as_bytes()), "{ok}");
        }
        for escapes in ["..", "../f", "sub/../../f", "a/b/../../../f"] {
            assert!(!stays_beneath(escapes.as_bytes()), "{escapes}");
        }
    }
    use crate::syscalls::{spec, Kind};
    use crate::task::{CallerFs, Fs};
    use roost_vfs::{Driver, MountTable, Namespace, Target};
    use std::ffi::CString;
    use std::sync::Arc;

    struct Remote;
    impl Driver for Remote {
        fn name(&self) -> &'static str {
            "remote"
        }
    }

    /// Decides `openat(AT_FDCWD, path, O_RDONLY)` in this process (memory reads work on
    /// ourselves) with `/data` mapped to `/usr` (a directory that exists, for `..`) and `/net`
    /// to a non-local driver.
    fn decide_openat(path: &str, cwd: &str) -> Decision {
        let mut table = MountTable::new();
        table.add(b"/data", Target::local("/usr"));
        table.add(b"/net", Target::remote(Arc::new(Remote), &b"/"[..], false));
        let ns = Namespace::new(table);
        let c = CString::new(path).unwrap();
        let mut regs = Regs::zeroed();
        regs.set_arg(0, AT_FDCWD as u64);
        regs.set_arg(1, c.as_ptr() as u64);
        let fs = CallerFs::known(Fs {
            logical: cwd.as_bytes().to_vec(),
            physical: table_physical(cwd),
        });
        let pid = std::process::id() as i32;
        let call = crate::call::Call::decode(Sys::Openat, &regs, pid);
        let mut ctx = Ctx::new(pid, (Sys::Openat, call, &regs), &ns, &fs, None);
        let Some(Kind::Path { args, .. }) = spec(Sys::Openat) else {
            panic!("openat spec")
        };
        handle(&mut ctx, args, false, false)
    }

    fn table_physical(cwd: &str) -> Vec<u8> {
        cwd.replacen("/data", "/usr", 1).into_bytes()
    }

    fn rewritten(d: &Decision) -> Option<String> {
        match &d.action {
            Action::Local(local) => {
                Some(String::from_utf8_lossy(&local.paths.first()?.physical).into())
            }
            _ => None,
        }
    }

    #[test]
    fn unmapped_paths_pass_with_the_same_pointer() {
        let d = decide_openat("/usr/lib/x", "/");
        assert!(matches!(d.action, Action::Pass));
    }

    #[test]
    fn mapped_paths_are_rewritten_to_physical() {
        let d = decide_openat("/data/sub/f", "/");
        assert_eq!(rewritten(&d).as_deref(), Some("/usr/sub/f"));
        assert_eq!(d.logical.as_deref(), Some(&b"/data/sub/f"[..]));
    }

    #[test]
    fn relative_paths_inside_a_mounted_cwd_pass() {
        let d = decide_openat("sub/f", "/data");
        assert!(matches!(d.action, Action::Pass), "{d:?}");
        let d = decide_openat("./lib//./x", "/data");
        assert!(matches!(d.action, Action::Pass), "{d:?}");
        let d = decide_openat("../etc/hostname", "/data");
        assert_eq!(rewritten(&d).as_deref(), Some("/etc/hostname"));
    }

    #[test]
    fn paths_on_a_non_local_driver_fail_with_enosys() {
        let d = decide_openat("/net/file", "/");
        assert!(matches!(d.action, Action::Fail(libc::ENOSYS)), "{d:?}");
    }

    #[test]
    fn only_plain_names_from_a_descriptor_skip_the_namespace() {
        let mut table = MountTable::new();
        table.add(b"/data", Target::local("/usr"));
        table.add(b"/secret/inner", Target::Deny);
        let ns = Namespace::new(table);
        let regs = Regs::zeroed();
        let fs = CallerFs::known(Fs {
            logical: Vec::new(),
            physical: Vec::new(),
        });
        let call = crate::call::Call::decode(Sys::Openat, &regs, 1);
        let ctx = Ctx::new(1, (Sys::Openat, call, &regs), &ns, &fs, None);
        let alike = |fd: i64, name: &str| kernel_resolves_alike(&ctx, Some(fd), name.as_bytes());
        assert!(alike(3, "x") && alike(0, "lib.so"));
        for name in ["data", "usr", "inner", "1234", "a/b", "..", ".", ""] {
            assert!(!alike(3, name), "{name}");
        }
        assert!(!alike(AT_FDCWD, "x"), "relative to the cwd");
        assert!(!kernel_resolves_alike(&ctx, None, b"x"));
    }

    #[test]
    fn open_flags_decide_following() {
        assert!(open_follows(libc::O_RDONLY as u64));
        assert!(open_follows(libc::O_CREAT as u64));
        assert!(!open_follows((libc::O_CREAT | libc::O_EXCL) as u64));
        assert!(!open_follows(libc::O_NOFOLLOW as u64));
    }
}
