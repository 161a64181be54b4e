//! A started job watched until it ends: its keeper ([`super::keeper`]) reports on the status
//! pipe how the program ended (or why it could not start); meanwhile a kill request or the
//! time limit stops the job (SIGTERM to every process of it, SIGKILL to what is left after
//! [`GRACE`]), and so does its processes' memory passing the job's memory limit (at once,
//! SIGKILL). Whatever ended it, every process of the job is then killed ([`Tree::kill`])
//! before the keeper is reaped, so none outlives its job.

use super::keeper::{Report, Stage};
use super::record::Exit;
use super::tree::Tree;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Child;
use std::time::{Duration, Instant};

/// The longest a running job goes unlooked at (its end, and its keeper's, wake the watch
/// at once).
const POLL: Duration = Duration::from_millis(50);
/// Time between SIGTERM and SIGKILL when a job is stopped.
pub const GRACE: Duration = Duration::from_secs(2);
/// How long a keeper gets to reap what is left and exit, once its job's processes are killed.
const KEEPER_PATIENCE: Duration = Duration::from_secs(1);
/// How often the memory of a job's processes is added up.
const MEMORY_LOOK: Duration = Duration::from_millis(250);

/// Why the server stopped a job before its program ended by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    Killed,
    TimeLimit,
    /// Its processes held this many bytes, over the memory limit.
    Memory(u64),
}

/// How a job ended.
#[derive(Debug)]
pub struct Ended {
    /// How the program ended, if it was seen to.
    pub exit: Option<Exit>,
    /// Why it could not start.
    pub error: Option<(Stage, i32)>,
    /// Steps that failed without stopping it.
    pub notes: Vec<(Stage, i32)>,
    pub stop: Option<Stop>,
    /// CPU time the job's processes used, microseconds.
    pub cpu_us: u64,
    /// Whether no process of the job is left.
    pub cleared: bool,
}

/// A started job.
pub struct Running {
    keeper: Child,
    status: Option<File>,
    reports: Vec<u8>,
    tree: Tree,
}

impl Running {
    /// The job whose keeper is `keeper`, reporting on `status` (the pipe's read end);
    /// `namespaced`: whether it has a PID namespace.
    pub fn new(keeper: Child, status: OwnedFd, namespaced: bool) -> Running {
        // SAFETY: a flag on our descriptor.
        unsafe {
            let fd = status.as_raw_fd();
            libc::fcntl(
                fd,
                libc::F_SETFL,
                libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
            );
        }
        let tree = Tree::new(keeper.id() as i32, namespaced);
        Running {
            keeper,
            status: Some(File::from(status)),
            reports: Vec::new(),
            tree,
        }
    }

    /// The keeper's process id, which is the job's process group.
    pub fn pid(&self) -> i32 {
        self.keeper.id() as i32
    }

    /// Watches the job until it ends; `wanted` says whether it may go on (false once it is
    /// killed), `tick` is called on every look (the runner's CPU checkpoints),
    /// `time_limit` and `memory_limit` are the job's.
    pub fn watch(
        mut self,
        wanted: impl Fn() -> bool,
        mut tick: impl FnMut(),
        time_limit: Duration,
        memory_limit: Option<u64>,
    ) -> Ended {
        let deadline = Instant::now() + time_limit;
        let mut stop: Option<(Stop, Instant)> = None;
        let ended = ExitNotice::open(self.pid());
        let mut next_look = Instant::now();
        loop {
            tick();
            self.read_reports();
            if self.program_ended() || has_exited(self.pid()) {
                return self.finish(stop.map(|(s, _)| s));
            }
            let now = Instant::now();
            match stop {
                None => {
                    let mut why = if !wanted() {
                        Some(Stop::Killed)
                    } else if now >= deadline {
                        Some(Stop::TimeLimit)
                    } else {
                        None
                    };
                    if let (None, Some(limit), true) = (why, memory_limit, now >= next_look) {
                        next_look = now + MEMORY_LOOK;
                        let held = self.tree.resident();
                        if held > limit {
                            why = Some(Stop::Memory(held));
                        }
                    }
                    match why {
                        Some(Stop::Memory(_)) => {
                            self.tree.kill();
                        }
                        Some(_) => self.tree.signal(libc::SIGTERM),
                        None => {}
                    }
                    stop = why.map(|w| (w, now));
                }
                Some((_, since)) if since.elapsed() >= GRACE => {
                    self.tree.kill();
                }
                Some(_) => {}
            }
            ended.wait(self.status.as_ref(), POLL);
        }
    }

