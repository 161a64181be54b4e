//! An exclusive lock on a file that belongs to one server (its job directory's lock file, its
//! ledger), so that a second server given the same one refuses to start instead of sharing it.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Locks `file` (`flock`, not waiting) for as long as it stays open; a file another process
/// holds is an `AddrInUse` error saying `another server is using WHAT`.
pub fn hold(file: &File, what: &str) -> io::Result<()> {
    // SAFETY: a descriptor borrowed from `file` for the call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    Err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("another server is using {what}"),
        )
    } else {
        e
    })
}
