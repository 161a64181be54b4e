//! One started job, on a thread of its own: make its sandbox and bind its inputs, run its
//! program as the job's user in its own process group under Landlock, watch for a kill
//! request or the time limit, then kill what is left of the group, store the outputs, record
//! how it ended and remove the sandbox.
//!
//! The program is run as cctools does: `executable` exactly (relative names are relative to
//! the sandbox, no `PATH` search), `arguments` as its whole argument vector, an environment of
//! the job's variables over cctools' defaults, standard input from `/dev/null`; standard
//! output and error go to files in the sandbox ([`super::sandbox::STDOUT`]).

use super::confine;
use super::description::JobFile;
use super::record::{Exit, Process, Status};
use super::sandbox::Sandbox;
use super::{dispatch, Inner, JobError};
use crate::log::{self, Level};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a running job is checked for a kill request or its time limit (its end is
/// seen at once, through a pidfd, where the kernel has them).
const POLL: Duration = Duration::from_millis(50);
/// Time between SIGTERM and SIGKILL when a job is stopped.
const GRACE: Duration = Duration::from_secs(2);

/// How a run ended, to be written into the record.
struct Outcome {
    status: Status,
    error: Option<String>,
    exit: Option<Exit>,
    /// The files with their outputs' final names and sizes, when outputs were stored.
    files: Option<Vec<JobFile>>,
}

impl Outcome {
    fn errored(error: String) -> Outcome {
        Outcome {
            status: Status::Errored,
            error: Some(error),
            exit: None,
            files: None,
        }
    }
}

/// Why the job's processes were stopped before the program ended by itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Killed,
    TimeLimit,
}

/// Runs job `id` (already marked STARTED) to its end.
pub(super) fn run(inner: &Arc<Inner>, id: i64) {
    let sandbox_path = inner.store.sandbox_path(id);
    // Taken now: a killed job may be reaped, and forgotten, before its runner ends.
    let subject = inner.lock().jobs.get(&id).map(|j| j.subject.clone());
    let mut cpu_us = 0;
    let outcome = run_job(inner, id, &mut cpu_us);
    if let Err(e) = Sandbox::remove(&sandbox_path) {
        log::event(
            Level::Error,
            "job-sandbox-left",
            &[
                ("id", &id),
                ("path", &sandbox_path.display()),
                ("error", &e),
            ],
        );
    }
    let mut table = inner.lock();
    table.running -= 1;
    if let (Some(accounting), Some(subject)) = (&inner.accounting, &subject) {
        accounting.job(subject, id, cpu_us);
    }
    if let (Some(outcome), Some(job)) = (outcome, table.jobs.get_mut(&id)) {
        if job.status == Status::Started {
            job.end(outcome.status, outcome.error);
            job.exit = outcome.exit;
            if let Some(files) = outcome.files {
                job.description.files = files;
            }
            inner.save(job);
            log::event(
                Level::Info,
                "job-ended",
                &[
                    ("id", &id),
                    ("status", &job.status.name()),
                    ("exit", &exit_text(job.exit)),
                    ("error", &job.error.as_deref().unwrap_or("")),
                ],
            );
        }
    }
    inner.ended.notify_all();
    dispatch(inner, &mut table);
}

fn exit_text(exit: Option<Exit>) -> String {
    match exit {
        None => "-".into(),
        Some(Exit::Exited(c)) => c.to_string(),
        Some(Exit::Signaled(s)) => super::record::signal_name(s),
    }
}

/// Whether job `id` still wants to run (it may have been killed or reaped meanwhile).
fn still_started(inner: &Inner, id: i64) -> bool {
    inner
        .lock()
        .jobs
        .get(&id)
        .is_some_and(|j| j.status == Status::Started)
}

