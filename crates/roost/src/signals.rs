//! Stop signals (SIGTERM, SIGINT, SIGHUP) turned into something a thread can wait for: the
//! handler writes the signal's number to a pipe (the one thing a handler may safely do),
//! which [`StopSignals::wait`] and [`StopSignals::poll`] read. Handlers are reset by
//! `execve`, so programs started later (jobs, a supervised server) get the default actions.

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

/// The pipe's write end, for the handler.
static WRITE_END: AtomicI32 = AtomicI32::new(-1);

extern "C" fn handler(signal: libc::c_int) {
    let fd = WRITE_END.load(Ordering::Relaxed);
    let byte = signal as u8;
    // SAFETY: write(2) is async-signal-safe; a full pipe just drops the byte (one is enough).
    unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
}

/// The stop signals, caught.
pub struct StopSignals {
    read_end: libc::c_int,
}

impl StopSignals {
    /// Catches SIGTERM, SIGINT and SIGHUP from now on.
    pub fn catch() -> io::Result<StopSignals> {
        let mut fds = [0; 2];
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        WRITE_END.store(fds[1], Ordering::Relaxed);
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = handler as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(StopSignals { read_end: fds[0] })
    }

    /// The signal caught, waiting at most `timeout` for one.
    pub fn poll(&self, timeout: Duration) -> Option<i32> {
        let mut pfd = libc::pollfd {
            fd: self.read_end,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        if unsafe { libc::poll(&mut pfd, 1, ms) } <= 0 {
            return None;
        }
        let mut byte = 0u8;
        let n = unsafe { libc::read(self.read_end, (&mut byte as *mut u8).cast(), 1) };
        (n == 1).then_some(i32::from(byte))
    }

    /// Waits for a stop signal; its number.
    pub fn wait(&self) -> i32 {
        loop {
            if let Some(signal) = self.poll(Duration::from_secs(3600)) {
                return signal;
            }
        }
    }
}
