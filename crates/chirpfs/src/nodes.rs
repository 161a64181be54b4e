//! FIFOs and AF_UNIX sockets made on a remote mount. A Chirp server holds files,
//! directories and symlinks only, and a FIFO or a socket is a meeting point of local
//! processes anyway (on NFS too, the server keeps the name and each client's kernel the
//! pipe or the socket). So one made under a remote path is a local node in the agent's
//! private directory, known by its server and path for the run's life: stat, listings,
//! opens, connects, chmod, times, rename and unlink of that name act on it, and every
//! process of the run that opens or connects to the name meets the others there. Other
//! runs and other hosts do not see it.

use roost_vfs::{Errno, LocalDriver, Stat};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// A node's name: the server (its `host:port`) and the path on it.
type Name = (String, Vec<u8>);

/// The run's FIFOs and sockets on remote mounts.
#[derive(Default)]
pub struct Nodes {
    /// Whether any was ever made (so the lookups of a run that makes none cost nothing).
    any: AtomicBool,
    next: AtomicU64,
    by_name: Mutex<HashMap<Name, PathBuf>>,
}

impl Nodes {
    /// Whether the run ever made one.
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// The local node standing for `path` on `server` (none for a socket's name reserved
    /// by a bind that has not made it, or failed).
    pub fn local(&self, server: &str, path: &[u8]) -> Option<PathBuf> {
        self.stat(server, path).map(|(local, _)| local)
    }

    /// The local node of `path` on `server` and its attributes.
    pub fn stat(&self, server: &str, path: &[u8]) -> Option<(PathBuf, Stat)> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let local = {
            let names = self.by_name.lock().expect("nodes lock");
            names.get(&(server.to_string(), path.to_vec())).cloned()?
        };
        let st = roost_vfs::Driver::lstat(&LocalDriver, local.as_os_str().as_bytes()).ok()?;
        Some((local, st))
    }

    /// A local name for a socket `bind` is to make for `path` on `server` (the kernel makes
    /// it there, as the program's call goes on with that name): EADDRINUSE when the run has
    /// a node there already.
    pub fn reserve(&self, dir: &Path, server: &str, path: &[u8]) -> Result<PathBuf, Errno> {
        let mut names = self.by_name.lock().expect("nodes lock");
        let name = (server.to_string(), path.to_vec());
        if let Some(local) = names.get(&name) {
            if std::fs::symlink_metadata(local).is_ok() {
                return Err(libc::EADDRINUSE);
            }
            return Ok(local.clone());
        }
        let local = dir.join(self.next.fetch_add(1, Ordering::Relaxed).to_string());
        names.insert(name, local.clone());
        self.any.store(true, Ordering::Release);
        Ok(local)
    }

    /// Makes a FIFO for `path` on `server` in directory `dir` with permission bits `mode`
    /// exactly (the caller's umask was applied already).
    pub fn make(&self, dir: &Path, server: &str, path: &[u8], mode: u32) -> Result<(), Errno> {
        let mut names = self.by_name.lock().expect("nodes lock");
        let name = (server.to_string(), path.to_vec());
        if names
            .get(&name)
            .is_some_and(|l| std::fs::symlink_metadata(l).is_ok())
        {
            return Err(libc::EEXIST);
        }
        let local = dir.join(self.next.fetch_add(1, Ordering::Relaxed).to_string());
        let c = std::ffi::CString::new(local.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
        // SAFETY: valid C strings; a FIFO in roost's own directory.
        unsafe {
            if libc::mkfifo(c.as_ptr(), 0o600) < 0 || libc::chmod(c.as_ptr(), mode & 0o7777) < 0 {
                let e = roost_base::last_errno();
                libc::unlink(c.as_ptr());
                return Err(e);
            }
        }
        names.insert(name, local);
        self.any.store(true, Ordering::Release);
        Ok(())
    }

    /// Forgets the node of `path` (unlink): whether there was one.
    pub fn remove(&self, server: &str, path: &[u8]) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        let mut names = self.by_name.lock().expect("nodes lock");
        match names.remove(&(server.to_string(), path.to_vec())) {
            Some(local) => std::fs::remove_file(local).is_ok(),
            None => false,
        }
    }

    /// Gives the node of `from` the name `to` (rename), replacing any node there: whether
    /// `from` was one.
    pub fn rename(&self, server: &str, from: &[u8], to: &[u8]) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        let mut names = self.by_name.lock().expect("nodes lock");
        let Some(local) = names.remove(&(server.to_string(), from.to_vec())) else {
            return false;
        };
        if let Some(old) = names.insert((server.to_string(), to.to_vec()), local) {
            let _ = std::fs::remove_file(old);
        }
        true
    }

    /// The nodes directly in directory `dir` of `server`: each one's name there, its local
    /// node and its type (`S_IFMT` bits).
    pub fn in_dir(&self, server: &str, dir: &[u8]) -> Vec<(Vec<u8>, PathBuf, u32)> {
        if !self.any.load(Ordering::Acquire) {
            return Vec::new();
        }
        let names = self.by_name.lock().expect("nodes lock");
        names
            .iter()
            .filter(|((s, p), _)| s == server && roost_vfs::path::parent(p) == dir)
            .filter_map(|((_, p), local)| {
                let kind = std::fs::symlink_metadata(local).ok()?.mode() & libc::S_IFMT;
                let name = roost_vfs::path::components(p).next_back()?.to_vec();
                Some((name, local.clone(), kind))
            })
            .collect()
    }
}
