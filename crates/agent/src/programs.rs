//! What roost knows of each process's program: its logical executable (what
//! `/proc/PID/exe` must show) and how many execs roost has seen it make.
//!
//! An exec that takes a ptrace stop is confirmed by its exec event (asked for that exec),
//! so when no event came before the thread's next stop, it failed. An exec answered by a
//! notification (`CONTINUE`: nothing in it is mapped) has no stop after it: it is recorded
//! as *pending*, and resolved by the first thing that needs to know — the tracer's next stop
//! of that thread, a readlink of its `/proc/PID/exe`, or its next exec — by comparing the
//! file the kernel now runs (`/proc/PID/exe`) with the one the exec named. A pending exec is
//! resolved only for the thread that made it: no other thread can act after it before it
//! finished (exec kills the others), so the answer is never taken mid-exec.
//!
//! The tracer keeps each thread's address-space state (the scratch area) with the exec
//! count it was made for; a higher count means the program exec'd and the state is stale.

use roost_vfs::resolve::file_id;
use std::collections::HashMap;
use std::sync::Mutex;

/// An exec let through whose outcome is not known yet.
#[derive(Clone, Debug)]
struct Pending {
    /// The logical name of the program, when roost resolved it.
    exe: Option<Vec<u8>>,
    outcome: Outcome,
}

/// How a pending exec's success shows.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Outcome {
    /// Its exec event comes before the thread's next stop; none came: it failed.
    Event,
    /// `/proc/PID/exe` names this file, (device, inode).
    Runs((u64, u64)),
    /// `/proc/PID/exe` no longer names this file, the one that ran before (an exec of a
    /// file roost could not find, which fails unless the file appears meanwhile).
    Replaces(Option<(u64, u64)>),
}

#[derive(Clone, Debug, Default)]
struct Program {
    /// The logical executable, when roost resolved it at an exec.
    exe: Option<Vec<u8>>,
    /// (device, inode) of the file that exec ran: a process that runs another file is not
    /// the one this record is about (its pid was reused after that one exited unseen).
    runs: Option<(u64, u64)>,
    /// Execs seen to succeed.
    count: u64,
    pending: Option<Pending>,
}

/// Every traced process's program, by thread-group id.
#[derive(Default)]
pub struct Execs {
    programs: Mutex<HashMap<i32, Program>>,
    /// How many records make the next prune (0: [`PRUNE_AT`]).
    prune_at: std::sync::atomic::AtomicUsize,
}

/// Records kept before those of processes that are gone are dropped (processes roost does
/// not trace exit unseen): the first prune comes at this many, the next at twice as many as
/// were left.
const PRUNE_AT: usize = 4096;

