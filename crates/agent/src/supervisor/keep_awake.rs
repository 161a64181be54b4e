//! Keeps one CPU from halting while roost installs descriptors in the program
//! (`roost run --idle-poll-us`).
//!
//! Answering a notification wakes the caller on the answering CPU (synchronous wake-ups,
//! see [`super::start`]), but installing a descriptor (`SECCOMP_IOCTL_NOTIF_ADDFD`) takes
//! two plain wake-ups: the caller, to take the descriptor, and roost, once it has. The
//! kernel sends a plain wake-up to an idle CPU when there is one, and a virtual CPU that
//! halted takes ~20 us to run again here (the guest's halt polling is off): an open of a
//! mapped file went from 7 us to 50 us once a loop of them had run for a few milliseconds.
//! A thread of the lowest priority (`SCHED_IDLE`) that polls for a short while after each
//! install keeps the idle CPU awake, so both wake-ups find it running, as the kernel's own
//! halt polling would. It yields to any other thread at once and sleeps when installs stop.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// The poller: when the last install was, and whether the thread sleeps.
struct KeepAwake {
    start: Instant,
    /// Nanoseconds from `start` to the last install.
    last_install: AtomicU64,
    window: Duration,
    asleep: AtomicBool,
    thread: Thread,
}

static KEEPER: OnceLock<KeepAwake> = OnceLock::new();

/// Starts the poller, which polls for `window` after each install (zero: never). Not
/// where it cannot help or would cost the program: roost allowed one CPU only (`--pin`,
/// `taskset`), or its cgroup (or one above) holding a CPU quota, which the polling would
/// spend.
pub fn start(window: Duration) {
    if window.is_zero() || KEEPER.get().is_some() || allowed_cpus() < 2 || cpu_limited() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("roost-awake".into())
        .spawn(poll);
    if let Ok(handle) = spawned {
        let keeper = KeepAwake {
            start: Instant::now(),
            last_install: AtomicU64::new(0),
            window,
            asleep: AtomicBool::new(false),
            thread: handle.thread().clone(),
        };
        let _ = KEEPER.set(keeper);
        handle.thread().unpark();
    }
}

/// Whether this process's cgroup, or one above it, holds a CPU quota.
fn cpu_limited() -> bool {
    roost_cgroup::Placement::of_self().cpu_limited()
}

/// How many CPUs this thread may run on.
fn allowed_cpus() -> u32 {
    // SAFETY: the kernel fills the plain-data set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: this thread's own affinity into a set of the size given.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } != 0 {
        return 1;
    }
    // SAFETY: counting the bits of the set just filled.
    unsafe { libc::CPU_COUNT(&set) as u32 }
}

/// Says that a descriptor is about to be installed: the poller runs from now on for its
/// window (woken if it sleeps).
pub fn installing() {
    let Some(k) = KEEPER.get() else {
        return;
    };
    k.last_install
        .store(k.start.elapsed().as_nanos() as u64, Ordering::SeqCst);
    if k.asleep.swap(false, Ordering::SeqCst) {
        k.thread.unpark();
    }
}

impl KeepAwake {
    fn recently_installed(&self) -> bool {
        let last = Duration::from_nanos(self.last_install.load(Ordering::SeqCst));
        self.start.elapsed().saturating_sub(last) < self.window
    }
}

/// The poller's loop.
fn poll() {
    // SAFETY: a plain-data parameter for this thread's own policy.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
    }
    let k = loop {
        if let Some(k) = KEEPER.get() {
            break k;
        }
        std::thread::park();
    };
    loop {
        while k.recently_installed() {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
        }
        k.asleep.store(true, Ordering::SeqCst);
        // An install between the check above and `asleep` would find the flag still clear
        // and not wake this thread: look once more before sleeping (sequentially
        // consistent, so that either this look sees the install or the install sees the
        // flag).
        if k.recently_installed() {
            k.asleep.store(false, Ordering::Release);
            continue;
        }
        std::thread::park();
        k.asleep.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The poller's scheduling policy and state letter from /proc, once it exists.
    fn poller() -> Option<(i32, char)> {
        // Other tests' threads come and go meanwhile: one that vanished is skipped.
        for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
            let dir = task.path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if comm.trim() != "roost-awake" {
                continue;
            }
            let tid: i32 = dir.file_name()?.to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            let state = stat.rsplit(')').next()?.trim_start().chars().next()?;
            // SAFETY: a query of a thread of this process.
            let policy = unsafe { libc::sched_getscheduler(tid) };
            return Some((policy, state));
        }
        None
    }

    fn state_within(want: char, limit: Duration) -> Option<(i32, char)> {
        let start = Instant::now();
        loop {
            let seen = poller();
            if seen.is_some_and(|(_, s)| s == want) || start.elapsed() > limit {
                return seen;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn polls_at_the_lowest_priority_after_an_install_then_sleeps() {
        if allowed_cpus() < 2 || cpu_limited() {
            eprintln!("skipped: one CPU or a CPU quota here, where the poller does not start");
            return;
        }
        start(Duration::from_millis(300));
        // A thread of the lowest priority on a loaded machine may wait long for its turn.
        let asleep = state_within('S', Duration::from_secs(30));
        assert_eq!(
            asleep,
            Some((libc::SCHED_IDLE, 'S')),
            "idle before any install"
        );
        installing();
        std::thread::sleep(Duration::from_millis(100));
        let polling = poller().map(|(_, s)| s);
        assert_eq!(polling, Some('R'), "still polling 100 ms after an install");
        let asleep = state_within('S', Duration::from_secs(30));
        assert_eq!(
            asleep.map(|(_, s)| s),
            Some('S'),
            "asleep once installs stop"
        );
    }
}
