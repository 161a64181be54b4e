//! The identity of local copies of remote objects. A file opened from a remote mount in
//! cached mode, and any remote directory, is read through a local copy in the driver's
//! mirror (`remote.rs`), so the kernel would answer fstat on its descriptor, and
//! getdents' `d_ino` in its listing, with the copy's local device and inode, while a name
//! lookup answers with the server's. Programs that compare the two (GNU cp, install, mv,
//! tar, rsync, fts, Python's shutil and scandir) then see a file replaced under them.
//!
//! Each copy is noted here when it is made, by its local device and inode, with the remote
//! object it stands for; the descriptor calls that tell an identity are then answered with
//! the remote one, on both delivery paths:
//!
//! - `newfstatat`/`statx` with `AT_EMPTY_PATH` (glibc's fstat): path calls, trapped anyway;
//!   the descriptor (or cwd) is looked up by the inode `/proc/TID/fd/N` leads to, whatever
//!   its number;
//! - the raw `fstat` and `getdents64`/`getdents` on a copy: with notifications the copies
//!   are installed in a range of descriptor numbers of their own ([`range`]), below the
//!   virtual descriptors', and only calls on that range are notified (reads, writes and
//!   mmap of a copy stay native); with ptrace only, these calls stop for every descriptor.
//!   A listing is made by roost on a copy of the caller's descriptor (`pidfd_getfd`: the
//!   same open file, so the same offset), with each entry's `d_ino` the remote one.
//!
//! A copy being read answers with the remote attributes it was made from (what the name
//! said then: its size, mode and times are the copy's); a copy being written answers with
//! its local size and times and the remote identity; a directory with what its name says
//! now, while that is still the same directory.

use crate::arch::Regs;
use crate::arch::Sys;
use roost_vfs::{Driver, Errno, Stat};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The range of descriptor numbers copies are installed in, for a process whose
/// descriptor limit is `limit`: the quarter below the virtual descriptors'
/// ([`crate::vfd::Vfds::range`]), at most 512-767.
pub fn range(limit: u64) -> (u32, u32) {
    let (vfd_base, _) = crate::vfd::Vfds::range(limit);
    let top = limit.min(1024) as u32;
    (top - top / 2, vfd_base)
}

/// The descriptor calls that tell an identity, and those that change attributes the
/// remote object holds (made there): their descriptor is argument 0.
pub const CALLS: &[Sys] = &[
    Sys::Fstat,
    Sys::Getdents64,
    Sys::Getdents,
    Sys::Fchmod,
    Sys::Fchown,
];

/// The calls that copy a descriptor (`dup`, `fcntl`'s `F_DUPFD`): notified on the copies'
/// range too, so a copy's duplicate lands in the range, next to it as the kernel numbers
/// (and its identity calls stay roost's); see `supervisor::direct::dup_copy`.
pub const DUPLICATING: &[Sys] = &[Sys::Dup, Sys::Fcntl];

/// Whether descriptor `fd` of thread `tid` is a local copy of a remote object.
pub fn is_copy(tid: i32, fd: i32) -> bool {
    behind(&link(tid, fd)).is_some()
}

/// What a copy stands for.
struct Copy {
    driver: Arc<dyn Driver>,
    /// The local copy's change time when last seen to be the copy (see [`behind`]).
    seen: Mutex<(i64, i64)>,
    /// The remote object's driver path.
    path: Vec<u8>,
    kind: Kind,
}

enum Kind {
    /// A file being read: the remote attributes it was made from (a mode changed through
    /// its descriptor since).
    Read(Mutex<Stat>),
    /// A file being written: its remote identity, learnt on first use.
    Written(Mutex<Option<Stat>>),
    /// A directory: its remote attributes when listed, and its entries' remote inodes.
    Dir(Stat, HashMap<Vec<u8>, u64>),
}

