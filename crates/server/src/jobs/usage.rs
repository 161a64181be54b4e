//! A running job's CPU time, so that a crash does not lose it from the ledger. A job's CPU is
//! recorded when it ends (`wait4`'s count, in the runner); a server that dies while jobs run
//! never sees them end. So, while a job runs, its CPU time so far is read from `/proc` every
//! `cpu_checkpoint` ([`checkpoint`]) and written into its record; a server restarted on the
//! job directory records, for each job that was running, that checkpoint in the ledger
//! ([`account_crashed`]), once: a job the ledger already has a record of (the server died
//! between writing it and marking the job ended) is not recorded again, and the job is then
//! marked ERRORED, so a second restart finds nothing to record.
//!
//! What is lost is the CPU used after the last checkpoint (at most one checkpoint's time of
//! the job's processes) and that of processes that left the job's process group.

use super::record::Status;
use super::Inner;
use crate::accounting::Accounting;
use crate::log::{self, Level};
use crate::thermostat::procs;

/// The CPU time (microseconds) the processes of group `pgid` have used so far: each one's
/// own, and that of the children it waited for.
pub fn used_by_group(pgid: i32) -> u64 {
    let ticks: u64 = procs::all()
        .iter()
        .filter(|p| p.pgrp == pgid)
        .map(|p| p.ticks + p.waited_ticks)
        .sum();
    // SAFETY: a plain query.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ticks.saturating_mul(1_000_000) / per_second
}

/// Writes job `id`'s CPU time so far (its processes in group `pgid`) into its record.
pub(super) fn checkpoint(inner: &Inner, id: i64, pgid: i32) {
    let used = used_by_group(pgid);
    let mut table = inner.lock();
    let Some(job) = table.jobs.get_mut(&id) else {
        return;
    };
    match &mut job.process {
        Some(p) if job.status == Status::Started && used > p.cpu_us => {
            p.cpu_us = used;
            inner.save(job);
        }
        _ => {}
    }
}

/// Records in the ledger, once, the CPU that the jobs a crashed server was running had used
/// by their last checkpoint.
pub(super) fn account_crashed(accounting: &Accounting, crashed: &[&super::record::Job]) {
    let recorded = match accounting.recorded_jobs() {
        Ok(ids) => ids,
        Err(e) => {
            // Better not to record than to record twice.
            log::event(
                Level::Error,
                "job-cpu-lost",
                &[("jobs", &crashed.len()), ("error", &e)],
            );
            return;
        }
    };
    for job in crashed {
        let cpu_us = job.process.map_or(0, |p| p.cpu_us);
        let already = recorded.contains(&job.id);
        if !already {
            accounting.job(&job.subject, job.id, cpu_us);
        }
        log::event(
            Level::Info,
            "job-cpu-recovered",
            &[
                ("id", &job.id),
                ("subject", &job.subject),
                ("cpu_us", &cpu_us),
                (
                    "action",
                    &if already {
                        "already in the ledger"
                    } else {
                        "recorded"
                    },
                ),
            ],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_group_is_seen_using_cpu() {
        // This test process's own group, which has been running for a while.
        // SAFETY: a plain query.
        let pgid = unsafe { libc::getpgrp() };
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(300) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        assert!(x != 1);
        assert!(used_by_group(pgid) >= 100_000, "{}", used_by_group(pgid));
        assert_eq!(used_by_group(i32::MAX - 7), 0);
    }
}
