//! `roost run` returns when the program does, as a shell would, even when the program left
//! processes running (a build's daemon, `cmd &`): roost splits in two before it starts the
//! program. The agent, a child process, traces the program and everything it starts until
//! the last of them exits; the front, the process the caller waits for, exits with the
//! program's exit code as soon as the agent reports it (with `--trace` or `--summary`, when
//! the agent itself exits, after its report on every process).
//!
//! The front stands in for the program towards the caller's shell: it ignores the terminal's
//! SIGINT and SIGQUIT (the program gets them from the terminal itself), stops with the job
//! (Ctrl-Z) and whenever the agent sees the program stop, so the shell sees the job stopped
//! exactly when the program is, and passes SIGTERM and SIGHUP on to the agent, whose death
//! takes the traced processes with it (so does the front's own death, SIGKILL included, until
//! the program has exited). The agent ignores the terminal's stop signals: it must
//! keep running to let the program stop and, after SIGCONT, go on.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// Which process the caller of [`split`] is now.
pub enum Side {
    /// The front: the program exited with this code (or the agent could not report it).
    Front(i32),
    /// The agent, with what it tells the front.
    Agent(Front),
}

/// The agent's line to the front.
pub struct Front {
    pid: i32,
    report: Option<OwnedFd>,
}

impl Front {
    /// The front's process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// What to call with the program's exit code when the program exits (`None` when the
    /// front waits for the agent itself).
    pub fn on_program_exit(&mut self) -> Option<Box<dyn FnOnce(i32)>> {
        let report_w = self.report.take()?;
        Some(Box::new(move |code| report(report_w, code)))
    }

    /// What to call with the stop signal when the program stops.
    pub fn on_program_stop(&self) -> Box<dyn FnMut(i32)> {
        let front = self.pid;
        // SAFETY: signals the front, our parent.
        Box::new(move |sig| unsafe {
            libc::kill(front, sig);
        })
    }
}

/// The agent's pid, for the front's signal handler.
static AGENT: AtomicI32 = AtomicI32::new(0);

extern "C" fn pass_on(sig: libc::c_int) {
    let agent = AGENT.load(Ordering::Relaxed);
    if agent > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(agent, sig) };
    }
}

/// Forks the agent off; with `report_early` the front exits as soon as the program does.
/// Must be called while the process has one thread.
pub fn split(report_early: bool) -> io::Result<Side> {
    let mut fds = [0; 2];
    // SAFETY: a plain pipe2 into a local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptors were just created and are owned here alone.
    let (report_r, report_w) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: a plain id query.
    let front_pid = unsafe { libc::getpid() };
    // SAFETY: the process is single-threaded here (roost has started no thread yet).
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            drop(report_r);
            // Until the program exits, the front standing in for it dies only if the program
            // should: killed (even by SIGKILL), it takes the agent and so every traced process
            // with it, as the single roost process did.
            // SAFETY: plain prctl and id queries on this process.
            unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != front_pid {
                    libc::_exit(125); // the front died before the line above
                }
            }
            Ok(Side::Agent(Front {
                pid: front_pid,
                report: report_early.then_some(report_w),
            }))
        }
        agent => {
            drop(report_w);
            Ok(Side::Front(front(agent, report_r)))
        }
    }
}

/// In the agent: hands the exit code to the front, then lets go of the caller's standard
/// descriptors, so that a caller reading the program's output is not held up by roost
/// tracing what the program left behind.
fn report(report_w: OwnedFd, code: i32) {
    // From now on the front exits, and the agent must outlive it.
    // SAFETY: a plain prctl on this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0) };
    let bytes = code.to_ne_bytes();
    // SAFETY: writes four bytes from a local array (a pipe write this small is atomic).
    unsafe { libc::write(report_w.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
    drop(report_w);
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            // SAFETY: replaces a standard descriptor with /dev/null.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}

/// In the front: waits for the program's exit code from the agent. If the agent ends without
/// one (it failed to start the program, or was killed), its own status says what happened.
fn front(agent: i32, report_r: OwnedFd) -> i32 {
    AGENT.store(agent, Ordering::Relaxed);
    // SAFETY: dispositions of this process only; the handler only calls kill.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        let handler = pass_on as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGHUP, handler);
    }
    let mut bytes = [0u8; 4];
    let mut got = 0;
    while got < bytes.len() {
        // SAFETY: reads into the rest of a local buffer.
        let n = unsafe {
            libc::read(
                report_r.as_raw_fd(),
                bytes[got..].as_mut_ptr().cast(),
                bytes.len() - got,
            )
        };
        match n {
            n if n > 0 => got += n as usize,
            0 => break,
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => break,
        }
    }
    if got == bytes.len() {
        return i32::from_ne_bytes(bytes);
    }
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(agent, &mut status, 0) };
        if r == agent {
            break;
        }
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            eprintln!("roost run: the agent vanished");
            return 125;
        }
    }
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}