/// Everything between STARTED and the end; `None` when the job was killed (its record
/// already says so). `cpu_us` becomes the CPU time the program and the descendants it
/// waited for used.
fn run_job(inner: &Arc<Inner>, id: i64, cpu_us: &mut u64) -> Option<Outcome> {
    let (subject, description) = {
        let table = inner.lock();
        let job = table.jobs.get(&id)?;
        (job.subject.clone(), job.description.clone())
    };
    let identity = &inner.identity;
    let owner = identity.switch.then_some((identity.uid, identity.gid));
    let sandbox = match Sandbox::create(&inner.store.sandbox_path(id), owner) {
        Ok(s) => s,
        Err(e) => return Some(Outcome::errored(format!("cannot make the sandbox: {e}"))),
    };
    if let Err(e) = sandbox.bind_inputs(&inner.export, &subject, &description.files) {
        return Some(Outcome::errored(e.message));
    }
    let child = match start(inner, id, &subject, &description, &sandbox) {
        Ok(child) => child,
        Err(e) => {
            // Its groups may have been made for it already (`entry_files`).
            inner.limits.release(id);
            return Some(Outcome::errored(e.message));
        }
    };
    let pgid = child.id() as i32;
    if let Some((_, start_ticks)) = confine::group_and_start(pgid) {
        let mut table = inner.lock();
        if let Some(job) = table.jobs.get_mut(&id) {
            job.process = Some(Process {
                pgid,
                uid: identity.uid,
                start_ticks,
                cpu_us: 0,
            });
            inner.save(job);
        }
    }
    log::event(
        Level::Info,
        "job-started",
        &[("id", &id), ("pid", &pgid), ("user", &identity.name)],
    );
    let admitted = inner.limits.admit(id, pgid);
    let ((status, used), stop) = match admitted {
        Ok(()) => watch(inner, id, &child, pgid),
        Err(ref e) => {
            log::event(Level::Error, "job-limits", &[("id", &id), ("error", e)]);
            stop_group(pgid, libc::SIGKILL);
            (reap(&child), Some(Stop::Killed))
        }
    };
    *cpu_us = used;
    let verdict = inner.limits.verdict(id);
    inner.limits.release(id);
    if let Err(e) = admitted {
        return Some(Outcome::errored(format!(
            "cannot put the job under the owner's limits: {e}"
        )));
    }
    let exit = status.map(|s| match s.code() {
        Some(code) => Exit::Exited(code),
        None => Exit::Signaled(s.signal().unwrap_or(0)),
    });
    if let Some(why) = verdict.filter(|_| stop != Some(Stop::Killed)) {
        return Some(Outcome {
            exit,
            ..Outcome::errored(why)
        });
    }
    match stop {
        Some(Stop::Killed) => None,
        Some(Stop::TimeLimit) => Some(Outcome {
            exit,
            ..Outcome::errored(format!(
                "the job ran longer than the time limit of {} s",
                inner.config.time_limit.as_secs()
            ))
        }),
        None => {
            let mut files = description.files;
            let stored = sandbox.collect_outputs(&inner.export, &subject, id, &mut files);
            Some(Outcome {
                status: if stored.is_ok() {
                    Status::Finished
                } else {
                    Status::Errored
                },
                error: stored.err().map(|e| e.message),
                exit,
                files: Some(files),
            })
        }
    }
}