    /// Kills the job at once (it could not be put under the owner's limits).
    pub fn abort(self) -> Ended {
        self.finish(Some(Stop::Killed))
    }

    /// Reads what the keeper has reported so far; notes the pipe's end.
    fn read_reports(&mut self) {
        let Some(status) = &mut self.status else {
            return;
        };
        let mut buf = [0u8; 512];
        loop {
            match status.read(&mut buf) {
                Ok(0) => {
                    self.status = None;
                    return;
                }
                Ok(n) => self.reports.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    fn program_ended(&self) -> bool {
        Report::parse_all(&self.reports)
            .iter()
            .any(|r| matches!(r, Report::Exit(_) | Report::Error(..)))
    }

    /// Kills every process of the job, lets the keeper reap them, and reaps it.
    fn finish(mut self, stop: Option<Stop>) -> Ended {
        let cleared = self.tree.kill();
        // With nothing left to watch over the keeper exits; if it does not (stopped by the
        // thermostat's loop, or something would not die), it is killed.
        let deadline = Instant::now() + KEEPER_PATIENCE;
        while !has_exited(self.pid()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.keeper.kill();
        let cpu_us = reap(&self.keeper);
        self.read_reports();
        let reports = Report::parse_all(&self.reports);
        let exit = reports
            .iter()
            .find_map(|r| match r {
                Report::Exit(status) => Some(exit_of(*status)),
                _ => None,
            })
            .or(stop.map(|_| Exit::Signaled(libc::SIGKILL)));
        Ended {
            exit,
            error: reports.iter().find_map(|r| match r {
                Report::Error(stage, errno) => Some((*stage, *errno)),
                _ => None,
            }),
            notes: reports
                .iter()
                .filter_map(|r| match r {
                    Report::Note(stage, errno) => Some((*stage, *errno)),
                    _ => None,
                })
                .collect(),
            stop,
            cpu_us,
            cleared,
        }
    }
}

fn exit_of(status: i32) -> Exit {
    if libc::WIFSIGNALED(status) {
        Exit::Signaled(libc::WTERMSIG(status))
    } else {
        Exit::Exited(libc::WEXITSTATUS(status))
    }
}

/// A way to sleep until a child process ends or a pipe has something: a pidfd (Linux 5.3)
/// beside the pipe; without one, only the pipe wakes the sleep early.
struct ExitNotice(Option<OwnedFd>);

impl ExitNotice {
    fn open(pid: i32) -> ExitNotice {
        // SAFETY: a plain system call on a number; its descriptor (close-on-exec, as every
        // pidfd is) is owned below.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        // SAFETY: a descriptor pidfd_open just made, owned by nobody else.
        ExitNotice((fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// Returns when the process has ended, `pipe` is readable, or `most` has passed.
    fn wait(&self, pipe: Option<&File>, most: Duration) {
        let mut fds: Vec<libc::pollfd> = [
            self.0.as_ref().map(|f| f.as_raw_fd()),
            pipe.map(|p| p.as_raw_fd()),
        ]
        .into_iter()
        .flatten()
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
        if fds.is_empty() {
            return std::thread::sleep(most);
        }
        // SAFETY: polls pollfds of ours; EINTR only shortens the wait.
        unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                most.as_millis() as libc::c_int,
            )
        };
    }
}

/// Reaps `child` (which has ended or been killed): the CPU time (user and system,
/// microseconds) it and the descendants it waited for used, from `wait4`.
fn reap(child: &Child) -> u64 {
    let mut status = 0;
    // SAFETY: `struct rusage` is plain data, valid all zeros.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for our child into a status and usage of ours.
        let r = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
        if r > 0 {
            let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
            return micros(usage.ru_utime) + micros(usage.ru_stime);
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return 0;
        }
    }
}

/// Whether process `pid` (a child of this process) has ended, without reaping it.
fn has_exited(pid: i32) -> bool {
    // SAFETY: `siginfo_t` is plain data, valid all zeros.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: into a siginfo of ours.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // ECHILD: already reaped (cannot happen here, but then it has certainly ended).
    // SAFETY: `info` was zeroed and, if waitid found the child, filled as a SIGCHLD siginfo, whose si_pid the accessor reads.
    r != 0 || unsafe { info.si_pid() } != 0
}
