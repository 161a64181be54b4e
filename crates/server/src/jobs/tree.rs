//! A running job's processes as the server sees them in `/proc`: every process in its
//! keeper's process group or descended from one. None can leave that tree: the keeper
//! ([`super::keeper`]) is a child subreaper, and in a PID namespace the job's init adopts
//! every orphan. The server signals them (each through a pidfd, after checking that the
//! number still names the process it found) and adds up their memory.

use crate::thermostat::procs::{self, Proc};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The longest [`Tree::kill`] tries.
const KILL_PATIENCE: Duration = Duration::from_secs(5);

/// One job's processes, known by its keeper.
pub struct Tree {
    keeper: i32,
    /// Whether the job has a PID namespace, whose init is the keeper's child.
    namespaced: bool,
}

impl Tree {
    pub fn new(keeper: i32, namespaced: bool) -> Tree {
        Tree { keeper, namespaced }
    }

    /// The job's processes now that have not ended, the keeper left out.
    fn members(&self) -> Vec<Proc> {
        let all = procs::all();
        let mut jobs = procs::of_jobs(&all, &BTreeMap::from([(0, self.keeper)]));
        let mut members = jobs.remove(&0).unwrap_or_default();
        members.retain(|p| p.pid != self.keeper && !p.zombie);
        members
    }

    /// Sends `signal` to every process of the job but its keeper.
    pub fn signal(&self, signal: libc::c_int) {
        for p in self.members() {
            send(&p, signal);
        }
    }

    /// Kills every process of the job but its keeper, again and again until none is left
    /// (or [`KILL_PATIENCE`] has passed). Whether none is left.
    pub fn kill(&self) -> bool {
        let deadline = Instant::now() + KILL_PATIENCE;
        let mut empty_before = false;
        loop {
            let members = self.members();
            // Empty twice in a row: a child whose parent just died shows that parent (no
            // longer in the tree) until the kernel hands it to the keeper, and would be
            // missed by a single look.
            if members.is_empty() && empty_before {
                return true;
            }
            empty_before = members.is_empty();
            if Instant::now() >= deadline {
                return false;
            }
            for p in &members {
                send(p, libc::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The resident memory of the job's own processes, bytes (the keeper and the init,
    /// which hold no memory of the job's, left out).
    pub fn resident(&self) -> u64 {
        // SAFETY: a plain query.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
        self.members()
            .iter()
            .filter(|p| !(self.namespaced && p.ppid == self.keeper))
            .map(|p| p.rss_pages * page)
            .sum()
    }
}

/// Sends `signal` to `p` if its number still names it.
fn send(p: &Proc, signal: libc::c_int) {
    let same = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|text| procs::parse_stat(pid, &text))
            .is_some_and(|now| now.start == p.start)
    };
    // SAFETY: a plain system call; the descriptor is closed below.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, p.pid, 0) } as libc::c_int;
    if fd < 0 {
        // No pidfd (Linux before 5.3): the check and the kill are a moment apart.
        if same(p.pid) {
            // SAFETY: a plain system call.
            unsafe { libc::kill(p.pid, signal) };
        }
        return;
    }
    // Held by the pidfd, the process cannot be replaced by another of the same number.
    if same(p.pid) {
        // SAFETY: a plain system call on our descriptor.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
    }
    // SAFETY: ours.
    unsafe { libc::close(fd) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn a_grandchild_in_a_session_of_its_own_is_killed_with_the_tree() {
        // The "keeper": a shell, subreaper and leader of its group, whose child starts a
        // grandchild in a session of its own and exits.
        let mut command = Command::new("sh");
        command
            .args(["-c", "(setsid sleep 1000 &); sleep 1000"])
            .process_group(0);
        // SAFETY: a system call between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
                Ok(())
            });
        }
        let mut keeper = command.spawn().unwrap();
        let tree = Tree::new(keeper.id() as i32, false);
        let deadline = Instant::now() + Duration::from_secs(10);
        while tree.members().len() < 2 {
            assert!(Instant::now() < deadline, "{:?}", tree.members());
            std::thread::sleep(Duration::from_millis(10));
        }
        let escaped: Vec<i32> = tree.members().iter().map(|p| p.pid).collect();
        assert!(tree.resident() > 0);
        assert!(tree.kill(), "{:?}", tree.members());
        for pid in escaped {
            // SAFETY: a probe of a number.
            let alive = unsafe { libc::kill(pid, 0) } == 0
                && std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| !s.contains(") Z "));
            assert!(!alive, "{pid} lives");
        }
        keeper.kill().unwrap();
        keeper.wait().unwrap();
    }
}
