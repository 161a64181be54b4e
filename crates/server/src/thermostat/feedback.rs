//! The stop/continue loop, for machines where no cgroup is writable: every
//! [`super::TICK`] it adds up the CPU time the guest jobs' processes used, against what the
//! limit allows over the same time, and stops (SIGSTOP) every guest process while they are
//! ahead, continuing them (SIGCONT) once they are behind; and a memory watchdog that stops
//! and kills (SIGSTOP, then SIGKILL) the job with the most resident memory while all guests
//! together hold more than the limit. It signals only the admitted jobs' process groups and
//! the processes descended from them (see [`super::procs`]). The watchdog alone
//! ([`memory_watchdog`]) also holds the memory limit under a cgroup mechanism while the
//! kernel refuses it.

use super::procs::{self, Proc};
use super::schedule::{size_text, Limits};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// How far ahead (CPU seconds per allowed core-second) the guests may bank idle time: a
/// tenth of a second of their share, so a job that slept does not then burst past the limit.
const CREDIT_SECONDS: f64 = 0.1;

/// The loop's state.
pub struct Feedback {
    /// Ticks each process had at the last look, by (pid, start time).
    last: HashMap<(i32, u64), u64>,
    /// CPU seconds used beyond the allowance (negative: behind it).
    debt: f64,
    stopped: bool,
    at: Instant,
    cores: f64,
    ticks_per_second: f64,
    page_size: u64,
}

impl Default for Feedback {
    fn default() -> Feedback {
        Feedback::new()
    }
}

impl Feedback {
    pub fn new() -> Feedback {
        // SAFETY: a plain query.
        let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as f64;
        // SAFETY: a plain query.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        // SAFETY: a plain query.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
        Feedback {
            last: HashMap::new(),
            debt: 0.0,
            stopped: false,
            at: Instant::now(),
            cores,
            ticks_per_second: ticks,
            page_size: page,
        }
    }

    /// One turn of the loop over the jobs in `groups` (job id to process group). Returns the
    /// jobs killed for memory, each with its status text.
    pub fn step(&mut self, groups: &BTreeMap<i64, i32>, limits: Limits) -> Vec<(i64, String)> {
        let now = Instant::now();
        let dt = now.duration_since(self.at).as_secs_f64();
        self.at = now;
        let jobs = procs::of_jobs(&procs::all(), groups);
        let mut used_ticks = 0u64;
        let mut seen = HashMap::new();
        for p in jobs.values().flatten() {
            let key = (p.pid, p.start);
            used_ticks += p
                .ticks
                .saturating_sub(self.last.get(&key).copied().unwrap_or(0));
            seen.insert(key, p.ticks);
        }
        self.last = seen;
        let killed = self.watch_memory(groups, &jobs, limits);
        if limits.cpu_percent >= 100 {
            self.debt = 0.0;
            if self.stopped {
                signal_all(groups, &jobs, libc::SIGCONT);
                self.stopped = false;
            }
            return killed;
        }
        let rate = f64::from(limits.cpu_percent) / 100.0 * self.cores;
        self.debt += used_ticks as f64 / self.ticks_per_second - rate * dt;
        self.debt = self.debt.max(-rate * CREDIT_SECONDS);
        let stop = self.debt > 0.0;
        // Signalled every turn, not only on a change: a process started meanwhile must
        // follow the others.
        signal_all(
            groups,
            &jobs,
            if stop { libc::SIGSTOP } else { libc::SIGCONT },
        );
        self.stopped = stop;
        killed
    }

    fn watch_memory(
        &self,
        groups: &BTreeMap<i64, i32>,
        jobs: &BTreeMap<i64, Vec<Proc>>,
        limits: Limits,
    ) -> Vec<(i64, String)> {
        kill_over_memory(groups, jobs, limits, self.page_size)
    }
}

/// The memory watchdog alone, over the jobs in `groups`: while they hold more than the
/// limit together, the job holding the most is stopped and killed. Returns the jobs killed,
/// each with its status text.
pub fn memory_watchdog(groups: &BTreeMap<i64, i32>, limits: Limits) -> Vec<(i64, String)> {
    if limits.mem_bytes.is_none() || groups.is_empty() {
        return Vec::new();
    }
    // SAFETY: a plain query.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    kill_over_memory(groups, &procs::of_jobs(&procs::all(), groups), limits, page)
}

fn kill_over_memory(
    groups: &BTreeMap<i64, i32>,
    jobs: &BTreeMap<i64, Vec<Proc>>,
    limits: Limits,
    page_size: u64,
) -> Vec<(i64, String)> {
    let Some(limit) = limits.mem_bytes else {
        return Vec::new();
    };
    let rss = |ps: &Vec<Proc>| ps.iter().map(|p| p.rss_pages).sum::<u64>() * page_size;
    let mut sizes: Vec<(i64, u64)> = jobs.iter().map(|(j, ps)| (*j, rss(ps))).collect();
    let mut total: u64 = sizes.iter().map(|(_, s)| s).sum();
    sizes.sort_by_key(|(_, s)| std::cmp::Reverse(*s));
    let mut killed = Vec::new();
    for (job, size) in sizes {
        if total <= limit {
            break;
        }
        let (Some(pgid), Some(ps)) = (groups.get(&job), jobs.get(&job)) else {
            continue;
        };
        signal_job(*pgid, ps, libc::SIGSTOP);
        signal_job(*pgid, ps, libc::SIGKILL);
        killed.push((
            job,
            format!(
                "killed: over memory limit {} (the job held {} of guest memory)",
                size_text(limit),
                size_text_rounded(size)
            ),
        ));
        total -= size;
    }
    killed
}

fn size_text_rounded(bytes: u64) -> String {
    format!("{}M", bytes.div_ceil(1 << 20))
}

fn signal_all(groups: &BTreeMap<i64, i32>, jobs: &BTreeMap<i64, Vec<Proc>>, signal: i32) {
    for (job, pgid) in groups {
        signal_job(*pgid, jobs.get(job).map_or(&[][..], |v| v), signal);
    }
}

/// Signals job's group, and each of its processes that left the group.
fn signal_job(pgid: i32, ps: &[Proc], signal: i32) {
    // SAFETY: a plain system call, no memory shared with it.
    unsafe { libc::kill(-pgid, signal) };
    for p in ps.iter().filter(|p| p.pgrp != pgid) {
        // SAFETY: a plain system call, no memory shared with it.
        unsafe { libc::kill(p.pid, signal) };
    }
}