/// Every copy noted in this run, by local (device, inode).
struct Copies {
    by_inode: Mutex<HashMap<(u64, u64), Arc<Copy>>>,
    /// Set once any copy was noted: until then no call is looked at.
    any: AtomicBool,
}

fn copies() -> &'static Copies {
    static COPIES: OnceLock<Copies> = OnceLock::new();
    COPIES.get_or_init(|| Copies {
        by_inode: Mutex::new(HashMap::new()),
        any: AtomicBool::new(false),
    })
}

/// Told of each copy's local (device, inode) as it is noted: the in-process fast path,
/// which must leave descriptors of copies to roost.
static WATCHER: OnceLock<Box<dyn Fn(u64, u64) + Send + Sync>> = OnceLock::new();

/// Has `watcher` told of every copy noted from now on (one watcher a run).
pub fn watch(watcher: impl Fn(u64, u64) + Send + Sync + 'static) {
    let _ = WATCHER.set(Box::new(watcher));
}

/// The most copies remembered; past it the oldest-made are no more told apart from
/// local files (a run that opened this many remote objects is rare).
const MOST: usize = 1 << 18;

/// Notes that `local` (a kernel path) is a copy of `path` on `driver`, made for writing or
/// not. Called as the copy is made, before the program can open it.
pub fn note(driver: &Arc<dyn Driver>, path: &[u8], local: &[u8], writing: bool) {
    let Ok(meta) = std::fs::metadata(std::ffi::OsStr::from_bytes(local)) else {
        return;
    };
    use std::os::unix::fs::MetadataExt;
    let kind = if writing {
        Kind::Written(Mutex::new(None))
    } else {
        // Just asked by the walk and the copy: the driver's cached answer.
        let Ok(st) = driver.stat(path) else {
            return;
        };
        if meta.is_dir() {
            Kind::Dir(st, entries(driver, path, local))
        } else {
            Kind::Read(Mutex::new(st))
        }
    };
    let copy = Arc::new(Copy {
        driver: Arc::clone(driver),
        seen: Mutex::new((meta.ctime(), meta.ctime_nsec())),
        path: path.to_vec(),
        kind,
    });
    if let Some(watcher) = WATCHER.get() {
        watcher(meta.dev(), meta.ino());
    }
    let c = copies();
    let mut by_inode = c.by_inode.lock().expect("copies lock");
    if by_inode.len() >= MOST {
        by_inode.clear();
    }
    by_inode.insert((meta.dev(), meta.ino()), copy);
    c.any.store(true, Ordering::Release);
}

/// The remote inodes of the entries of directory copy `local` of `path`: from the driver's
/// attribute cache, which the listing that made the copy has just filled (a later listing
/// may find them expired, and a directory is listed long after it was opened).
fn entries(driver: &Arc<dyn Driver>, path: &[u8], local: &[u8]) -> HashMap<Vec<u8>, u64> {
    let dir = match std::fs::read_dir(std::ffi::OsStr::from_bytes(local)) {
        Ok(dir) if !is_root(path) => dir,
        _ => return HashMap::new(),
    };
    dir.flatten()
        .filter_map(|e| {
            let name = e.file_name().into_encoded_bytes();
            let st = driver.lstat(&roost_vfs::path::join(path, &name)).ok()?;
            Some((name, st.ino))
        })
        .collect()
}

/// Whether `path` is a driver's root, whose copy also holds roost's own (the mirror's top;
/// its entries are servers, each a connection to ask).
fn is_root(path: &[u8]) -> bool {
    path.iter().all(|&b| b == b'/')
}

