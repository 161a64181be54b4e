//! The threads that answer notifications. One thread at a time waits in
//! `SECCOMP_IOCTL_NOTIF_RECV` (the *listener*): the kernel wakes every thread waiting
//! there for each notification, so two waiting threads would cost a useless wake-up and
//! a switch on every call. The listener takes a call and answers it; calls on the local
//! file system take microseconds and meanwhile the next caller simply waits. A call that
//! may take long calls [`may_block`] — a Chirp reply not there within a millisecond
//! (`roost_client::receive::when_slow`), a new connection or an HTTP request
//! (`roost_vfs::about_to_block`), a lock that must wait — which hands the listening over
//! to another thread (a parked one, or a new one, up to [`MAX_THREADS`]), so a call
//! stalled on a slow, stopped or cut-off server holds up only its own caller. A thread done with its call goes back to listening
//! if nobody listens, and parks otherwise.

use super::{answer, send, Shared};
use crate::syscalls::Table;
use std::cell::RefCell;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex};

/// The most threads answering notifications at once.
const MAX_THREADS: usize = 32;

pub struct Pool {
    listener: OwnedFd,
    shared: Arc<Shared>,
    state: Mutex<State>,
    /// Parked threads wait here for the listening to be free.
    free: Condvar,
}

struct State {
    /// A thread is in (or on its way into) `NOTIF_RECV`.
    listening: bool,
    threads: usize,
    parked: usize,
    /// The traced processes are gone: every thread ends.
    closed: bool,
}

thread_local! {
    /// The pool this thread answers for (none on other threads).
    static POOL: RefCell<Option<Arc<Pool>>> = const { RefCell::new(None) };
}

/// Called by a notification thread before something that may block for long: makes sure
/// another thread listens meanwhile. Costs a lock when one already does.
pub fn may_block() {
    POOL.with(|p| {
        if let Some(pool) = p.borrow().as_ref() {
            pool.hand_over();
        }
    });
}

/// Whether no process is left with the filter of listener `fd` (the kernel says `POLLHUP`
/// and has no notification waiting).
fn orphaned(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, no wait.
    let ready = unsafe { libc::poll(&mut p, 1, 0) };
    ready == 1 && p.revents & libc::POLLHUP != 0 && p.revents & libc::POLLIN == 0
}

impl Pool {
    /// Starts answering the notifications of `listener` with one thread.
    pub fn start(listener: OwnedFd, shared: Arc<Shared>) {
        let pool = Arc::new(Pool {
            listener,
            shared,
            state: Mutex::new(State {
                listening: false,
                threads: 0,
                parked: 0,
                closed: false,
            }),
            free: Condvar::new(),
        });
        pool.state.lock().expect("pool lock").threads = 1;
        if !Pool::spawn(&pool) {
            panic!("cannot start the notification thread");
        }
    }

    /// Starts a thread (counted in `threads` by the caller); false if none could start.
    fn spawn(pool: &Arc<Pool>) -> bool {
        let me = Arc::clone(pool);
        std::thread::Builder::new()
            .name("roost-notify".into())
            .spawn(move || {
                // A private umask (and cwd) for this thread: opens that create files apply
                // the caller's umask here without touching the rest of roost.
                // SAFETY: unsharing the fs attributes of this thread only.
                if unsafe { libc::unshare(libc::CLONE_FS) } != 0 {
                    eprintln!("roost: cannot unshare the notification thread's umask");
                }
                POOL.with(|p| *p.borrow_mut() = Some(Arc::clone(&me)));
                roost_vfs::before_blocking(may_block);
                me.serve();
                POOL.with(|p| *p.borrow_mut() = None);
            })
            .is_ok()
    }

    /// Lets another thread listen while this one answers a call that may block.
    fn hand_over(self: &Arc<Pool>) {
        let mut st = self.state.lock().expect("pool lock");
        if st.listening || st.closed {
            return;
        }
        if st.parked > 0 {
            self.free.notify_one();
        } else if st.threads < MAX_THREADS {
            st.threads += 1;
            if !Pool::spawn(self) {
                st.threads -= 1; // the threads there are go on answering
            }
        }
    }

    /// Waits until this thread may listen; false once the pool is closed.
    fn become_listener(&self) -> bool {
        let mut st = self.state.lock().expect("pool lock");
        while st.listening && !st.closed {
            st.parked += 1;
            st = self.free.wait(st).expect("pool lock");
            st.parked -= 1;
        }
        if st.closed {
            return false;
        }
        st.listening = true;
        true
    }

    fn serve(self: Arc<Pool>) {
        let table = Table::new();
        let fd = self.listener.as_raw_fd();
        while self.become_listener() {
            let req = loop {
                // SAFETY: the kernel fills the plain-data struct.
                let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
                if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) } == 0 {
                    break Some(req);
                }
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // A caller gone before its call was taken, or no process left with the
                    // filter: then every receive fails at once, and none will succeed again.
                    Some(libc::ENOENT) if !orphaned(fd) => continue,
                    _ => break None, // the last traced process is gone
                }
            };
            {
                let mut st = self.state.lock().expect("pool lock");
                st.listening = false;
                if req.is_none() {
                    st.closed = true;
                    self.free.notify_all();
                    return;
                }
            }
            let req = req.expect("checked above");
            let reply = answer(&table, &self.shared, fd, &req);
            send(fd, req.id, reply);
        }
    }
}
