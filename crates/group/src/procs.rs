//! Process tables for `roost ptop`: read at each member from a `/proc`-style directory and
//! merged, grouped by command (and user), up the tree.
//!
//! A member is a directory with one numeric subdirectory per process holding `stat` and
//! `status` files, as Linux's `/proc` (served by `roost serve /proc`). Each process gives its
//! command (the name in parentheses in `stat`), its user id (`Uid:` in `status`), its CPU
//! time (`utime` + `stime`, in clock ticks) and its resident set (`VmRSS:`, KiB). The
//! aggregation keeps, per command (or per command and user): processes, CPU ticks, total and
//! largest resident set, and the members that run it. Process directories are read through
//! the member's descriptor without following symlinks, and one that holds its own ACL file is
//! skipped, so the rights checked when the member was opened are the rights used.

use crate::codec::{DecodeError, Decoder, Encoder};
use crate::ranges::IndexSet;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd};

/// A group key: command, and user id when grouping by user (`None` otherwise).
pub type ProcKey = (String, Option<u32>);

/// What a group of processes uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcStats {
    pub processes: u64,
    pub cpu_ticks: u64,
    pub rss_kib: u64,
    pub max_rss_kib: u64,
    pub members: IndexSet,
}

impl ProcStats {
    pub fn merge(&mut self, other: &ProcStats) {
        self.processes += other.processes;
        self.cpu_ticks += other.cpu_ticks;
        self.rss_kib += other.rss_kib;
        self.max_rss_kib = self.max_rss_kib.max(other.max_rss_kib);
        self.members.extend(&other.members);
    }
}

/// A process table: groups and their use.
pub type ProcTable = BTreeMap<ProcKey, ProcStats>;

/// Merges `other` into `into`.
pub fn merge(into: &mut ProcTable, other: ProcTable) {
    for (key, stats) in other {
        into.entry(key).or_default().merge(&stats);
    }
}

/// One process as read from its directory.
#[derive(Debug, PartialEq, Eq)]
pub struct Process {
    pub command: String,
    pub uid: u32,
    pub cpu_ticks: u64,
    pub rss_kib: u64,
}

/// Parses `stat` (command, utime, stime) and `status` (Uid, VmRSS) texts.
pub fn parse_process(stat: &str, status: &str) -> Option<Process> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let command = stat.get(open + 1..close)?.to_string();
    // Fields after the command: state is field 3 of stat, utime 14 and stime 15.
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some(Process {
        command,
        uid: u32::try_from(field("Uid:")?).ok()?,
        cpu_ticks: utime + stime,
        rss_kib: field("VmRSS:").unwrap_or(0),
    })
}

fn openat(dir: &File, name: &str, flags: i32) -> Option<File> {
    let name = CString::new(name).ok()?;
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    (fd >= 0).then(|| unsafe { File::from_raw_fd(fd) })
}

fn read_text(dir: &File, name: &str) -> Option<String> {
    let mut text = String::new();
    openat(dir, name, libc::O_RDONLY)?
        .take(64 * 1024)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The processes under a member directory (entries that vanish meanwhile are skipped).
pub fn scan(dir: &File) -> std::io::Result<Vec<Process>> {
    // Listing through /proc/self/fd names the very directory that was opened and checked.
    let listing = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))?;
    let mut processes = Vec::new();
    for entry in listing.flatten() {
        let name = entry.file_name();
        let Some(name) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Some(proc_dir) = openat(dir, name, libc::O_RDONLY | libc::O_DIRECTORY) else {
            continue;
        };
        // A directory with its own ACL may grant less than the member's: leave it alone.
        if openat(&proc_dir, ".__acl", libc::O_RDONLY).is_some() {
            continue;
        }
        let (Some(stat), Some(status)) =
            (read_text(&proc_dir, "stat"), read_text(&proc_dir, "status"))
        else {
            continue;
        };
        if let Some(p) = parse_process(&stat, &status) {
            processes.push(p);
        }
    }
    Ok(processes)
}

