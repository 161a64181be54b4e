//! Direct-mode files through notifications: an open of a file on a direct-mode mount (or
//! an `O_APPEND` open for writing on a cached-mode one, which writes through) opens it on
//! the server and hands the program a placeholder at a reserved number ([`crate::vfd`]); the calls on such a descriptor (read, write, pread, pwrite, readv,
//! writev, lseek, fstat, ftruncate, fsync, fchmod, fcntl, mmap, ...) arrive here and are
//! served with requests to the server, their data copied between the program's buffers
//! and the requests. A call on any other descriptor of the range is let through.

use super::handover::{hand_over, replace_then_continue};
use super::locks;
use super::{Notification, Reply, CONTINUE};
use crate::arch::Regs;
use crate::arch::Sys;
use crate::decision::RemoteCall;
use crate::memory;
use crate::memory::bytes_of;
use crate::remote::{into_buffer, statfs_bytes, umask};
use crate::shared::GroupStops;
use crate::vfd::{VFile, Vfds};
use roost_vfs::{Errno, Intent, OpenMode};
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// The most one read or write moves (a larger one is short, as the kernel's are past
/// 2 GiB): bounds the memory a call takes in roost.
const MOST: usize = 16 << 20;

/// Opens a file of a direct-mode mount for `call` of thread `tid`, or `None` when the
/// call is not one (another mount's file, a directory — listed through a local copy —,
/// an O_TMPFILE), so the caller makes it as a cached-mode open. A cached-mode file opened
/// to append is opened so too: its writes go to the server's end as they are made, where
/// a copy written back on close would replace what others appended meanwhile.
pub fn open(
    vfds: &Vfds,
    call: &RemoteCall,
    tid: i32,
    logical: &[u8],
    n: Notification,
) -> Option<Reply> {
    let remote = call.args.first()?.remote.as_ref()?;
    let (flags, mode) = call.call.open().map(|o| (o.flags, o.mode))?;
    let access = flags & libc::O_ACCMODE;
    let append = flags & libc::O_APPEND != 0 && access != libc::O_RDONLY;
    if flags & libc::O_TMPFILE == libc::O_TMPFILE || !(remote.direct || append) {
        return None;
    }
    if let Some(e) = crate::remote::names_a_directory_only(call, flags) {
        return Some(Reply::errno(e));
    }
    let (driver, path) = (&remote.driver, &remote.path);
    let create = flags & libc::O_CREAT != 0;
    let exclusive = create && flags & libc::O_EXCL != 0;
    match driver.lstat(path) {
        Ok(_) if exclusive => return Some(Reply::errno(libc::EEXIST)),
        Ok(st) if st.is_dir() => {
            return (access != libc::O_RDONLY || create).then(|| Reply::errno(libc::EISDIR));
        }
        // Left unfollowed by the walk: O_NOFOLLOW.
        Ok(st) if st.is_symlink() => return Some(Reply::errno(libc::ELOOP)),
        Ok(st) if st.mode & libc::S_IFMT != libc::S_IFREG => return None,
        Ok(_) if flags & libc::O_DIRECTORY != 0 => return Some(Reply::errno(libc::ENOTDIR)),
        Ok(_) => {}
        Err(libc::ENOENT) if create => {}
        Err(e) => return Some(Reply::errno(e)),
    }
    // No room in the range (the program lowered its descriptor limit, or holds that many
    // files open): used through a local copy, as in cached mode.
    vfds.free_slot(tid)?;
    let how = OpenMode {
        read: access != libc::O_WRONLY,
        write: access != libc::O_RDONLY,
        create,
        exclusive,
        truncate: flags & libc::O_TRUNC != 0 && access != libc::O_RDONLY,
        append,
        // The umask (a read of /proc) only matters to a file made.
        mode: if create {
            mode & 0o7777 & !umask(tid)
        } else {
            0
        },
    };
    if n.ensure_waiting().is_err() {
        return Some(Reply::Answered);
    }
    let file = match driver.open_file(path, how) {
        Ok(f) => f,
        Err(libc::ENOSYS) => return None, // a file the driver serves through local copies
        Err(e) => return Some(Reply::errno(e)),
    };
    let (_, placeholder) = match vfds.add(file, Arc::clone(driver), logical, flags) {
        Ok(added) => added,
        Err(e) => return Some(Reply::errno(e)),
    };
    let cloexec = flags & libc::O_CLOEXEC != 0;
    Some(hand_over_high(vfds, tid, n, placeholder, cloexec))
}

