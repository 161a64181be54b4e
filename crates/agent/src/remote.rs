//! Calls on remote objects (a path that resolved onto a driver the kernel cannot reach,
//! such as Chirp). The handler decides under the namespace lock that a call is remote and
//! hands over a [`RemoteCall`]; both delivery backends then make it here, with no lock
//! held, and apply the [`Action`] it returns as they apply any other:
//!
//! - lookups (stat family, access, readlink, statfs, the xattr reads) are answered from the
//!   driver, written into the caller's buffers as the kernel would (`Emulate`);
//! - changes (mkdir, unlink, rename, link, symlink, chmod, chown, truncate, utime, the
//!   xattr writes) are made through the driver (`Emulate` with the result, or `Fail`);
//! - opens, chdir and exec go to a local copy the driver makes ([`Driver::localize`]): the
//!   call is rewritten to its kernel path, so reads, writes, mmap and getdents run natively
//!   on a real descriptor (`Rewrite`).

use crate::call::{Call, Open, OpenSpelling, StatOut, Times, XattrOp};
use crate::decision::{Action, Decision, RemoteCall};
use crate::memory::{self, bytes_of};
use crate::task::AfterExit;
use roost_vfs::{Errno, Intent, Namespace};

/// A call's return value and what it writes into the caller's memory, or its errno.
type Written = Result<(i64, Vec<(u64, Vec<u8>)>), Errno>;

/// What making a remote call came to: the action for the backend, and the kernel path of
/// a local copy when the call was rewritten to one.
pub struct Made {
    pub action: Action,
    pub physical: Option<Vec<u8>>,
}

impl Made {
    fn result(r: Result<i64, Errno>) -> Made {
        Made {
            action: match r {
                Ok(ret) => Action::Emulate {
                    ret,
                    writes: Vec::new(),
                },
                Err(e) => Action::Fail(e),
            },
            physical: None,
        }
    }

    fn writes(r: Written) -> Made {
        Made {
            action: match r {
                Ok((ret, writes)) => Action::Emulate { ret, writes },
                Err(e) => Action::Fail(e),
            },
            physical: None,
        }
    }
}

