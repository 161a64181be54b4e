//! Attribute calls on mapped paths, made by the supervisor on the physical path with the
//! caller's buffers copied in and out: the path xattr calls, statfs, and the utime family.
//! (On unmapped paths these calls are answered `CONTINUE` and never reach this module.)

use super::identity::{as_caller, Identity};
use super::lookup::last_errno;
use super::Notification;
use crate::arch::Regs;
use crate::arch::Sys;
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

/// Makes attribute call `name` of thread `tid` on `physical` with the caller's identity
/// `who`; returns its result or errno. The caller's buffers are read before `n` is checked
/// to be still waiting, and written after the call.
pub fn emulate(
    sys: Sys,
    regs: &Regs,
    tid: i32,
    physical: &[u8],
    who: Option<&Identity>,
    n: Notification,
) -> Result<i64, i32> {
    let path = CString::new(physical).map_err(|_| libc::EINVAL)?;
    let p = path.as_ptr();
    match sys {
        Sys::Getxattr | Sys::Lgetxattr | Sys::Listxattr | Sys::Llistxattr => {
            let listing = matches!(sys, Sys::Listxattr | Sys::Llistxattr);
            let (out, size) = if listing {
                (regs.arg(1), regs.arg(2) as usize)
            } else {
                (regs.arg(2), regs.arg(3) as usize)
            };
            let attr = if listing {
                None
            } else {
                Some(xattr_name(tid, regs.arg(1))?)
            };
            let mut buf = vec![0u8; size.min(XATTR_SIZE_MAX)];
            n.ensure_waiting()?;
            let rc = as_caller(who, || {
                // SAFETY: valid C strings and a buffer of the length passed.
                unsafe {
                    match &attr {
                        Some(a) => {
                            libc::syscall(sys.nr(), p, a.as_ptr(), buf.as_mut_ptr(), buf.len())
                        }
                        None => libc::syscall(sys.nr(), p, buf.as_mut_ptr(), buf.len()),
                    }
                }
            });
            let n = result(rc)?;
            if !buf.is_empty() {
                memory::write(tid, out, &buf[..n as usize]).map_err(memory::errno)?;
            }
            Ok(n)
        }
        Sys::Setxattr | Sys::Lsetxattr => {
            let attr = xattr_name(tid, regs.arg(1))?;
            let size = regs.arg(3) as usize;
            if size > XATTR_SIZE_MAX {
                return Err(libc::E2BIG);
            }
            let value = caller_bytes(tid, regs.arg(2), size)?;
            n.ensure_waiting()?;
            let rc = as_caller(who, || {
                // SAFETY: valid C strings and a value buffer of `size` bytes (or null).
                unsafe {
                    libc::syscall(
                        sys.nr(),
                        p,
                        attr.as_ptr(),
                        ptr_of(&value),
                        size,
                        regs.arg(4),
                    )
                }
            });
            result(rc)
        }
        Sys::Removexattr | Sys::Lremovexattr => {
            let attr = xattr_name(tid, regs.arg(1))?;
            n.ensure_waiting()?;
            // SAFETY: valid C strings.
            let rc = as_caller(who, || unsafe { libc::syscall(sys.nr(), p, attr.as_ptr()) });
            result(rc)
        }
        Sys::Statfs => {
            // SAFETY: the kernel fills the plain-data struct.
            let mut st: libc::statfs = unsafe { std::mem::zeroed() };
            n.ensure_waiting()?;
            // SAFETY: a valid C string and struct.
            let rc = as_caller(who, || unsafe { libc::statfs(p, &mut st) });
            result(rc.into())?;
            // SAFETY: zeroed, then filled by the kernel.
            unsafe { memory::write_struct(tid, regs.arg(1), &st) }.map_err(memory::errno)?;
            Ok(0)
        }
        Sys::Utime | Sys::Utimes | Sys::Futimesat | Sys::Utimensat => {
            // (times argument, bytes it points at); futimesat's dirfd was made AT_FDCWD by
            // the rewrite, so it is utimes on the physical path.
            let (times_arg, len) = match sys {
                Sys::Utime => (1, 16),
                Sys::Utimes => (1, 32),
                Sys::Futimesat => (2, 32),
                _ => (2, 32),
            };
            let times = caller_bytes(tid, regs.arg(times_arg), len)?;
            n.ensure_waiting()?;
            let rc = as_caller(who, || {
                // SAFETY: a valid C string and a times array of the kernel's size (or null).
                unsafe {
                    match sys {
                        Sys::Utime | Sys::Utimes => libc::syscall(sys.nr(), p, ptr_of(&times)),
                        Sys::Futimesat => libc::syscall(Sys::Utimes.nr(), p, ptr_of(&times)),
                        _ => libc::syscall(
                            Sys::Utimensat.nr(),
                            libc::AT_FDCWD,
                            p,
                            ptr_of(&times),
                            regs.arg(3),
                        ),
                    }
                }
            });
            result(rc)
        }
        _ => Err(libc::ENOSYS),
    }
}