/// Serves call `sys` if a descriptor in one of `fd_args` is virtual (the first such one).
pub fn answer(
    vfds: &Vfds,
    (sys, fd_args): (Sys, &[usize]),
    (tid, regs): (i32, &Regs),
    n: Notification,
    stops: &GroupStops,
) -> Reply {
    let Some((fd, vf)) = fd_args.iter().find_map(|&arg| {
        let fd = regs.arg(arg) as i32;
        vfds.get(tid, fd).map(|vf| (fd, vf))
    }) else {
        return CONTINUE;
    };
    let call = Serving { tid, regs, n };
    match sys {
        Sys::Read | Sys::Pread64 | Sys::Readv | Sys::Preadv | Sys::Preadv2 => call.read(sys, &vf),
        Sys::Write | Sys::Pwrite64 | Sys::Writev | Sys::Pwritev | Sys::Pwritev2 => {
            call.write(sys, &vf)
        }
        Sys::Lseek => Reply::from(lseek(&vf, regs.arg(1) as i64, regs.arg(2) as i32)),
        Sys::Fstat => call.answer_with(vf.file.fstat().map(|st| bytes_of(&st.to_kernel())), 1),
        Sys::Fstatfs => call.answer_with(vf.file.fstatfs().map(|fs| statfs_bytes(&fs)), 1),
        Sys::Ftruncate if !vf.writable() => Reply::errno(libc::EINVAL),
        Sys::Ftruncate if (regs.arg(1) as i64) < 0 => Reply::errno(libc::EINVAL),
        Sys::Ftruncate => done(vf.file.ftruncate(regs.arg(1))),
        Sys::Fsync | Sys::Fdatasync | Sys::SyncFileRange => done(vf.file.fsync()),
        // A server changes modes through descriptors open for writing only; natively the
        // owner may through any (rsync does, on a file it opened to read).
        Sys::Fchmod if !vf.writable() => done(vf.driver.chmod(vf.file.path(), regs.arg(1) as u32)),
        Sys::Fchmod => done(vf.file.fchmod(regs.arg(1) as u32)),
        Sys::Fchown => done(vf.file.fchown(regs.arg(1) as u32, regs.arg(2) as u32)),
        Sys::Fcntl if locks::is_record_lock(regs.arg(1) as i32) => {
            locks::record_lock(&vf, (regs.arg(1) as i32, regs.arg(2)), (tid, n, stops))
        }
        Sys::Fcntl => fcntl(vfds, &vf, fd, (tid, regs), n),
        Sys::Flock => locks::flock(&vf, regs.arg(1) as i32, (tid, n, stops)),
        Sys::Dup => match lowest_standard_free(tid, 0) {
            Some(low) => copy_low(&vf, low, false, n),
            None => copy_high(vfds, fd, false, tid, n),
        },
        Sys::Dup2 | Sys::Dup3 => {
            let (to, cloexec) = (
                regs.arg(1) as u32,
                regs.arg(2) as i32 & libc::O_CLOEXEC != 0,
            );
            if to as i32 == fd || to >= vfds.base {
                CONTINUE // the kernel's: the same descriptor, or a copy still in the range
            } else {
                copy_low(&vf, to, sys == Sys::Dup3 && cloexec, n)
            }
        }
        Sys::Mmap => mmap(&vf, fd, (tid, regs), n),
        Sys::Fgetxattr | Sys::Flistxattr | Sys::Fsetxattr | Sys::Fremovexattr => {
            call.xattr(sys, &vf)
        }
        // Advice a server has no use for.
        Sys::Fadvise64 | Sys::Readahead => Reply::value(0),
        // No room is reserved on a Chirp server ahead of writes.
        Sys::Fallocate => Reply::errno(libc::EOPNOTSUPP),
        Sys::Sendfile | Sys::Splice | Sys::CopyFileRange => {
            super::copies::answer(vfds, sys, (tid, regs), n)
        }
        _ if refused(sys) => Reply::errno(libc::EINVAL),
        _ => CONTINUE,
    }
}

