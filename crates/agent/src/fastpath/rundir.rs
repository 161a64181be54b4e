//! The directory that holds a run's fast-path files (the object, its table, the preload
//! list): made at the start of the run, removed at its end, and locked between, so that a
//! later run can tell a directory whose run was killed (`SIGKILL` leaves it behind) and
//! remove it. The lock is an `flock` on the directory's `lock` file, which the kernel drops
//! with the last descriptor of the run that holds it, whatever pid namespace the runs are
//! in; directories without a `lock` file (written by a roost before this one) are left.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What every run directory's name starts with.
const PREFIX: &str = "roost-fastpath-";
/// The file a live run holds locked.
const LOCK: &str = "lock";
/// A directory younger than this is never removed: its run may not hold its lock yet.
const YOUNGEST_SWEPT: Duration = Duration::from_secs(60);

/// A run's directory, locked while this value lives.
pub struct RunDir {
    pub path: PathBuf,
    /// Holds the lock (closing it releases it).
    _lock: std::fs::File,
}

impl RunDir {
    /// A new directory of the run's own, readable by whatever user a program becomes: in
    /// `$XDG_RUNTIME_DIR`, or the temporary directory when that is unset or not ours to
    /// write. `random` names it apart from other runs of this process id.
    pub fn make(random: u32) -> io::Result<RunDir> {
        let name = format!("{PREFIX}{}-{random:08x}", std::process::id());
        let mut last = io::Error::other("no directory for the run's files");
        for base in bases() {
            let dir = base.join(&name);
            match std::fs::create_dir(&dir) {
                Ok(()) => match lock(&dir) {
                    Ok(lock) => {
                        return Ok(RunDir {
                            path: dir,
                            _lock: lock,
                        })
                    }
                    Err(e) => {
                        let _ = std::fs::remove_dir_all(&dir);
                        return Err(e);
                    }
                },
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

/// Where run directories are made, canonical: `$XDG_RUNTIME_DIR` first when set.
fn bases() -> Vec<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    runtime
        .into_iter()
        .chain([std::env::temp_dir()])
        .filter_map(|base| std::fs::canonicalize(base).ok())
        .collect()
}

/// Sets `dir`'s mode (the umask may have taken bits the programs need) and makes and locks
/// its `lock` file. A sweep that found the directory unlocked and old (the clock moved, or
/// this process stopped between the two steps) may have removed it meanwhile: then the lock
/// is on a file no longer linked, and the run has no directory.
fn lock(dir: &Path) -> io::Result<std::fs::File> {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(dir.join(LOCK))?;
    flock(&file, libc::LOCK_EX)?;
    if file.metadata()?.nlink() == 0 {
        return Err(io::Error::other(
            "the run's directory was removed as it was made",
        ));
    }
    Ok(file)
}

fn flock(file: &std::fs::File, how: libc::c_int) -> io::Result<()> {
    // SAFETY: flock on a descriptor this File owns.
    if unsafe { libc::flock(file.as_raw_fd(), how) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Removes the run directories of this user's runs that were killed: a minute old or more,
/// their `lock` file there and held by no one.
pub fn sweep() {
    let now = SystemTime::now();
    // SAFETY: a plain id query.
    let me = unsafe { libc::geteuid() };
    for base in bases() {
        let Ok(entries) = std::fs::read_dir(&base) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !name.as_encoded_bytes().starts_with(PREFIX.as_bytes()) {
                continue;
            }
            let dir = base.join(&name);
            if let Some(_held) = abandoned(&dir, me, now) {
                // Removed while its lock is held, so no other sweep takes it meanwhile.
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
}

/// The lock of run directory `dir`, taken, when the directory is `me`'s, old enough, and
/// its lock free: the caller removes the directory while it holds the lock.
fn abandoned(dir: &Path, me: u32, now: SystemTime) -> Option<std::fs::File> {
    let meta = std::fs::symlink_metadata(dir).ok()?;
    let old = meta
        .modified()
        .ok()
        .and_then(|m| now.duration_since(m).ok())
        .is_some_and(|age| age >= YOUNGEST_SWEPT);
    if !meta.is_dir() || meta.uid() != me || !old {
        return None;
    }
    // Not through a symlink, and never waiting on a FIFO put there.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(dir.join(OsStr::new(LOCK)))
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    flock(&file, libc::LOCK_EX | libc::LOCK_NB).ok()?;
    Some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets `path`'s times `age` into the past.
    fn age(path: &Path, age: Duration) {
        let then = SystemTime::now() - age;
        let f = std::fs::File::open(path).unwrap();
        f.set_modified(then).unwrap();
    }

    #[test]
    fn a_killed_runs_directory_is_swept_and_a_live_ones_is_not() {
        let live = RunDir::make(0x5eed_0001).unwrap();
        let RunDir {
            path: dead_path,
            _lock,
        } = RunDir::make(0x5eed_0002).unwrap();
        drop(_lock); // as a killed run's descriptors are closed
        let base = live.path.parent().unwrap();
        let young = base.join(format!("{PREFIX}young-{}", std::process::id()));
        std::fs::create_dir(&young).unwrap();
        std::fs::File::create(young.join(LOCK)).unwrap();
        let unlocked_old = base.join(format!("{PREFIX}old-{}", std::process::id()));
        std::fs::create_dir(&unlocked_old).unwrap();
        for dir in [&live.path, &dead_path, &unlocked_old] {
            age(dir, Duration::from_secs(120));
        }
        sweep();
        assert!(live.path.exists(), "a live run's directory went");
        assert!(!dead_path.exists(), "a killed run's directory stayed");
        assert!(young.exists(), "a directory younger than a minute went");
        assert!(
            unlocked_old.exists(),
            "a directory without a lock file went"
        );
        for dir in [&live.path, &young, &unlocked_old] {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }
}
