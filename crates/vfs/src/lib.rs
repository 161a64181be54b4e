//! The namespace: the mount table, logical path resolution and the `Driver` interface through
//! which every path operation of a traced program goes. Local files are the first driver.
//!
//! Paths are byte strings (`Vec<u8>`), as the kernel sees them. A *logical* path is what the
//! traced program names; a *physical* path is where a driver finds it. [`Namespace::resolve`]
//! walks a logical path (symlinks and `..` in the logical namespace, results cached) and maps
//! it through the longest matching mount.

mod anchor;
pub mod cache;
pub mod chirp;
mod chirp_direct;
pub mod content_check;
pub mod driver;
pub mod mount;
pub mod mountfile;
mod nodes;
pub mod path;
pub mod resolve;

pub use driver::{Driver, Intent, LocalDriver, OpenFile, OpenMode, ReadAt, Stat, StatFs};
pub use mount::{Mapped, Mount, MountTable, Target};
pub use mountfile::{parse_mount_file, parse_mount_spec, MountContext, MountFileError};
pub use resolve::{KernelProc, LinkTarget, Located, Namespace, ProcLinks, Remote, Resolved};

/// An errno value (positive), as returned by failed operations.
pub type Errno = i32;

thread_local! {
    /// What this thread does before a driver call that may block for long.
    static BEFORE_BLOCKING: std::cell::Cell<Option<fn()>> = const { std::cell::Cell::new(None) };
}

/// Installs `hook`, which this thread calls when a driver call may block for long: before
/// a new connection or an HTTP request, and when a Chirp server's reply has not come within
/// a millisecond ([`roost_client::receive::when_slow`]). The agent's notification threads
/// use it to let another thread take the next calls meanwhile.
pub fn before_blocking(hook: fn()) {
    BEFORE_BLOCKING.with(|h| h.set(Some(hook)));
    roost_client::receive::when_slow(hook);
}

/// Says that this thread is about to do something that may block for long (connect to a
/// server, send an HTTP request): drivers call it.
pub fn about_to_block() {
    BEFORE_BLOCKING.with(|h| {
        if let Some(hook) = h.get() {
            hook()
        }
    });
}

thread_local! {
    /// When the program's call this thread is answering started ([`call_starts`]).
    static CALL_STARTED: std::cell::Cell<Option<std::time::Instant>> =
        const { std::cell::Cell::new(None) };
}

/// Says that this thread starts answering a program's call (the agent calls it as each
/// call comes): what a driver learns from here on is as fresh as anything it could ask
/// again for this call (a write-open's look at the attributes the walk that led to it has
/// just fetched).
pub fn call_starts() {
    CALL_STARTED.with(|c| c.set(Some(std::time::Instant::now())));
}

/// When the call this thread answers started (None outside the agent's calls).
pub(crate) fn call_started() -> Option<std::time::Instant> {
    CALL_STARTED.with(|c| c.get())
}

/// The errno of the last failed libc call.
pub(crate) fn last_errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Lower-case hexadecimal of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