/// newfstatat, statx and utimensat naming a virtual descriptor itself (an empty path with
/// `AT_EMPTY_PATH`, or utimensat's NULL path): glibc's fstat and futimens are these.
pub fn on_descriptor_itself(
    vfds: &Vfds,
    (sys, decoded): (Sys, &crate::call::Call),
    (tid, regs): (i32, &Regs),
    n: Notification,
) -> Option<Reply> {
    if (regs.arg(0) as i32) < vfds.base as i32 {
        return None;
    }
    let (empty_flags, path) = match sys {
        Sys::Newfstatat => (regs.arg(3), regs.arg(1)),
        Sys::Statx => (regs.arg(2), regs.arg(1)),
        Sys::Utimensat => (regs.arg(3), regs.arg(1)),
        _ => return None,
    };
    let names_itself = if path == 0 {
        sys == Sys::Utimensat
    } else {
        empty_flags & crate::syscalls::AT_EMPTY_PATH != 0
            && memory::read_cstr(tid, path, 1).is_ok_and(|p| p.is_empty())
    };
    if !names_itself {
        return None;
    }
    let vf = vfds.get(tid, regs.arg(0) as i32)?;
    let call = Serving { tid, regs, n };
    Some(match sys {
        Sys::Newfstatat => call.answer_with(vf.file.fstat().map(|st| bytes_of(&st.to_kernel())), 2),
        Sys::Statx => call.answer_with(vf.file.fstat().map(|st| bytes_of(&st.to_statx())), 4),
        _ => {
            let times = match *decoded {
                crate::call::Call::Utime { times, .. } => crate::remote::times(times, tid),
                _ => Err(libc::ENOSYS),
            };
            let path = vf.file.path().to_vec();
            done(times.and_then(|(a, m)| {
                if a.is_none() && m.is_none() {
                    return Ok(());
                }
                vf.driver.utime(&path, a, m)
            }))
        }
    })
}

/// A call being served: its thread, registers and notification.
struct Serving<'a> {
    tid: i32,
    regs: &'a Regs,
    n: Notification,
}

