//! The supervisor thread for seccomp user notifications. The hottest trapped calls are pure
//! lookups (the stat family, access, readlink): they are delivered as notifications instead
//! of ptrace stops, which costs about half as much. The same handlers decide; a call that may
//! pass is let through (`CONTINUE`), one on a mapped path is emulated here on its physical
//! path with the result written into the caller's memory, and failures are answered with
//! their errno. This thread never calls ptrace.

use crate::arch::{self, Regs};
use crate::handlers::{self, path, procfs, Action, Ctx, Decision};
use crate::memory;
use crate::syscalls::{Kind, Table};
use crate::task::Fs;
use roost_vfs::Namespace;
use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

/// The syscalls delivered as notifications.
pub const NOTIFIED: &[&str] = &[
    "stat",
    "lstat",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "readlink",
    "readlinkat",
];

/// State the supervisor shares with the ptrace thread.
pub struct Shared {
    pub ns: Mutex<Namespace>,
    /// Logical executables by thread-group id, when roost resolved them at exec.
    pub exes: Mutex<HashMap<i32, Vec<u8>>>,
}

/// Starts the supervisor on `listener`.
pub fn start(listener: OwnedFd, shared: Arc<Shared>) {
    std::thread::Builder::new()
        .name("roost-notify".into())
        .spawn(move || serve(&listener, &shared))
        .expect("spawn the notification thread");
}

fn serve(listener: &OwnedFd, shared: &Shared) {
    let table = Table::new();
    let fd = listener.as_raw_fd();
    loop {
        // SAFETY: the kernel fills the plain-data struct.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) } != 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) | Some(libc::ENOENT) => continue,
                _ => return, // the last traced process is gone
            }
        }
        let (val, error, flags) = answer(&table, shared, fd, &req);
        let mut resp = libc::seccomp_notif_resp {
            id: req.id,
            val,
            error,
            flags: flags as u32,
        };
        // SAFETY: a plain-data reply; ENOENT means the caller was interrupted meanwhile.
        unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) };
    }
}

