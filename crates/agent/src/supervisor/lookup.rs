//! Lookups answered by the supervisor for a mapped path: the stat family, access and
//! readlink run here on the physical path and their results go into the caller's memory,
//! as the kernel would have written them.

use crate::arch::Sys;
use crate::call::{Call, StatOut};
use crate::caller::{as_caller, Identity};
use crate::memory;
use std::ffi::CString;

pub use crate::sys::last_errno;

/// Performs lookup `call` on `physical` for thread `tid`, with its identity `who` when
/// that may differ from roost's, and writes its result into the caller's buffer, as the
/// kernel would have.
pub fn emulate(call: &Call, tid: i32, physical: &[u8], who: Option<&Identity>) -> Result<i64, i32> {
    let c = CString::new(physical).map_err(|_| libc::EINVAL)?;
    match *call {
        Call::Stat {
            flags,
            out: StatOut::Stat(buf),
        } => {
            // SAFETY: the kernel fills the plain-data struct.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            let flags = flags & libc::AT_SYMLINK_NOFOLLOW;
            // SAFETY: a valid C string and stat buffer.
            let rc = as_caller(who, || unsafe {
                libc::fstatat(libc::AT_FDCWD, c.as_ptr(), &mut st, flags)
            });
            if rc != 0 {
                return Err(last_errno());
            }
            // SAFETY: zeroed, then filled by the kernel.
            unsafe { memory::write_struct(tid, buf, &st) }.map_err(|_| libc::EFAULT)?;
            Ok(0)
        }
        Call::Stat {
            flags,
            out: StatOut::Statx { mask, buf },
        } => {
            // SAFETY: the kernel fills the plain-data struct.
            let mut stx: libc::statx = unsafe { std::mem::zeroed() };
            let flags = flags & !(crate::syscalls::AT_EMPTY_PATH as i32);
            // SAFETY: a valid C string and statx buffer.
            let rc = as_caller(who, || unsafe {
                libc::statx(libc::AT_FDCWD, c.as_ptr(), flags, mask, &mut stx)
            });
            if rc != 0 {
                return Err(last_errno());
            }
            // SAFETY: zeroed, then filled by the kernel.
            unsafe { memory::write_struct(tid, buf, &stx) }.map_err(|_| libc::EFAULT)?;
            Ok(0)
        }
        Call::Access { mode, flags } => {
            // Without AT_EACCESS the kernel checks with the caller's real ids: take those on
            // and ask for the check with this thread's (switched) ids.
            let eaccess = libc::AT_EACCESS;
            let real;
            let (checker, flags) = match who {
                Some(w) if flags & eaccess == 0 => {
                    real = w.for_access();
                    (Some(&real), flags | eaccess)
                }
                Some(w) => (Some(w), flags),
                None => (None, flags),
            };
            // SAFETY: raw faccessat2 with a valid C string.
            let rc = as_caller(checker, || unsafe {
                libc::syscall(
                    Sys::Faccessat2.nr(),
                    libc::AT_FDCWD,
                    c.as_ptr(),
                    mode,
                    flags,
                )
            });
            if rc != 0 {
                return Err(last_errno());
            }
            Ok(0)
        }
        Call::Readlink { buf, size } => {
            if size as i32 <= 0 {
                return Err(libc::EINVAL);
            }
            let target = as_caller(who, || {
                roost_vfs::Driver::readlink(&roost_vfs::LocalDriver, physical)
            })?;
            let n = target.len().min(size as usize);
            memory::write(tid, buf, &target[..n]).map_err(|_| libc::EFAULT)?;
            Ok(n as i64)
        }
        _ => Err(libc::ENOSYS),
    }
}