impl Serving<'_> {
    /// Writes `bytes` into the buffer of argument `buf` and answers 0.
    fn answer_with(&self, bytes: Result<Vec<u8>, Errno>, buf: usize) -> Reply {
        match bytes {
            Ok(b) => self.deliver(0, &[(self.regs.arg(buf), &b[..])]),
            Err(e) => Reply::errno(e),
        }
    }

    /// Writes each (address, bytes) into the caller's memory and answers `ret`.
    fn deliver(&self, ret: i64, writes: &[(u64, &[u8])]) -> Reply {
        if self.n.ensure_waiting().is_err() {
            return Reply::Answered;
        }
        for (addr, bytes) in writes {
            if !bytes.is_empty() && memory::write(self.tid, *addr, bytes).is_err() {
                return Reply::errno(libc::EFAULT);
            }
        }
        Reply::value(ret)
    }

    /// The caller's buffers: one for read/write, its iovecs for the vector calls.
    fn buffers(&self, sys: Sys) -> Result<Vec<(u64, usize)>, Errno> {
        let regs = self.regs;
        if !matches!(
            sys,
            Sys::Readv | Sys::Writev | Sys::Preadv | Sys::Pwritev | Sys::Preadv2 | Sys::Pwritev2
        ) {
            return Ok(vec![(regs.arg(1), regs.arg(2) as usize)]);
        }
        let count = regs.arg(2) as usize;
        if count > 1024 {
            return Err(libc::EINVAL);
        }
        let raw = memory::read(self.tid, regs.arg(1), count * 16).map_err(memory::errno)?;
        if raw.len() < count * 16 {
            return Err(libc::EFAULT);
        }
        Ok(raw
            .chunks_exact(16)
            .map(|c| {
                let word = |i: usize| u64::from_ne_bytes(c[i..i + 8].try_into().expect("8"));
                (word(0), word(8) as usize)
            })
            .collect())
    }

    /// The buffers and explicit offset of a read or write the file's mode allows.
    #[allow(clippy::type_complexity)]
    fn request(&self, sys: Sys, allowed: bool) -> Result<(Vec<(u64, usize)>, Option<u64>), Errno> {
        if !allowed {
            return Err(libc::EBADF);
        }
        Ok((self.buffers(sys)?, self.position(sys)?))
    }

    /// The explicit offset of a positional call (`None`: the file's offset).
    fn position(&self, sys: Sys) -> Result<Option<u64>, Errno> {
        let at = match sys {
            Sys::Pread64 | Sys::Pwrite64 => self.regs.arg(3) as i64,
            Sys::Preadv | Sys::Pwritev | Sys::Preadv2 | Sys::Pwritev2 => self.regs.arg(3) as i64,
            _ => return Ok(None),
        };
        match at {
            // preadv2/pwritev2 with -1 use the file's offset.
            -1 if matches!(sys, Sys::Preadv2 | Sys::Pwritev2) => Ok(None),
            at if at < 0 => Err(libc::EINVAL),
            at => Ok(Some(at as u64)),
        }
    }

    fn read(&self, sys: Sys, vf: &VFile) -> Reply {
        let (buffers, position) = match self.request(sys, vf.readable()) {
            Ok(request) => request,
            Err(e) => return Reply::errno(e),
        };
        let total = buffers.iter().map(|b| b.1).sum::<usize>().min(MOST);
        let mut state = vf.lock();
        let at = position.unwrap_or(state.offset);
        let data = match vf.file.pread(at, total) {
            Ok(d) => d,
            Err(e) => return Reply::errno(e),
        };
        // Each buffer gets its part of the data, in place (no copy of it here).
        let mut writes = Vec::new();
        let mut rest = &data[..];
        for (addr, len) in buffers {
            if rest.is_empty() {
                break;
            }
            let (part, more) = rest.split_at(len.min(rest.len()));
            writes.push((addr, part));
            rest = more;
        }
        let reply = self.deliver(data.len() as i64, &writes);
        if position.is_none() && matches!(reply, Reply::Send(v, 0, 0) if v >= 0) {
            state.offset = at + data.len() as u64;
        }
        reply
    }

    fn write(&self, sys: Sys, vf: &VFile) -> Reply {
        let (buffers, position) = match self.request(sys, vf.writable()) {
            Ok(request) => request,
            Err(e) => return Reply::errno(e),
        };
        let mut data = Vec::new();
        for (addr, len) in buffers {
            let room = MOST - data.len();
            let len = len.min(room);
            if len == 0 {
                continue;
            }
            match memory::read(self.tid, addr, len) {
                Ok(b) if b.len() == len => data.extend_from_slice(&b),
                _ => return Reply::errno(libc::EFAULT),
            }
        }
        if self.n.ensure_waiting().is_err() {
            return Reply::Answered;
        }
        let mut state = vf.lock();
        let written = match position {
            // Linux's pwrite on an O_APPEND descriptor appends (and keeps the offset).
            Some(_) if state.append => vf.file.append(&data).map(|(n, _)| n),
            Some(at) => vf.file.pwrite(&data, at),
            None => vf.write_here(&mut state, &data),
        };
        Reply::from(written.map(|n| n as i64))
    }

    fn xattr(&self, sys: Sys, vf: &VFile) -> Reply {
        let regs = self.regs;
        let path = vf.file.path();
        let attr_name = || memory::read_cstr(self.tid, regs.arg(1), 256).map_err(memory::errno);
        let (d, tid) = (&vf.driver, self.tid);
        let answer = match sys {
            Sys::Fgetxattr => attr_name()
                .and_then(|a| d.getxattr(path, &a, true))
                .and_then(|v| into_buffer(v, regs.arg(2), regs.arg(3))),
            Sys::Flistxattr => d
                .listxattr(path, true)
                .and_then(|v| into_buffer(v, regs.arg(1), regs.arg(2))),
            Sys::Fsetxattr => attr_name().and_then(|a| {
                let value =
                    memory::read(tid, regs.arg(2), regs.arg(3) as usize).map_err(memory::errno)?;
                d.setxattr(path, &a, &value, regs.arg(4) as i32, true)
                    .map(|()| (0, Vec::new()))
            }),
            _ => attr_name().and_then(|a| d.removexattr(path, &a, true).map(|()| (0, Vec::new()))),
        };
        match answer {
            Ok((ret, writes)) => {
                let writes: Vec<(u64, &[u8])> = writes.iter().map(|(a, b)| (*a, &b[..])).collect();
                self.deliver(ret, &writes)
            }
            Err(e) => Reply::errno(e),
        }
    }
}

fn done(r: Result<(), Errno>) -> Reply {
    Reply::from(r.map(|()| 0))
}

