//! Enforcement by cgroup v1 where its `cpu` and `memory` hierarchies are writable (a root
//! server on a v1 or hybrid machine): one group per server in each, beneath the server's own
//! group, named after its job directory (`roost-<hash>`), holding the limits for all guests
//! together (`cpu.cfs_quota_us` over `cpu.cfs_period_us`, `cpu.shares` in proportion to the
//! limit, `memory.limit_in_bytes` and
//! `memory.memsw.limit_in_bytes`), and a group per job inside it (`job-ID`), so that every
//! process a job starts is in it and the kernel's OOM kills are counted per job
//! (`memory.oom_control`'s `oom_kill`). The kernel kills only one process when the guests
//! are over their memory; the thermostat then kills the rest of that job and reports why.

use super::schedule::Limits;
use std::io;
use std::path::{Path, PathBuf};

/// The period the CPU quota is measured over, in microseconds.
const PERIOD_US: u64 = 100_000;

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
}

/// Where the v1 hierarchy with `controller` is mounted, from `/proc/self/mountinfo`.
fn mount_of(controller: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut r = right.split_whitespace();
        if r.next()? != "cgroup" {
            return None;
        }
        let options = r.nth(1)?;
        let point = left.split_whitespace().nth(4)?;
        options
            .split(',')
            .any(|o| o == controller)
            .then(|| PathBuf::from(point))
    })
}

/// This process's group in the v1 hierarchy with `controller`, from `/proc/self/cgroup`.
fn own_group(controller: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (_, list, path) = (f.next()?, f.next()?, f.next()?);
        list.split(',')
            .any(|c| c == controller)
            .then(|| path.trim_start_matches('/').to_string())
    })
}

/// The guests' group name for the jobs in `job_dir`: `roost-` and a hash of its path.
fn group_name(job_dir: &Path) -> Option<String> {
    let text = job_dir.to_string_lossy();
    // FNV-1a: stable across versions, which is all a name needs.
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    Some(format!("roost-{:08x}", hash as u32))
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn make_dir(path: &Path) -> io::Result<()> {
    match std::fs::create_dir(path) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(io::Error::new(
            e.kind(),
            format!("cannot make cgroup {}: {e}", path.display()),
        )),
        _ => Ok(()),
    }
}