impl Execs {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<i32, Program>) -> T) -> T {
        f(&mut self.programs.lock().expect("execs lock"))
    }

    /// Resolves `tid`'s pending exec, if it has one: it succeeded when the kernel now runs
    /// the file it named. (A failed exec of the very file already running counts as
    /// succeeded: the only harm is a scratch area mapped again.)
    fn resolve(programs: &mut HashMap<i32, Program>, tid: i32) {
        let Some(p) = programs.get_mut(&tid) else {
            return;
        };
        let Some(pending) = p.pending.take() else {
            return;
        };
        let running = file_id(format!("/proc/{tid}/exe").as_bytes());
        let succeeded = match pending.outcome {
            Outcome::Event => false,
            Outcome::Runs(file) => running == Some(file),
            Outcome::Replaces(before) => running != before,
        };
        if succeeded {
            p.exe = pending.exe;
            p.runs = running;
            p.count += 1;
        }
    }

    /// An exec by thread-group leader `tid` of `physical` (logically `exe`) is let through
    /// with no stop after it.
    pub fn expect(&self, tid: i32, exe: Vec<u8>, physical: &[u8]) {
        let outcome = match file_id(physical) {
            Some(file) => Outcome::Runs(file),
            None => Outcome::Replaces(file_id(format!("/proc/{tid}/exe").as_bytes())),
        };
        self.pend(tid, Some(exe), outcome);
    }

    /// An exec by thread `tid` of `exe` takes a ptrace stop and will have an exec event if
    /// it succeeds.
    pub fn expect_event(&self, tid: i32, exe: Option<Vec<u8>>) {
        self.pend(tid, exe, Outcome::Event);
    }

    fn pend(&self, tid: i32, exe: Option<Vec<u8>>, outcome: Outcome) {
        self.with(|programs| {
            Execs::resolve(programs, tid);
            let relaxed = std::sync::atomic::Ordering::Relaxed;
            let prune_at = self.prune_at.load(relaxed).max(PRUNE_AT);
            if !programs.contains_key(&tid) && programs.len() >= prune_at {
                programs.retain(|&pid, _| crate::procinfo::alive(pid));
                self.prune_at.store(2 * programs.len(), relaxed);
            }
            programs.entry(tid).or_default().pending = Some(Pending { exe, outcome });
        });
    }

    /// The exec event of thread `former`, now `tid` (the thread-group leader's id): its
    /// pending exec succeeded.
    pub fn succeeded(&self, former: i32, tid: i32) {
        self.with(|programs| {
            let pending = programs.get_mut(&former).and_then(|p| p.pending.take());
            if former != tid {
                programs.remove(&former);
            }
            let p = programs.entry(tid).or_default();
            p.pending = None;
            p.exe = pending.and_then(|pending| pending.exe);
            p.runs = file_id(format!("/proc/{tid}/exe").as_bytes());
            p.count += 1;
        });
    }

    /// How many execs thread `tid` (as its process's leader) has made, its pending one
    /// resolved first. Asked by the tracer at each stop of `tid`.
    pub fn count(&self, tid: i32) -> u64 {
        self.with(|programs| {
            Execs::resolve(programs, tid);
            programs.get(&tid).map_or(0, |p| p.count)
        })
    }

    /// The logical executable of process `tgid`, as thread `caller` of it asks (its own
    /// pending exec resolved first).
    pub fn exe(&self, tgid: i32, caller: i32) -> Option<Vec<u8>> {
        self.with(|programs| {
            if caller == tgid {
                Execs::resolve(programs, tgid);
            }
            let p = programs.get(&tgid)?;
            let current = || p.runs == file_id(format!("/proc/{tgid}/exe").as_bytes());
            p.exe.clone().filter(|_| p.runs.is_none() || current())
        })
    }

    /// A forked process runs its parent's program.
    pub fn forked(&self, parent: i32, child: i32) {
        self.with(|programs| {
            Execs::resolve(programs, parent);
            if let Some(p) = programs.get(&parent) {
                let (exe, runs) = (p.exe.clone(), p.runs);
                let child = programs.entry(child).or_default();
                child.exe = exe;
                child.runs = runs;
            }
        });
    }

    /// Process `tgid` is gone.
    pub fn gone(&self, tgid: i32) {
        self.with(|programs| programs.remove(&tgid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_exec_counts_once_the_kernel_runs_its_file() {
        let me = std::process::id() as i32;
        let execs = Execs::default();
        let running = std::fs::read_link("/proc/self/exe").unwrap();
        let running = running.as_os_str().as_encoded_bytes().to_vec();
        assert_eq!(execs.count(me), 0);
        // An exec of another file: not what runs, so it failed.
        execs.expect(me, b"/logical/sh".to_vec(), b"/bin/sh");
        assert_eq!(execs.count(me), 0);
        assert_eq!(execs.exe(me, me), None);
        // An exec of the file that runs: it succeeded.
        execs.expect(me, b"/logical/me".to_vec(), &running);
        assert_eq!(execs.exe(me, me), Some(b"/logical/me".to_vec()));
        assert_eq!(execs.count(me), 1);
        // Another thread of the process asking does not resolve it for the leader.
        execs.expect(me, b"/logical/again".to_vec(), &running);
        assert_eq!(execs.exe(me, me + 1), Some(b"/logical/me".to_vec()));
        assert_eq!(execs.count(me), 2);
        // A file that does not exist: the exec failed while the same program runs.
        execs.expect(me, b"/x".to_vec(), b"/nonexistent/x");
        assert_eq!(execs.count(me), 2);
        assert_eq!(execs.exe(me, me), Some(b"/logical/again".to_vec()));
        execs.expect_event(me, Some(b"/by/ptrace".to_vec()));
        execs.succeeded(me, me);
        assert_eq!(execs.count(me), 3);
        assert_eq!(execs.exe(me, me), Some(b"/by/ptrace".to_vec()));
        // An exec that stops and has no event before the thread's next stop failed.
        execs.expect_event(me, Some(b"/failed".to_vec()));
        assert_eq!(execs.count(me), 3);
        assert_eq!(execs.exe(me, me), Some(b"/by/ptrace".to_vec()));
        // A thread's exec: the thread takes the leader's id.
        execs.expect_event(me + 5, Some(b"/from/a/thread".to_vec()));
        execs.succeeded(me + 5, me);
        assert_eq!(execs.exe(me, me), Some(b"/from/a/thread".to_vec()));
        assert_eq!(execs.count(me + 5), 0);
        execs.forked(me, 77);
        let inherited = execs.with(|p| p.get(&77).map(|p| (p.exe.clone(), p.runs)));
        let ours = execs.with(|p| p.get(&me).map(|p| p.runs)).flatten();
        assert_eq!(
            inherited,
            Some((Some(b"/from/a/thread".to_vec()), ours)),
            "pid 77 runs no such file: the record is kept, not shown"
        );
        execs.gone(me);
        assert_eq!(execs.count(me), 0);
    }

    #[test]
    fn a_record_of_a_file_the_process_does_not_run_names_nothing() {
        let me = std::process::id() as i32;
        let running = std::fs::read_link("/proc/self/exe").unwrap();
        let running = running.as_os_str().as_encoded_bytes().to_vec();
        let execs = Execs::default();
        // As left by an earlier process with this pid, which exited unseen.
        execs.with(|p| {
            p.insert(
                me,
                Program {
                    exe: Some(b"/old".to_vec()),
                    runs: Some((0, 1)),
                    ..Program::default()
                },
            )
        });
        assert_eq!(execs.exe(me, me), None);
        execs.expect(me, b"/new".to_vec(), &running);
        assert_eq!(execs.exe(me, me), Some(b"/new".to_vec()));
    }

    #[test]
    fn records_of_processes_that_are_gone_are_dropped() {
        let execs = Execs::default();
        // Pids above the kernel's limit: no such process.
        for pid in 0..PRUNE_AT as i32 {
            execs.expect_event(i32::MAX - pid, None);
        }
        let me = std::process::id() as i32;
        execs.expect_event(me, None);
        assert_eq!(execs.with(|p| p.len()), 1);
    }
}
