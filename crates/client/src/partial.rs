//! Local files written under a temporary name and renamed into place only when complete, so
//! that an interrupted or failed download never leaves a truncated file under the final
//! name, nor destroys the file it would have replaced.
//!
//! The temporary (`.NAME.roost-PID-N`, beside NAME, so the rename stays on one file system)
//! is removed when a [`PartialFile`] is dropped uncommitted, and also when a stop signal ends
//! the process: every temporary is listed in a fixed table of atomic slots that
//! [`remove_registered`] empties with nothing but atomic swaps and `unlink`/`rmdir`, which a
//! signal handler may call ([`remove_on_signals`] installs one). Whoever swaps a slot's path
//! out owns it, so the handler and the owner never both use one.

use std::ffi::{c_char, CString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Temporaries that can be registered at once; more are still removed on error and on drop,
/// just not by a signal.
const SLOTS: usize = 256;

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: AtomicPtr<c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Registered paths, as leaked C strings whose first byte says what to do: `f` unlink, `d`
/// rmdir.
static TABLE: [AtomicPtr<c_char>; SLOTS] = [EMPTY; SLOTS];

/// Numbers temporaries within this process.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A path listed for removal by a signal, until it is dropped.
pub struct Registered {
    slot: Option<usize>,
}

impl Registered {
    /// Lists `path`, a file (`dir` false) or an empty directory, for removal by a signal.
    pub fn new(path: &Path, dir: bool) -> Registered {
        let mut bytes = vec![if dir { b'd' } else { b'f' }];
        bytes.extend_from_slice(path.as_os_str().as_bytes());
        let Ok(text) = CString::new(bytes) else {
            return Registered { slot: None };
        };
        let raw = text.into_raw();
        for (i, slot) in TABLE.iter().enumerate() {
            if slot
                .compare_exchange(
                    std::ptr::null_mut(),
                    raw,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return Registered { slot: Some(i) };
            }
        }
        // SAFETY: `raw` came from `into_raw` above and was never published.
        drop(unsafe { CString::from_raw(raw) });
        Registered { slot: None }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let raw = TABLE[i].swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !raw.is_null() {
                // SAFETY: the swap made this the only owner of a pointer from `into_raw`.
                drop(unsafe { CString::from_raw(raw) });
            }
        }
    }
}

/// Removes every registered temporary now (files first, then directories). Safe in a signal
/// handler: atomic swaps, `unlink` and `rmdir` only; the strings are left leaked.
pub fn remove_registered() {
    for pass in [b'f', b'd'] {
        for slot in &TABLE {
            let raw = slot.load(Ordering::Acquire);
            // SAFETY: a non-null slot holds a NUL-terminated string of at least its kind byte.
            if raw.is_null() || unsafe { *raw } as u8 != pass {
                continue;
            }
            let raw = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if raw.is_null() {
                continue;
            }
            // SAFETY: the path after the kind byte is NUL-terminated; we own it now.
            unsafe {
                let path = raw.add(1);
                if pass == b'f' {
                    libc::unlink(path);
                } else {
                    libc::rmdir(path);
                }
            }
        }
    }
}

extern "C" fn on_stop(signal: libc::c_int) {
    remove_registered();
    // SA_RESETHAND restored the default action: the signal, delivered again once this
    // handler returns, ends the process as it would have.
    // SAFETY: raise is async-signal-safe and takes no pointers.
    unsafe { libc::raise(signal) };
}

/// From now on, SIGINT, SIGTERM and SIGHUP remove the registered temporaries, then end the
/// process as they would have.
pub fn remove_on_signals() -> io::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a handler that only does async-signal-safe work.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
        // SAFETY: a filled sigaction, and no old action asked for.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A file being written for `target`: under a temporary name until [`PartialFile::commit`].
pub struct PartialFile {
    file: File,
    /// The temporary, or `None` when the target is written in place (see [`PartialFile::create`]).
    temporary: Option<(PathBuf, Registered)>,
    target: PathBuf,
}

impl PartialFile {
    /// Creates the temporary for `target` (mode 0666 less the umask, as `File::create`).
    /// A target that exists and is not a regular file (`/dev/null`, a FIFO) is written in
    /// place, as is one whose directory does not let us create the temporary; a symbolic
    /// link's target is replaced, not the link.
    pub fn create(target: &Path) -> io::Result<PartialFile> {
        let target = match std::fs::symlink_metadata(target) {
            Ok(m) if m.file_type().is_symlink() => {
                std::fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf())
            }
            _ => target.to_path_buf(),
        };
        let in_place = std::fs::metadata(&target).is_ok_and(|m| !m.is_file());
        if !in_place {
            let name = target.file_name().unwrap_or_default().as_bytes();
            let mut tmp = b".".to_vec();
            tmp.extend_from_slice(name);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            tmp.extend_from_slice(format!(".roost-{}-{n}", std::process::id()).as_bytes());
            let tmp = target.with_file_name(std::ffi::OsStr::from_bytes(&tmp));
            let registered = Registered::new(&tmp, false);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .open(&tmp)
            {
                Ok(file) => {
                    return Ok(PartialFile {
                        file,
                        temporary: Some((tmp, registered)),
                        target,
                    })
                }
                Err(e)
                    if !matches!(
                        e.raw_os_error(),
                        Some(libc::EACCES | libc::EPERM | libc::EROFS)
                    ) =>
                {
                    return Err(e)
                }
                Err(_) => {}
            }
        }
        Ok(PartialFile {
            file: File::create(&target)?,
            temporary: None,
            target,
        })
    }

    /// The file to write.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// The name the file will have.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Gives the complete file its name.
    pub fn commit(mut self) -> io::Result<()> {
        if let Some((tmp, _)) = &self.temporary {
            std::fs::rename(tmp, &self.target)?;
        }
        // Renamed: nothing left to remove.
        self.temporary = None;
        Ok(())
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if let Some((tmp, _)) = self.temporary.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Mutex;

    /// The table is the process's: a test that empties it must not run beside the others.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    fn alone() -> std::sync::MutexGuard<'static, ()> {
        ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_target_appears_only_when_committed() {
        let _alone = alone();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        std::fs::write(&target, b"old").unwrap();
        let mut p = PartialFile::create(&target).unwrap();
        p.file().write_all(b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        assert_eq!(names(dir.path()).len(), 2);
        p.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(names(dir.path()), vec!["out"]);
    }

    #[test]
    fn dropped_uncommitted_leaves_the_old_file() {
        let _alone = alone();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        std::fs::write(&target, b"old").unwrap();
        let mut p = PartialFile::create(&target).unwrap();
        p.file().write_all(b"half").unwrap();
        drop(p);
        assert_eq!(names(dir.path()), vec!["out"]);
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
    }

    #[test]
    fn registered_temporaries_are_removed_on_demand() {
        let _alone = alone();
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("scratch");
        std::fs::create_dir(&sub).unwrap();
        let _d = Registered::new(&sub, true);
        let mut p = PartialFile::create(&sub.join("x")).unwrap();
        p.file().write_all(b"data").unwrap();
        remove_registered();
        assert_eq!(names(dir.path()), Vec::<String>::new());
        drop(p);
    }

    #[test]
    fn devices_are_written_in_place() {
        let _alone = alone();
        let mut p = PartialFile::create(Path::new("/dev/null")).unwrap();
        p.file().write_all(b"gone").unwrap();
        assert!(p.temporary.is_none());
        p.commit().unwrap();
    }
}
