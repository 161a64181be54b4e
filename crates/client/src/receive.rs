//! Waiting for a reply: poll the socket for a short while before going to sleep.
//!
//! A client reads only when it waits for an answer it has just asked for. Sleeping in
//! `recv` and being woken when the answer lands costs a wake-up of an idle CPU: on the
//! project's VM a loopback round trip takes 55 µs that way and 19 µs when the waiting side
//! polls (`bench/remote/micro.sh` measures the effect on whole RPCs). So a read first polls
//! with `MSG_DONTWAIT` for up to the spin budget, then blocks as before (with the
//! connection's read timeout).
//!
//! Polling is adaptive, so that a server farther away than the budget costs no CPU: a wait
//! that outlasts the budget turns polling off for the next reads, for longer after each
//! further miss (up to [`MAX_REST`] reads); one answer that arrives within the budget turns
//! it back on. The policy ([`Spin`]) serves the server too, which polls for a client's next
//! request the same way (`roost serve --poll-us`).

use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The longest run of reads that block without polling after repeated misses.
const MAX_REST: u32 = 256;

/// The budget given to connections unless `ROOST_SPIN_US` says otherwise.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(100);

/// The spin budget for new connections: `ROOST_SPIN_US` (microseconds, `0` turns polling
/// off), or [`DEFAULT_SPIN`].
pub fn spin_from_env() -> Duration {
    std::env::var("ROOST_SPIN_US")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_SPIN, Duration::from_micros)
}

/// How long a reply may take before the thread's slow-reply hook is called.
pub const SLOW_AFTER: Duration = Duration::from_millis(1);

thread_local! {
    /// What this thread does when a reply is slow in coming ([`when_slow`]).
    static WHEN_SLOW: std::cell::Cell<Option<fn()>> = const { std::cell::Cell::new(None) };
}

/// Installs `hook`, called on this thread when a reply has not come within [`SLOW_AFTER`]
/// (before the thread goes on waiting for it): a thread that answers for others (the
/// agent's notification threads) lets another take over meanwhile. A reply that comes
/// sooner costs one `poll` more.
pub fn when_slow(hook: fn()) {
    WHEN_SLOW.with(|h| h.set(Some(hook)));
}

/// Waits up to [`SLOW_AFTER`] for `fd` to be readable; calls the thread's slow-reply
/// hook if it is not.
fn wait_or_say_slow(fd: i32) {
    let Some(hook) = WHEN_SLOW.with(|h| h.get()) else {
        return;
    };
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut pfd, 1, SLOW_AFTER.as_millis() as i32) };
    if ready == 0 {
        hook();
    }
}

/// Adaptive polling: polls for up to a budget before the caller blocks, and after a poll
/// that found nothing in time lets that many more reads block without polling (twice as
/// many after each further miss, up to [`MAX_REST`]); a poll that finds data resets it.
pub struct Spin {
    budget: Duration,
    /// Reads left to make without polling, and how many to rest after the next miss.
    resting: u32,
    rest_after_miss: u32,
}

impl Spin {
    /// Polls for up to `budget` (zero: never).
    pub fn new(budget: Duration) -> Spin {
        Spin {
            budget,
            resting: 0,
            rest_after_miss: 1,
        }
    }

    /// Calls `try_now` (one attempt that does not block: `None` when there is nothing yet)
    /// until it has an outcome or the budget is spent, unless resting. `None`: the caller
    /// blocks for the data.
    pub fn poll<T>(
        &mut self,
        mut try_now: impl FnMut() -> Option<io::Result<T>>,
    ) -> Option<io::Result<T>> {
        if self.budget.is_zero() {
            return None;
        }
        if self.resting > 0 {
            self.resting -= 1;
            if self.resting == 0 {
                // Try polling again on the next read; a miss then rests twice as long.
                self.rest_after_miss = (self.rest_after_miss * 2).min(MAX_REST);
            }
            return None;
        }
        let start = Instant::now();
        loop {
            if let Some(done) = try_now() {
                self.rest_after_miss = 1;
                return Some(done);
            }
            if start.elapsed() >= self.budget {
                self.resting = self.rest_after_miss;
                return None;
            }
            // The other side may have been woken on this very CPU (a wake-up favours the
            // waker's): give it the CPU rather than spin in front of it.
            // SAFETY: no arguments; it cannot fail on Linux.
            unsafe { libc::sched_yield() };
        }
    }
}

