//! The namespace: the mount table, logical path resolution and the `Driver` interface through
//! which every path operation of a traced program goes. Local files are the first driver.
//!
//! Paths are byte strings (`Vec<u8>`), as the kernel sees them. A *logical* path is what the
//! traced program names; a *physical* path is where a driver finds it. [`Namespace::resolve`]
//! walks a logical path (symlinks and `..` in the logical namespace, results cached) and maps
//! it through the longest matching mount.

// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

mod anchor;
pub mod cache;
pub mod driver;
pub mod mount;
pub mod mountfile;
pub mod path;
pub mod registry;
pub mod resolve;

pub use driver::{Driver, Intent, LocalDriver, OpenFile, OpenMode, ReadAt, Stat, StatFs};
pub use mount::{Mapped, Mount, MountTable, Target};
pub use mountfile::{parse_mount_file, parse_mount_spec, MountContext, MountFileError};
pub use registry::{Registry, Scheme};
pub use resolve::{KernelProc, LinkTarget, Located, Namespace, ProcLinks, Remote, Resolved};

/// An errno value (positive), as returned by failed operations.
pub type Errno = i32;

thread_local! {
    /// What this thread does before a driver call that may block for long.
    static BEFORE_BLOCKING: std::cell::Cell<Option<fn()>> = const { std::cell::Cell::new(None) };
}

/// Installs a hook somewhere else on the calling thread ([`also_before_blocking`]).
type Installer = fn(fn());

/// What else [`before_blocking`] installs its hook into.
static ALSO_INSTALL: std::sync::Mutex<Vec<Installer>> = std::sync::Mutex::new(Vec::new());

/// Installs `hook`, which this thread calls when a driver call may block for long: before
/// a new connection or an HTTP request, and wherever a driver's library waits on its own
/// (a Chirp server's reply that has not come within a millisecond: see
/// [`also_before_blocking`]). The agent's notification threads use it to let another
/// thread take the next calls meanwhile.
pub fn before_blocking(hook: fn()) {
    BEFORE_BLOCKING.with(|h| h.set(Some(hook)));
    let also = ALSO_INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    for install in also.iter() {
        install(hook);
    }
}

/// Has [`before_blocking`] call `install` with its hook from then on, on the thread it is
/// called on: for a driver whose library waits for replies on its own (the Chirp client's
/// `receive::when_slow`). A driver calls it once, when it is made (before the agent's
/// threads start).
pub fn also_before_blocking(install: Installer) {
    ALSO_INSTALL
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(install);
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
pub fn call_started() -> Option<std::time::Instant> {
    CALL_STARTED.with(|c| c.get())
}

/// Lower-case hexadecimal of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