impl Cgroup1 {
    /// Makes (or takes over) the guests' groups for the jobs in `job_dir`; fails, saying
    /// why, when the hierarchies are missing or not writable.
    pub fn create(job_dir: &Path) -> io::Result<Cgroup1> {
        let missing = |c: &str| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no cgroup v1 hierarchy with the {c} controller"),
            )
        };
        let name = group_name(job_dir).ok_or_else(|| missing("cpu"))?;
        let base = |c: &str| -> io::Result<PathBuf> {
            let mount = mount_of(c).ok_or_else(|| missing(c))?;
            Ok(mount.join(own_group(c).unwrap_or_default()).join(&name))
        };
        let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64;
        let groups = Cgroup1 {
            cpu: base("cpu")?,
            mem: base("memory")?,
            cores,
        };
        for dir in [&groups.cpu, &groups.mem] {
            make_dir(dir)?;
            // A previous server's job groups, empty now: gone.
            if let Ok(entries) = std::fs::read_dir(dir) {
                for e in entries.flatten() {
                    if e.file_name().to_string_lossy().starts_with("job-") {
                        let _ = std::fs::remove_dir(e.path());
                    }
                }
            }
        }
        write(
            &groups.cpu.join("cpu.cfs_period_us"),
            &PERIOD_US.to_string(),
        )?;
        groups.apply(Limits::UNLIMITED)?;
        Ok(groups)
    }

    /// Sets the guests' limits.
    pub fn apply(&self, limits: Limits) -> io::Result<()> {
        let quota = if limits.cpu_percent >= 100 {
            "-1".to_string()
        } else {
            (u64::from(limits.cpu_percent) * self.cores * PERIOD_US / 100).to_string()
        };
        write(&self.cpu.join("cpu.cfs_quota_us"), &quota)?;
        write(
            &self.cpu.join("cpu.shares"),
            &shares(limits.cpu_percent).to_string(),
        )?;
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
        let Some(name) = group_name(job_dir) else {
            return 0;
        };
        let mut left = 0;
        for c in ["cpu", "memory"] {
            let Some(mount) = mount_of(c) else { continue };
            let dir = mount.join(own_group(c).unwrap_or_default()).join(&name);
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for e in entries.flatten() {
                    if e.file_name().to_string_lossy().starts_with("job-") {
                        let _ = std::fs::remove_dir(e.path());
                    }
                }
            }
            let _ = std::fs::remove_dir(&dir);
            left += usize::from(dir.exists());
        }
        left
    }

    fn job_dirs(&self, job: i64) -> [PathBuf; 2] {
        let name = format!("job-{job}");
        [self.cpu.join(&name), self.mem.join(&name)]
    }

    /// The `cgroup.procs` files of job `job`'s groups (made now), open for writing: the
    /// job's first process writes `0` to each before it runs the program, so that it runs
    /// under its limits from its first instruction (the files are the server's, opened
    /// with its rights; a process may move itself into a group whose file it holds).
    pub fn entry_files(&self, job: i64) -> io::Result<Vec<std::fs::File>> {
        self.job_dirs(job)
            .iter()
            .map(|dir| {
                make_dir(dir)?;
                let procs = dir.join("cgroup.procs");
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&procs)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", procs.display())))
            })
            .collect()
    }

    /// Puts job `job` in its groups: every process in group `pgid` and every descendant of
    /// one (it may have started others, even in sessions of their own, before it was
    /// admitted), looked for again until a look finds no process left outside (what a
    /// process starts once it is inside is inside).
    pub fn admit(&self, job: i64, pgid: i32) -> io::Result<()> {
        let dirs = self.job_dirs(job);
        for dir in &dirs {
            make_dir(dir)?;
        }
        let one = std::collections::BTreeMap::from([(job, pgid)]);
        let mut moved = std::collections::HashSet::new();
        for _ in 0..100 {
            let all = super::procs::all();
            let members = super::procs::of_jobs(&all, &one)
                .remove(&job)
                .unwrap_or_default();
            let new: Vec<i32> = members
                .iter()
                .map(|p| p.pid)
                .filter(|pid| !moved.contains(pid))
                .collect();
            if new.is_empty() {
                return Ok(());
            }
            for pid in new {
                for dir in &dirs {
                    match std::fs::write(dir.join("cgroup.procs"), pid.to_string()) {
                        // Gone meanwhile: nothing to hold.
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                        r => r.map_err(|e| {
                            io::Error::new(e.kind(), format!("{}: {e}", dir.display()))
                        })?,
                    }
                }
                moved.insert(pid);
            }
        }
        Err(io::Error::other(
            "the job starts processes faster than they can be put in its cgroup",
        ))
    }

    /// How many of job `job`'s processes the kernel killed for memory.
    pub fn oom_kills(&self, job: i64) -> u64 {
        let path = self.job_dirs(job)[1].join("memory.oom_control");
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// The pids in job `job`'s group.
    pub fn pids(&self, job: i64) -> Vec<i32> {
        let path = self.job_dirs(job)[1].join("cgroup.procs");
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Kills what is left in job `job`'s groups (a process that left the job's process
    /// group, with `setsid`, is still in them; every process in them is the job's) and
    /// removes them; an error says which could not be removed.
    pub fn release(&self, job: i64) -> io::Result<()> {
        let start = std::time::Instant::now();
        loop {
            let pids = self.pids(job);
            if pids.is_empty() || start.elapsed() > std::time::Duration::from_secs(2) {
                break;
            }
            for pid in pids {
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for dir in self.job_dirs(job) {
            match std::fs::remove_dir(&dir) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot remove cgroup {}: {e}", dir.display()),
                    ))
                }
                _ => {}
            }
        }
        Ok(())
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

    #[test]
    fn own_groups_are_found_when_v1_is_mounted() {
        if let Some(mount) = mount_of("cpu") {
            assert!(mount.join("cgroup.procs").exists());
            assert!(own_group("cpu").is_some());
        }
    }
}
