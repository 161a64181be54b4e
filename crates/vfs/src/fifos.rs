//! FIFOs made on a remote mount. A Chirp server holds files, directories and symlinks
//! only, and a FIFO is a meeting point of local processes anyway (on NFS too, the server
//! keeps the name and each client's kernel the pipe). So a FIFO made under a remote path is
//! a local FIFO in the agent's private directory, known by its server and path for the
//! run's life: stat, listings, opens, chmod, times, rename and unlink of that name act on
//! it, and every process of the run that opens the name meets the others there. Other runs
//! and other hosts do not see it.

use crate::{Errno, LocalDriver, Stat};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// A FIFO's name: the server (its `host:port`) and the path on it.
type Name = (String, Vec<u8>);

/// The run's FIFOs on remote mounts.
#[derive(Default)]
pub struct Fifos {
    /// Whether any was ever made (so the lookups of a run that makes none cost nothing).
    any: AtomicBool,
    next: AtomicU64,
    by_name: Mutex<HashMap<Name, PathBuf>>,
}

impl Fifos {
    /// Whether the run ever made one.
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// The local FIFO standing for `path` on `server`.
    pub fn local(&self, server: &str, path: &[u8]) -> Option<PathBuf> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let names = self.by_name.lock().expect("fifos lock");
        names.get(&(server.to_string(), path.to_vec())).cloned()
    }

    /// Its attributes: the local FIFO's.
    pub fn stat(&self, server: &str, path: &[u8]) -> Option<Result<Stat, Errno>> {
        let local = self.local(server, path)?;
        Some(crate::Driver::lstat(&LocalDriver, local.as_os_str().as_bytes()))
    }

    /// Makes a FIFO for `path` on `server` in directory `dir` with permission bits `mode`
    /// exactly (the caller's umask was applied already).
    pub fn make(&self, dir: &Path, server: &str, path: &[u8], mode: u32) -> Result<(), Errno> {
        let mut names = self.by_name.lock().expect("fifos lock");
        let name = (server.to_string(), path.to_vec());
        if names.contains_key(&name) {
            return Err(libc::EEXIST);
        }
        let local = dir.join(self.next.fetch_add(1, Ordering::Relaxed).to_string());
        let c = std::ffi::CString::new(local.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
        // SAFETY: valid C strings; a FIFO in roost's own directory.
        unsafe {
            if libc::mkfifo(c.as_ptr(), 0o600) < 0 || libc::chmod(c.as_ptr(), mode & 0o7777) < 0 {
                let e = crate::last_errno();
                libc::unlink(c.as_ptr());
                return Err(e);
            }
        }
        names.insert(name, local);
        self.any.store(true, Ordering::Release);
        Ok(())
    }

    /// Forgets the FIFO of `path` (unlink): whether there was one.
    pub fn remove(&self, server: &str, path: &[u8]) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        let mut names = self.by_name.lock().expect("fifos lock");
        match names.remove(&(server.to_string(), path.to_vec())) {
            Some(local) => {
                let _ = std::fs::remove_file(local);
                true
            }
            None => false,
        }
    }

    /// Gives the FIFO of `from` the name `to` (rename), replacing any FIFO there: whether
    /// `from` was one.
    pub fn rename(&self, server: &str, from: &[u8], to: &[u8]) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        let mut names = self.by_name.lock().expect("fifos lock");
        let Some(local) = names.remove(&(server.to_string(), from.to_vec())) else {
            return false;
        };
        if let Some(old) = names.insert((server.to_string(), to.to_vec()), local) {
            let _ = std::fs::remove_file(old);
        }
        true
    }

    /// The FIFOs directly in directory `dir` of `server`: each one's name there and its
    /// local FIFO.
    pub fn in_dir(&self, server: &str, dir: &[u8]) -> Vec<(Vec<u8>, PathBuf)> {
        if !self.any.load(Ordering::Acquire) {
            return Vec::new();
        }
        let names = self.by_name.lock().expect("fifos lock");
        names
            .iter()
            .filter(|((s, p), _)| s == server && crate::path::parent(p) == dir)
            .map(|((_, p), local)| (crate::path::components(p).next_back().unwrap_or_default().to_vec(), local.clone()))
            .collect()
    }
}
