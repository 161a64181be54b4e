//! What the thermostat's two cgroup mechanisms ([`super::cgroup1`], [`super::cgroup2`])
//! share: where the hierarchies are mounted and where this process stands in them
//! ([`Placement`], from the roost-cgroup crate, which the agent reads too), the name of a
//! server's groups, the CPU quota, writes that say which file failed, and the groups of the
//! jobs inside the guests' group ([`JobGroups`]): made before a job starts, entered, counted
//! for OOM kills, emptied and removed, and those a previous server left removed.

pub use roost_cgroup::{Mount, Placement};
use std::io;
use std::path::{Path, PathBuf};

/// The period the CPU quota is measured over, in microseconds.
pub const PERIOD_US: u64 = 100_000;

/// The guests' CPU time per [`PERIOD_US`] at `cpu_percent` of a machine of `cores` cores;
/// `None` when unlimited (100%).
pub fn quota_us(cpu_percent: u32, cores: u64) -> Option<u64> {
    (cpu_percent < 100).then(|| u64::from(cpu_percent) * cores * PERIOD_US / 100)
}

/// The machine's cores, online.
pub fn cores() -> u64 {
    // SAFETY: a plain query.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64
}

/// The name of a server's guests' group, for the jobs in `job_dir`: `roost-` and a hash of
/// its path.
pub fn group_name(job_dir: &Path) -> String {
    let text = job_dir.to_string_lossy();
    // FNV-1a: stable across versions, which is all a name needs.
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("roost-{:08x}", hash as u32)
}

/// Writes `value` to the cgroup file `path`; an error names the file.
pub fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// Makes the group `path`, unless it is there already.
pub fn make_dir(path: &Path) -> io::Result<()> {
    match std::fs::create_dir(path) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(io::Error::new(
            e.kind(),
            format!("cannot make cgroup {}: {e}", path.display()),
        )),
        _ => Ok(()),
    }
}

/// The pids a `cgroup.procs` file lists (none when it cannot be read).
pub fn read_pids(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Removes the job groups (`job-*`) in `dir` that are empty.
fn remove_jobs_in(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with("job-") {
                let _ = std::fs::remove_dir(e.path());
            }
        }
    }
}

/// Removes the guests' group `dir` of a server that stopped, its empty job groups first;
/// returns whether it is still there (some job group holds a process).
pub fn remove_group(dir: &Path) -> bool {
    remove_jobs_in(dir);
    let _ = std::fs::remove_dir(dir);
    dir.exists()
}

/// The groups of the jobs, `job-ID`, inside the guests' group of each hierarchy (v1: the
/// `memory` and `cpu` ones; v2: the one). The first hierarchy has the memory controller:
/// its job group's `cgroup.procs` lists the job's processes and its `events` file counts
/// the job's processes the kernel killed for memory (`oom_kill N`).
pub struct JobGroups {
    guests: Vec<PathBuf>,
    events: &'static str,
}

impl JobGroups {
    pub fn new(guests: Vec<PathBuf>, events: &'static str) -> JobGroups {
        JobGroups { guests, events }
    }

    /// Removes the job groups a previous server left in the guests' groups (those still
    /// holding a process stay).
    pub fn remove_leftovers(&self) {
        for dir in &self.guests {
            remove_jobs_in(dir);
        }
    }

    fn dirs(&self, job: i64) -> Vec<PathBuf> {
        let name = format!("job-{job}");
        self.guests.iter().map(|g| g.join(&name)).collect()
    }

    /// The `cgroup.procs` files of job `job`'s groups (made now), open for writing: the
    /// job's first process writes `0` to each before it runs the program, so that it runs
    /// under its limits from its first instruction (the files are the server's, opened
    /// with its rights; a process may move itself into a group whose file it holds).
    pub fn entry_files(&self, job: i64) -> io::Result<Vec<std::fs::File>> {
        self.dirs(job)
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
        let dirs = self.dirs(job);
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
        let path = self.dirs(job)[0].join(self.events);
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
        read_pids(&self.dirs(job)[0].join("cgroup.procs"))
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
                // SAFETY: a plain system call, no memory shared with it.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for dir in self.dirs(job) {
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
    fn quota_is_a_share_of_all_cores_and_none_when_unlimited() {
        assert_eq!(quota_us(30, 2), Some(60_000));
        assert_eq!(quota_us(1, 1), Some(1_000));
        assert_eq!(quota_us(100, 4), None);
    }

    #[test]
    fn job_groups_are_made_entered_counted_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("memory"), tmp.path().join("cpu"));
        for g in [&a, &b] {
            std::fs::create_dir_all(g.join("job-7")).unwrap();
        }
        std::fs::create_dir(a.join("other")).unwrap();
        std::fs::create_dir(a.join("job-8")).unwrap();
        std::fs::write(a.join("job-8/cgroup.procs"), "").unwrap();
        let jobs = JobGroups::new(vec![a.clone(), b.clone()], "memory.oom_control");
        // An empty job group of a previous server goes, one holding a "process" stays.
        jobs.remove_leftovers();
        assert!(!a.join("job-7").exists() && !b.join("job-7").exists());
        assert!(a.join("job-8").exists() && a.join("other").exists());
        // The groups are made; the kernel would give them their files, here the test does.
        let e = jobs.entry_files(3).unwrap_err();
        assert!(e.to_string().contains("memory/job-3/cgroup.procs"), "{e}");
        assert!(a.join("job-3").is_dir());
        for g in [&a, &b] {
            std::fs::create_dir_all(g.join("job-3")).unwrap();
            std::fs::write(g.join("job-3/cgroup.procs"), "").unwrap();
        }
        let files = jobs.entry_files(3).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(jobs.oom_kills(3), 0);
        std::fs::write(
            a.join("job-3/memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        assert_eq!(jobs.oom_kills(3), 2);
        drop(files);
        // What a real group holds would be gone; a fake one's files are emptied here.
        for g in [&a, &b] {
            for f in std::fs::read_dir(g.join("job-3")).unwrap() {
                std::fs::remove_file(f.unwrap().path()).unwrap();
            }
        }
        jobs.release(3).unwrap();
        assert!(!a.join("job-3").exists() && !b.join("job-3").exists());
        assert!(remove_group(&a), "job-8 is not empty");
        assert!(!remove_group(&b) && !b.exists());
    }
}