/// The copy `link` (a `/proc/TID/fd/N` or `/proc/TID/cwd` link) leads to, with the local
/// attributes: `None` for anything else.
fn behind(link: &str) -> Option<(libc::stat, Arc<Copy>)> {
    let c = copies();
    if !c.any.load(Ordering::Acquire) {
        return None;
    }
    let local = crate::sys::stat_path(link.as_bytes()).ok()?;
    let copy = c
        .by_inode
        .lock()
        .expect("copies lock")
        .get(&(local.st_dev, local.st_ino))
        .cloned()?;
    // An inode number freed by the cache and taken by another file since is not the copy:
    // copies are opened by their name in the mirror. Unchanged since that was last seen
    // (its change time), it is still the copy, without a readlink.
    let ctime = (local.st_ctime, local.st_ctime_nsec);
    let mut seen = copy.seen.lock().expect("copy lock");
    if *seen != ctime {
        let mirror = copy.driver.mirror()?;
        let target = std::fs::read_link(link).ok()?;
        if !target.as_os_str().as_bytes().starts_with(mirror) {
            return None;
        }
        *seen = ctime;
    }
    drop(seen);
    Some((local, copy))
}

/// Whether descriptor `fd` of process `pid` is a copy of a remote file being read or of a
/// remote directory: a change made through its `/proc` name is the remote object's.
pub fn read_copy(pid: i32, fd: i32) -> bool {
    behind(&link(pid, fd)).is_some_and(|(_, copy)| !matches!(copy.kind, Kind::Written(_)))
}

impl Copy {
    /// The attributes a descriptor of this copy answers with.
    fn identity(&self, local: &libc::stat) -> Stat {
        match &self.kind {
            Kind::Read(st) => *st.lock().expect("copy lock"),
            Kind::Dir(then, _) => match self.driver.stat(&self.path) {
                Ok(now) if (now.dev, now.ino) == (then.dev, then.ino) => now,
                _ => *then,
            },
            Kind::Written(known) => {
                let mut known = known.lock().expect("copy lock");
                if known.is_none() {
                    *known = self.driver.lstat(&self.path).ok();
                }
                let mut st = Stat::from_kernel(local);
                if let Some(remote) = *known {
                    (st.dev, st.ino, st.nlink) = (remote.dev, remote.ino, remote.nlink);
                    (st.uid, st.gid, st.blksize) = (remote.uid, remote.gid, remote.blksize);
                }
                st
            }
        }
    }

    /// The remote inode of entry `name` of this directory copy.
    fn entry_ino(&self, name: &[u8], own: u64) -> Option<u64> {
        match name {
            b"." => Some(own),
            b".." => self
                .driver
                .lstat(roost_vfs::path::parent(&self.path))
                .ok()
                .map(|st| st.ino),
            _ => match &self.kind {
                Kind::Dir(_, entries) if entries.contains_key(name) => entries.get(name).copied(),
                _ if is_root(&self.path) => None,
                _ => self
                    .driver
                    .lstat(&roost_vfs::path::join(&self.path, name))
                    .ok()
                    .map(|st| st.ino),
            },
        }
    }
}

/// A call's return value and what it writes into the caller's memory, or its errno.
type Written = Result<(i64, Vec<(u64, Vec<u8>)>), Errno>;

/// newfstatat or statx (`name`) by thread `tid` whose path the caller read and found
/// empty, naming a descriptor (or the cwd) itself with `AT_EMPTY_PATH`: answered when that
/// is a copy, `None` otherwise (the kernel's to answer).
pub fn stat_itself(tid: i32, sys: Sys, regs: &Regs) -> Option<Written> {
    if !copies().any.load(Ordering::Acquire) {
        return None;
    }
    let (flags, buf) = match sys {
        Sys::Newfstatat => (regs.arg(3), regs.arg(2)),
        Sys::Statx => (regs.arg(2), regs.arg(4)),
        _ => return None,
    };
    if flags & crate::syscalls::AT_EMPTY_PATH == 0 {
        return None;
    }
    let (local, copy) = behind(&link(tid, regs.arg(0) as i32))?;
    let st = copy.identity(&local);
    let bytes = if sys == Sys::Statx {
        crate::memory::bytes_of(&st.to_statx())
    } else {
        crate::memory::bytes_of(&st.to_kernel())
    };
    Some(Ok((0, vec![(buf, bytes)])))
}