/// The caller's umask, from `/proc/TID/status`.
pub(crate) fn umask(tid: i32) -> u32 {
    crate::procinfo::Status::read(tid)
        .and_then(|s| s.umask())
        .unwrap_or(0o022)
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Makes `call` for thread `tid`.
pub fn make(call: &RemoteCall, tid: i32) -> Made {
    match call.call {
        Call::Open(open) => self::open(call, &open, tid),
        Call::Chdir => enter(call),
        Call::Stat { out, .. } => Made::writes(stat(call, out)),
        Call::Readlink { buf, size } => Made::writes(readlink(call, buf, size)),
        Call::Statfs { buf } => Made::writes(statfs(call, buf)),
        Call::Xattr {
            op: op @ (XattrOp::Get { .. } | XattrOp::List { .. }),
            follow,
        } => Made::writes(xattr_read(call, op, follow, tid)),
        Call::Unreadable(e) => Made::result(Err(e)),
        _ => Made::result(change(call, tid)),
    }
}

/// Makes `call`, the remote call `decision` asked for, for thread `tid`, and puts what is
/// left to do in the decision's place (an answer, or a rewrite to a local copy). The names
/// it changed are forgotten from `ns`'s cache at once: its result is immediate.
pub fn make_decided(decision: &mut Decision, call: &RemoteCall, tid: i32, ns: &Namespace) {
    let made = make(call, tid);
    if let Some(AfterExit::Invalidate(names)) = &decision.after {
        for name in names {
            ns.invalidate_under(name);
        }
    }
    decision.action = made.action;
    if made.physical.is_some() {
        decision.physical = made.physical;
    }
}

/// The open family: a local copy for reading or writing, and the call rewritten to it.
fn open(call: &RemoteCall, open: &Open, tid: i32) -> Made {
    if open.tmpfile() {
        return Made::result(Err(libc::EOPNOTSUPP));
    }
    let Ok(remote) = call.first() else {
        return Made::result(Err(libc::EXDEV));
    };
    if let Some(e) = names_a_directory_only(call, open.flags) {
        return Made::result(Err(e));
    }
    // Read-only but exclusive: it must not exist, and then the copy is new.
    let intent = if open.writes() || open.exclusive() {
        Intent::Write {
            create: open.creates(),
            exclusive: open.exclusive(),
            truncate: open.flags & libc::O_TRUNC != 0,
            append: open.writes() && open.flags & libc::O_APPEND != 0,
            mode: open.mode & 0o7777 & !umask(tid),
        }
    } else {
        Intent::Read
    };
    let local = match remote.driver.localize(&remote.path, intent) {
        Ok(p) => p,
        Err(e) => return Made::result(Err(e)),
    };
    if open.flags & libc::O_DIRECTORY != 0 && !is_dir(&local) {
        return Made::result(Err(libc::ENOTDIR));
    }
    crate::copies::note(&remote.driver, &remote.path, &local, intent != Intent::Read);
    let kernel_flags = open.of_copy().how_flags();
    let arg = &call.args[0];
    let mut to_copy = crate::decision::Local::at(arg.path, arg.dirfd, local.clone());
    match open.spelt {
        OpenSpelling::How(i) => to_copy.how = Some((i, [kernel_flags, u64::from(open.mode), 0])),
        spelt => to_copy.open_flags = Some((spelt, kernel_flags)),
    }
    Made {
        action: Action::Local(to_copy),
        physical: Some(local),
    }
}

/// An open whose path ends in `/` names a directory only, as the kernel has it: a file
/// there is ENOTDIR, a missing name ENOENT, or EISDIR when the open would create it (the
/// walk drops the slash; this puts its meaning back). `None`: no slash, or a directory.
pub(crate) fn names_a_directory_only(call: &RemoteCall, flags: i32) -> Option<Errno> {
    let arg = call.args.first()?;
    if !arg.trailing_slash {
        return None;
    }
    let remote = arg.remote.as_ref()?;
    match remote.driver.stat(&remote.path) {
        Ok(st) if st.is_dir() => None,
        Ok(_) => Some(libc::ENOTDIR),
        Err(libc::ENOENT) if flags & libc::O_CREAT != 0 => Some(libc::EISDIR),
        Err(e) => Some(e),
    }
}

fn is_dir(local: &[u8]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    std::fs::metadata(std::ffi::OsStr::from_bytes(local)).is_ok_and(|m| m.is_dir())
}

/// chdir: into the local copy of the directory (its entries listed), named logically by
/// the namespace's mirror mapping.
fn enter(call: &RemoteCall) -> Made {
    let Ok(remote) = call.first() else {
        return Made::result(Err(libc::EXDEV));
    };
    let local = match remote.driver.stat(&remote.path) {
        Ok(st) if st.is_dir() => remote.driver.localize(&remote.path, Intent::Read),
        Ok(_) => Err(libc::ENOTDIR),
        Err(e) => Err(e),
    };
    match local {
        Ok(local) => {
            crate::copies::note(&remote.driver, &remote.path, &local, false);
            Made {
                action: Action::Local(crate::decision::Local::at(
                    call.args[0].path,
                    None,
                    local.clone(),
                )),
                physical: Some(local),
            }
        }
        Err(e) => Made::result(Err(e)),
    }
}

/// The stat family, written as `struct stat` or `struct statx`.
fn stat(call: &RemoteCall, out: StatOut) -> Written {
    let remote = call.first()?;
    // A descriptor of a local copy answers with these too (`crate::copies`).
    let st = if call.args[0].follow {
        remote.driver.stat(&remote.path)?
    } else {
        remote.driver.lstat(&remote.path)?
    };
    Ok(match out {
        StatOut::Stat(buf) => (0, vec![(buf, bytes_of(&st.to_kernel()))]),
        StatOut::Statx { buf, .. } => (0, vec![(buf, bytes_of(&st.to_statx()))]),
    })
}

fn readlink(call: &RemoteCall, buf: u64, size: u64) -> Written {
    let remote = call.first()?;
    if size as i32 <= 0 {
        return Err(libc::EINVAL);
    }
    let mut target = remote.driver.readlink(&remote.path)?;
    target.truncate(size as usize);
    Ok((target.len() as i64, vec![(buf, target)]))
}

fn statfs(call: &RemoteCall, buf: u64) -> Written {
    let remote = call.first()?;
    let fs = remote.driver.statfs(&remote.path)?;
    Ok((0, vec![(buf, statfs_bytes(&fs))]))
}

/// `struct statfs` for a remote file system.
pub(crate) fn statfs_bytes(fs: &roost_vfs::StatFs) -> Vec<u8> {
    // SAFETY: plain data, every field that matters set below.
    let mut out: libc::statfs = unsafe { std::mem::zeroed() };
    out.f_type = fs.kind;
    out.f_bsize = fs.bsize;
    out.f_frsize = fs.bsize;
    out.f_blocks = fs.blocks;
    out.f_bfree = fs.bfree;
    out.f_bavail = fs.bavail;
    out.f_files = fs.files;
    out.f_ffree = fs.ffree;
    out.f_namelen = 255;
    bytes_of(&out)
}

/// A value for a buffer of `size` bytes: its length when `size` is 0 (the caller asks how
/// much room it needs), ERANGE when it does not fit.
pub(crate) fn into_buffer(value: Vec<u8>, buf: u64, size: u64) -> Written {
    if size == 0 {
        return Ok((value.len() as i64, Vec::new()));
    }
    if value.len() > size as usize {
        return Err(libc::ERANGE);
    }
    Ok((value.len() as i64, vec![(buf, value)]))
}

fn xattr_read(call: &RemoteCall, op: XattrOp, follow: bool, tid: i32) -> Written {
    let remote = call.first()?;
    match op {
        XattrOp::Get { name, buf, size } => {
            let name = memory::read_cstr(tid, name, 256).map_err(memory::errno)?;
            let value = remote.driver.getxattr(&remote.path, &name, follow)?;
            into_buffer(value, buf, size)
        }
        _ => {
            let XattrOp::List { buf, size } = op else {
                return Err(libc::EINVAL);
            };
            let list = remote.driver.listxattr(&remote.path, follow)?;
            into_buffer(list, buf, size)
        }
    }
}

/// Times for utime and friends: (atime, mtime) in seconds, `None` to leave one alone.
pub(crate) fn times(spelt: Times, tid: i32) -> Result<(Option<i64>, Option<i64>), Errno> {
    let one = |t: &libc::timespec| match t.tv_nsec {
        libc::UTIME_OMIT => None,
        libc::UTIME_NOW => Some(now()),
        _ => Some(t.tv_sec),
    };
    Ok(match spelt.read(tid)? {
        None => (Some(now()), Some(now())),
        Some([atime, mtime]) => (one(&atime), one(&mtime)),
    })
}

/// The changes, made through the driver.
fn change(call: &RemoteCall, tid: i32) -> Result<i64, Errno> {
    let r = call.first()?;
    let (d, p) = (&r.driver, r.path.as_slice());
    let cstr = |at: u64, max: usize| memory::read_cstr(tid, at, max).map_err(memory::errno);
    let created = |mode: u32| mode & 0o7777 & !umask(tid);
    match call.call {
        Call::Mkdir { mode } => d.mkdir(p, created(mode)),
        Call::Unlink { flags } if flags & libc::AT_REMOVEDIR != 0 => d.rmdir(p),
        Call::Unlink { .. } => d.unlink(p),
        Call::Rename { flags } => {
            let to = call.second()?;
            if flags & (libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT) != 0 {
                return Err(libc::EINVAL);
            }
            if flags & libc::RENAME_NOREPLACE != 0 && d.lstat(&to.path).is_ok() {
                return Err(libc::EEXIST);
            }
            d.rename(p, &to.path)
        }
        Call::Link { .. } => d.link(p, &call.second()?.path),
        Call::Symlink { target } => d.symlink(&cstr(target, memory::PATH_MAX)?, p),
        Call::Chmod { mode, flags } => {
            // fchmodat2 refuses to change a symlink's own mode, as Linux does.
            if flags & libc::AT_SYMLINK_NOFOLLOW != 0 && d.lstat(p)?.is_symlink() {
                return Err(libc::EOPNOTSUPP);
            }
            d.chmod(p, mode)
        }
        Call::Chown { uid, gid, .. } => d.chown(p, uid, gid, call.args[0].follow),
        Call::Truncate { length } if length < 0 => Err(libc::EINVAL),
        Call::Truncate { length } => d.truncate(p, length as u64),
        Call::Utime { times: spelt, .. } => {
            let (a, m) = times(spelt, tid)?;
            if a.is_none() && m.is_none() {
                return Ok(0);
            }
            // The walk followed every symlink it was told to: a symlink left is the object.
            if !call.args[0].follow && d.lstat(p)?.is_symlink() {
                d.lutime(p, a, m)
            } else {
                d.utime(p, a, m)
            }
        }
        Call::Xattr {
            op:
                XattrOp::Set {
                    name,
                    value,
                    size,
                    flags,
                },
            follow,
        } => {
            let name = cstr(name, 256)?;
            let value = memory::read(tid, value, size as usize).map_err(memory::errno)?;
            d.setxattr(p, &name, &value, flags, follow)
        }
        Call::Xattr {
            op: XattrOp::Remove { name },
            follow,
        } => d.removexattr(p, &cstr(name, 256)?, follow),
        Call::Access { mode, .. } => d.access(p, mode),
        Call::Mknod { mode, .. } => match mode & libc::S_IFMT {
            0 | libc::S_IFREG => d
                .localize(
                    p,
                    Intent::Write {
                        create: true,
                        exclusive: true,
                        truncate: false,
                        append: false,
                        mode: created(mode),
                    },
                )
                .map(drop),
            // A FIFO meets the run's processes here (see roost_vfs::nodes).
            libc::S_IFIFO => d.mkfifo(p, created(mode)),
            // A Chirp server holds files, directories and links only.
            _ => Err(libc::EPERM),
        },
        // inotify, fanotify, file handles, chroot, sockets, ...: nothing remote to act on.
        _ => Err(libc::EOPNOTSUPP),
    }
    .map(|()| 0)
}
