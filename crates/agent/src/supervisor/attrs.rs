//! Attribute calls on mapped paths, made by the supervisor on the physical path with the
//! caller's buffers copied in and out: the path xattr calls, statfs, and the utime family.
//! (On unmapped paths these calls are answered `CONTINUE` and never reach this module.)

use super::lookup::last_errno;
use super::Notification;
use crate::arch::Sys;
use crate::call::{Call, XattrOp};
use crate::caller::{as_caller, Identity};
use crate::memory;
use std::ffi::CString;

/// Linux's limits on xattr names and values.
const XATTR_NAME_MAX: usize = 255;
const XATTR_SIZE_MAX: usize = 65536;

/// An xattr name from the caller (ERANGE when longer than the kernel allows).
fn xattr_name(tid: i32, addr: u64) -> Result<CString, i32> {
    let name =
        memory::read_cstr(tid, addr, XATTR_NAME_MAX + 1).map_err(|e| match e.raw_os_error() {
            Some(libc::ENAMETOOLONG) => libc::ERANGE,
            other => other.unwrap_or(libc::EFAULT),
        })?;
    CString::new(name).map_err(|_| libc::EINVAL)
}

/// `len` bytes the caller points at, or a null pointer for a null address.
fn caller_bytes(tid: i32, addr: u64, len: usize) -> Result<Option<Vec<u8>>, i32> {
    if addr == 0 {
        return Ok(None);
    }
    let bytes = memory::read(tid, addr, len).map_err(memory::errno)?;
    if bytes.len() < len {
        return Err(libc::EFAULT);
    }
    Ok(Some(bytes))
}

fn ptr_of(b: &Option<Vec<u8>>) -> *const libc::c_void {
    b.as_ref().map_or(std::ptr::null(), |v| v.as_ptr().cast())
}

/// A syscall result as the caller gets it.
fn result(rc: i64) -> Result<i64, i32> {
    if rc < 0 {
        Err(last_errno())
    } else {
        Ok(rc)
    }
}

/// Makes attribute call `call` of thread `tid` on `physical` with the caller's identity
/// `who`; returns its result or errno. The caller's buffers are read before `n` is checked
/// to be still waiting, and written after the call.
pub fn emulate(
    call: &Call,
    tid: i32,
    physical: &[u8],
    who: Option<&Identity>,
    n: Notification,
) -> Result<i64, i32> {
    let path = CString::new(physical).map_err(|_| libc::EINVAL)?;
    let p = path.as_ptr();
    match *call {
        Call::Xattr { op, follow } => xattr(op, follow, (tid, p), who, n),
        Call::Statfs { buf } => {
            // SAFETY: the kernel fills the plain-data struct.
            let mut st: libc::statfs = unsafe { std::mem::zeroed() };
            n.ensure_waiting()?;
            // SAFETY: a valid C string and struct.
            let rc = as_caller(who, || unsafe { libc::statfs(p, &mut st) });
            result(rc.into())?;
            // SAFETY: zeroed, then filled by the kernel.
            unsafe { memory::write_struct(tid, buf, &st) }.map_err(memory::errno)?;
            Ok(0)
        }
        Call::Utime { times, flags } => {
            // Every spelling is utimensat on the physical path (futimesat's dirfd was made
            // AT_FDCWD by the rewrite): the times are converted, NULL stays NULL.
            let times = times.read(tid)?;
            let times_ptr = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
            n.ensure_waiting()?;
            // SAFETY: a valid C string and a timespec[2] (or null).
            let rc = as_caller(who, || unsafe {
                libc::utimensat(libc::AT_FDCWD, p, times_ptr, flags)
            });
            result(rc.into())
        }
        _ => Err(libc::ENOSYS),
    }
}

/// The path xattr calls on `p` (`follow`: not the `l*` spellings).
fn xattr(
    op: XattrOp,
    follow: bool,
    (tid, p): (i32, *const libc::c_char),
    who: Option<&Identity>,
    n: Notification,
) -> Result<i64, i32> {
    let spelt = |followed: Sys, own: Sys| if follow { followed } else { own }.nr();
    match op {
        XattrOp::Get { name, buf, size } => {
            let attr = xattr_name(tid, name)?;
            let nr = spelt(Sys::Getxattr, Sys::Lgetxattr);
            let mut value = vec![0u8; (size as usize).min(XATTR_SIZE_MAX)];
            n.ensure_waiting()?;
            // SAFETY: valid C strings and a buffer of the length passed.
            let rc = as_caller(who, || unsafe {
                libc::syscall(nr, p, attr.as_ptr(), value.as_mut_ptr(), value.len())
            });
            answer_into(tid, result(rc)?, (buf, &value))
        }
        XattrOp::List { buf, size } => {
            let nr = spelt(Sys::Listxattr, Sys::Llistxattr);
            let mut list = vec![0u8; (size as usize).min(XATTR_SIZE_MAX)];
            n.ensure_waiting()?;
            // SAFETY: a valid C string and a buffer of the length passed.
            let rc = as_caller(who, || unsafe {
                libc::syscall(nr, p, list.as_mut_ptr(), list.len())
            });
            answer_into(tid, result(rc)?, (buf, &list))
        }
        XattrOp::Set {
            name,
            value,
            size,
            flags,
        } => {
            let attr = xattr_name(tid, name)?;
            let size = size as usize;
            if size > XATTR_SIZE_MAX {
                return Err(libc::E2BIG);
            }
            let value = caller_bytes(tid, value, size)?;
            let nr = spelt(Sys::Setxattr, Sys::Lsetxattr);
            n.ensure_waiting()?;
            // SAFETY: valid C strings and a value buffer of `size` bytes (or null).
            let rc = as_caller(who, || unsafe {
                libc::syscall(nr, p, attr.as_ptr(), ptr_of(&value), size, flags)
            });
            result(rc)
        }
        XattrOp::Remove { name } => {
            let attr = xattr_name(tid, name)?;
            let nr = spelt(Sys::Removexattr, Sys::Lremovexattr);
            n.ensure_waiting()?;
            // SAFETY: valid C strings.
            let rc = as_caller(who, || unsafe { libc::syscall(nr, p, attr.as_ptr()) });
            result(rc)
        }
    }
}

/// Writes the first `len` bytes of `value` into the caller's buffer `buf` (none when it
/// gave no room: it asked for the size) and answers `len`.
fn answer_into(tid: i32, len: i64, (buf, value): (u64, &[u8])) -> Result<i64, i32> {
    if !value.is_empty() {
        memory::write(tid, buf, &value[..len as usize]).map_err(memory::errno)?;
    }
    Ok(len)
}