fn link(tid: i32, fd: i32) -> String {
    if fd == libc::AT_FDCWD {
        format!("/proc/{tid}/cwd")
    } else {
        format!("/proc/{tid}/fd/{fd}")
    }
}

/// The identity call of number `nr` (one of [`CALLS`]).
pub fn call_of(nr: i64) -> Option<Sys> {
    Sys::from_nr(nr).filter(|sys| CALLS.contains(sys))
}

/// fstat, getdents64 or getdents (`name`) by thread `tid` on a descriptor: answered when it
/// is a copy, `None` otherwise.
pub fn on_descriptor(tid: i32, sys: Sys, regs: &Regs) -> Option<Written> {
    let fd = regs.arg(0) as i32;
    if fd < 0 {
        return None;
    }
    let (local, copy) = behind(&link(tid, fd))?;
    match sys {
        Sys::Fchmod | Sys::Fchown => change(&copy, sys, regs),
        Sys::Fstat => Some(Ok((
            0,
            vec![(
                regs.arg(1),
                crate::memory::bytes_of(&copy.identity(&local).to_kernel()),
            )],
        ))),
        _ if local.st_mode & libc::S_IFMT != libc::S_IFDIR => None,
        _ => Some(list(tid, fd, sys == Sys::Getdents64, regs, &copy, &local)),
    }
}

/// fchmod or fchown on a copy being read (or a directory): made on the remote object, as
/// natively the owner may through any descriptor. A copy being written is the kernel's
/// (its mode goes back with it).
fn change(copy: &Copy, sys: Sys, regs: &Regs) -> Option<Written> {
    let (d, path) = (&copy.driver, copy.path.as_slice());
    let made = match (&copy.kind, sys) {
        (Kind::Written(_), _) => return None,
        (_, Sys::Fchmod) => d.chmod(path, regs.arg(1) as u32),
        _ => d.chown(path, regs.arg(1) as u32, regs.arg(2) as u32, false),
    };
    if let (Ok(()), Kind::Read(st)) = (made, &copy.kind) {
        if let Ok(now) = d.lstat(path) {
            st.lock().expect("copy lock").mode = now.mode;
        }
    }
    Some(made.map(|()| (0, Vec::new())))
}

/// A listing of directory copy `fd` of thread `tid`, made on a copy of its descriptor,
/// with each entry's remote inode.
fn list(tid: i32, fd: i32, wide: bool, regs: &Regs, copy: &Copy, local: &libc::stat) -> Written {
    let ours = crate::sys::take_thread_fd(tid, fd)?;
    let room = (regs.arg(2) as usize).min(1 << 20);
    let mut buf = vec![0u8; room];
    let nr = if wide {
        libc::SYS_getdents64
    } else {
        libc::SYS_getdents
    };
    use std::os::fd::AsRawFd;
    // SAFETY: the kernel writes at most `room` bytes into our buffer.
    let n = unsafe { libc::syscall(nr, ours.as_raw_fd(), buf.as_mut_ptr(), room) };
    if n < 0 {
        return Err(crate::sys::last_errno());
    }
    buf.truncate(n as usize);
    let own = copy.identity(local).ino;
    // Both records start with the 8-byte inode, the 8-byte offset and the 2-byte length;
    // the name follows at 19 (after the type) in getdents64's, at 18 in getdents'.
    let name_at = if wide { 19 } else { 18 };
    let mut at = 0;
    while at + name_at <= buf.len() {
        let len = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
        if len == 0 || at + len > buf.len() {
            break;
        }
        let record = &buf[at + name_at..at + len];
        let name = &record[..record.iter().position(|&b| b == 0).unwrap_or(record.len())];
        if let Some(ino) = copy.entry_ino(name, own) {
            buf[at..at + 8].copy_from_slice(&ino.to_ne_bytes());
        }
        at += len;
    }
    Ok((n, vec![(regs.arg(1), buf)]))
}
