//! sendfile, splice and copy_file_range with a direct-mode file on one side or both: the
//! kernel would move the placeholder socket's bytes, so roost moves the data itself, reading
//! and writing each side as the kernel would — a direct-mode file through the server, the
//! program's own descriptor through a copy of it (`pidfd_getfd`, sharing its offset) —
//! with the same checks, errnos, offsets and short counts as between local files.

use super::{Notification, Reply};
use crate::arch::Regs;
use crate::arch::Sys;
use crate::memory;
use crate::vfd::{VFile, Vfds};
use roost_vfs::Errno;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

/// The most one call moves (a larger one is short, as the kernel's may be): bounds the
/// memory a call takes in roost.
const MOST: usize = 8 << 20;

/// `SPLICE_F_NONBLOCK`: do not wait on the pipe.
const SPLICE_F_NONBLOCK: u64 = 2;

/// One side of a copy.
enum End {
    /// A direct-mode file.
    Remote(Arc<VFile>),
    /// A descriptor of the program's, through roost's copy of it.
    Local { fd: OwnedFd, mode: u32, flags: i32 },
}

impl End {
    fn of(vfds: &Vfds, tid: i32, fd: i32) -> Result<End, Errno> {
        if let Some(vf) = vfds.get(tid, fd) {
            return Ok(End::Remote(vf));
        }
        let ours = crate::sys::take_thread_fd(tid, fd).map_err(|_| libc::EBADF)?;
        // SAFETY: fstat and fcntl of a descriptor roost owns, into a zeroed struct.
        let (mode, flags) = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(ours.as_raw_fd(), &mut st) < 0 {
                return Err(libc::EBADF);
            }
            (st.st_mode, libc::fcntl(ours.as_raw_fd(), libc::F_GETFL))
        };
        Ok(End::Local {
            fd: ours,
            mode,
            flags,
        })
    }

    fn kind(&self) -> u32 {
        match self {
            End::Remote(_) => libc::S_IFREG,
            End::Local { mode, .. } => mode & libc::S_IFMT,
        }
    }

    fn readable(&self) -> bool {
        match self {
            End::Remote(vf) => vf.readable(),
            End::Local { flags, .. } => flags & libc::O_ACCMODE != libc::O_WRONLY,
        }
    }

    fn writable(&self) -> bool {
        match self {
            End::Remote(vf) => vf.writable(),
            End::Local { flags, .. } => flags & libc::O_ACCMODE != libc::O_RDONLY,
        }
    }

    fn appends(&self) -> bool {
        match self {
            End::Remote(vf) => vf.lock().append,
            End::Local { flags, .. } => flags & libc::O_APPEND != 0,
        }
    }

    fn is_pipe(&self) -> bool {
        self.kind() == libc::S_IFIFO
    }

    /// Up to `len` bytes at `at`, or at the descriptor's offset, which then moves past them.
    fn read(&self, at: Option<u64>, len: usize) -> Result<Vec<u8>, Errno> {
        match self {
            End::Remote(vf) => {
                let mut state = vf.lock();
                let data = vf.file.pread(at.unwrap_or(state.offset), len)?;
                if at.is_none() {
                    state.offset += data.len() as u64;
                }
                Ok(data)
            }
            End::Local { fd, .. } => {
                if self.is_pipe() {
                    roost_vfs::about_to_block();
                }
                let mut buf = vec![0u8; len];
                let fd = fd.as_raw_fd();
                // SAFETY: reads into a buffer of `len` bytes.
                let n = unsafe {
                    match at {
                        Some(at) => libc::pread(fd, buf.as_mut_ptr().cast(), len, at as i64),
                        None => libc::read(fd, buf.as_mut_ptr().cast(), len),
                    }
                };
                if n < 0 {
                    return Err(crate::sys::last_errno());
                }
                buf.truncate(n as usize);
                Ok(buf)
            }
        }
    }

    /// Gives back the last `n` bytes a read at the descriptor's offset took (the other side
    /// took fewer).
    fn unread(&self, n: usize) {
        if n == 0 {
            return;
        }
        match self {
            End::Remote(vf) => vf.lock().offset -= n as u64,
            End::Local { fd, .. } => {
                // SAFETY: a seek of roost's copy, which shares the program's offset.
                unsafe { libc::lseek(fd.as_raw_fd(), -(n as i64), libc::SEEK_CUR) };
            }
        }
    }

    /// Writes `data` at `at`, or at the descriptor's offset (the end under `O_APPEND`),
    /// which then moves past it; returns the count written.
    fn write(&self, at: Option<u64>, data: &[u8]) -> Result<usize, Errno> {
        match self {
            End::Remote(vf) => match at {
                Some(at) => vf.file.pwrite(data, at),
                None => vf.write_here(&mut vf.lock(), data),
            },
            End::Local { fd, mode, .. } => {
                if mode & libc::S_IFMT != libc::S_IFREG {
                    roost_vfs::about_to_block();
                }
                let fd = fd.as_raw_fd();
                // SAFETY: writes from a buffer of `data.len()` bytes.
                let n = unsafe {
                    match at {
                        Some(at) => libc::pwrite(fd, data.as_ptr().cast(), data.len(), at as i64),
                        None => libc::write(fd, data.as_ptr().cast(), data.len()),
                    }
                };
                if n < 0 {
                    return Err(crate::sys::last_errno());
                }
                Ok(n as usize)
            }
        }
    }

    /// Room in a pipe, and whether it has bytes to read: (`FIONREAD`, `F_GETPIPE_SZ`).
    fn pipe_fill(&self) -> (usize, usize) {
        let End::Local { fd, .. } = self else {
            return (0, 0);
        };
        let mut queued: libc::c_int = 0;
        // SAFETY: queries of a pipe roost holds a copy of.
        unsafe {
            libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut queued);
            let size = libc::fcntl(fd.as_raw_fd(), libc::F_GETPIPE_SZ);
            (queued.max(0) as usize, size.max(0) as usize)
        }
    }
}

