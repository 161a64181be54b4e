//! The working directory and the magic links that reveal paths: getcwd and
//! `readlink(/proc/<pid>/{exe,cwd,root,fd/N})` answer logical paths; paths through those links
//! resolve in the logical namespace ([`CallerProc`]); chdir and fchdir keep the virtual cwd in
//! step with the kernel's.

use super::{
    fd_path, logical_of_physical, path, relative_start, resolve_path, Action, Ctx, Decision,
    Resolution,
};
use crate::syscalls::PathArg;
use crate::task::{AfterExit, CallerFs, Fs};
use roost_vfs::path::strip_prefix;
use roost_vfs::LinkTarget;

/// The magic link a `/proc` path names, with the pid it belongs to.
#[derive(Debug, PartialEq)]
enum Magic {
    Exe(Option<i32>),
    Cwd(Option<i32>),
    Root(Option<i32>),
    Fd(Option<i32>, i64),
}

/// Splits `/proc/{self,thread-self,PID}[/task/TID]/ENTRY` into whose entry it is (`None`:
/// the caller itself) and ENTRY.
pub(crate) fn proc_entry(path: &[u8]) -> Option<(Option<i32>, &str)> {
    let s = std::str::from_utf8(path).ok()?;
    let rest = s.strip_prefix("/proc/")?;
    let (who, mut rest) = rest.split_once('/')?;
    let mut pid = match who {
        "self" | "thread-self" => None,
        n => Some(n.parse::<i32>().ok()?),
    };
    if let Some(r) = rest.strip_prefix("task/") {
        let (tid, r) = r.split_once('/')?;
        pid = Some(tid.parse().ok()?);
        rest = r;
    }
    Some((pid, rest))
}

impl Magic {
    /// Whether the link is one of roost's own processes' (`crate::guard`).
    fn of_roost(&self) -> bool {
        let (Magic::Exe(pid) | Magic::Cwd(pid) | Magic::Root(pid) | Magic::Fd(pid, _)) = self;
        pid.is_some_and(crate::guard::is_own)
    }
}

/// Parses `/proc/{self,thread-self,PID}[/task/TID]/{exe,cwd,root,fd/N}`; `None` pid means the
/// caller itself.
fn parse_magic(path: &[u8]) -> Option<Magic> {
    let (pid, rest) = proc_entry(path)?;
    match rest {
        "exe" => Some(Magic::Exe(pid)),
        "cwd" => Some(Magic::Cwd(pid)),
        "root" => Some(Magic::Root(pid)),
        r => Some(Magic::Fd(pid, r.strip_prefix("fd/")?.parse().ok()?)),
    }
}

/// The logical path `/proc` name `path` stands for when it is a magic link (`exe`, `cwd`,
/// `fd/N` of the caller or of another process). `None` when it is not one, or when what it
/// names has no path: a pipe, a socket, a memfd or a deleted file.
pub fn magic_link_target(ctx: &Ctx<'_>, path: &[u8]) -> Option<Vec<u8>> {
    magic_target(ctx, parse_magic(path)?, true)
}

/// What `magic` names, logically; `only_paths`: `None` for memfds and deleted files
/// (readlink shows their names, with the mount's logical prefix).
fn magic_target(ctx: &Ctx<'_>, magic: Magic, only_paths: bool) -> Option<Vec<u8>> {
    if magic.of_roost() {
        return None;
    }
    let me = ctx.pid;
    let physical = match magic {
        Magic::Exe(None) if ctx.exe.is_some() => return ctx.exe.map(<[u8]>::to_vec),
        Magic::Cwd(None) => return Some(ctx.fs.get().logical.clone()),
        // Programs are run by their logical names: the name through the mapping.
        Magic::Exe(p) => {
            return Some(
                ctx.ns
                    .table()
                    .reverse(&kernel_link(p.unwrap_or(me), "exe")?),
            )
        }
        Magic::Cwd(Some(p)) => kernel_link(p, "cwd")?,
        Magic::Root(None) => return Some(b"/".to_vec()),
        Magic::Root(Some(p)) => kernel_link(p, "root")?,
        Magic::Fd(p, fd) => match fd_path(p.unwrap_or(me), fd) {
            Some(physical) => physical,
            // A direct-mode file's placeholder: named by the file it stands for.
            None if !only_paths => {
                let link = kernel_link(p.unwrap_or(me), &format!("fd/{fd}"))?;
                let ino = std::str::from_utf8(&link)
                    .ok()?
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .parse()
                    .ok()?;
                return ctx.ns.descriptor_name(ino);
            }
            None => return None,
        },
    };
    if only_paths && (physical.ends_with(b" (deleted)") || physical.starts_with(b"/memfd:")) {
        return None;
    }
    Some(logical_of_physical(ctx.ns, &physical))
}

/// The view of `/proc` of the thread a call is resolved for: its root is the logical `/`
/// (a thread that chroots leaves the namespace), its cwd the logical cwd, another process's
/// cwd and any process's directory descriptors their kernel paths named logically. A final
/// `fd/N` is left to the kernel, which reopens the open file itself (deleted, renamed or
/// not a path at all), unless it is a remote object's copy being read, and so is `exe`.
pub struct CallerProc<'a> {
    pub pid: i32,
    pub fs: &'a CallerFs<'a>,
}

