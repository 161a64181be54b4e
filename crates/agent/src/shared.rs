//! What both delivery backends keep and read of the one program they run (`tracer`, the
//! ptrace stops; `supervisor`, the seccomp notifications): the namespace, each process's
//! program, the direct-mode files, the threads that changed their root, the processes in a
//! group stop, and the calls the supervisor sends back to take a ptrace stop. Neither
//! backend reaches into the other: what they share is here.

use roost_vfs::Namespace;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The kernel's "restart this call" result (never seen by programs): after a signal's
/// handler with `SA_RESTART` the call is made again, without one it fails with `EINTR`.
pub const ERESTARTSYS: i32 = 512;
/// The kernel's "restart this call, signal or not" result.
pub const ERESTARTNOINTR: i32 = 513;

/// Threads whose root directory is no longer roost's (they, or a thread they share their
/// file-system attributes with or descend from, called chroot): the mount list does not
/// apply inside their new root, so their calls are left to the kernel.
#[derive(Default)]
pub struct Rerooted {
    any: AtomicBool,
    tids: Mutex<HashSet<i32>>,
}

impl Rerooted {
    pub fn add(&self, tid: i32) {
        self.tids.lock().expect("rerooted lock").insert(tid);
        self.any.store(true, Ordering::Release);
    }
    pub fn remove(&self, tid: i32) {
        if self.any.load(Ordering::Acquire) {
            self.tids.lock().expect("rerooted lock").remove(&tid);
        }
    }
    pub fn contains(&self, tid: i32) -> bool {
        self.any.load(Ordering::Acquire) && self.tids.lock().expect("rerooted lock").contains(&tid)
    }
}

/// What both backends keep and read of the one program they run.
pub struct Shared {
    pub ns: Namespace,
    /// The open files of direct-mode mounts (None: no such mount, or no notifications).
    pub vfds: Option<Arc<crate::vfd::Vfds>>,
    /// Each process's program and exec count.
    pub execs: crate::programs::Execs,
    /// Calls the supervisor sends back to take a ptrace stop (None: no notifications).
    pub sent_back: Option<SentBack>,
    /// Set once any tracee changed its credentials: from then on, opens performed here
    /// take on the caller's file-system identity.
    pub credentials_changed: AtomicBool,
    /// The processes in a group stop (kept by the ptrace thread).
    pub stops: Arc<GroupStops>,
    /// The threads that changed their root (kept by the ptrace thread).
    pub rerooted: Rerooted,
    /// The identity id queries and uname report (`--uid`, ...).
    pub ids: crate::handlers::virtual_ids::VirtualIds,
    /// The descriptor numbers local copies of remote objects are installed at, where their
    /// fstat and getdents are notified (`crate::copies`; None: no notifications).
    pub copies: Option<crate::vfd::Slots>,
    /// The in-process fast path's table, kept current (None: no fast path this run).
    pub fast: Option<Arc<crate::fastpath::FastPath>>,
}

/// The processes (thread-group ids) in a group stop, with the threads that have reported
/// it, as the ptrace thread sees them. A stop signal sent to a process is taken by one
/// thread, which starts the stop; a thread waiting here never sees it pending, so it learns
/// of the stop from this set and leaves its call to stop too. Only a thread that has not
/// reported the stop is sent back: the kernel restarts the call of a thread with the stop
/// still pending, but would hand ERESTARTSYS to one without.
#[derive(Default)]
pub struct GroupStops(Mutex<HashMap<i32, HashSet<i32>>>);

impl GroupStops {
    /// Thread `tid` of process `tgid` has stopped for the process's group stop.
    pub fn stopped(&self, tgid: i32, tid: i32) {
        let mut stops = self.0.lock().expect("group stops lock");
        stops.entry(tgid).or_default().insert(tid);
    }
    /// Process `tgid` runs again (SIGCONT).
    pub fn resumed(&self, tgid: i32) {
        self.0.lock().expect("group stops lock").remove(&tgid);
    }
    /// Thread `tid` is gone (and its id may be reused): it leaves any stop it reported, and a
    /// process it led is forgotten.
    pub fn gone(&self, tid: i32) {
        let mut stops = self.0.lock().expect("group stops lock");
        stops.remove(&tid);
        for reported in stops.values_mut() {
            reported.remove(&tid);
        }
    }
    /// Whether thread `tid` of process `tgid` has a group stop still to take.
    pub(crate) fn must_stop(&self, tgid: i32, tid: i32) -> bool {
        let stops = self.0.lock().expect("group stops lock");
        stops
            .get(&tgid)
            .is_some_and(|reported| !reported.contains(&tid))
    }
}

/// A notification the tracer must answer: a call sent back to take a ptrace stop
/// (`supervisor::send_back` sends it; the tracer interrupts the caller, answers the
/// notification with [`ERESTARTNOINTR`] and marks the call so that it restarts as a ptrace
/// stop).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SendBack {
    pub tid: i32,
    pub id: u64,
    pub listener: i32,
    /// The call's number: only that call is marked when the thread stops.
    pub nr: i64,
}

/// Calls on their way from the supervisor to the tracer.
pub struct SentBack {
    queue: Mutex<Vec<SendBack>>,
    taken: Condvar,
    /// The tracer thread (woken with [`WAKE_SIGNAL`]).
    tracer: i32,
}

/// Interrupts the tracer's wait for the next stop (its handler does nothing).
pub const WAKE_SIGNAL: i32 = libc::SIGURG;

impl SentBack {
    /// For the tracer thread `tracer`, whose waits [`WAKE_SIGNAL`] interrupts.
    pub fn new(tracer: i32) -> SentBack {
        SentBack {
            queue: Mutex::new(Vec::new()),
            taken: Condvar::new(),
            tracer,
        }
    }

    /// Hands `s` to the tracer and returns once it took it. The tracer is woken again every
    /// millisecond: a wake-up that came while it was busy leaves it asleep in its next wait.
    pub fn send(&self, s: SendBack) {
        let mut queue = self.queue.lock().expect("sent-back lock");
        queue.push(s);
        while queue.contains(&s) {
            // SAFETY: a signal to a thread of this process, whose handler does nothing.
            unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), self.tracer, WAKE_SIGNAL) };
            queue = self
                .taken
                .wait_timeout(queue, Duration::from_millis(1))
                .expect("sent-back lock")
                .0;
        }
    }

    /// Everything sent back since the last call (the tracer's side).
    pub fn take(&self) -> Vec<SendBack> {
        let mut queue = self.queue.lock().expect("sent-back lock");
        if queue.is_empty() {
            return Vec::new();
        }
        let all = std::mem::take(&mut *queue);
        self.taken.notify_all();
        all
    }
}
