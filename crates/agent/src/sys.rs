//! Safe wrappers over the system calls the agent makes for itself (not on a program's behalf
//! through its registers): each owns what it returns and answers an [`Errno`] on failure, so
//! the handlers hold no `unsafe` of their own.

use roost_vfs::Errno;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

pub use roost_base::{last_errno, raise_descriptor_limit};

/// Takes ownership of a descriptor a raw call returned, or its errno.
fn owned(fd: i64) -> Result<OwnedFd, Errno> {
    if fd < 0 {
        return Err(last_errno());
    }
    // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn c_path(path: &[u8]) -> Result<CString, Errno> {
    CString::new(path).map_err(|_| libc::EINVAL)
}

/// An `O_PATH` descriptor on `path` (a `/proc` magic link, mostly).
pub fn open_path(path: &str) -> Result<OwnedFd, Errno> {
    let c = c_path(path.as_bytes())?;
    // SAFETY: a plain open of a valid C string.
    owned(unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) }.into())
}

/// `path` opened with `flags` (close-on-exec added) and its offset set to `offset`.
pub fn open_as(path: &[u8], flags: i32, offset: u64) -> Result<OwnedFd, Errno> {
    let c = c_path(path)?;
    // SAFETY: a plain open of a valid C string.
    let fd = owned(unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) }.into())?;
    // SAFETY: a seek of the descriptor just opened.
    if unsafe { libc::lseek(fd.as_raw_fd(), offset as i64, libc::SEEK_SET) } < 0 {
        return Err(last_errno());
    }
    Ok(fd)
}

/// `openat2(dir, path)` with `flags` (close-on-exec added) and `resolve` (`RESOLVE_*`).
pub fn openat2(
    dir: &impl AsRawFd,
    path: &[u8],
    flags: i32,
    resolve: u64,
) -> Result<OwnedFd, Errno> {
    let c = c_path(path)?;
    let how: [u64; 3] = [(flags | libc::O_CLOEXEC) as u64, 0, resolve];
    // SAFETY: a valid C string and a whole `struct open_how`, only read by the kernel.
    owned(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            how.as_ptr(),
            24usize,
        )
    })
}

/// `open_by_handle_at(mount, handle, flags)`; `handle` is a whole `struct file_handle`.
pub fn open_by_handle(mount: &impl AsRawFd, handle: &[u8], flags: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: `handle` holds the whole structure; the kernel only reads it.
    owned(unsafe {
        libc::syscall(
            libc::SYS_open_by_handle_at,
            mount.as_raw_fd(),
            handle.as_ptr(),
            flags,
        )
    })
}

/// Copies descriptor `fd` of process `pid` (a thread-group leader) into this process
/// (pidfd_open + pidfd_getfd).
pub fn take_fd(pid: i32, fd: i32) -> Result<OwnedFd, Errno> {
    take_fd_with(pid, fd, 0)
}

/// `pidfd_open`'s flag for a pidfd of one thread (Linux 6.9).
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// [`take_fd`] for thread `tid` (any thread of its process): by a pidfd of the thread, or
/// on older kernels of its process (a /proc read for its id).
pub fn take_thread_fd(tid: i32, fd: i32) -> Result<OwnedFd, Errno> {
    take_fd_with(tid, fd, PIDFD_THREAD).or_else(|_| {
        let tgid = crate::procinfo::tgid(tid).ok_or(libc::ESRCH)?;
        take_fd(tgid, fd)
    })
}

/// [`take_fd`] with `pidfd_open` flags.
fn take_fd_with(pid: i32, fd: i32, flags: libc::c_uint) -> Result<OwnedFd, Errno> {
    // SAFETY: raw calls with integer arguments returning new descriptors.
    let pidfd = owned(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) })?;
    // SAFETY: as above.
    owned(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) })
}

/// The attributes of what `path` names, following symlinks (and `/proc` magic links).
pub fn stat_path(path: &[u8]) -> Result<libc::stat, Errno> {
    let path = std::ffi::CString::new(path).map_err(|_| libc::EINVAL)?;
    // SAFETY: the kernel fills the plain-data struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a stat buffer.
    if unsafe { libc::stat(path.as_ptr(), &mut st) } != 0 {
        return Err(last_errno());
    }
    Ok(st)
}

/// The path a descriptor of this process names (its `/proc/self/fd` link).
pub fn path_of(fd: &impl AsRawFd) -> Result<Vec<u8>, Errno> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map(|p| p.into_os_string().into_encoded_bytes())
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// The name (or, with `peer`, the peer's name) of socket `sock`, as the kernel answers it.
pub fn socket_name(sock: &impl AsRawFd, peer: bool) -> Result<Vec<u8>, Errno> {
    let mut buf = [0u8; std::mem::size_of::<libc::sockaddr_un>()];
    let mut len = buf.len() as libc::socklen_t;
    let addr = buf.as_mut_ptr().cast::<libc::sockaddr>();
    // SAFETY: `buf` has room for `len` bytes, which the kernel fills and measures.
    let rc = unsafe {
        if peer {
            libc::getpeername(sock.as_raw_fd(), addr, &mut len)
        } else {
            libc::getsockname(sock.as_raw_fd(), addr, &mut len)
        }
    };
    if rc != 0 {
        return Err(last_errno());
    }
    Ok(buf[..(len as usize).min(buf.len())].to_vec())
}

/// A new directory of this process's own under the temporary directory, mode 0700 with a
/// random name (`mkdtemp`), so no other user can have made or filled it.
pub fn private_dir(prefix: &str) -> Result<PathBuf, Errno> {
    let mut template = std::env::temp_dir()
        .join(format!("{prefix}XXXXXX"))
        .into_os_string()
        .into_encoded_bytes();
    template.push(0);
    // SAFETY: a NUL-terminated template that mkdtemp fills in place.
    if unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) }.is_null() {
        return Err(last_errno());
    }
    template.pop();
    use std::os::unix::ffi::OsStringExt;
    Ok(PathBuf::from(std::ffi::OsString::from_vec(template)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrappers_answer_errnos_and_own_what_they_open() {
        assert_eq!(open_path("/nonexistent/x").unwrap_err(), libc::ENOENT);
        let root = open_path("/").unwrap();
        assert_eq!(path_of(&root).unwrap(), b"/");
        let etc = openat2(&root, b"etc", libc::O_PATH, 0x10).unwrap();
        assert_eq!(path_of(&etc).unwrap(), b"/etc");
        let d = private_dir("roost-sys-test-").unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
        std::fs::remove_dir(d).unwrap();
    }
}