impl roost_vfs::ProcLinks for CallerProc<'_> {
    fn target(&self, link: &[u8], last: bool) -> Option<LinkTarget> {
        let own = |p: Option<i32>| p.map_or(true, |p| p == self.pid);
        let magic = parse_magic(link)?;
        if magic.of_roost() {
            // Left unfollowed: the walk ends in roost's `/proc/PID`, which is refused.
            return None;
        }
        match magic {
            Magic::Root(p) if own(p) => Some(LinkTarget::Logical(b"/".to_vec())),
            Magic::Root(Some(p)) => match kernel_link(p, "root")? {
                root if root == b"/" => Some(LinkTarget::Logical(root)),
                root => Some(LinkTarget::Physical(root)),
            },
            // A deleted cwd has no name: the kernel's own `/proc` link still reaches it.
            Magic::Cwd(p) if own(p) && self.fs.get().physical.ends_with(b" (deleted)") => None,
            Magic::Cwd(p) if own(p) => Some(LinkTarget::Logical(self.fs.get().logical.clone())),
            Magic::Cwd(Some(p)) => kernel_link(p, "cwd")
                .filter(|cwd| !cwd.ends_with(b" (deleted)"))
                .map(LinkTarget::Physical),
            // A final one too when it is a local copy of a remote object being read: what
            // is done through it (chmod, stat) is done to that object (`crate::copies`).
            Magic::Fd(p, fd)
                if !last || crate::copies::read_copy(p.unwrap_or(self.pid), fd as i32) =>
            {
                let physical = fd_path(p.unwrap_or(self.pid), fd)?;
                (!physical.ends_with(b" (deleted)")).then_some(LinkTarget::Physical(physical))
            }
            _ => None,
        }
    }
}

/// `/proc/self` and `/proc/thread-self` as the caller means them.
pub fn proc_self_as(tid: i32, path: &[u8]) -> Vec<u8> {
    let tgid = || crate::procinfo::tgid(tid).unwrap_or(tid);
    if let Some(rest) = strip_prefix(path, b"/proc/thread-self") {
        return [format!("/proc/{}/task/{tid}", tgid()).as_bytes(), rest].concat();
    }
    if let Some(rest) = strip_prefix(path, b"/proc/self") {
        return [format!("/proc/{}", tgid()).as_bytes(), rest].concat();
    }
    path.to_vec()
}

/// The target of the kernel's `/proc/PID/WHAT` link (`cwd`, `root`, `exe`, `fd/N`).
pub(crate) fn kernel_link(pid: i32, what: &str) -> Option<Vec<u8>> {
    std::fs::read_link(format!("/proc/{pid}/{what}"))
        .ok()
        .map(|p| p.into_os_string().into_encoded_bytes())
}

/// readlink / readlinkat.
pub fn readlink(
    ctx: &mut Ctx<'_>,
    dirfd: Option<usize>,
    path_arg: usize,
    buf: usize,
    size: usize,
) -> Decision {
    let path = match ctx.read_path(ctx.regs.arg(path_arg)) {
        Ok(p) => p,
        Err(e) => return Decision::fail(e),
    };
    let magic = if ctx.ns.table().is_empty() {
        None
    } else {
        parse_magic(&absolute_name(ctx, dirfd, &path))
    };
    let Some(magic) = magic else {
        let spec = [PathArg {
            dirfd,
            path: path_arg,
            follow: crate::syscalls::Follow::Never,
            empty_flag: None,
            null_ok: false,
        }];
        return path::handle(ctx, &spec, false, false);
    };
    if magic.of_roost() {
        return Decision::fail(libc::EACCES);
    }
    if ctx.regs.arg(size) as i32 <= 0 {
        return Decision::fail(libc::EINVAL);
    }
    let Some(mut value) = magic_target(ctx, magic, false) else {
        return Decision::pass(); // pipes, sockets: nothing to translate
    };
    value.truncate(ctx.regs.arg(size) as i32 as usize);
    let mut d = Decision::new(Action::Emulate {
        ret: value.len() as i64,
        writes: vec![(ctx.regs.arg(buf), value.clone())],
    });
    d.logical = Some(path);
    d.physical = Some(value);
    d
}

/// The logical absolute name of `path` as the caller names it, so that a relative one
/// from a directory under /proc (`cd /proc/self && readlink exe`) is seen as the magic
/// link it is. A name with `..` is left as given (its meaning may depend on symlinks).
fn absolute_name(ctx: &Ctx<'_>, dirfd: Option<usize>, path: &[u8]) -> Vec<u8> {
    if path.first() == Some(&b'/') || path.is_empty() || roost_vfs::path::has_dotdot(path) {
        return path.to_vec();
    }
    let dirfd = dirfd.map_or(super::AT_FDCWD, |i| ctx.int_arg(i));
    match relative_start(ctx, dirfd) {
        Some((base, _)) if base.starts_with(b"/proc") => {
            roost_vfs::path::normalize(&roost_vfs::path::join(&base, path))
        }
        _ => path.to_vec(),
    }
}