fn lseek(vf: &VFile, offset: i64, whence: i32) -> Result<i64, Errno> {
    let mut state = vf.lock();
    let size = || vf.file.fstat().map(|st| st.size as i64);
    let to = match whence {
        libc::SEEK_SET => offset,
        libc::SEEK_CUR => state.offset as i64 + offset,
        libc::SEEK_END => size()? + offset,
        // The server keeps no holes it would tell of: data runs to the end.
        libc::SEEK_DATA if offset < size()? => offset,
        libc::SEEK_HOLE if offset < size()? => size()?,
        libc::SEEK_DATA | libc::SEEK_HOLE => return Err(libc::ENXIO),
        _ => return Err(libc::EINVAL),
    };
    if to < 0 {
        return Err(libc::EINVAL);
    }
    state.offset = to as u64;
    Ok(to)
}

fn fcntl(vfds: &Vfds, vf: &VFile, fd: i32, (tid, regs): (i32, &Regs), n: Notification) -> Reply {
    let mut state = vf.lock();
    match regs.arg(1) as i32 {
        libc::F_GETFL => {
            let mut flags = vf.access | libc::O_LARGEFILE;
            if state.append {
                flags |= libc::O_APPEND;
            }
            if state.nonblock {
                flags |= libc::O_NONBLOCK;
            }
            Reply::value(flags.into())
        }
        libc::F_SETFL => {
            let flags = regs.arg(2) as i32;
            let append = flags & libc::O_APPEND != 0;
            if let Err(e) = vf.file.set_append(append) {
                return Reply::errno(e);
            }
            state.append = append;
            state.nonblock = flags & libc::O_NONBLOCK != 0;
            Reply::value(0)
        }
        cmd @ (libc::F_DUPFD | libc::F_DUPFD_CLOEXEC) => {
            drop(state);
            let (from, cloexec) = (regs.arg(2) as u32, cmd == libc::F_DUPFD_CLOEXEC);
            if from >= vfds.base {
                return CONTINUE;
            }
            match lowest_standard_free(tid, from) {
                Some(low) => copy_low(vf, low, cloexec, n),
                None => copy_high(vfds, fd, cloexec, tid, n),
            }
        }
        // Descriptor flags and locks: the kernel's, on the placeholder.
        _ => CONTINUE,
    }
}

/// The lowest of the standard descriptors (0-2) from `from` on that thread `tid` has free:
/// a `dup` there is a redirection (`close(1); dup(fd)`), which the copy must honour.
fn lowest_standard_free(tid: i32, from: u32) -> Option<u32> {
    (from..3).find(|&n| !crate::vfd::is_open(tid, n))
}

/// A copy of virtual descriptor `fd` in the reserved range (`dup`, `F_DUPFD`): the same
/// open file, as the kernel's copy would be, at the next free number.
fn copy_high(vfds: &Vfds, fd: i32, cloexec: bool, tid: i32, n: Notification) -> Reply {
    let Some(pid) = crate::procinfo::tgid(tid) else {
        return Reply::errno(libc::ESRCH);
    };
    match crate::sys::take_fd(pid, fd) {
        Ok(ours) => hand_over_high(vfds, tid, n, ours, cloexec),
        Err(e) => Reply::errno(e),
    }
}

/// tee and vmsplice, which the kernel makes between pipes only: refused on a file, as by
/// the kernel (sendfile, splice and copy_file_range are made by roost: `copies`).
fn refused(sys: Sys) -> bool {
    matches!(sys, Sys::Tee | Sys::Vmsplice)
}

/// Installs `fd` at the next free number of the range in the caller's table.
fn hand_over_high(vfds: &Vfds, tid: i32, n: Notification, fd: OwnedFd, cloexec: bool) -> Reply {
    vfds.place(tid, |slot| placed(n, fd, cloexec, slot))
}

fn placed(n: Notification, fd: OwnedFd, cloexec: bool, slot: Option<u32>) -> Reply {
    match slot {
        Some(slot) => hand_over(n, fd, cloexec, Some(slot)),
        None => Reply::errno(libc::EMFILE), // the range filled up meanwhile
    }
}