/// Starts the job's program in the sandbox.
fn start(
    inner: &Inner,
    id: i64,
    subject: &str,
    description: &super::description::Description,
    sandbox: &Sandbox,
) -> Result<Child, JobError> {
    let (stdout, stderr) = sandbox
        .output_streams()
        .map_err(|e| JobError::io(&e, "cannot make the output files".into()))?;
    let ruleset = confine::landlock_ruleset(&sandbox.path, inner.landlock)
        .map_err(|e| JobError::io(&e, "cannot confine the job with Landlock".into()))?;
    let executable = &description.executable;
    // execve(2) takes a name without a slash relative to the working directory; so does
    // cctools. Command would search PATH instead.
    let program = if executable.contains('/') {
        executable.clone()
    } else {
        format!("./{executable}")
    };
    let mut command = Command::new(&program);
    let mut arguments = description.arguments.iter();
    command.arg0(arguments.next().unwrap_or(executable));
    command.args(arguments);
    let dir = sandbox.path.to_string_lossy().into_owned();
    let identity = &inner.identity;
    let defaults = [
        ("CHIRP_HOST", inner.config.chirp_host.as_str()),
        ("CHIRP_SUBJECT", subject),
        ("HOME", &dir),
        ("LANG", "C"),
        ("LC_ALL", "C"),
        ("PATH", "/bin:/usr/bin:/usr/local/bin"),
        ("PWD", &dir),
        ("TMPDIR", &dir),
        ("USER", &identity.name),
    ];
    command
        .env_clear()
        .envs(defaults)
        .envs(&description.environment)
        .current_dir(&sandbox.path)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    if identity.switch {
        // std drops the supplementary groups when it changes the user as root.
        command.uid(identity.uid).gid(identity.gid);
    }
    let entry = inner
        .limits
        .entry_files(id)
        .map_err(|e| JobError::io(&e, "cannot put the job under the owner's limits".into()))?;
    let entry_fds: Vec<i32> = entry.iter().map(|f| f.as_raw_fd()).collect();
    let parent = std::process::id() as libc::pid_t;
    let ruleset_fd = ruleset.as_ref().map(|fd| fd.as_raw_fd());
    // SAFETY: the closure makes only system calls (no allocation, no locks), as required
    // between fork and exec.
    unsafe {
        command.pre_exec(move || {
            // Into the owner's limits before anything else runs.
            for &fd in &entry_fds {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            libc::umask(0o022);
            // The job dies with the thread watching it (and so with the server)...
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // ...even if the server died before the line above.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // No setuid program can give the job more rights than its user's.
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if let Some(fd) = ruleset_fd {
                confine::restrict_self(fd)?;
            }
            Ok(())
        });
    }
    let child = command.spawn().map_err(|e| {
        let hint = if e.kind() == io::ErrorKind::PermissionDenied {
            format!(" (as {})", identity.name)
        } else {
            String::new()
        };
        // The child's failures before exec come back as the spawn's: entering the
        // groups is one of them.
        let or_groups = if entry.is_empty() {
            ""
        } else {
            " or put it in its cgroups"
        };
        JobError::io(&e, format!("cannot run {executable}{hint}{or_groups}"))
    })?;
    log::event(
        Level::Debug,
        "job-exec",
        &[("id", &id), ("program", &program)],
    );
    Ok(child)
}

/// Waits for the program to end, stopping its group when the job is killed or runs out of
/// time: SIGTERM, then SIGKILL after [`GRACE`].
fn watch(
    inner: &Inner,
    id: i64,
    child: &Child,
    pgid: i32,
) -> ((Option<std::process::ExitStatus>, u64), Option<Stop>) {
    let deadline = Instant::now() + inner.config.time_limit;
    let mut stop: Option<(Stop, Instant)> = None;
    let ended = ExitNotice::open(child.id() as i32);
    let mut checkpoint = Instant::now();
    loop {
        if checkpoint.elapsed() >= inner.config.cpu_checkpoint {
            checkpoint = Instant::now();
            super::usage::checkpoint(inner, id, pgid);
        }
        if has_exited(pgid) {
            // Until the leader is reaped its number cannot be reused: what is left of its
            // group is killed first, so the signal cannot reach a stranger.
            stop_group(pgid, libc::SIGKILL);
            return (reap(child), stop.map(|(s, _)| s));
        }
        match stop {
            None => {
                let why = if !still_started(inner, id) {
                    Some(Stop::Killed)
                } else if Instant::now() >= deadline {
                    Some(Stop::TimeLimit)
                } else {
                    None
                };
                if let Some(why) = why {
                    stop_group(pgid, libc::SIGTERM);
                    stop = Some((why, Instant::now()));
                }
            }
            Some((_, since)) if since.elapsed() >= GRACE => stop_group(pgid, libc::SIGKILL),
            Some(_) => {}
        }
        ended.wait(POLL);
    }
}

/// A way to sleep until a child process ends: a pidfd, readable once it has (Linux 5.3);
/// without one, the sleep lasts its whole time.
struct ExitNotice(Option<std::os::fd::OwnedFd>);

impl ExitNotice {
    fn open(pid: i32) -> ExitNotice {
        use std::os::fd::FromRawFd;
        // SAFETY: a plain system call on a number; its descriptor (close-on-exec, as every
        // pidfd is) is owned below.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        // SAFETY: a descriptor pidfd_open just made, owned by nobody else.
        ExitNotice((fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// Returns when the process has ended or `most` has passed.
    fn wait(&self, most: Duration) {
        let Some(fd) = &self.0 else {
            return std::thread::sleep(most);
        };
        let mut poll = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one pollfd of ours; EINTR only shortens the wait.
        unsafe { libc::poll(&mut poll, 1, most.as_millis() as libc::c_int) };
    }
}

/// Reaps `child` (which has ended or been killed): how it ended, and the CPU time (user and
/// system, microseconds) it and the descendants it waited for used, from `wait4`.
fn reap(child: &Child) -> (Option<std::process::ExitStatus>, u64) {
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
        if r > 0 {
            let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
            let cpu = micros(usage.ru_utime) + micros(usage.ru_stime);
            return (Some(std::process::ExitStatus::from_raw(status)), cpu);
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return (None, 0);
        }
    }
}

/// Whether process `pid` (a child of this process) has ended, without reaping it.
fn has_exited(pid: i32) -> bool {
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // ECHILD: already reaped (cannot happen here, but then it has certainly ended).
    r != 0 || unsafe { info.si_pid() } != 0
}

/// Sends `signal` to every process in group `pgid`.
fn stop_group(pgid: i32, signal: libc::c_int) {
    unsafe { libc::kill(-pgid, signal) };
}
