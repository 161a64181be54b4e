//! Starting the traced program: fork; the child installs the seccomp filter (after
//! `PR_SET_NO_NEW_PRIVS`), reports success and waits; the parent seizes it with
//! `PTRACE_SEIZE` and lets it exec. Failures are reported with an explanation (ptrace or
//! seccomp forbidden, e.g. inside a container).

use crate::arch::Sys;
use crate::filter;
use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::OwnedFd;

/// Why the program could not be started under the agent.
#[derive(Debug)]
pub enum SpawnError {
    Fork(io::Error),
    /// The child could not set up the filter: the step and errno.
    Filter(&'static str, i32),
    /// The child ended before it reported how its set-up went (killed from outside).
    Vanished,
    /// The child could not enter its Landlock domain ([`crate::fence`]): the step and errno.
    Fence(&'static str, i32),
    /// PTRACE_SEIZE failed with this errno.
    Ptrace(i32),
    /// The seccomp notification listener could not be obtained (old kernel, restricted
    /// pidfd_getfd); the caller may start again without notifications.
    Listener(io::Error),
    /// Another filter of this process already hands calls to a supervisor (roost run inside
    /// roost run): the kernel allows one, and that one would answer the program's calls
    /// before roost saw them.
    Nested,
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::Fork(e) => write!(f, "cannot fork: {e}"),
            SpawnError::Vanished => write!(
                f,
                "the program's process ended before roost had set it up (killed from outside?)"
            ),
            SpawnError::Listener(e) => write!(f, "cannot take the seccomp listener: {e}"),
            SpawnError::Nested => write!(
                f,
                "roost run cannot run under another seccomp supervisor (roost run inside roost \
                 run, or a container's seccomp agent): the kernel gives one supervisor the \
                 calls of a process, and here the outer one would answer them first"
            ),
            SpawnError::Filter(step, errno) => write!(
                f,
                "cannot install the seccomp filter ({step}: {}); roost run needs seccomp-bpf \
                 (Linux >= 3.5 with CONFIG_SECCOMP_FILTER, not disabled by a container profile)",
                io::Error::from_raw_os_error(*errno)
            ),
            SpawnError::Fence(step, errno) => write!(
                f,
                "cannot put the program in a Landlock domain of its own ({step}: {}); run roost \
                 with --no-landlock to go without it (a program run by root then answers \
                 lookups only in-process, docs/security.md)",
                io::Error::from_raw_os_error(*errno)
            ),
            SpawnError::Ptrace(errno) => write!(
                f,
                "ptrace is not available here (PTRACE_SEIZE: {}). roost run traces programs \
                 with ptrace; containers often forbid it (docker: --cap-add=SYS_PTRACE or \
                 --security-opt seccomp=unconfined) and /proc/sys/kernel/yama/ptrace_scope = 3 \
                 disables it entirely",
                io::Error::from_raw_os_error(*errno)
            ),
        }
    }
}

impl std::error::Error for SpawnError {}

/// The ptrace options every tracee has. With notifications, execs are let through by the
/// supervisor and need no exec event ([`crate::programs`]): [`EXEC_EVENTS`] is then set only on
/// a thread whose exec takes a ptrace stop.
pub const OPTIONS: libc::c_int = libc::PTRACE_O_EXITKILL
    | libc::PTRACE_O_TRACESECCOMP
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACESYSGOOD;
/// The exec event.
pub const EXEC_EVENTS: libc::c_int = libc::PTRACE_O_TRACEEXEC;

fn pipe() -> io::Result<[libc::c_int; 2]> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fds)
}

/// Only async-signal-safe calls: runs in the forked child.
unsafe fn child(
    status_w: libc::c_int,
    go_r: libc::c_int,
    program: &CString,
    argv: &[*const libc::c_char],
    bpf: &[libc::sock_filter],
    start: Start,
) -> ! {
    // roost is not dumpable (`crate::guard`); its forked copy must be, for roost to seize
    // it and take the listener (its exec keeps it so).
    let _ = crate::guard::dumpable();
    if start.untraced {
        // Exit-kill will not take it with roost: it dies with the agent all the same.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    // [failed (1: the filter, 2 + step: the fence), errno or listener fd]
    let mut report = [0u8; 8];
    let entered = if start.fence {
        // Landlock's condition, for a roost holding CAP_SYS_PTRACE but not CAP_SYS_ADMIN
        // (the filter sets it again).
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        crate::fence::enter()
    } else {
        Ok(())
    };
    let outcome = entered
        .map_err(|(step, errno)| (FENCE_FAILED + step as u32, errno))
        .and_then(|()| filter::install(bpf, start.listener).map_err(|(_, errno)| (1, errno)));
    match outcome {
        Ok(fd) => report[4..].copy_from_slice(&(fd as u32).to_ne_bytes()),
        Err((failed, errno)) => {
            report[..4].copy_from_slice(&failed.to_ne_bytes());
            report[4..].copy_from_slice(&(errno as u32).to_ne_bytes());
        }
    }
    libc::write(status_w, report.as_ptr().cast(), 8);
    let mut go = [0u8; 1];
    if libc::read(go_r, go.as_mut_ptr().cast(), 1) != 1 {
        libc::_exit(127);
    }
    if start.listener && report[..4] == [0; 4] {
        // roost holds its own copy now; the program must not inherit the listener.
        libc::close(u32::from_ne_bytes([report[4], report[5], report[6], report[7]]) as i32);
    }
    libc::execv(program.as_ptr(), argv.as_ptr());
    let errno = *libc::__errno_location();
    // As a shell says it: `roost: NAME: REASON`, NAME as the user wrote it (argv[0]).
    let name = std::ffi::CStr::from_ptr(argv[0]).to_bytes();
    for part in [b"roost: ", name, b": ", exec_failure(errno), b"\n"] {
        libc::write(2, part.as_ptr().cast(), part.len());
    }
    libc::_exit(if errno == libc::ENOENT { 127 } else { 126 });
}

/// Why an exec failed, in the C library's words (a table: the child of a fork may not
/// call `strerror`, which is not async-signal-safe).
fn exec_failure(errno: libc::c_int) -> &'static [u8] {
    match errno {
        libc::ENOENT => b"No such file or directory",
        libc::EACCES => b"Permission denied",
        libc::ENOEXEC => b"Exec format error",
        libc::ETXTBSY => b"Text file busy",
        libc::ELOOP => b"Too many levels of symbolic links",
        libc::ENOTDIR => b"Not a directory",
        libc::E2BIG => b"Argument list too long",
        libc::ENOMEM => b"Cannot allocate memory",
        libc::EISDIR => b"Is a directory",
        libc::ECONNREFUSED => b"Connection refused",
        libc::EIO => b"Input/output error",
        _ => b"cannot be executed",
    }
}