/// `dup` or `F_DUPFD` of a local copy of a remote object in the copies' range
/// (`crate::copies`): the duplicate is placed at the range's next number, as the kernel
/// numbers, so its identity calls stay roost's and files dup'ed in a row keep consecutive
/// numbers (`os.closerange` relies on it). `None` (the kernel's own dup) for any other
/// descriptor, a `dup` into a free standard descriptor (a redirection), or an `F_DUPFD`
/// asking for a number above the range's start.
pub(super) fn dup_copy(
    slots: &crate::vfd::Slots,
    tid: i32,
    sys: Sys,
    regs: &Regs,
    n: Notification,
) -> Option<Reply> {
    let fd = regs.arg(0) as i32;
    let cloexec = match (sys, regs.arg(1) as i32) {
        (Sys::Dup, _) if lowest_standard_free(tid, 0).is_none() => false,
        (Sys::Fcntl, libc::F_DUPFD) if regs.arg(2) as u32 <= slots.base => false,
        (Sys::Fcntl, libc::F_DUPFD_CLOEXEC) if regs.arg(2) as u32 <= slots.base => true,
        _ => return None,
    };
    if fd < slots.base as i32 || !crate::copies::is_copy(tid, fd) {
        return None;
    }
    let Some(pid) = crate::procinfo::tgid(tid) else {
        return Some(Reply::errno(libc::ESRCH));
    };
    Some(match crate::sys::take_fd(pid, fd) {
        Ok(ours) => slots.place(tid, |slot| placed(n, ours, cloexec, slot)),
        Err(e) => Reply::errno(e),
    })
}

/// A copy of a virtual descriptor at a low number the filter does not watch (`dup2(fd,
/// 1)`): a local copy of the file, opened as the descriptor was, at its offset, and
/// written back when closed (so `> /chirp/...` in a shell works, and so do lseek, fstat
/// and futimens on the copy); an appending one's (`>>`) goes back as an append of what
/// was added to it, so that other writers' records stay.
fn copy_low(vf: &VFile, to: u32, cloexec: bool, n: Notification) -> Reply {
    let state = vf.lock();
    let intent = if vf.writable() {
        Intent::Write {
            create: false,
            exclusive: false,
            truncate: false,
            append: state.append,
            mode: 0o600,
        }
    } else {
        Intent::Read
    };
    let local = match vf.driver.localize(vf.file.path(), intent) {
        Ok(l) => l,
        Err(e) => return Reply::errno(e),
    };
    crate::copies::note(&vf.driver, vf.file.path(), &local, vf.writable());
    let mut flags = vf.access;
    if state.append {
        flags |= libc::O_APPEND;
    }
    let copy = match crate::sys::open_as(&local, flags, state.offset) {
        Ok(f) => f,
        Err(e) => return Reply::errno(e),
    };
    drop(state);
    hand_over(n, copy, cloexec, Some(to))
}

/// mmap of a virtual descriptor: a shared writable mapping cannot follow the server
/// (ENODEV, said once); any other maps a local copy, which takes the descriptor's place
/// from then on (the descriptor reads that copy, as in cached mode).
fn mmap(vf: &VFile, fd: i32, (tid, regs): (i32, &Regs), n: Notification) -> Reply {
    let (prot, flags) = (regs.arg(2) as i32, regs.arg(3) as i32);
    if flags & libc::MAP_ANONYMOUS != 0 {
        return CONTINUE;
    }
    let shared = flags & libc::MAP_TYPE == libc::MAP_SHARED
        || flags & libc::MAP_TYPE == libc::MAP_SHARED_VALIDATE;
    if shared && prot & libc::PROT_WRITE != 0 {
        let mut state = vf.state.lock().expect("vfile lock");
        if !std::mem::replace(&mut state.said_mmap, true) {
            eprintln!(
                "roost: {}: a shared writable mapping of a direct-mode file cannot follow \
                 the server (ENODEV); mount it :cached to map it",
                vf.name()
            );
        }
        return Reply::errno(libc::ENODEV);
    }
    let state = vf.lock();
    let local = match vf.driver.localize(vf.file.path(), Intent::Read) {
        Ok(l) => l,
        Err(e) => return Reply::errno(e),
    };
    crate::copies::note(&vf.driver, vf.file.path(), &local, false);
    let copy = match crate::sys::open_as(&local, libc::O_RDONLY, state.offset) {
        Ok(f) => f,
        Err(e) => return Reply::errno(e),
    };
    drop(state);
    let cloexec = crate::procinfo::read_file(&format!("/proc/{tid}/fdinfo/{fd}"))
        .and_then(|info| {
            let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
            i64::from_str_radix(flags.trim(), 8).ok()
        })
        .is_some_and(|f| f & i64::from(libc::O_CLOEXEC) != 0);
    replace_then_continue(n, copy, cloexec, fd as u32)
}
