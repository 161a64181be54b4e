//! An open that must wait — for a FIFO's other end, or for a lease on the file to be
//! broken — on a thread of its own so the supervisor goes on serving. The caller's signals
//! are still delivered while it waits: roost's filter
//! makes a received notification wait killably (a change must not be made twice by a
//! restarted call), so this thread watches the caller and, when a signal is pending for it,
//! abandons the open and answers `ERESTARTSYS` — the kernel then restarts the call after an
//! `SA_RESTART` handler (or a stop) and fails it with `EINTR` otherwise, as it does for an
//! open interrupted natively. A stop of the caller's process (SIGSTOP, Ctrl-Z) is taken the
//! same way, so the waiting thread stops with the rest of the process.

use super::handover::Request;
use super::lookup::last_errno;
use super::{send, Notification, Reply};
use crate::caller::as_caller;
use crate::procinfo::{main_thread_blocked, Status};
use crate::shared::{GroupStops, ERESTARTSYS};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

/// How often the caller is looked at while it waits.
const TICK: Duration = Duration::from_millis(10);

/// How the caller's open waits.
pub enum Wait {
    /// A read-only open of a FIFO: roost holds a non-blocking read end, so writers see a
    /// reader as they would see the caller, and waits for a writer in a blocking reopen of it.
    Reader(OwnedFd),
    /// An open that failed with this errno only because it did not block: a write-only
    /// open of a FIFO with no reader yet (ENXIO), or an open that started breaking another
    /// process's lease on the file (EWOULDBLOCK). Retried without blocking until it can be
    /// made (a blocking open of a FIFO, interrupted to look at signals, would wake readers
    /// as if a writer had come and gone).
    Retry(i32),
}

/// Whether an open that failed with `errno` would have waited had it been blocking: what
/// [`Wait::Retry`] waits out.
pub fn would_wait(request: &Request, errno: i32) -> bool {
    match errno {
        libc::ENXIO => names_fifo(&request.physical), // a socket says ENXIO for good
        libc::EWOULDBLOCK => true,
        _ => false,
    }
}

/// Whether `path` (followed) is a FIFO.
pub fn names_fifo(path: &CString) -> bool {
    // SAFETY: the kernel fills the plain-data struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and stat buffer.
    let rc = unsafe { libc::stat(path.as_ptr(), &mut st) };
    rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO
}

/// What the waiting caller is doing.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Caller {
    Waiting = 0,
    /// A signal is pending for it, or its process is stopping: its call must be restarted
    /// to take the signal or the stop.
    Signalled = 1,
    /// Killed: nothing waits for an answer any more.
    Gone = 2,
}

/// Whether thread `tid`, waiting for the answer to `n`, still waits, must take a signal or a
/// stop first, or is gone.
pub(super) fn look_at(tid: i32, n: Notification, stops: &GroupStops) -> Caller {
    if n.ensure_waiting().is_err() {
        return Caller::Gone;
    }
    let Some(status) = Status::read(tid) else {
        return Caller::Gone;
    };
    let tgid = status.tgid();
    let stopping = tgid.is_some_and(|g| stops.must_stop(g, tid) || another_stopped(g, tid));
    if stopping || status.signal_pending(|| tgid.map_or(!0, main_thread_blocked)) {
        Caller::Signalled
    } else {
        Caller::Waiting
    }
}

/// Whether a thread of process `tgid` other than `tid` is stopped (job control): a process
/// roost does not trace is in a group stop, which its thread waiting here, killable only
/// once roost took its call, does not take until roost answers. (Traced threads report
/// their stops to the tracer instead: [`GroupStops`].)
fn another_stopped(tgid: i32, tid: i32) -> bool {
    crate::procinfo::threads_of(tgid)
        .into_iter()
        .filter(|&t| t != tid)
        .any(|t| {
            crate::procinfo::stat_fields(&format!("/proc/{tgid}/task/{t}/stat"))
                .is_some_and(|fields| fields.first().is_some_and(|state| state == "T"))
        })
}

fn abandoned(state: Caller) -> i32 {
    match state {
        Caller::Signalled => ERESTARTSYS,
        _ => libc::ENOENT,
    }
}

/// Waits as `wait` says on a new thread, which answers notification `n` of thread `tid`.
/// `Err`: no thread could be started.
pub fn wait_elsewhere(
    request: Request,
    wait: Wait,
    (tid, n): (i32, Notification),
    stops: Arc<GroupStops>,
) -> Result<(), i32> {
    // SAFETY: duplicating the live listener for the thread.
    let own = unsafe { libc::fcntl(n.listener, libc::F_DUPFD_CLOEXEC, 0) };
    if own < 0 {
        return Err(libc::EMFILE);
    }
    // SAFETY: the new descriptor is ours alone.
    let own = unsafe { OwnedFd::from_raw_fd(own) };
    std::thread::Builder::new()
        .name("roost-fifo-open".into())
        .stack_size(128 * 1024)
        .spawn(move || {
            let n = Notification {
                listener: own.as_raw_fd(),
                ..n
            };
            let opened = match wait {
                Wait::Reader(read_end) => wait_for_writer(&request, &read_end, tid, n, &stops),
                Wait::Retry(errno) => retry(&request, errno, tid, n, &stops),
            };
            let reply = match opened {
                Ok(fd) => request.install(n, fd),
                Err(e) => Reply::errno(e),
            };
            send(n.listener, n.id, reply);
        })
        .map(drop)
        .map_err(|_| libc::EAGAIN)
}

