//! What this host lets the server do to keep jobs apart, found out when it starts by running
//! the keeper ([`super::keeper`]) once in probe mode for each kind of namespaces, best first:
//! user namespaces (any server, where the kernel allows unprivileged ones), namespaces made
//! as root (a root server), none (an unprivileged server where user namespaces are not
//! allowed: its jobs' processes are followed through `/proc`, see every process of the host,
//! and have no process cap; the server logs so).
//!
//! The network goes with the namespaces: a job with namespaces gets an empty network
//! namespace of its own (unix sockets by path refused by [`super::seccomp`]); one without
//! gets no socket at all ([`super::seccomp::Sockets::All`]) and, where Landlock has TCP
//! rules (ABI 4), no TCP either way. `--job-network` keeps the host's network. A host where
//! even the filter cannot be installed runs no job without `--job-network`: the probe fails
//! saying so, and the server does not start.

use super::identity::Identity;
use super::keeper::{self, Namespaces, Plan, Report, Stage};
use super::landlock;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// How jobs are kept apart on this host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Isolation {
    pub namespaces: Namespaces,
    /// The kernel's Landlock ABI, if it has Landlock.
    pub landlock: Option<i64>,
    /// Whether the owner allows jobs the network (`--job-network`).
    pub network: bool,
    /// Whether a job gets a `/proc` of its own (showing its processes only).
    pub own_proc: bool,
    /// Why each better kind of namespaces could not be had.
    pub fallbacks: Vec<String>,
}

impl Isolation {
    /// Tries each kind of namespaces (or only `wanted`) for jobs run as `identity`, with the
    /// network or not. `keeper` is the program the keeper is (`roost`).
    pub fn probe(
        keeper: &Path,
        identity: &Identity,
        network: bool,
        wanted: Option<Namespaces>,
    ) -> Result<Isolation, String> {
        let kinds: Vec<Namespaces> = match wanted {
            Some(kind) => vec![kind],
            None => Namespaces::ALL
                .into_iter()
                .filter(|k| *k != Namespaces::Root || identity.switch)
                .collect(),
        };
        if wanted == Some(Namespaces::Root) && !identity.switch {
            return Err(
                "--job-namespaces root: only a server running as root makes namespaces as root; \
                 use user (or auto)"
                    .into(),
            );
        }
        let landlock = landlock::abi();
        let mut fallbacks = Vec::new();
        for namespaces in kinds {
            let plan = Plan {
                namespaces,
                network,
                user: identity.switch.then_some((identity.uid, identity.gid)),
                entry: Vec::new(),
                ruleset: None,
                status: -1,
                processes: None,
                memory: None,
                probe: true,
            };
            match run_probe(keeper, plan) {
                Ok(reports) => {
                    let own_proc = namespaces.any()
                        && !reports
                            .iter()
                            .any(|r| matches!(r, Report::Note(Stage::Proc, _)));
                    return Ok(Isolation {
                        namespaces,
                        landlock,
                        network,
                        own_proc,
                        fallbacks,
                    });
                }
                Err(why) => fallbacks.push(format!("{}: {why}", namespaces.name())),
            }
        }
        let hint = if network {
            ""
        } else {
            " (without namespaces jobs are kept off the network by a seccomp filter: pass \
             --job-network to run them with this host's network instead)"
        };
        Err(format!(
            "jobs cannot be confined on this host: {}{hint}",
            fallbacks.join("; ")
        ))
    }

    /// How jobs are kept off the network: `host` (they are not: `--job-network`),
    /// `namespace`, or `filter` (no socket; and no TCP by Landlock where it can).
    pub fn network_name(&self) -> &'static str {
        match (self.network, self.namespaces.any(), self.landlock) {
            (true, _, _) => "host",
            (false, true, _) => "namespace",
            (false, false, Some(abi)) if abi >= 4 => "filter+landlock",
            (false, false, _) => "filter",
        }
    }

    /// Whether Landlock should refuse TCP too (no network namespace keeps it away).
    pub fn deny_tcp(&self) -> bool {
        !self.network && !self.namespaces.any()
    }

    /// The process cap that holds for each job: `limit` where it counts the job's processes
    /// alone (a user namespace of its own; or a uid of its own, as root), none without
    /// namespaces (`RLIMIT_NPROC` would count every process of the server's user).
    pub fn process_limit(&self, limit: Option<u64>) -> Option<u64> {
        limit.filter(|_| self.namespaces.any())
    }
}

/// Runs the keeper on `plan` (a probe), with `/bin/true` as the program it does not run;
/// what it reported, if it got as far as the program.
fn run_probe(keeper: &Path, mut plan: Plan) -> Result<Vec<Report>, String> {
    let (read, write) = pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
    plan.status = write.as_raw_fd();
    let mut command = keeper_command(keeper, &plan, OsStr::new("/bin/true"), &["true".into()]);
    command
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", keeper.display()))?;
    drop(write);
    let mut bytes = Vec::new();
    let read = File::from(read).read_to_end(&mut bytes);
    let status = child.wait().map_err(|e| e.to_string())?;
    read.map_err(|e| e.to_string())?;
    let reports = Report::parse_all(&bytes);
    if let Some((stage, errno)) = reports.iter().find_map(|r| match r {
        Report::Error(stage, errno) => Some((*stage, *errno)),
        _ => None,
    }) {
        return Err(format!(
            "{}: {}",
            describe(stage),
            io::Error::from_raw_os_error(errno)
        ));
    }
    if reports.contains(&Report::Exit(0)) {
        return Ok(reports);
    }
    Err(format!(
        "{} is not a roost that can keep jobs ({status})",
        keeper.display()
    ))
}

/// What failed, for a person.
pub fn describe(stage: Stage) -> &'static str {
    match stage {
        Stage::Limits => "cannot enter the owner's cgroups",
        Stage::User => "cannot become the job's user",
        Stage::Namespaces => "cannot make the job's namespaces",
        Stage::Proc => "cannot mount the job's /proc",
        Stage::Loopback => "cannot raise the loopback of the job's network",
        Stage::Confine => "cannot confine the job (limits, seccomp, Landlock)",
        Stage::Exec => "cannot run the program",
    }
}

/// A pipe, both ends close-on-exec (the keeper's end is passed on by [`keeper_command`]).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: into an array of two; the descriptors are owned below.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just made, owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The command starting a keeper on `plan` for `program` with `argv`: the descriptors the
/// plan names are passed on (and only to it), and it dies with the calling thread.
pub fn keeper_command(
    keeper: &Path,
    plan: &Plan,
    program: &OsStr,
    argv: &[std::ffi::OsString],
) -> Command {
    let mut command = Command::new(keeper);
    command
        .arg0(keeper::NAME)
        .arg(plan.to_json())
        .arg(program)
        .args(argv);
    let inherited = plan.inherited();
    // SAFETY: only system calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            for &fd in &inherited {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}
