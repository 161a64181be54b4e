//! Removing whole-file uploads that a server killed mid-transfer left behind.
//!
//! An upload (`putfile`, `putstream`) writes to a hidden file beside its target,
//! `.__acl.put.PID.N`, and renames it into place when complete; a failed upload removes it.
//! Only a server that dies mid-upload leaves one, which no client can see or remove. A new
//! server sweeps the export for them once, in the background, at start.
//!
//! A file counts as left behind if it was last written before this server started and the
//! server that made it is gone: its process no longer exists, or it is this very process id
//! (reused after a restart, as a container's first process always is), or it has not been
//! written for an hour (a live server cuts off a stalled upload long before that).

use crate::export::Export;
use crate::jail::ACL_FILE_NAME;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Older than this, an upload is abandoned whoever made it.
const ABANDONED_AFTER: Duration = Duration::from_secs(3600);

/// Removes every upload left behind in `export` by a server that is gone (see the module
/// comment); `started` is when this server started. Returns how many were removed.
pub fn sweep(export: &Export, started: SystemTime) -> usize {
    let Ok(root) = export.jail().open_path(
        &crate::jail::JailPath::root(),
        libc::O_RDONLY | libc::O_DIRECTORY,
        0,
    ) else {
        return 0;
    };
    let started = started
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let mut removed = 0;
    // An explicit stack: exports can be deeper than a thread's stack allows recursion.
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        let Ok(names) = crate::export::child_names(&dir) else {
            continue;
        };
        for name in names {
            if let Some(pid) = upload_pid(name.as_bytes()) {
                if abandoned(&dir, &name, pid, started) {
                    // SAFETY: a name inside a directory we hold open, not followed.
                    let gone = unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) };
                    removed += usize::from(gone == 0);
                }
            } else if let Ok(Some(sub)) = crate::export::open_subdir(dir.as_fd(), &name) {
                stack.push(sub);
            }
        }
    }
    removed
}

/// The process id in an upload's name, `.__acl.put.PID.N`; `None` for any other name.
fn upload_pid(name: &[u8]) -> Option<i32> {
    let rest = name.strip_prefix(ACL_FILE_NAME)?.strip_prefix(b".put.")?;
    let (pid, n) = std::str::from_utf8(rest).ok()?.split_once('.')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Whether the upload `name` in `dir`, made by process `pid`, was left behind.
fn abandoned(dir: &OwnedFd, name: &CStr, pid: i32, started: i64) -> bool {
    let Ok(st) = crate::export::fstat_at(dir, name) else {
        return false;
    };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return false;
    }
    // A second's margin: times are whole seconds here.
    if st.st_mtime >= started - 1 {
        return false;
    }
    let ours = pid == std::process::id() as i32;
    // SAFETY: signal 0 only asks whether the process exists.
    let maker_gone = unsafe { libc::kill(pid, 0) } != 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    let idle_for = started - st.st_mtime;
    ours || maker_gone || idle_for > ABANDONED_AFTER.as_secs() as i64
}

/// An upload's hidden name as [`Export::begin_put`] makes it.
pub fn upload_name(pid: u32, n: u64) -> CString {
    CString::new(format!(
        "{}.put.{pid}.{n}",
        String::from_utf8_lossy(ACL_FILE_NAME)
    ))
    .expect("no NUL")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::Acl;

    #[test]
    fn upload_names_are_recognised_and_nothing_else() {
        assert_eq!(upload_pid(upload_name(42, 7).as_bytes()), Some(42));
        assert_eq!(upload_pid(b".__acl"), None);
        assert_eq!(upload_pid(b".__acl.put.x.1"), None);
        assert_eq!(upload_pid(b".__acl.put.12"), None);
        assert_eq!(upload_pid(b"notes.put.12.1"), None);
    }

    #[test]
    fn sweeps_what_dead_servers_left_and_keeps_the_rest() {
        let dir = crate::jail::tempdir::TempDir::new();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        let old = |path: &std::path::Path| {
            std::fs::write(path, b"partial").unwrap();
            let f = std::fs::File::options().write(true).open(path).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(120))
                .unwrap();
        };
        // A dead server's (no process has an id above the largest pid_max, 2^22), this
        // process id reused, and a live process's upload written just now.
        let dead = root.join("a/b").join(".__acl.put.4194305.3");
        old(&dead);
        let reused = root.join(upload_name(std::process::id(), 9).to_str().unwrap());
        old(&reused);
        let live = root.join("a").join(".__acl.put.1.1");
        std::fs::write(&live, b"in progress").unwrap();
        let keep = root.join("a/b/data.put.1.1");
        old(&keep);
        let export = Export::new(root, Acl::default()).unwrap();
        assert_eq!(sweep(&export, SystemTime::now()), 2);
        assert!(!dead.exists() && !reused.exists());
        assert!(live.exists() && keep.exists());
    }
}
