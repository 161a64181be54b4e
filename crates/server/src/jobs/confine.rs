//! The hook where the owner's thermostat takes hold of a job's processes
//! ([`ResourceLimits`]), and the clean-up of processes a previous server left running.
//! What confines a job is elsewhere: its user ([`super::identity`]), namespaces
//! ([`super::keeper`]), files ([`super::view`]) and sockets ([`super::seccomp`]).

use std::io;

// ---- the thermostat's hook ----------------------------------------------------------------------

/// Where the owner's limits on guest work (the thermostat, issue 13 item 3) take hold of a
/// job: [`ResourceLimits::admit`] is called with the job's process group right after its
/// first process starts, before it can have started others that escape, and
/// [`ResourceLimits::release`] once every process of it is gone. The thermostat will put the
/// group under its stop/continue loop there ([`crate::thermostat`]).
pub trait ResourceLimits: Send + Sync {
    /// Files the job's first process writes `0` to before it runs the program (a
    /// cgroup's `cgroup.procs`: it enters its groups itself, before its first instruction,
    /// where [`ResourceLimits::admit`] would find it some time after it started).
    fn entry_files(&self, _job: i64) -> io::Result<Vec<std::fs::File>> {
        Ok(Vec::new())
    }
    fn admit(&self, job: i64, pgid: i32) -> io::Result<()>;
    fn release(&self, job: i64);
    /// Why the limits killed job `job`, if they did (asked before [`ResourceLimits::release`]):
    /// the job is then reported ERRORED with this as its error.
    fn verdict(&self, _job: i64) -> Option<String> {
        None
    }
    /// What guest jobs may take now (what the owner offers, for the ledger).
    fn current(&self) -> crate::thermostat::schedule::Limits {
        crate::thermostat::schedule::Limits::UNLIMITED
    }
}

/// No limits: a server without `--thermostat`. Jobs are bounded only by
/// `--job-concurrency` and `--job-time-limit`.
pub struct Unlimited;

impl ResourceLimits for Unlimited {
    fn admit(&self, _job: i64, _pgid: i32) -> io::Result<()> {
        Ok(())
    }
    fn release(&self, _job: i64) {}
}

// ---- processes ----------------------------------------------------------------------------------

/// A process's group and start time (clock ticks after boot), from `/proc/PID/stat`.
pub fn group_and_start(pid: i32) -> Option<(i32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold anything, even ") "; the fields follow its last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ppid(4) pgrp(5) ... starttime(22), counted from 1.
    let pgrp = fields.get(2)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((pgrp, start))
}

/// Kills (SIGKILL) every process left in process group `pgid` that runs as `uid` and started
/// no earlier than `start_ticks`: what a job started by a server that has since stopped left
/// behind. Returns how many were killed.
pub fn kill_leftovers(pgid: i32, uid: u32, start_ticks: u64) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut killed = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Some((group, start)) = group_and_start(pid) else {
            continue;
        };
        let owner = std::os::unix::fs::MetadataExt::uid(&match entry.metadata() {
            Ok(m) => m,
            Err(_) => continue,
        });
        if group == pgid && owner == uid && start >= start_ticks {
            // SAFETY: a plain system call, no memory shared with it.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed += 1;
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_group_and_a_start_time() {
        let pid = std::process::id() as i32;
        let (pgrp, start) = group_and_start(pid).unwrap();
        // SAFETY: a plain query.
        assert_eq!(pgrp, unsafe { libc::getpgrp() });
        assert!(start > 0);
    }
}
