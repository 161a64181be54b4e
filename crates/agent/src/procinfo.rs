//! What the agent reads in /proc of other processes: whether one still exists, its threads,
//! the fields of its `stat` line, and its `status` (thread group, umask, ids, signal masks).

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
    let stat = read_file(path)?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    Some(after_name.split_whitespace().map(str::to_owned).collect())
}

/// The text of the /proc file `path`, read with one buffer of a page or two: procfs says
/// its files are empty, so `std::fs::read_to_string` would stat the file, then read it 32
/// bytes first and in doubling pieces (eight reads for a `status`).
pub fn read_file(path: &str) -> Option<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut text = Vec::with_capacity(8192);
    file.read_to_end(&mut text).ok()?;
    String::from_utf8(text).ok()
}

/// A thread's `/proc/TID/status`, read once.
pub struct Status(String);

impl Status {
    pub fn read(tid: i32) -> Option<Status> {
        read_file(&format!("/proc/{tid}/status")).map(Status)
    }

    /// The status whose text is `text`.
    pub fn from_text(text: String) -> Status {
        Status(text)
    }

    /// The thread's umask.
    pub fn umask(&self) -> Option<u32> {
        u32::from_str_radix(self.field("Umask:")?.next()?, 8).ok()
    }

    /// The whitespace-separated values of field `name` (e.g. `"Uid:"`).
    pub(crate) fn field<'a>(&'a self, name: &str) -> Option<std::str::SplitWhitespace<'a>> {
        self.0
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::split_whitespace)
    }

    pub(crate) fn number(&self, name: &str, index: usize) -> Option<u32> {
        self.field(name)?.nth(index)?.parse().ok()
    }

    /// The one value of a `Uid:` or `Gid:` line whose real, effective, saved and
    /// file-system ids are all alike (None when they differ).
    pub(crate) fn single(&self, name: &str) -> Option<u32> {
        let mut ids = self.field(name)?.map(|v| v.parse::<u32>().ok());
        let first = ids.next()??;
        ids.all(|v| v == Some(first)).then_some(first)
    }

    pub(crate) fn hex(&self, name: &str) -> Option<u64> {
        u64::from_str_radix(self.field(name)?.next()?, 16).ok()
    }

    pub fn tgid(&self) -> Option<i32> {
        self.field("Tgid:")?.next()?.parse().ok()
    }

    /// Whether the thread has exited (its status lingers while the process lives).
    fn is_zombie(&self) -> bool {
        self.field("State:").and_then(|mut f| f.next()) == Some("Z")
    }

    /// The signals this thread blocks.
    pub fn blocked(&self) -> u64 {
        self.hex("SigBlk:").unwrap_or(0)
    }

    /// Whether a signal is pending that this thread must take: one sent to the thread and
    /// not blocked, or one sent to its process that the kernel handed to this thread. The
    /// kernel offers a process's signal to the main thread first, then to any thread that
    /// does not block it; so this thread takes it when it is the main thread, or when the
    /// main thread blocks it (`main_blocked`: the main thread's blocked set, asked only when
    /// such a signal is pending; then another thread may take it too, and a needless
    /// restart of this thread's call is the lesser harm).
    pub fn signal_pending(&self, main_blocked: impl FnOnce() -> u64) -> bool {
        // A traced thread is sent even the signals it ignores, and those whose default is
        // to be ignored: neither interrupts a call natively unless a handler catches it.
        let caught = self.hex("SigCgt:").unwrap_or(0);
        let ignored = self.hex("SigIgn:").unwrap_or(0) | (IGNORED_BY_DEFAULT & !caught);
        let blocked = self.blocked() | ignored;
        if self.hex("SigPnd:").unwrap_or(0) & !blocked != 0 {
            return true;
        }
        let shared = self.hex("ShdPnd:").unwrap_or(0) & !blocked;
        let is_main = self.tgid() == self.field("Pid:").and_then(|mut f| f.next()?.parse().ok());
        shared != 0 && (is_main || shared & main_blocked() != 0)
    }
}

/// SIGCHLD, SIGCONT, SIGURG and SIGWINCH: ignored unless caught (bit N-1 for signal N).
const IGNORED_BY_DEFAULT: u64 = 1 << (libc::SIGCHLD - 1)
    | 1 << (libc::SIGCONT - 1)
    | 1 << (libc::SIGURG - 1)
    | 1 << (libc::SIGWINCH - 1);

/// The signals the main thread of process `tgid` blocks (all, when it has exited).
pub fn main_thread_blocked(tgid: i32) -> u64 {
    Status::read(tgid)
        .filter(|main| !main.is_zombie())
        .map_or(!0, |main| main.blocked())
}

/// The thread-group id of `tid`.
pub fn tgid(tid: i32) -> Option<i32> {
    Status::read(tid)?.tgid()
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