/// The thread-group id of `tid`.
fn tgid(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// (return value, negative errno, flags) for one notification.
fn answer(table: &Table, shared: &Shared, fd: i32, req: &libc::seccomp_notif) -> (i64, i32, u64) {
    const CONTINUE: (i64, i32, u64) = (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE);
    let tid = req.pid as i32;
    let nr = i64::from(req.data.nr);
    let Some((name, kind)) = table.get(nr) else {
        return CONTINUE;
    };
    let mut regs = Regs::zeroed();
    for (i, a) in req.data.args.iter().enumerate() {
        regs.set_arg(i, *a);
    }
    // The cwd costs a /proc lookup: only relative paths and /proc magic links need it.
    let path_arg = match kind {
        Kind::Path { args, .. } => args.first().map(|a| a.path),
        Kind::Readlink { path, .. } => Some(path),
        _ => None,
    };
    let path = path_arg.and_then(|i| memory::read_cstr(tid, regs.arg(i), 8).ok());
    let needs_cwd = path.map_or(true, |p| {
        p.first() != Some(&b'/') || p.starts_with(b"/proc")
    });
    let physical_cwd = if needs_cwd {
        std::fs::read_link(format!("/proc/{tid}/cwd"))
            .map(|p| p.into_os_string().into_encoded_bytes())
            .unwrap_or_else(|_| b"/".to_vec())
    } else {
        Vec::new()
    };
    let decision = {
        let mut ns = shared.ns.lock().expect("namespace lock");
        let fs = Fs {
            logical: handlers::logical_of_physical(&ns, &physical_cwd),
            physical: physical_cwd,
        };
        let exe = match kind {
            Kind::Readlink { .. } => {
                tgid(tid).and_then(|g| shared.exes.lock().expect("exes").get(&g).cloned())
            }
            _ => None,
        };
        let mut ctx = Ctx {
            pid: tid,
            regs: &regs,
            ns: &mut ns,
            fs: &fs,
            exe: exe.as_deref(),
        };
        match kind {
            Kind::Path { args, .. } => path::handle(&mut ctx, args, false, false),
            Kind::Readlink {
                dirfd,
                path,
                buf,
                size,
            } => procfs::readlink(&mut ctx, dirfd, path, buf, size),
            _ => Decision::pass(),
        }
    };
    // The caller's memory was read while it waited: make sure it still does.
    let id = req.id;
    // SAFETY: checks a notification id.
    if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &id) } != 0 {
        return (0, -libc::ENOENT, 0);
    }
    match decision.action {
        Action::Pass => CONTINUE,
        Action::Fail(e) => (0, -e, 0),
        Action::Emulate { ret, writes } => {
            for (addr, bytes) in writes {
                if memory::write(tid, addr, &bytes).is_err() {
                    return (0, -libc::EFAULT, 0);
                }
            }
            (ret, 0, 0)
        }
        Action::Rewrite { .. } => match decision.physical {
            Some(p) => match emulate(name, &regs, tid, &p) {
                Ok(v) => (v, 0, 0),
                Err(e) => (0, -e, 0),
            },
            None => (0, -libc::EFAULT, 0),
        },
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Performs the lookup `name` on `physical` for thread `tid` and writes its result into the
/// caller's buffer, as the kernel would have.
fn emulate(name: &str, regs: &Regs, tid: i32, physical: &[u8]) -> Result<i64, i32> {
    let c = CString::new(physical).map_err(|_| libc::EINVAL)?;
    let nofollow = |flags: u64| (flags & libc::AT_SYMLINK_NOFOLLOW as u64) as i32;
    let stat_into = |flags: i32, buf: u64| -> Result<i64, i32> {
        // SAFETY: the kernel fills the plain-data struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstatat(libc::AT_FDCWD, c.as_ptr(), &mut st, flags) } != 0 {
            return Err(last_errno());
        }
        // SAFETY: viewing plain data as bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&st as *const libc::stat).cast::<u8>(),
                std::mem::size_of::<libc::stat>(),
            )
        };
        memory::write(tid, buf, bytes).map_err(|_| libc::EFAULT)?;
        Ok(0)
    };
    let access = |mode: u64, flags: u64| -> Result<i64, i32> {
        // SAFETY: raw faccessat2 with a valid C string.
        let rc = unsafe {
            libc::syscall(
                arch::number("faccessat2").expect("faccessat2"),
                libc::AT_FDCWD,
                c.as_ptr(),
                mode,
                flags,
            )
        };
        if rc != 0 {
            return Err(last_errno());
        }
        Ok(0)
    };
    match name {
        "stat" => stat_into(0, regs.arg(1)),
        "lstat" => stat_into(libc::AT_SYMLINK_NOFOLLOW, regs.arg(1)),
        "newfstatat" => stat_into(nofollow(regs.arg(3)), regs.arg(2)),
        "statx" => {
            // SAFETY: the kernel fills the plain-data struct.
            let mut stx: libc::statx = unsafe { std::mem::zeroed() };
            let flags = (regs.arg(2) & !(crate::syscalls::AT_EMPTY_PATH)) as i32;
            let rc = unsafe {
                libc::statx(
                    libc::AT_FDCWD,
                    c.as_ptr(),
                    flags,
                    regs.arg(3) as u32,
                    &mut stx,
                )
            };
            if rc != 0 {
                return Err(last_errno());
            }
            // SAFETY: viewing plain data as bytes.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    (&stx as *const libc::statx).cast::<u8>(),
                    std::mem::size_of::<libc::statx>(),
                )
            };
            memory::write(tid, regs.arg(4), bytes).map_err(|_| libc::EFAULT)?;
            Ok(0)
        }
        "access" => access(regs.arg(1), 0),
        "faccessat" => access(regs.arg(2), 0),
        "faccessat2" => access(regs.arg(2), regs.arg(3)),
        "readlink" | "readlinkat" => {
            let (buf, size) = if name == "readlink" {
                (regs.arg(1), regs.arg(2))
            } else {
                (regs.arg(2), regs.arg(3))
            };
            if size as i32 <= 0 {
                return Err(libc::EINVAL);
            }
            let target = roost_vfs::Driver::readlink(&roost_vfs::LocalDriver, physical)?;
            let n = target.len().min(size as usize);
            memory::write(tid, buf, &target[..n]).map_err(|_| libc::EFAULT)?;
            Ok(n as i64)
        }
        _ => Err(libc::ENOSYS),
    }
}