/// getcwd: the logical cwd when it differs from the kernel's. A deleted one has no name
/// (the kernel answers ENOENT).
pub fn getcwd(ctx: &mut Ctx<'_>) -> Decision {
    let fs = ctx.fs.get();
    if fs.logical == fs.physical || fs.physical.ends_with(b" (deleted)") {
        return Decision::pass();
    }
    let mut bytes = fs.logical.clone();
    bytes.push(0);
    if (ctx.regs.arg(1) as usize) < bytes.len() {
        return Decision::fail(libc::ERANGE);
    }
    let mut d = Decision::new(Action::Emulate {
        ret: bytes.len() as i64,
        writes: vec![(ctx.regs.arg(0), bytes)],
    });
    d.logical = Some(fs.logical.clone());
    d
}

/// chdir: resolve like any path, then record the new cwd at the exit stop.
pub fn chdir(ctx: &mut Ctx<'_>) -> Decision {
    let path = match ctx.read_path(ctx.regs.arg(0)) {
        Ok(p) => p,
        Err(e) => return Decision::fail(e),
    };
    let resolution = resolve_path(ctx, None, &path, true);
    let logical = match &resolution {
        Resolution::Fail(e) => return Decision::fail(*e),
        r => r.logical().unwrap_or_default(),
    };
    ctx.ns.note_reached(logical);
    let spec = [PathArg {
        dirfd: None,
        path: 0,
        follow: crate::syscalls::Follow::Always,
        empty_flag: None,
        null_ok: false,
    }];
    let mut d = path::handle(ctx, &spec, false, false);
    d.after = Some(AfterExit::Chdir(resolution.logical().map(<[u8]>::to_vec)));
    d
}

/// Notes, before a chdir that the kernel makes with the name as given, the name the cwd is
/// entered by (what the exit stop of a traced chdir notes): the notification thread, which
/// sees only the kernel's cwd afterwards, then names it so. A relative chdir inside a
/// mapping is such a call.
pub fn entering(ns: &roost_vfs::Namespace, logical: &[u8]) {
    let Some(physical) = ns.kernel_path(logical) else {
        return;
    };
    use std::os::unix::ffi::OsStrExt;
    if let Ok(physical) = std::fs::canonicalize(std::ffi::OsStr::from_bytes(&physical)) {
        ns.entered(physical.as_os_str().as_bytes(), logical);
    }
}

/// fchdir: the kernel decides; the logical cwd is derived at the exit stop.
pub fn fchdir() -> Decision {
    let mut d = Decision::pass();
    d.after = Some(AfterExit::Chdir(None));
    d
}

/// The cwd after a successful chdir (`logical`: the name it resolved) or fchdir (`None`: the
/// descriptor's name) of `pid`; the name is noted in `ns` for the notification thread, which
/// sees only the kernel's cwd.
pub fn cwd_after_chdir(
    ns: &roost_vfs::Namespace,
    pid: i32,
    logical: Option<Vec<u8>>,
) -> Option<Fs> {
    let physical = kernel_link(pid, "cwd")?;
    // The name resolved is kept where it leads to the directory the kernel now holds (not,
    // say, an unnormalised path walked with no mounts, or a /proc link's own name).
    let leads_here = |l: &[u8]| {
        let Some(path) = ns.kernel_path(l) else {
            return false;
        };
        let there = roost_vfs::resolve::file_id(&path);
        let held = roost_vfs::resolve::file_id(format!("/proc/{pid}/cwd").as_bytes());
        there.is_some() && there == held
    };
    let logical = match logical {
        Some(l) if leads_here(&l) => l,
        Some(_) => ns.logical_cwd(&physical),
        None => logical_of_physical(ns, &physical),
    };
    ns.entered(&physical, &logical);
    Some(Fs { logical, physical })
}

/// New names for a cwd `fs` entered through a mount (its logical and physical names differ)
/// when the kernel now holds it elsewhere (it, or a parent, was renamed): the new physical
/// name through the mount, noted in `ns`. `None` while `fs` is current.
pub fn current_cwd(ns: &roost_vfs::Namespace, pid: i32, fs: &Fs) -> Option<Fs> {
    let physical = kernel_link(pid, "cwd")?;
    if physical == fs.physical {
        return None;
    }
    let logical = ns.table().reverse(&physical);
    ns.entered(&physical, &logical);
    Some(Fs { logical, physical })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_magic_links() {
        assert_eq!(parse_magic(b"/proc/self/exe"), Some(Magic::Exe(None)));
        assert_eq!(
            parse_magic(b"/proc/thread-self/cwd"),
            Some(Magic::Cwd(None))
        );
        assert_eq!(parse_magic(b"/proc/42/fd/3"), Some(Magic::Fd(Some(42), 3)));
        assert_eq!(
            parse_magic(b"/proc/1/task/7/exe"),
            Some(Magic::Exe(Some(7)))
        );
        assert_eq!(parse_magic(b"/proc/self/maps"), None);
        assert_eq!(parse_magic(b"/tmp/exe"), None);
    }
}
