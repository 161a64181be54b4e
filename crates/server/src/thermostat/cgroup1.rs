//! Enforcement by cgroup v1 where its `cpu` and `memory` hierarchies are writable (a root
//! server on a v1 or hybrid machine): one group per server in each, beneath the server's own
//! group, named after its job directory (`roost-<hash>`), holding the limits for all guests
//! together (`cpu.cfs_quota_us` over `cpu.cfs_period_us`, `cpu.shares` in proportion to the
//! limit, `memory.limit_in_bytes` and
//! `memory.memsw.limit_in_bytes`), and a group per job inside it (`job-ID`), so that every
//! process a job starts is in it and the kernel's OOM kills are counted per job
//! (`memory.oom_control`'s `oom_kill`). The kernel kills only one process when the guests
//! are over their memory; the thermostat then kills the rest of that job and reports why.
//! What it shares with [`super::cgroup2`] (finding the groups, the jobs' groups) is in
//! [`super::cgroupfs`].

use super::cgroupfs::{self, JobGroups, Placement, PERIOD_US};
use super::schedule::Limits;
use std::io;
use std::path::{Path, PathBuf};

/// The guests' weight when the CPUs are contended (`cpu.shares`): in proportion to their
/// limit, so that several servers' guests on one machine get the CPU in the ratio of their
/// owners' limits rather than equally, and never above the default weight (1024) of the
/// group the owner's own processes run in: under contention the owner comes first.
fn shares(cpu_percent: u32) -> u64 {
    (1024 * u64::from(cpu_percent.min(100)) / 100).max(2)
}

/// The guests' groups.
pub struct Cgroup1 {
    cpu: PathBuf,
    mem: PathBuf,
    cores: u64,
    jobs: JobGroups,
}

/// The guests' groups of the jobs in `job_dir` in the hierarchy with `controller`: beneath
/// this process's group.
fn guests_dir(placement: &Placement, controller: &str, job_dir: &Path) -> Option<PathBuf> {
    Some(
        placement
            .v1_group(controller)?
            .join(cgroupfs::group_name(job_dir)),
    )
}

impl Cgroup1 {
    /// Makes (or takes over) the guests' groups for the jobs in `job_dir`; fails, saying
    /// why, when the hierarchies are missing or not writable.
    pub fn create(job_dir: &Path) -> io::Result<Cgroup1> {
        let placement = Placement::of_self();
        let base = |c: &str| {
            guests_dir(&placement, c, job_dir).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no cgroup v1 hierarchy with the {c} controller"),
                )
            })
        };
        let (cpu, mem) = (base("cpu")?, base("memory")?);
        let groups = Cgroup1 {
            jobs: JobGroups::new(vec![mem.clone(), cpu.clone()], "memory.oom_control"),
            cpu,
            mem,
            cores: cgroupfs::cores(),
        };
        for dir in [&groups.cpu, &groups.mem] {
            cgroupfs::make_dir(dir)?;
        }
        // A previous server's job groups, empty now: gone.
        groups.jobs.remove_leftovers();
        cgroupfs::write(
            &groups.cpu.join("cpu.cfs_period_us"),
            &PERIOD_US.to_string(),
        )?;
        groups.apply(Limits::UNLIMITED)?;
        Ok(groups)
    }

    /// The jobs' groups.
    pub fn jobs(&self) -> &JobGroups {
        &self.jobs
    }

    /// Sets the guests' limits.
    pub fn apply(&self, limits: Limits) -> io::Result<()> {
        self.apply_cpu(limits)?;
        self.apply_memory(limits)
    }

    /// Sets the guests' CPU limit.
    pub fn apply_cpu(&self, limits: Limits) -> io::Result<()> {
        let quota = cgroupfs::quota_us(limits.cpu_percent, self.cores)
            .map_or("-1".to_string(), |q| q.to_string());
        let write = cgroupfs::write;
        write(&self.cpu.join("cpu.cfs_quota_us"), &quota)?;
        write(
            &self.cpu.join("cpu.shares"),
            &shares(limits.cpu_percent).to_string(),
        )
    }

    /// Sets the guests' memory limit. The kernel refuses a limit below what the guests hold
    /// and cannot reclaim (no swap): the old limit then stays.
    pub fn apply_memory(&self, limits: Limits) -> io::Result<()> {
        let write = cgroupfs::write;
        let mem = limits.mem_bytes.map_or("-1".to_string(), |b| b.to_string());
        let plain = self.mem.join("memory.limit_in_bytes");
        let swap = self.mem.join("memory.memsw.limit_in_bytes");
        if !swap.exists() {
            return write(&plain, &mem);
        }
        // memsw may never be below the plain limit: which goes first depends on the way.
        write(&plain, &mem)
            .and_then(|()| write(&swap, &mem))
            .or_else(|_| write(&swap, &mem).and_then(|()| write(&plain, &mem)))
    }

    /// Removes the guests' groups of the jobs in `job_dir` that hold no process any more
    /// (what a stopped server leaves; a restarted one would take them over). Returns how
    /// many of its directories are left (0: none).
    pub fn remove_leftovers(job_dir: &Path) -> usize {
        let placement = Placement::of_self();
        ["cpu", "memory"]
            .iter()
            .filter_map(|c| guests_dir(&placement, c, job_dir))
            .filter(|dir| cgroupfs::remove_group(dir))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guests_weigh_in_proportion_to_their_limit_and_never_above_the_owner() {
        assert_eq!(shares(15), 153);
        assert_eq!(shares(10), 102);
        assert_eq!(shares(100), 1024);
        assert_eq!(shares(250), 1024);
        assert_eq!(shares(0), 2);
        assert!(shares(30) * 2 == shares(60) || shares(30) * 2 + 1 == shares(60));
    }
}