/// The table of one member's processes.
pub fn table(member: u32, processes: &[Process], by_user: bool) -> ProcTable {
    let mut t = ProcTable::new();
    for p in processes {
        let key = (p.command.clone(), by_user.then_some(p.uid));
        let s = t.entry(key).or_default();
        s.merge(&ProcStats {
            processes: 1,
            cpu_ticks: p.cpu_ticks,
            rss_kib: p.rss_kib,
            max_rss_kib: p.rss_kib,
            members: IndexSet::single(member),
        });
    }
    t
}

pub fn encode(e: &mut Encoder, t: &ProcTable) {
    e.uint(t.len() as u64);
    for ((command, uid), s) in t {
        e.text(command);
        match uid {
            Some(u) => e.uint(1).uint((*u).into()),
            None => e.uint(0),
        };
        e.uint(s.processes)
            .uint(s.cpu_ticks)
            .uint(s.rss_kib)
            .uint(s.max_rss_kib)
            .set(&s.members);
    }
}

pub fn decode(d: &mut Decoder<'_>) -> Result<ProcTable, DecodeError> {
    let mut t = ProcTable::new();
    for _ in 0..d.count()? {
        let command = d.text()?;
        let uid = match d.uint()? {
            0 => None,
            1 => Some(d.u32()?),
            _ => return Err(DecodeError("bad user flag")),
        };
        let stats = ProcStats {
            processes: d.uint()?,
            cpu_ticks: d.uint()?,
            rss_kib: d.uint()?,
            max_rss_kib: d.uint()?,
            members: d.set()?,
        };
        t.insert((command, uid), stats);
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                        30 12 0 0 20 0 1 0 100 1000 50 18446744073709551615";
    const STATUS: &str = "Name:\tcmd\nUid:\t1000\t1000\t1000\t1000\nVmRSS:\t  2048 kB\n";

    #[test]
    fn stat_and_status_give_command_user_cpu_and_memory() {
        let p = parse_process(STAT, STATUS).unwrap();
        assert_eq!(
            p,
            Process {
                command: "my (odd) cmd".into(),
                uid: 1000,
                cpu_ticks: 42,
                rss_kib: 2048
            }
        );
        assert_eq!(parse_process("garbage", STATUS), None);
    }

    #[test]
    fn tables_merge_per_command_and_survive_encoding() {
        let p = |c: &str, uid, cpu, rss| Process {
            command: c.into(),
            uid,
            cpu_ticks: cpu,
            rss_kib: rss,
        };
        let mut all = table(0, &[p("sh", 0, 5, 100), p("sh", 1, 1, 300)], false);
        merge(
            &mut all,
            table(3, &[p("sh", 0, 2, 200), p("db", 7, 9, 900)], false),
        );
        let sh = &all[&("sh".to_string(), None)];
        assert_eq!(
            (sh.processes, sh.cpu_ticks, sh.rss_kib, sh.max_rss_kib),
            (3, 8, 600, 300)
        );
        assert_eq!(sh.members.to_string(), "0:3:2");
        let by_user = table(0, &[p("sh", 0, 5, 100), p("sh", 1, 1, 300)], true);
        assert_eq!(by_user.len(), 2);
        let mut e = Encoder::new();
        encode(&mut e, &all);
        encode(&mut e, &by_user);
        let bytes = e.finish();
        let mut d = Decoder::new(&bytes);
        assert_eq!(decode(&mut d).unwrap(), all);
        assert_eq!(decode(&mut d).unwrap(), by_user);
    }

    #[test]
    fn this_process_is_found_in_proc() {
        let dir = File::open("/proc").unwrap();
        let me = std::process::id().to_string();
        let processes = scan(&dir).unwrap();
        assert!(!processes.is_empty());
        let stat = std::fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
        let command = &stat[stat.find('(').unwrap() + 1..stat.rfind(')').unwrap()];
        assert!(processes.iter().any(|p| p.command == command));
    }
}