/// How [`spawn`] starts the program.
#[derive(Clone, Copy)]
pub struct Start {
    /// Take the filter's notification listener.
    pub listener: bool,
    /// Let go of the program before it execs (attaching on demand).
    pub untraced: bool,
    /// Start it in a Landlock domain of its own ([`crate::fence`]).
    pub fence: bool,
}

/// A child's report of a failed fence: this plus the step's index in [`crate::fence::STEPS`].
const FENCE_FAILED: u32 = 2;

/// A started program: its pid and, when asked for, the seccomp notification listener.
pub struct Spawned {
    pub pid: i32,
    pub listener: Option<OwnedFd>,
}

/// Forks, filters and seizes `program` (run with `argv`); returns once it is traced and
/// released to exec. With `listener`, the filter's notification fd comes back too, and
/// exec events are left off ([`OPTIONS`]). With `untraced` (attaching on demand,
/// `crate::attach`), roost lets go of it again before it execs. With `fence`, the program
/// starts in a Landlock domain of its own ([`crate::fence`]).
pub fn spawn(
    program: &CString,
    argv: &[CString],
    bpf: &[libc::sock_filter],
    start: Start,
) -> Result<Spawned, SpawnError> {
    let Start {
        listener, untraced, ..
    } = start;
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let [status_r, status_w] = pipe().map_err(SpawnError::Fork)?;
    let [go_r, go_w] = pipe().map_err(SpawnError::Fork)?;
    // SAFETY: the child only makes raw syscalls before exec.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(SpawnError::Fork(io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: see `child`.
        unsafe { child(status_w, go_r, program, &ptrs, bpf, start) }
    }
    let close = |fd| {
        // SAFETY: closing descriptors this function opened.
        unsafe { libc::close(fd) };
    };
    close(status_w);
    close(go_r);
    let mut report = [0u8; 8];
    // SAFETY: reading into a local buffer.
    let n = unsafe { libc::read(status_r, report.as_mut_ptr().cast(), 8) };
    close(status_r);
    let kill = || {
        // SAFETY: killing and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    };
    if n != 8 {
        kill();
        close(go_w);
        return Err(SpawnError::Vanished);
    }
    if report[..4] != [0; 4] {
        kill();
        close(go_w);
        let errno = u32::from_ne_bytes(report[4..].try_into().expect("4")) as i32;
        let failed = u32::from_ne_bytes(report[..4].try_into().expect("4"));
        if let Some(step) = failed.checked_sub(FENCE_FAILED) {
            return Err(SpawnError::Fence(
                crate::fence::STEPS
                    .get(step as usize)
                    .copied()
                    .unwrap_or("landlock"),
                errno,
            ));
        }
        if listener && errno == libc::EBUSY {
            return Err(SpawnError::Nested);
        }
        return Err(SpawnError::Filter(Sys::Prctl.name(), errno));
    }
    let options = if listener {
        OPTIONS
    } else {
        OPTIONS | EXEC_EVENTS
    };
    // SAFETY: plain ptrace request on our child.
    if unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, options as libc::c_ulong) } < 0 {
        let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
        kill();
        close(go_w);
        return Err(SpawnError::Ptrace(errno));
    }
    let listener = if listener {
        let fd = u32::from_ne_bytes(report[4..].try_into().expect("4")) as i32;
        match crate::sys::take_fd(pid, fd).map_err(io::Error::from_raw_os_error) {
            Ok(l) => Some(l),
            Err(e) => {
                kill();
                close(go_w);
                return Err(SpawnError::Listener(e));
            }
        }
    } else {
        None
    };
    if untraced {
        if let Err(e) = let_go(pid) {
            kill();
            close(go_w);
            return Err(SpawnError::Ptrace(e.raw_os_error().unwrap_or(0)));
        }
    }
    // SAFETY: writing one byte to our pipe.
    unsafe { libc::write(go_w, [1u8].as_ptr().cast(), 1) };
    close(go_w);
    Ok(Spawned { pid, listener })
}

/// Detaches from the child, seized only to prove ptrace works: it must be stopped first.
fn let_go(pid: i32) -> io::Result<()> {
    // SAFETY: plain ptrace requests and a wait on our own child.
    unsafe {
        if libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut status = 0;
        if libc::waitpid(pid, &mut status, libc::__WALL) != pid {
            return Err(io::Error::last_os_error());
        }
    }
    crate::attach::detach(pid, 0)
}