/// One `recv` of what socket `fd` holds into the `len` bytes at `to`, without waiting:
/// `None` when it holds nothing yet.
///
/// # Safety
///
/// `to` must be valid for writes of `len` bytes (they need not be initialized: only what
/// the kernel reports written is).
pub unsafe fn recv_now(fd: i32, to: *mut u8, len: usize) -> Option<io::Result<usize>> {
    loop {
        // SAFETY: the caller's promise; `fd` is the caller's socket.
        let n = unsafe { libc::recv(fd, to.cast(), len, libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Some(Ok(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return None,
            io::ErrorKind::Interrupted => continue,
            _ => return Some(Err(e)),
        }
    }
}

/// The receiving half of a connection.
pub struct Receiver {
    stream: TcpStream,
    spin: Spin,
}

impl Receiver {
    /// Reads from `stream`, polling for up to `budget` first (zero: never poll).
    pub fn new(stream: TcpStream, budget: Duration) -> Receiver {
        Receiver {
            stream,
            spin: Spin::new(budget),
        }
    }
}

impl Read for Receiver {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let fd = self.stream.as_raw_fd();
        if !buf.is_empty() {
            let (at, len) = (buf.as_mut_ptr(), buf.len());
            // SAFETY: `buf` is valid for writes of its length.
            if let Some(done) = self.spin.poll(|| unsafe { recv_now(fd, at, len) }) {
                return done;
            }
        }
        wait_or_say_slow(fd);
        self.stream.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (b, _) = listener.accept().unwrap();
        (a, b)
    }

    #[test]
    fn data_already_there_is_read_by_polling() {
        let (a, mut b) = pair();
        b.write_all(b"hello").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let mut r = Receiver::new(a, Duration::from_millis(50));
        let mut buf = [0u8; 16];
        assert_eq!(r.read(&mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        assert_eq!(r.spin.resting, 0);
    }

    #[test]
    fn a_late_answer_is_still_read_and_polling_rests_longer_after_each_miss() {
        let (a, mut b) = pair();
        let mut r = Receiver::new(a, Duration::from_micros(50));
        let mut buf = [0u8; 16];
        let mut expected_rest = 1;
        for round in 0..3 {
            let writer = std::thread::spawn({
                let mut b = b.try_clone().unwrap();
                move || {
                    std::thread::sleep(Duration::from_millis(30));
                    b.write_all(b"late").unwrap();
                }
            });
            assert_eq!(r.read(&mut buf).unwrap(), 4, "round {round}");
            writer.join().unwrap();
            assert_eq!(r.spin.resting, expected_rest, "round {round}");
            // Rest: these reads block without polling, then polling is tried again.
            for _ in 0..expected_rest {
                b.write_all(b"x").unwrap();
                assert_eq!(r.read(&mut buf).unwrap(), 1);
            }
            assert_eq!(r.spin.resting, 0);
            expected_rest *= 2;
        }
        // An answer within the budget: polling is back on at full strength.
        b.write_all(b"now").unwrap();
        std::thread::sleep(Duration::from_millis(10));
        assert_eq!(r.read(&mut buf).unwrap(), 3);
        assert_eq!(r.spin.rest_after_miss, 1);
    }

    #[test]
    fn a_closed_peer_reads_as_end_of_file_and_a_zero_budget_never_polls() {
        let (a, b) = pair();
        drop(b);
        let mut r = Receiver::new(a, Duration::ZERO);
        let mut buf = [0u8; 4];
        assert_eq!(r.read(&mut buf).unwrap(), 0);
        assert_eq!(r.spin.resting, 0);
    }

    #[test]
    fn a_slow_reply_calls_the_threads_hook_and_a_quick_one_does_not() {
        static CALLED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        fn hook() {
            CALLED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let (a, mut b) = pair();
        when_slow(hook);
        let mut r = Receiver::new(a, Duration::ZERO);
        let mut buf = [0u8; 8];
        b.write_all(b"quick").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(r.read(&mut buf).unwrap(), 5);
        assert_eq!(CALLED.load(std::sync::atomic::Ordering::Relaxed), 0);
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            b.write_all(b"slow").unwrap();
        });
        assert_eq!(r.read(&mut buf).unwrap(), 4);
        writer.join().unwrap();
        assert_eq!(CALLED.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[test]
    fn the_read_timeout_still_holds_after_polling() {
        let (a, _b) = pair();
        a.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut r = Receiver::new(a, Duration::from_micros(100));
        let start = Instant::now();
        let err = r.read(&mut [0u8; 4]).unwrap_err();
        assert!(matches!(
            err.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ));
        assert!(start.elapsed() < Duration::from_secs(2));
    }
}
