//! What the agent reads in /proc of processes it does not trace (so sees no events of):
//! whether one still exists, its threads, and the fields of its `stat` line.

/// Whether process or thread `pid` exists.
pub fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The threads of process `tgid`.
pub fn threads_of(tgid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{tgid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The fields of the `stat` file `path` (`/proc/PID/stat`, `/proc/PID/task/TID/stat`) after
/// the command name, which may hold spaces and parentheses: the state first, then the
/// parent's pid, and so on (field 3 of proc(5) is the first here).
pub fn stat_fields(path: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(path).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    Some(after_name.split_whitespace().map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_process_reads_back() {
        let me = std::process::id() as i32;
        assert!(alive(me));
        assert!(threads_of(me).contains(&me));
        let fields = stat_fields(&format!("/proc/{me}/stat")).unwrap();
        assert!(["R", "S"].contains(&fields[0].as_str()), "{fields:?}");
        let parent: i32 = fields[1].parse().unwrap();
        // SAFETY: a plain id query.
        assert_eq!(parent, unsafe { libc::getppid() });
        assert!(!alive(i32::MAX));
    }
}
