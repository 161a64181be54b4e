//! One started job, on a thread of its own: make its sandbox (a random name) and bind its
//! inputs, take a user for it, start its keeper ([`super::keeper`]), which makes the job's
//! namespaces and confines its program (limits, socket filter, Landlock ruleset of
//! [`super::view`]), watch it to its end ([`super::watch`]), then store the outputs, record
//! how it ended, remove the sandbox and give the user back.
//!
//! The program is run as cctools does: `executable` exactly (relative names are relative to
//! the sandbox, no `PATH` search), `arguments` as its whole argument vector, an environment of
//! the job's variables over cctools' defaults, standard input from `/dev/null`; standard
//! output and error go to files in the sandbox ([`super::sandbox::STDOUT`]).

use super::description::{Description, JobFile};
use super::identity::Identity;
use super::isolation::{self, describe};
use super::keeper::{Namespaces, Plan, Stage};
use super::record::{Exit, Process, Status};
use super::sandbox::Sandbox;
use super::watch::{Ended, Running, Stop};
use super::{confine, dispatch, Inner, JobError};
use crate::log::{self, Level};
use std::ffi::OsString;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

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

/// Runs job `id` (already marked STARTED) to its end.
pub(super) fn run(inner: &Arc<Inner>, id: i64) {
    // Taken now: a killed job may be reaped, and forgotten, before its runner ends.
    let subject = inner.lock().jobs.get(&id).map(|j| j.subject.clone());
    let mut cpu_us = 0;
    let outcome = match (inner.users.take(), inner.store.new_sandbox_path()) {
        (Some(identity), Ok(path)) => {
            let (outcome, cleared) = run_job(inner, id, &identity, &path, &mut cpu_us);
            if let Err(e) = Sandbox::remove(&path) {
                log::event(
                    Level::Error,
                    "job-sandbox-left",
                    &[("id", &id), ("path", &path.display()), ("error", &e)],
                );
            }
            if cleared {
                inner.users.put_back(&identity);
            } else {
                log::event(
                    Level::Error,
                    "job-processes-left",
                    &[("id", &id), ("uid", &identity.uid)],
                );
            }
            outcome
        }
        (None, _) => Some(Outcome::errored(
            "no uid of --job-uids is free (processes of an earlier job would not die)".into(),
        )),
        (_, Err(e)) => Some(Outcome::errored(format!("cannot name a sandbox: {e}"))),
    };
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

/// Everything between STARTED and the end, in `sandbox`, as `identity`: the outcome
/// (`None` when the job was killed: its record already says so) and whether none of its
/// processes is left. `cpu_us` becomes the CPU time its processes used.
fn run_job(
    inner: &Arc<Inner>,
    id: i64,
    identity: &Identity,
    sandbox: &Path,
    cpu_us: &mut u64,
) -> (Option<Outcome>, bool) {
    let Some((subject, description)) = inner
        .lock()
        .jobs
        .get(&id)
        .map(|job| (job.subject.clone(), job.description.clone()))
    else {
        return (None, true);
    };
    let owner = identity.switch.then_some((identity.uid, identity.gid));
    let sandbox = match Sandbox::create(sandbox, owner) {
        Ok(s) => s,
        Err(e) => {
            let error = format!("cannot make the sandbox: {e}");
            return (Some(Outcome::errored(error)), true);
        }
    };
    if let Err(e) = sandbox.bind_inputs(&inner.export, &subject, &description.files) {
        return (Some(Outcome::errored(e.message)), true);
    }
    let running = match start(inner, id, &subject, &description, &sandbox, identity) {
        Ok(running) => running,
        Err(e) => {
            // Its groups may have been made for it already (`entry_files`).
            inner.limits.release(id);
            return (Some(Outcome::errored(e.message)), true);
        }
    };
    let pgid = running.pid();
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
    let mut checkpoint = Instant::now();
    let ended = match &admitted {
        Ok(()) => running.watch(
            || still_started(inner, id),
            || {
                if checkpoint.elapsed() >= inner.config.cpu_checkpoint {
                    checkpoint = Instant::now();
                    super::usage::checkpoint(inner, id, pgid);
                }
            },
            inner.config.time_limit,
            inner.config.memory_limit,
        ),
        Err(e) => {
            log::event(Level::Error, "job-limits", &[("id", &id), ("error", e)]);
            running.abort()
        }
    };
    *cpu_us = ended.cpu_us;
    for (stage, errno) in &ended.notes {
        log::event(
            Level::Info,
            "job-note",
            &[
                ("id", &id),
                ("what", &describe(*stage)),
                ("error", &io::Error::from_raw_os_error(*errno)),
            ],
        );
    }
    let verdict = inner.limits.verdict(id);
    inner.limits.release(id);
    let cleared = ended.cleared;
    if let Err(e) = admitted {
        let error = format!("cannot put the job under the owner's limits: {e}");
        return (Some(Outcome::errored(error)), cleared);
    }
    if let Some((stage, errno)) = ended.error {
        let error = start_error(stage, errno, &description.executable, identity);
        return (Some(Outcome::errored(error)), cleared);
    }
    (
        finish(inner, id, &subject, description, &sandbox, ended, verdict),
        cleared,
    )
}

/// Why a job's keeper could not start its program, for its record.
fn start_error(stage: Stage, errno: i32, executable: &str, identity: &Identity) -> String {
    let e = io::Error::from_raw_os_error(errno);
    match stage {
        Stage::Exec => {
            let hint = if errno == libc::EACCES {
                format!(
                    " (as {}; a job runs programs from its sandbox, /usr, /bin, /sbin, /lib* \
                     and the --job-read directories only)",
                    identity.name
                )
            } else {
                String::new()
            };
            format!("cannot run {executable}{hint}: {e}")
        }
        Stage::Limits => format!("cannot put the job under the owner's limits: {e}"),
        other => format!("{}: {e}", describe(other)),
    }
}

/// The outcome of a job whose program ran.
fn finish(
    inner: &Inner,
    id: i64,
    subject: &str,
    description: Description,
    sandbox: &Sandbox,
    ended: Ended,
    verdict: Option<String>,
) -> Option<Outcome> {
    let exit = ended.exit;
    if let Some(why) = verdict.filter(|_| ended.stop != Some(Stop::Killed)) {
        return Some(Outcome {
            exit,
            ..Outcome::errored(why)
        });
    }
    match ended.stop {
        Some(Stop::Killed) => None,
        Some(Stop::TimeLimit) => Some(Outcome {
            exit,
            ..Outcome::errored(format!(
                "the job ran longer than the time limit of {} s",
                inner.config.time_limit.as_secs()
            ))
        }),
        Some(Stop::Memory(held)) => Some(Outcome {
            exit,
            ..Outcome::errored(format!(
                "killed: over the job memory limit of {} (its processes held {})",
                mebibytes(inner.config.memory_limit.unwrap_or(0)),
                mebibytes(held)
            ))
        }),
        None => {
            let mut files = description.files;
            let stored = sandbox.collect_outputs(&inner.export, subject, id, &mut files);
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

fn mebibytes(bytes: u64) -> String {
    format!("{}M", bytes.div_ceil(1 << 20))
}

/// Starts the job's keeper in the sandbox.
fn start(
    inner: &Inner,
    id: i64,
    subject: &str,
    description: &Description,
    sandbox: &Sandbox,
    identity: &Identity,
) -> Result<Running, JobError> {
    let (stdout, stderr) = sandbox
        .output_streams()
        .map_err(|e| JobError::io(&e, "cannot make the output files".into()))?;
    let isolation = &inner.isolation;
    let namespaced = isolation.namespaces.any();
    let ruleset = isolation
        .landlock
        .map(|abi| {
            inner
                .config
                .view
                .ruleset(abi, &sandbox.path, !namespaced, isolation.deny_tcp())
        })
        .transpose()
        .map_err(|e| JobError::io(&e, "cannot make the job's Landlock rules".into()))?;
    let (status_read, status_write) = isolation::pipe()
        .map_err(|e| JobError::io(&e, "cannot make the job's status pipe".into()))?;
    let entry = inner
        .limits
        .entry_files(id)
        .map_err(|e| JobError::io(&e, "cannot put the job under the owner's limits".into()))?;
    // In a user namespace of its own, the keeper and the init count too.
    let helpers = if isolation.namespaces == Namespaces::User {
        2
    } else {
        0
    };
    let plan = Plan {
        namespaces: isolation.namespaces,
        network: isolation.network,
        user: identity.switch.then_some((identity.uid, identity.gid)),
        entry: entry.iter().map(|f| f.as_raw_fd()).collect(),
        ruleset: ruleset.as_ref().map(|r| r.as_raw_fd()),
        status: status_write.as_raw_fd(),
        processes: isolation
            .process_limit(inner.config.process_limit)
            .map(|n| n + helpers),
        memory: inner.config.memory_limit,
        probe: false,
    };
    let executable = &description.executable;
    // execve(2) takes a name without a slash relative to the working directory; so does
    // cctools. Command would search PATH instead.
    let program = if executable.contains('/') {
        executable.clone()
    } else {
        format!("./{executable}")
    };
    let argv: Vec<OsString> = if description.arguments.is_empty() {
        vec![executable.into()]
    } else {
        description.arguments.iter().map(OsString::from).collect()
    };
    let dir = sandbox.path.to_string_lossy().into_owned();
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
    let keeper = &inner.config.keeper;
    let mut command = isolation::keeper_command(keeper, &plan, program.as_ref(), &argv);
    command
        .env_clear()
        .envs(defaults)
        .envs(&description.environment)
        .current_dir(&sandbox.path)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    let child = command.spawn().map_err(|e| {
        JobError::io(
            &e,
            format!("cannot start the job's keeper {}", keeper.display()),
        )
    })?;
    // The keeper holds its own copies now.
    drop((status_write, ruleset, entry));
    log::event(
        Level::Debug,
        "job-exec",
        &[("id", &id), ("program", &program)],
    );
    Ok(Running::new(child, status_read, namespaced))
}