/// Retries a non-blocking open until it stops failing with `errno` ([`Wait::Retry`]), as
/// long as the caller waits, backing off from 1 to 10 ms between tries.
fn retry(
    request: &Request,
    errno: i32,
    tid: i32,
    n: Notification,
    stops: &GroupStops,
) -> Result<OwnedFd, i32> {
    let mut pause = Duration::from_millis(1);
    loop {
        match request.open_nonblocking() {
            Err(e) if e == errno && would_wait(request, e) => {}
            other => return other,
        }
        match look_at(tid, n, stops) {
            Caller::Waiting => {}
            state => return Err(abandoned(state)),
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(TICK);
    }
}

/// The signal that interrupts this module's blocking opens (no `SA_RESTART`).
fn wake_signal() -> i32 {
    static HANDLER: Once = Once::new();
    let sig = libc::SIGRTMIN() + 7;
    extern "C" fn ignore(_: libc::c_int) {}
    HANDLER.call_once(|| {
        // SAFETY: installs a handler that does nothing, for a signal roost sends itself.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    });
    sig
}

/// Where a reader's blocking reopen stands (shared with the thread watching it).
#[derive(Clone, Copy, PartialEq)]
enum Watch {
    Waiting,
    /// The caller must take a signal: its call is restarted.
    Signalled,
    /// The caller is gone.
    Gone,
    /// A writer came (and maybe went) before the reopen began waiting, which would then
    /// wait for the next one: the read end roost holds is handed over instead.
    WriterCame,
    /// The reopen returned.
    Done,
}

/// Whether a writer has opened the FIFO since `read_end` was opened: data to read, or a
/// hang-up (a writer came and went).
fn writer_came(read_end: &OwnedFd) -> bool {
    let mut poll = libc::pollfd {
        fd: read_end.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no waiting.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & (libc::POLLIN | libc::POLLHUP) != 0
}

fn wait_for_writer(
    request: &Request,
    read_end: &OwnedFd,
    tid: i32,
    n: Notification,
    stops: &GroupStops,
) -> Result<OwnedFd, i32> {
    let sig = wake_signal();
    // SAFETY: unblocks one signal for this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    // SAFETY: plain id queries.
    let (pid, me) = unsafe { (libc::getpid(), libc::gettid()) };
    let reopen = CString::new(format!("/proc/self/fd/{}", read_end.as_raw_fd()))
        .expect("no NUL in a /proc path");
    let flags = request.flags | libc::O_CLOEXEC | libc::O_NOCTTY;
    let state = AtomicU8::new(Watch::Waiting as u8);
    let stopped = |why: Watch| state.load(Ordering::Acquire) == why as u8;
    std::thread::scope(|s| {
        let watcher = std::thread::Builder::new()
            .name("roost-fifo-watch".into())
            .stack_size(64 * 1024)
            .spawn_scoped(s, || {
                // Signals until the open returns: one sent just before it began is not enough.
                while !stopped(Watch::Done) {
                    std::thread::park_timeout(TICK);
                    if stopped(Watch::Waiting) {
                        let seen = if writer_came(read_end) {
                            Watch::WriterCame
                        } else {
                            match look_at(tid, n, stops) {
                                Caller::Waiting => continue,
                                Caller::Signalled => Watch::Signalled,
                                Caller::Gone => Watch::Gone,
                            }
                        };
                        let _ = state.compare_exchange(
                            Watch::Waiting as u8,
                            seen as u8,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        );
                    }
                    if !stopped(Watch::Done) {
                        // SAFETY: a signal to this process's own opener thread.
                        unsafe { libc::syscall(libc::SYS_tgkill, pid, me, sig) };
                    }
                }
            });
        let Ok(watcher) = watcher else {
            return Err(libc::EAGAIN);
        };
        let opened = loop {
            // SAFETY: a blocking reopen of our FIFO read end through its /proc name.
            let fd = as_caller(request.who.as_ref(), || unsafe {
                libc::open(reopen.as_ptr(), flags)
            });
            if fd >= 0 {
                // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
                break Ok(unsafe { OwnedFd::from_raw_fd(fd) });
            }
            match last_errno() {
                libc::EINTR if stopped(Watch::Waiting) => continue,
                // The writer's data (or end of file) waits in the read end roost holds.
                libc::EINTR if stopped(Watch::WriterCame) => {
                    break read_end.try_clone().map_err(|_| libc::EMFILE)
                }
                libc::EINTR if stopped(Watch::Signalled) => {
                    break Err(abandoned(Caller::Signalled))
                }
                libc::EINTR => break Err(abandoned(Caller::Gone)),
                e => break Err(e),
            }
        };
        state.store(Watch::Done as u8, Ordering::Release);
        watcher.thread().unpark();
        opened
    })
}
