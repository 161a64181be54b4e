//! The guest jobs' processes, read from `/proc`: every process in an admitted job's process
//! group, and every descendant of one (a process that left the group with `setsid` is still
//! the job's), with its CPU time and resident memory.

use std::collections::{BTreeMap, HashMap};

/// One process as `/proc/PID/stat` shows it.
#[derive(Clone, Copy, Debug)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub pgrp: i32,
    /// utime + stime, in clock ticks.
    pub ticks: u64,
    /// cutime + cstime: the CPU of the children it waited for, in clock ticks.
    pub waited_ticks: u64,
    /// Start time, clock ticks after boot (a pid and this name one process).
    pub start: u64,
    /// Resident pages.
    pub rss_pages: u64,
    /// Whether it has ended and waits to be reaped (it can do nothing more).
    pub zombie: bool,
}

/// Parses `/proc/PID/stat`'s text.
pub fn parse_stat(pid: i32, text: &str) -> Option<Proc> {
    // The command name may hold anything; the fields follow its last ')'.
    let rest = text.get(text.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Counted from 3 (state): ppid 4, pgrp 5, utime 14, stime 15, cutime 16, cstime 17,
    // starttime 22, rss 24.
    let n = |i: usize| f.get(i - 3).and_then(|s| s.parse::<i64>().ok());
    Some(Proc {
        pid,
        zombie: matches!(f.first(), Some(&"Z") | Some(&"X")),
        ppid: n(4)? as i32,
        pgrp: n(5)? as i32,
        ticks: (n(14)? + n(15)?).max(0) as u64,
        waited_ticks: (n(16)? + n(17)?).max(0) as u64,
        start: n(22)?.max(0) as u64,
        rss_pages: n(24)?.max(0) as u64,
    })
}

/// Every process on the machine.
pub fn all() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            parse_stat(pid, &text)
        })
        .collect()
}

/// The processes of each job: `groups` maps a job to its process group; a process belongs to
/// the job whose group it is in, or whose process is its parent (transitively).
pub fn of_jobs(all: &[Proc], groups: &BTreeMap<i64, i32>) -> BTreeMap<i64, Vec<Proc>> {
    let by_group: HashMap<i32, i64> = groups.iter().map(|(j, g)| (*g, *j)).collect();
    let mut owner: HashMap<i32, i64> = HashMap::new();
    for p in all {
        if let Some(job) = by_group.get(&p.pgrp) {
            owner.insert(p.pid, *job);
        }
    }
    // Descendants that left the group: repeat until nothing changes (a chain is short).
    loop {
        let mut added = false;
        for p in all {
            if owner.contains_key(&p.pid) {
                continue;
            }
            if let Some(job) = owner.get(&p.ppid).copied() {
                owner.insert(p.pid, job);
                added = true;
            }
        }
        if !added {
            break;
        }
    }
    let mut out: BTreeMap<i64, Vec<Proc>> = groups.keys().map(|j| (*j, Vec::new())).collect();
    for p in all {
        if let Some(job) = owner.get(&p.pid) {
            out.entry(*job).or_default().push(*p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names() {
        let text = "42 (a) b (c) R 1 42 42 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 555 1000 \
                    25 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let p = parse_stat(42, text).unwrap();
        assert_eq!(
            (
                p.ppid,
                p.pgrp,
                p.ticks,
                p.waited_ticks,
                p.start,
                p.rss_pages,
                p.zombie
            ),
            (1, 42, 10, 0, 555, 25, false)
        );
        assert!(
            parse_stat(7, "7 (z) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 0 0")
                .unwrap()
                .zombie
        );
        assert!(parse_stat(1, "garbage").is_none());
        assert!(parse_stat(1, "1 (x)").is_none());
        assert!(parse_stat(1, "1 (x) R").is_none());
    }

    #[test]
    fn descendants_that_left_the_group_stay_the_job_s() {
        let p = |pid, ppid, pgrp| Proc {
            pid,
            ppid,
            pgrp,
            ticks: 0,
            waited_ticks: 0,
            start: 0,
            rss_pages: 0,
            zombie: false,
        };
        let all = [
            p(10, 1, 10),
            p(11, 10, 10),
            p(12, 11, 12),
            p(13, 12, 13),
            p(20, 1, 20),
        ];
        let groups = BTreeMap::from([(1, 10)]);
        let jobs = of_jobs(&all, &groups);
        let pids: Vec<i32> = jobs[&1].iter().map(|p| p.pid).collect();
        assert_eq!(pids, [10, 11, 12, 13]);
    }

    #[test]
    fn this_process_is_listed() {
        let me = std::process::id() as i32;
        assert!(all().iter().any(|p| p.pid == me && p.ticks < u64::MAX));
    }
}