/// An offset argument: the pointer and the value it points at (`None`: a NULL pointer).
fn offset_at(tid: i32, addr: u64) -> Result<Option<(u64, u64)>, Errno> {
    if addr == 0 {
        return Ok(None);
    }
    let raw = memory::read(tid, addr, 8).map_err(memory::errno)?;
    let value = i64::from_ne_bytes(raw.as_slice().try_into().map_err(|_| libc::EFAULT)?);
    if value < 0 {
        return Err(libc::EINVAL);
    }
    Ok(Some((addr, value as u64)))
}

/// Serves `name` (sendfile, splice, copy_file_range) for thread `tid` when one of its
/// descriptors is a direct-mode file.
pub fn answer(vfds: &Vfds, sys: Sys, (tid, regs): (i32, &Regs), n: Notification) -> Reply {
    let (fd_in, off_in, fd_out, off_out, len) = match sys {
        Sys::Sendfile => (regs.arg(1), regs.arg(2), regs.arg(0), 0, regs.arg(3)),
        _ => (
            regs.arg(0),
            regs.arg(1),
            regs.arg(2),
            regs.arg(3),
            regs.arg(4),
        ),
    };
    let flags = regs.arg(5);
    let made = (|| {
        let from = End::of(vfds, tid, fd_in as i32)?;
        let to = End::of(vfds, tid, fd_out as i32)?;
        let off_in = offset_at(tid, off_in)?;
        let off_out = offset_at(tid, off_out)?;
        match sys {
            Sys::Sendfile => check_sendfile(&from, &to)?,
            Sys::Splice => check_splice(&from, &to, off_in.is_some(), off_out.is_some())?,
            _ => check_copy_file_range(&from, &to, flags)?,
        }
        let mut len = (len as usize).min(MOST);
        if sys == Sys::Splice {
            len = match splice_room(&from, &to, len, flags) {
                Some(room) => room,
                None => return Err(libc::EAGAIN),
            };
        }
        if n.ensure_waiting().is_err() {
            return Ok(None);
        }
        let data = from.read(off_in.map(|o| o.1), len)?;
        let written = if data.is_empty() {
            0
        } else {
            match to.write(off_out.map(|o| o.1), &data) {
                Ok(w) => w,
                Err(e) => {
                    if off_in.is_none() {
                        from.unread(data.len());
                    }
                    return Err(e);
                }
            }
        };
        if off_in.is_none() {
            from.unread(data.len() - written);
        }
        for (addr, at) in [off_in, off_out].into_iter().flatten() {
            let moved = (at + written as u64).to_ne_bytes();
            memory::write(tid, addr, &moved).map_err(memory::errno)?;
        }
        Ok(Some(written as i64))
    })();
    match made {
        Ok(Some(count)) => Reply::value(count),
        Ok(None) => Reply::Answered,
        Err(e) => Reply::errno(e),
    }
}

/// sendfile: from a regular file open for reading, to anything open for writing but a file
/// that appends.
fn check_sendfile(from: &End, to: &End) -> Result<(), Errno> {
    if !from.readable() || !to.writable() {
        return Err(libc::EBADF);
    }
    if from.kind() != libc::S_IFREG || to.appends() {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// splice: one side a pipe, which takes no offset.
fn check_splice(from: &End, to: &End, off_in: bool, off_out: bool) -> Result<(), Errno> {
    if !from.readable() || !to.writable() {
        return Err(libc::EBADF);
    }
    if !from.is_pipe() && !to.is_pipe() {
        return Err(libc::EINVAL);
    }
    if (from.is_pipe() && off_in) || (to.is_pipe() && off_out) {
        return Err(libc::ESPIPE);
    }
    if to.appends() {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// copy_file_range: between regular files, no flags, not onto a file that appends.
fn check_copy_file_range(from: &End, to: &End, flags: u64) -> Result<(), Errno> {
    if flags != 0 {
        return Err(libc::EINVAL);
    }
    if from.kind() == libc::S_IFDIR || to.kind() == libc::S_IFDIR {
        return Err(libc::EISDIR);
    }
    if from.kind() != libc::S_IFREG || to.kind() != libc::S_IFREG {
        return Err(libc::EINVAL);
    }
    if !from.readable() || !to.writable() || to.appends() {
        return Err(libc::EBADF);
    }
    Ok(())
}

/// How much a splice may move without waiting where the caller said not to wait
/// (`SPLICE_F_NONBLOCK`), `None` when nothing can move: what a pipe to fill has room for,
/// what a pipe to drain holds. (A pipe open `O_NONBLOCK` answers EAGAIN itself.)
fn splice_room(from: &End, to: &End, len: usize, flags: u64) -> Option<usize> {
    if to.is_pipe() {
        let (queued, size) = to.pipe_fill();
        let room = size.saturating_sub(queued);
        if room == 0 && flags & SPLICE_F_NONBLOCK != 0 {
            return None;
        }
        // A full pipe: wait for room for one page, as the kernel does.
        return Some(len.min(if room == 0 { 4096 } else { room }));
    }
    let (queued, _) = from.pipe_fill();
    if queued == 0 && flags & SPLICE_F_NONBLOCK != 0 {
        return None;
    }
    Some(len)
}
