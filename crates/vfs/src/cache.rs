//! The local side of remote files: a content cache shared by every agent of a user, each
//! agent's private mirror of the remote trees it touched, and the write-back of files a
//! program wrote.
//!
//! - **Objects** (`DIR/objects/KEY/VERSION`): whole remote files, keyed by a hash of
//!   (server, path) and named by the version the server reported (inode, size, mtime), so a
//!   stale copy is never found: a changed file has another name. Filled through a temporary
//!   name and renamed into place, so concurrent agents share entries safely; the total size
//!   is held under a bound by evicting the least recently used.
//! - **Mirror** (`DIR/agents/PID.N/` + driver path): what the program's descriptors and
//!   working directory point at. A file read is a hard link to its object; a directory is a
//!   directory holding one placeholder per remote entry (for `getdents`); a file opened for
//!   writing is a private copy. Removed when the agent ends.
//! - **Write-back**: a written copy is watched with inotify; when its last descriptor is
//!   closed (`IN_CLOSE_WRITE`) it is sent back to the server (open-to-close consistency, as
//!   AFS). [`Cache::flush`] sends what is pending; drivers call it before each operation,
//!   so a program never reads an older version of a file it has closed.

mod blocks;
pub mod shown;

pub use blocks::BlockCopy;

use crate::Errno;
use roost_base::errno_of;
use sha2::Digest;
use std::collections::HashMap;
use std::fs::File;
use std::io::{Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The default bound on the objects' total size.
pub const DEFAULT_LIMIT: u64 = 4 << 30;

/// The version of a remote file a cached copy holds: a changed file has another version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub ino: u64,
    pub size: u64,
    pub mtime: i64,
}

impl Version {
    fn name(&self) -> String {
        format!("{}-{}-{}", self.ino, self.size, self.mtime)
    }
}

/// Where a written file goes back: the driver's side of a write-back.
pub trait Destination: Send + Sync {
    /// Sends `file` as the whole of the object at driver path `path`; returns the object's
    /// cache key and the version the server now holds.
    fn send(&self, path: &[u8], file: &mut File) -> Result<(String, Version), Errno>;
    /// Appends what `file` holds from `from` on to the object at `path` as it now is.
    fn append(&self, path: &[u8], file: &mut File, from: u64) -> Result<(), Errno>;
    /// The object's name for messages (`chirp://host:port/path`).
    fn name(&self, path: &[u8]) -> String;
}

/// A written copy waiting for its close.
struct Pending {
    /// The driver path it goes back to (renames and unlinks made meanwhile follow it).
    path: Vec<u8>,
    /// The copy, opened for reading (the mirror name may be replaced meanwhile).
    file: File,
    to: Box<dyn Destination>,
    /// Opened to append: its length when made. What the program adds past it goes back
    /// as an append (unless it cut the copy shorter: then the whole copy goes back).
    appends_from: Option<u64>,
    /// The size and modification time it had when last sent back (`None`: never sent).
    sent: Option<(u64, i64, i64)>,
}

/// What says a copy changed since it was sent back: its size and modification time.
fn sent_state(file: &File) -> Option<(u64, i64, i64)> {
    let meta = file.metadata().ok()?;
    Some((meta.len(), meta.mtime(), meta.mtime_nsec()))
}

/// The write-back state: the inotify instance and what each watch stands for.
struct WriteBack {
    inotify: OwnedFd,
    pending: HashMap<i32, Pending>,
}

/// The cache and mirror of one agent.
pub struct Cache {
    objects: PathBuf,
    mirror: PathBuf,
    mirror_bytes: Vec<u8>,
    limit: u64,
    /// The objects' total size as last counted, plus what this agent added since.
    used: AtomicU64,
    /// Made by [`Cache::start`].
    writes: Mutex<Option<WriteBack>>,
    started: std::sync::OnceLock<Result<(), Errno>>,
    /// The mirror directory, open and locked (`flock`) while this agent lives.
    mirror_lock: std::sync::OnceLock<File>,
    /// Held while names of the mirror are changed, so that calls answered at once on
    /// several threads change them one at a time (a listing's placeholders, a shown copy,
    /// a private copy for writing).
    mirror_changes: Mutex<()>,
    /// Cache hits and misses and files written back, for `-v` and `--summary`.
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub written_back: AtomicU64,
    verbose: bool,
}

/// Opens and locks (`flock`, exclusive, without waiting) the directory `dir`; `None` when
/// another process holds it.
fn lock_dir(dir: &Path) -> std::io::Result<Option<File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let d = File::options()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    // SAFETY: a valid descriptor.
    if unsafe { libc::flock(d.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            Ok(None)
        } else {
            Err(e)
        };
    }
    Ok(Some(d))
}

/// Removes the mirrors in `agents` (but `own`) no live agent holds: those of agents that
/// were killed (a mirror holds only copies; what was written went back when closed).
fn remove_abandoned(agents: &Path, own: &Path) {
    let Ok(entries) = std::fs::read_dir(agents) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        // A live agent makes its mirror before it locks it: one whose process is alive
        // is never taken for abandoned, locked or not.
        let pid = e
            .file_name()
            .to_str()
            .and_then(|n| n.split('.').next()?.parse::<i32>().ok());
        let alive = pid.is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if path != own && !alive && matches!(lock_dir(&path), Ok(Some(_))) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Waits for closes of written copies and sends them back, until the cache is dropped.
fn write_back_loop(cache: std::sync::Weak<Cache>, inotify: i32) {
    loop {
        let mut pfd = libc::pollfd {
            fd: inotify,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd (the descriptor lives as long as the cache, checked
        // below); a second's timeout lets the thread notice the cache is gone.
        unsafe { libc::poll(&mut pfd, 1, 1000) };
        match cache.upgrade() {
            Some(cache) => cache.flush(),
            None => return,
        }
    }
}

#[cfg(test)]
fn bytes_path(b: &[u8]) -> &Path {
    Path::new(std::ffi::OsStr::from_bytes(b))
}

impl Cache {
    /// The cache in `dir` with a mirror of this agent's own. Nothing is made on disk
    /// until the first remote file is: a run that reaches no server leaves no trace.
    pub fn new(dir: &Path, limit: u64, verbose: bool) -> Arc<Cache> {
        static AGENTS: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mirror = dir.join("agents").join(format!(
            "{}.{nanos}.{}",
            std::process::id(),
            AGENTS.fetch_add(1, Ordering::Relaxed)
        ));
        Arc::new(Cache {
            mirror_bytes: mirror.as_os_str().as_bytes().to_vec(),
            objects: dir.join("objects"),
            mirror,
            limit,
            used: AtomicU64::new(0),
            writes: Mutex::new(None),
            started: std::sync::OnceLock::new(),
            mirror_lock: std::sync::OnceLock::new(),
            mirror_changes: Mutex::new(()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            written_back: AtomicU64::new(0),
            verbose,
        })
    }

    /// Makes the directories, the inotify instance and the thread that sends closed files
    /// back, once.
    fn start(self: &Arc<Self>) -> Result<(), Errno> {
        *self.started.get_or_init(|| {
            let made = || -> std::io::Result<()> {
                std::fs::create_dir_all(&self.objects)?;
                std::fs::create_dir_all(self.aux().join("once"))?;
                File::create(self.aux().join("empty"))?;
                // Held while this agent lives: a mirror whose lock can be taken belongs to
                // an agent that died without removing it.
                let held = lock_dir(&self.mirror)?.ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::AlreadyExists, "mirror in use")
                })?;
                let _ = self.mirror_lock.set(held);
                if let Some(agents) = self.mirror.parent() {
                    remove_abandoned(agents, &self.mirror);
                }
                // SAFETY: creates a descriptor roost owns.
                let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // SAFETY: a fresh descriptor owned from here on.
                let inotify = unsafe { OwnedFd::from_raw_fd(fd) };
                *self.writes.lock().expect("write-back lock") = Some(WriteBack {
                    inotify,
                    pending: HashMap::new(),
                });
                self.used.store(self.count_objects(), Ordering::Relaxed);
                let weak = Arc::downgrade(self);
                std::thread::Builder::new()
                    .name("roost-writeback".into())
                    .spawn(move || write_back_loop(weak, fd))?;
                Ok(())
            };
            made().map_err(|e| {
                eprintln!("roost: cache {}: {e}", self.mirror.display());
                errno_of(e)
            })
        })
    }

    /// roost's own files in the mirror (copies used once, the placeholders' empty file),
    /// beside the servers' trees: no server is named `.roost`.
    fn aux(&self) -> PathBuf {
        self.mirror.join(".roost")
    }

    /// This agent's private directory `name` (made if need be), beside its local copies.
    pub fn private_dir(self: &Arc<Self>, name: &str) -> Result<PathBuf, Errno> {
        self.start()?;
        let dir = self.aux().join(name);
        std::fs::create_dir_all(&dir).map_err(errno_of)?;
        Ok(dir)
    }

    /// The directory holding this agent's local copies (`mirror + driver path`).
    pub fn mirror(&self) -> &[u8] {
        &self.mirror_bytes
    }

    /// The key of a remote file: a hash of its server and path.
    pub fn key(server: &str, path: &[u8]) -> String {
        let mut h = sha2::Sha256::new();
        h.update(server.as_bytes());
        h.update(b"\0");
        h.update(path);
        crate::hex(&h.finalize()[..16])
    }

    /// The object of `key` at `version`, filled by `fetch` (which writes the whole file)
    /// unless a copy is there already; `name` says which file it is, under `-v`.
    pub fn object(
        self: &Arc<Self>,
        (key, name): (&str, &str),
        version: Version,
        fetch: impl FnOnce(&mut File) -> Result<(), Errno>,
    ) -> Result<PathBuf, Errno> {
        self.start()?;
        let dir = self.objects.join(key);
        let path = dir.join(version.name());
        // A copy cut short (by a crash: objects are not synced) is fetched again.
        if self.holds(key, version) {
            self.hit(name);
            Cache::touch(&path);
            return Ok(path);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        if self.verbose {
            eprintln!(
                "roost: cache miss: {name} (fetching {} bytes)",
                version.size
            );
        }
        let filled = self.fill(&dir, &path, version, fetch)?;
        drop_older_versions(&dir, &filled);
        Ok(filled)
    }

    /// Makes the object at `path` (in `dir`) of `version` with `fetch`, through a
    /// temporary name.
    fn fill(
        &self,
        dir: &Path,
        path: &Path,
        version: Version,
        fetch: impl FnOnce(&mut File) -> Result<(), Errno>,
    ) -> Result<PathBuf, Errno> {
        std::fs::create_dir_all(dir).map_err(errno_of)?;
        let (tmp, mut file) = temporary(dir)?;
        // Not synced (an fsync costs ~300 µs a file here, which a build opening hundreds
        // pays): a copy a crash cut short has the wrong size, and is fetched again.
        let filled = fetch(&mut file);
        if let Err(e) = filled {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        let size = file.metadata().map_err(errno_of)?.len();
        if size != version.size {
            // The file changed while it was read: this copy is of no version the server had.
            let _ = std::fs::remove_file(&tmp);
            return Err(libc::ESTALE);
        }
        std::fs::rename(&tmp, path).map_err(errno_of)?;
        self.added(size, path);
        Ok(path.to_path_buf())
    }

    /// A copy of a file no cache may keep (its version cannot name its content: it changed
    /// within the last seconds), filled by `fetch` in this agent's mirror; its name goes
    /// when the returned guard is dropped (a mirror link made meanwhile keeps the data).
    pub fn object_once(
        self: &Arc<Self>,
        name: &str,
        version: Version,
        fetch: impl FnOnce(&mut File) -> Result<(), Errno>,
    ) -> Result<OnceObject, Errno> {
        self.start()?;
        self.misses.fetch_add(1, Ordering::Relaxed);
        if self.verbose {
            eprintln!(
                "roost: cache bypassed: {name} changed just now (fetching {} bytes)",
                version.size
            );
        }
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = self.aux().join("once");
        let path = dir.join(N.fetch_add(1, Ordering::Relaxed).to_string());
        let _ = std::fs::remove_file(&path);
        self.fill(&dir, &path, version, fetch).map(OnceObject)
    }

    /// A copy of a file as one `fetch` found it, of no version (a file others append to
    /// changes while it is read), used once: the start of a copy opened to append.
    pub fn snapshot(
        self: &Arc<Self>,
        fetch: impl FnOnce(&mut File) -> Result<(), Errno>,
    ) -> Result<OnceObject, Errno> {
        self.start()?;
        let dir = self.aux().join("once");
        std::fs::create_dir_all(&dir).map_err(errno_of)?;
        let (path, mut file) = temporary(&dir)?;
        let copy = OnceObject(path); // removed when dropped, a failed fetch's too
        fetch(&mut file)?;
        Ok(copy)
    }

    /// The lock object of `key` ([`crate::Driver::lock_object`]): `DIR/locks/KEY`, made
    /// on first use.
    pub fn lock_object(&self, key: &str) -> Result<File, Errno> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = self.objects.with_file_name("locks");
        std::fs::create_dir_all(&dir).map_err(errno_of)?;
        File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(dir.join(key))
            .map_err(errno_of)
    }

    /// Counts a hit on `name` (said under `-v`).
    pub fn hit(&self, name: &str) {
        self.hits.fetch_add(1, Ordering::Relaxed);
        if self.verbose {
            eprintln!("roost: cache hit: {name}");
        }
    }

    /// Marks `object` used now: eviction goes by last use, its access time.
    pub fn touch(object: &Path) {
        let now = libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        };
        let omit = libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        };
        let Ok(c) = std::ffi::CString::new(object.as_os_str().as_bytes()) else {
            return;
        };
        // SAFETY: a valid C string and two timespecs.
        unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [now, omit].as_ptr(), 0) };
    }

    /// Whether the object of `key` at `version` is here, whole (not cut short).
    pub fn holds(&self, key: &str, version: Version) -> bool {
        let path = self.objects.join(key).join(version.name());
        std::fs::metadata(path).is_ok_and(|m| m.len() == version.size)
    }

    /// A new, nameless file in this agent's mirror (gone when its last descriptor
    /// closes): room for the blocks of a file read in place.
    pub fn scratch(self: &Arc<Self>) -> Result<File, Errno> {
        use std::os::unix::fs::OpenOptionsExt;
        self.start()?;
        let nameless = File::options()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .mode(0o600)
            .open(self.aux());
        match nameless {
            Ok(f) => Ok(f),
            // A file system without O_TMPFILE: a name, removed at once.
            Err(_) => {
                let (name, f) = temporary(&self.aux())?;
                let _ = std::fs::remove_file(name);
                Ok(f)
            }
        }
    }

    /// Records beside `object` the server's change time (ctime) of the file when the copy
    /// was made or last found to hold its content: a small file `OBJECT.ctime` (not an
    /// extended attribute of the copy, which programs reading it would see and copy).
    pub fn stamp(&self, object: &Path, ctime: i64) {
        if let Some(dir) = object.parent() {
            let _ = write_whole(dir, &stamp_path(object), ctime.to_string().as_bytes());
        }
    }

    /// The change time recorded beside `object` by [`Cache::stamp`].
    pub fn stamp_of(&self, object: &Path) -> Option<i64> {
        std::fs::read_to_string(stamp_path(object))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Removes an object found stale (its content is no longer the server's, although
    /// its version is); a program holding it open keeps reading it.
    pub fn discard(&self, object: &Path) {
        if std::fs::remove_file(object).is_ok() && self.verbose {
            eprintln!("roost: cache: dropped {}", object.display());
        }
    }

    /// Keeps `content` for later runs under `key` (a driver's note, such as a web
    /// server's directory index): `DIR/objects/KEY/note`, written whole through a
    /// temporary name, counted and evicted with the objects. Its modification time says
    /// when it was last known current ([`Cache::remembered`], [`Cache::confirm`]).
    /// Failures are silent: a note only saves a request.
    pub fn remember(&self, key: &str, content: &[u8]) {
        let dir = self.objects.join(key);
        let note = dir.join(NOTE);
        let made = std::fs::create_dir_all(&dir).map_err(errno_of);
        if made
            .and_then(|()| write_whole(&dir, &note, content))
            .is_ok()
        {
            self.added(content.len() as u64, &note);
        }
    }

    /// The note kept under `key` by [`Cache::remember`] and when it was last known
    /// current.
    pub fn remembered(&self, key: &str) -> Option<(Vec<u8>, SystemTime)> {
        let mut f = File::open(self.objects.join(key).join(NOTE)).ok()?;
        let at = f.metadata().ok()?.modified().ok()?;
        let mut content = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut content).ok()?;
        Some((content, at))
    }

    /// Records that the note under `key` is current now (a server said it is unchanged).
    pub fn confirm(&self, key: &str) {
        let now = SystemTime::now();
        if let Ok(f) = File::options()
            .write(true)
            .open(self.objects.join(key).join(NOTE))
        {
            let _ = f.set_modified(now);
        }
    }

    /// Drops the note under `key` (it is known to be out of date).
    pub fn forget_note(&self, key: &str) {
        let _ = std::fs::remove_file(self.objects.join(key).join(NOTE));
    }

    /// The highest number recorded under `key` by [`Cache::raise`] (0 when none): a
    /// driver's guard against going back, such as the revision of a signed index seen
    /// last. Kept in `DIR/highest/KEY`, apart from the objects: never evicted.
    pub fn highest(&self, key: &str) -> u64 {
        std::fs::read_to_string(self.objects.with_file_name("highest").join(key))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Records `value` under `key` unless a number as high is there already (through a
    /// temporary name: a reader sees one number or the other). Writers take turns (an
    /// exclusive `flock` on `highest/.lock`), so two raising at once never leave the lower
    /// of their numbers. Failures are silent.
    pub fn raise(&self, key: &str, value: u64) {
        if self.highest(key) >= value {
            return;
        }
        let dir = self.objects.with_file_name("highest");
        if std::fs::create_dir_all(&dir).is_err() {
            return;
        }
        let Ok(lock) = File::options()
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(".lock"))
        else {
            return;
        };
        // SAFETY: a valid descriptor; the lock goes with it.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0
            || self.highest(key) >= value
        {
            return;
        }
        let _ = write_whole(&dir, &dir.join(key), value.to_string().as_bytes());
    }

    /// Counts `bytes` more in the objects (`at` was filled or grew), evicting the least
    /// recently used others when that passes the bound.
    fn added(&self, bytes: u64, at: &Path) {
        if self.used.fetch_add(bytes, Ordering::Relaxed) + bytes > self.limit {
            self.evict(at);
        }
    }

    /// Stores the content of `file` as the object of `key` at `version` (a file this agent
    /// wrote back, so the next open finds it without fetching).
    fn keep(&self, key: &str, version: Version, file: &mut File) {
        let dir = self.objects.join(key);
        if version.size < KEEP_FROM {
            // Its older versions are of no more use either way.
            drop_entries(&dir, |_| false);
            return;
        }
        let kept = self.fill(&dir, &dir.join(version.name()), version, |dst| {
            file.rewind().map_err(errno_of)?;
            std::io::copy(file, dst).map_err(errno_of).map(drop)
        });
        if let Ok(kept) = kept {
            drop_older_versions(&dir, &kept);
        }
    }

    /// The objects' total size.
    fn count_objects(&self) -> u64 {
        self.all_objects().iter().map(|(_, size, _)| size).sum()
    }

    /// Every object: (path, size, last use).
    fn all_objects(&self) -> Vec<(PathBuf, u64, i64)> {
        let mut out = Vec::new();
        let Ok(keys) = std::fs::read_dir(&self.objects) else {
            return out;
        };
        for key in keys.flatten() {
            let Ok(versions) = std::fs::read_dir(key.path()) else {
                continue;
            };
            for v in versions.flatten() {
                if let Ok(m) = v.metadata() {
                    // What it takes on disk: a copy filled block by block is sparse.
                    let size = m.len().min(m.blocks() * 512);
                    out.push((v.path(), size, m.atime().max(m.mtime())));
                }
            }
        }
        out
    }

    /// Removes the least recently used objects (never `keep`) until the total is under
    /// the bound. An object a program holds open stays readable through its descriptor.
    fn evict(&self, keep: &Path) {
        let mut all = self.all_objects();
        let mut total: u64 = all.iter().map(|(_, s, _)| s).sum();
        all.sort_by_key(|(_, _, used)| *used);
        for (path, size, _) in all {
            if total <= self.limit {
                break;
            }
            if path != keep && std::fs::remove_file(&path).is_ok() {
                total -= size;
            }
        }
        self.used.store(total, Ordering::Relaxed);
    }

    /// The mirror path of driver path `path`.
    pub fn mirror_path(&self, path: &[u8]) -> PathBuf {
        let mut p = self.mirror_bytes.clone();
        p.extend_from_slice(&crate::path::normalize(path));
        PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(p))
    }

    /// Makes the mirror name of `path` a link to `object` (a copy if linking fails), with
    /// the remote file's permission bits and modification time.
    pub fn show_file(
        self: &Arc<Self>,
        path: &[u8],
        object: &Path,
        mode: u32,
        mtime: i64,
    ) -> Result<Vec<u8>, Errno> {
        self.start()?;
        let _one_change_at_a_time = self.mirror_changes.lock().expect("mirror lock");
        let at = self.mirror_path(path);
        let same =
            |a: &std::fs::Metadata, b: &std::fs::Metadata| a.dev() == b.dev() && a.ino() == b.ino();
        if let (Ok(shown), Ok(obj)) = (std::fs::symlink_metadata(&at), std::fs::metadata(object)) {
            if same(&shown, &obj) && shown.mode() & 0o7777 == (mode & 0o7777) | 0o400 {
                // Shown already (a file opened again): one stat instead of four changes.
                return Ok(at.into_os_string().into_encoded_bytes());
            }
        }
        // Made under a name of roost's own, then renamed over the old one: the name never
        // goes missing, so an open of it that another thread let through meanwhile finds
        // the old copy or the new one.
        let staged = self
            .aux()
            .join(format!(".show.{}", SHOWN.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_file(&staged);
        if std::fs::hard_link(object, &staged).is_err() {
            std::fs::copy(object, &staged).map_err(errno_of)?;
        }
        set_attributes(&staged, mode, mtime);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
            self.clear(&at)?;
        } else {
            self.make_parents(&at)?;
        }
        if let Err(e) = std::fs::rename(&staged, &at) {
            let _ = std::fs::remove_file(&staged);
            return Err(errno_of(e));
        }
        Ok(at.into_os_string().into_encoded_bytes())
    }

    /// Makes the mirror name of `path` a directory holding one placeholder per entry (a
    /// directory, a symlink or an empty file, by type), dropping names no longer listed.
    /// Entries already localized stay as they are.
    pub fn show_dir(
        self: &Arc<Self>,
        path: &[u8],
        entries: &[(Vec<u8>, u32)],
    ) -> Result<Vec<u8>, Errno> {
        self.start()?;
        let _one_change_at_a_time = self.mirror_changes.lock().expect("mirror lock");
        let at = self.mirror_path(path);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                self.clear(&at)?;
                std::fs::create_dir(&at).map_err(errno_of)?;
            }
            Err(_) => {
                self.make_parents(&at)?;
                std::fs::create_dir(&at).map_err(errno_of)?;
            }
        }
        let wanted: HashMap<&[u8], u32> = entries
            .iter()
            .map(|(n, t)| (n.as_slice(), t & libc::S_IFMT))
            .collect();
        let kind_of = |t: std::fs::FileType| {
            if t.is_dir() {
                libc::S_IFDIR
            } else if t.is_symlink() {
                libc::S_IFLNK
            } else if t.is_file() {
                libc::S_IFREG
            } else {
                0
            }
        };
        let mut present: HashMap<Vec<u8>, u32> = HashMap::new();
        let aux = self.aux();
        for e in std::fs::read_dir(&at).map_err(errno_of)?.flatten() {
            if e.path() == aux {
                continue; // roost's own, beside the servers at the mirror's top
            }
            let name = e.file_name().into_encoded_bytes();
            let kind = e.file_type().map(kind_of).unwrap_or(0);
            let fits = wanted
                .get(name.as_slice())
                .is_some_and(|&want| placeholder_kind(want) == kind);
            if fits {
                present.insert(name, kind);
            } else {
                let _ = remove_any(&e.path());
            }
        }
        for (name, kind) in &wanted {
            if present.contains_key(*name) {
                continue;
            }
            let p = at.join(std::ffi::OsStr::from_bytes(name));
            let _ = match placeholder_kind(*kind) {
                libc::S_IFDIR => std::fs::create_dir(&p),
                libc::S_IFLNK => std::os::unix::fs::symlink(".", &p),
                // A link to one empty file: a tenth of the cost of a new inode, which a
                // listing of thousands of files pays for each (a fresh one past the
                // file system's link limit).
                // Never truncating: a name shown meanwhile is a copy (a cached object).
                _ => std::fs::hard_link(aux.join("empty"), &p).or_else(|_| {
                    File::options()
                        .write(true)
                        .create_new(true)
                        .open(&p)
                        .map(drop)
                }),
            };
        }
        Ok(at.into_os_string().into_encoded_bytes())
    }

    /// Makes the mirror name of `path` a private copy for writing, with `content` (the
    /// current version's object, unless the file is new or truncated), and watches it:
    /// when the program closes it, it goes back to `to` — as an append of what was added
    /// to it when `append` (`O_APPEND`), so other writers' appends meanwhile stay.
    pub fn show_written(
        self: &Arc<Self>,
        path: &[u8],
        content: Option<&Path>,
        (mode, append): (u32, bool),
        to: Box<dyn Destination>,
    ) -> Result<Vec<u8>, Errno> {
        self.start()?;
        let at = self.mirror_path(path);
        let mut file = {
            let _one_change_at_a_time = self.mirror_changes.lock().expect("mirror lock");
            self.clear(&at)?;
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&at)
                .map_err(errno_of)?
        };
        if let Some(src) = content {
            let mut src = File::open(src).map_err(errno_of)?;
            std::io::copy(&mut src, &mut file).map_err(errno_of)?;
        }
        let _ = std::fs::set_permissions(
            &at,
            std::fs::Permissions::from_mode((mode & 0o7777) | 0o600),
        );
        let made = file.metadata().map_err(errno_of)?.len();
        drop(file);
        let reader = File::open(&at).map_err(errno_of)?;
        let mut guard = self.writes.lock().expect("write-back lock");
        let writes = guard.as_mut().ok_or(libc::EIO)?;
        let c = std::ffi::CString::new(at.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
        // SAFETY: a valid C string and a live inotify descriptor.
        let wd = unsafe {
            libc::inotify_add_watch(writes.inotify.as_raw_fd(), c.as_ptr(), libc::IN_CLOSE_WRITE)
        };
        if wd < 0 {
            return Err(roost_base::last_errno());
        }
        writes.pending.insert(
            wd,
            Pending {
                path: path.to_vec(),
                file: reader,
                to,
                appends_from: append.then_some(made),
                sent: None,
            },
        );
        Ok(at.into_os_string().into_encoded_bytes())
    }

    /// The mirror name of `path` when it is a copy this run writes whose latest content is
    /// not on the server yet (never sent, or changed since): another open of the file in
    /// this run must see it, as on one host's file system (what a program has closed was
    /// sent back before, [`Cache::flush`]).
    pub fn unsent_copy(&self, path: &[u8]) -> Option<Vec<u8>> {
        let guard = self.writes.lock().expect("write-back lock");
        let p = guard.as_ref()?.pending.values().find(|p| p.path == path)?;
        if p.sent.is_some() && p.sent == sent_state(&p.file) {
            return None;
        }
        let at = self.mirror_path(path);
        let shown = std::fs::symlink_metadata(&at).ok()?;
        let copy = p.file.metadata().ok()?;
        (shown.dev() == copy.dev() && shown.ino() == copy.ino())
            .then(|| at.into_os_string().into_encoded_bytes())
    }

    /// A name was renamed on the server: copies still being written below `from` go back
    /// below `to`, where the program now has them.
    pub fn moved(&self, from: &[u8], to: &[u8]) {
        let mut guard = self.writes.lock().expect("write-back lock");
        for p in guard.iter_mut().flat_map(|w| w.pending.values_mut()) {
            if let Some(rest) = crate::path::strip_prefix(&p.path, from) {
                p.path = [to, rest].concat();
            }
        }
    }

    /// A name was removed on the server: copies still being written at or below it are
    /// the program's alone now, and never go back (they would bring the name back).
    pub fn dropped(&self, path: &[u8]) {
        let mut guard = self.writes.lock().expect("write-back lock");
        if let Some(w) = guard.as_mut() {
            w.pending
                .retain(|_, p| crate::path::strip_prefix(&p.path, path).is_none());
        }
    }

    /// Sends back every written file closed since the last flush, in the order closed.
    /// A failed write-back is said on stderr, naming where the data stays.
    pub fn flush(self: &Arc<Self>) {
        let mut guard = self.writes.lock().expect("write-back lock");
        let Some(writes) = guard.as_mut() else {
            return; // nothing was ever written
        };
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: reads into a buffer valid for its length.
            let n = unsafe {
                libc::read(
                    writes.inotify.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n <= 0 {
                return;
            }
            let mut at = 0usize;
            let event_size = std::mem::size_of::<libc::inotify_event>();
            while at + event_size <= n as usize {
                // SAFETY: the kernel wrote whole events; read unaligned.
                let ev: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                at += event_size + ev.len as usize;
                if ev.mask & libc::IN_IGNORED != 0 {
                    writes.pending.remove(&ev.wd);
                    continue;
                }
                if ev.mask & libc::IN_CLOSE_WRITE == 0 {
                    continue;
                }
                if let Some(p) = writes.pending.get_mut(&ev.wd) {
                    let appended = p
                        .appends_from
                        .filter(|&from| p.file.metadata().is_ok_and(|m| m.len() >= from));
                    let sent = match appended {
                        // The file as the server now has it is not this copy: not kept.
                        Some(from) => p.to.append(&p.path, &mut p.file, from).map(|()| None),
                        None => p
                            .file
                            .rewind()
                            .map_err(errno_of)
                            .and_then(|()| p.to.send(&p.path, &mut p.file))
                            .map(Some),
                    };
                    match sent {
                        Ok(kept) => {
                            p.sent = sent_state(&p.file);
                            self.written_back.fetch_add(1, Ordering::Relaxed);
                            if self.verbose {
                                eprintln!("roost: wrote back {}", p.to.name(&p.path));
                            }
                            if let Some((key, version)) = kept {
                                self.keep(&key, version, &mut p.file);
                            }
                        }
                        Err(e) => eprintln!(
                            "roost: writing back {} failed ({}); the data written is kept in {}",
                            p.to.name(&p.path),
                            std::io::Error::from_raw_os_error(e),
                            self.mirror.display()
                        ),
                    }
                }
            }
        }
    }

    /// Removes whatever the mirror holds at `at` (a placeholder, an older copy), making its
    /// parent directories as needed.
    fn clear(&self, at: &Path) -> Result<(), Errno> {
        self.make_parents(at)?;
        match remove_any(at) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(errno_of(e)),
        }
    }

    /// Makes the parent directories of mirror path `at`. What stands where one must be —
    /// the copy or placeholder of a name that was a file on the server and is a directory
    /// now (a file removed and a directory made in its place) — is replaced.
    fn make_parents(&self, at: &Path) -> Result<(), Errno> {
        let Some(parent) = at.parent() else {
            return Ok(());
        };
        if std::fs::create_dir_all(parent).is_ok() {
            return Ok(());
        }
        let below = parent
            .strip_prefix(&self.mirror)
            .map_err(|_| libc::ENOTDIR)?;
        let mut dir = self.mirror.clone();
        for name in below.components() {
            dir.push(name);
            match std::fs::symlink_metadata(&dir) {
                Ok(m) if m.is_dir() => continue,
                Ok(_) => std::fs::remove_file(&dir).map_err(errno_of)?,
                Err(_) => {}
            }
            std::fs::create_dir(&dir).map_err(errno_of)?;
        }
        Ok(())
    }

    /// Forgets the mirror (the agent is done): what was written and not sent back is lost
    /// from here, so everything pending is flushed first.
    pub fn close(self: &Arc<Self>) {
        self.flush();
        let _ = std::fs::remove_dir_all(&self.mirror);
    }
}

/// The smallest file written back that is kept as a cached object. A smaller one, read
/// again, costs one round trip either way (a kept copy is checked against the server's
/// digest before use, as its change time is not known; or it changed in the last seconds
/// and is fetched anyway): keeping it would only save its few bytes, for a new file and a
/// copy made while the program waits.
const KEEP_FROM: u64 = 64 * 1024;

/// The name of a driver's note among a key's objects (no version is named so: versions
/// are numbers).
const NOTE: &str = "note";

/// Where [`Cache::stamp`] keeps an object's change time.
fn stamp_path(object: &Path) -> PathBuf {
    let mut p = object.as_os_str().to_owned();
    p.push(".ctime");
    PathBuf::from(p)
}

/// Numbers the names copies are staged under before they are shown.
static SHOWN: AtomicU64 = AtomicU64::new(0);

/// Removes the objects in `dir` (one file's versions) but `current`: older versions of the
/// file are of no more use. Files being filled (`.tmp*`) stay. Never for the directory of
/// copies used once, whose files are other files', in use.
fn drop_older_versions(dir: &Path, current: &Path) {
    drop_entries(dir, |e| e == current || e == stamp_path(current));
}

/// Removes the files of `dir` but those `keep` names and those being filled (`.tmp*`).
fn drop_entries(dir: &Path, keep: impl Fn(&Path) -> bool) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if !keep(&e.path()) && !e.file_name().as_bytes().starts_with(b".tmp") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// A fetched copy used once (see [`Cache::object_once`]), removed when dropped.
pub struct OnceObject(PathBuf);

impl std::ops::Deref for OnceObject {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for OnceObject {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The kind of placeholder shown for a remote entry of type `kind`: directories and
/// symlinks as themselves, anything else as a regular file.
fn placeholder_kind(kind: u32) -> u32 {
    match kind {
        libc::S_IFDIR | libc::S_IFLNK => kind,
        _ => libc::S_IFREG,
    }
}

fn remove_any(p: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(p)? {
        m if m.is_dir() => std::fs::remove_dir_all(p),
        _ => std::fs::remove_file(p),
    }
}

/// Gives a mirror file the remote file's permission bits (readable by roost, which copies
/// it) and modification time.
fn set_attributes(at: &Path, mode: u32, mtime: i64) {
    let _ = std::fs::set_permissions(at, std::fs::Permissions::from_mode((mode & 0o7777) | 0o400));
    let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(mtime.max(0) as u64);
    if let Ok(f) = File::options().write(false).read(true).open(at) {
        let _ = f.set_modified(when);
    }
}

/// A new file under `dir` with a unique temporary name.
fn temporary(dir: &Path) -> Result<(PathBuf, File), Errno> {
    static N: AtomicU64 = AtomicU64::new(0);
    loop {
        let name = format!(
            ".tmp.{}.{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let p = dir.join(name);
        match File::options()
            .write(true)
            .read(true)
            .create_new(true)
            .open(&p)
        {
            Ok(f) => return Ok((p, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(errno_of(e)),
        }
    }
}

/// Makes `to` hold `content`, written under a temporary name in `dir` and renamed over
/// it: a reader sees the old content or the new, whole.
fn write_whole(dir: &Path, to: &Path, content: &[u8]) -> Result<(), Errno> {
    let (tmp, mut f) = temporary(dir)?;
    let written = f.write_all(content).map_err(errno_of);
    let renamed = written.and_then(|()| std::fs::rename(&tmp, to).map_err(errno_of));
    if renamed.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    renamed
}

/// Reads a whole small file (tests).
#[cfg(test)]
fn read_all(p: &Path) -> Vec<u8> {
    use std::io::Read;
    let mut v = Vec::new();
    File::open(p).unwrap().read_to_end(&mut v).unwrap();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("roost-cache-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// Makes `count` objects (`/f0`, `/f1`, ... on `h:1`) holding `data` each.
    fn fill_objects(cache: &Arc<Cache>, count: u64, data: &[u8]) {
        for i in 0..count {
            let v = Version {
                ino: i,
                size: data.len() as u64,
                mtime: 0,
            };
            let key = Cache::key("h:1", format!("/f{i}").as_bytes());
            cache
                .object((&key, "f"), v, |f| f.write_all(data).map_err(errno_of))
                .unwrap();
        }
    }

    #[test]
    fn objects_are_found_by_version_and_filled_once() {
        let dir = tmp("obj");
        let cache = Cache::new(&dir, DEFAULT_LIMIT, false);
        let v1 = Version {
            ino: 1,
            size: 3,
            mtime: 10,
        };
        let key = Cache::key("h:1", b"/f");
        let p = cache
            .object((&key, "f"), v1, |f| f.write_all(b"abc").map_err(errno_of))
            .unwrap();
        assert_eq!(read_all(&p), b"abc");
        let again = cache
            .object((&key, "f"), v1, |_| panic!("fetched twice"))
            .unwrap();
        assert_eq!(again, p);
        let v2 = Version { mtime: 11, ..v1 };
        let p2 = cache
            .object((&key, "f"), v2, |f| f.write_all(b"xyz").map_err(errno_of))
            .unwrap();
        assert_eq!(read_all(&p2), b"xyz");
        assert!(!p.exists(), "the older version is dropped");
        // A failed fetch leaves nothing behind.
        let v3 = Version { mtime: 12, ..v1 };
        assert_eq!(
            cache.object((&key, "f"), v3, |_| Err(libc::EIO)),
            Err(libc::EIO)
        );
        assert_eq!(
            std::fs::read_dir(dir.join("objects").join(&key))
                .unwrap()
                .count(),
            1
        );
        cache.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn notes_are_kept_across_caches_confirmed_forgotten_and_evicted() {
        let dir = tmp("note");
        let key = Cache::key("index+http://h:1", b"/d");
        {
            let cache = Cache::new(&dir, DEFAULT_LIMIT, false);
            assert!(cache.remembered(&key).is_none());
            cache.remember(&key, b"first");
            cache.remember(&key, b"second");
        }
        // Another agent (a later run) finds it, with the time it was written.
        let cache = Cache::new(&dir, 100, false);
        let (content, at) = cache.remembered(&key).unwrap();
        assert_eq!(content, b"second");
        assert!(at.elapsed().unwrap() < std::time::Duration::from_secs(5));
        let note = dir.join("objects").join(&key).join(NOTE);
        let old = SystemTime::now() - std::time::Duration::from_secs(3600);
        File::options()
            .write(true)
            .open(&note)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(cache.remembered(&key).unwrap().1 <= old);
        cache.confirm(&key);
        assert!(cache.remembered(&key).unwrap().1 > old);
        // An object of another key beside it keeps it; the versions of a file and the
        // note of a key never share a name.
        let other = Cache::key("h:1", b"/d");
        let v = Version {
            ino: 1,
            size: 3,
            mtime: 1,
        };
        cache
            .object((&other, "f"), v, |f| f.write_all(b"abc").map_err(errno_of))
            .unwrap();
        assert_eq!(cache.remembered(&key).unwrap().0, b"second");
        cache.forget_note(&key);
        assert!(cache.remembered(&key).is_none());
        // Notes count toward the bound like objects (100 bytes here).
        cache.remember(&key, &[b'x'; 60]);
        let third = Cache::key("index+http://h:1", b"/e");
        std::thread::sleep(std::time::Duration::from_millis(20));
        cache.remember(&third, &[b'y'; 60]);
        let left = [&key, &third, &other]
            .iter()
            .filter(|k| {
                std::fs::read_dir(dir.join("objects").join(k))
                    .unwrap()
                    .count()
                    > 0
            })
            .count();
        assert!(left < 3, "over the bound, something was evicted");
        assert_eq!(cache.remembered(&third).unwrap().0, [b'y'; 60]);
        cache.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_highest_number_recorded_is_kept_across_caches_and_never_lowered() {
        let dir = tmp("highest");
        let key = Cache::key("revision+http://h:1", b"/d");
        {
            let cache = Cache::new(&dir, 10, false);
            assert_eq!(cache.highest(&key), 0);
            cache.raise(&key, 7);
            cache.raise(&key, 5);
            assert_eq!(cache.highest(&key), 7);
            // Not an object: a bound of 10 bytes and many objects never evict it.
            fill_objects(&cache, 5, b"12345678");
            cache.close();
        }
        let cache = Cache::new(&dir, DEFAULT_LIMIT, false);
        assert_eq!(cache.highest(&key), 7);
        cache.raise(&key, 9);
        assert_eq!(cache.highest(&key), 9);
        // Many raising at once, in any order: the highest stays.
        let threads: Vec<_> = (10..50u64)
            .rev()
            .map(|v| {
                let cache = Arc::clone(&cache);
                let key = key.clone();
                std::thread::spawn(move || cache.raise(&key, v))
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(cache.highest(&key), 49);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn copies_used_once_outlive_each_other_and_shown_names_never_go_missing() {
        let dir = tmp("once");
        let cache = Cache::new(&dir, DEFAULT_LIMIT, false);
        let version = |size| Version {
            ino: 1,
            size,
            mtime: 10,
        };
        // Two files fetched at once by two threads: the second's copy must not remove
        // the first's before it is shown.
        let a = cache
            .object_once("a", version(1), |f| f.write_all(b"a").map_err(errno_of))
            .unwrap();
        let b = cache
            .object_once("b", version(2), |f| f.write_all(b"bb").map_err(errno_of))
            .unwrap();
        assert_eq!(read_all(&a), b"a");
        assert_eq!(read_all(&b), b"bb");
        // One name shown again and again on one thread while another opens it: every
        // open finds a whole copy.
        let shown = cache.show_file(b"/h/f", &a, 0o644, 10).unwrap();
        let shown =
            PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(shown));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let opener = std::thread::spawn({
            let (shown, stop) = (shown.clone(), Arc::clone(&stop));
            move || {
                let mut opens = 0;
                while !stop.load(Ordering::Relaxed) {
                    let got = std::fs::read(&shown).expect("the shown name went missing");
                    assert!(got == b"a" || got == b"bb", "{got:?}");
                    opens += 1;
                }
                opens
            }
        });
        for i in 0..2000 {
            let object = if i % 2 == 0 { &b } else { &a };
            cache.show_file(b"/h/f", object, 0o644, 10).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        assert!(opener.join().unwrap() > 0);
        drop((a, b));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn eviction_keeps_the_total_under_the_bound() {
        let dir = tmp("evict");
        let cache = Cache::new(&dir, 10, false);
        fill_objects(&cache, 5, b"1234");
        assert!(cache.count_objects() <= 10, "{}", cache.count_objects());
        cache.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn directories_show_placeholders_and_written_files_go_back_on_close() {
        let dir = tmp("mirror");
        let cache = Cache::new(&dir, DEFAULT_LIMIT, false);
        let entries = vec![
            (b"d".to_vec(), libc::S_IFDIR),
            (b"f".to_vec(), libc::S_IFREG),
            (b"l".to_vec(), libc::S_IFLNK),
        ];
        let at = cache.show_dir(b"/h:1/top", &entries).unwrap();
        let mut names: Vec<_> = std::fs::read_dir(bytes_path(&at))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["d", "f", "l"]);
        // A name gone from the listing goes from the mirror.
        cache.show_dir(b"/h:1/top", &entries[..1]).unwrap();
        assert_eq!(std::fs::read_dir(bytes_path(&at)).unwrap().count(), 1);

        /// What was sent: (path, content) pairs.
        type Sent = Arc<Mutex<Vec<(Vec<u8>, Vec<u8>)>>>;
        /// Records what was sent, and where.
        struct Recorder(Sent);
        impl Destination for Recorder {
            fn send(&self, path: &[u8], f: &mut File) -> Result<(String, Version), Errno> {
                let mut v = Vec::new();
                f.read_to_end(&mut v).map_err(errno_of)?;
                let version = Version {
                    ino: 9,
                    size: v.len() as u64,
                    mtime: 1,
                };
                self.0.lock().unwrap().push((path.to_vec(), v));
                Ok((Cache::key("h:1", &path[4..]), version))
            }
            fn append(&self, path: &[u8], f: &mut File, from: u64) -> Result<(), Errno> {
                let mut v = b"append:".to_vec();
                f.seek(std::io::SeekFrom::Start(from)).map_err(errno_of)?;
                f.read_to_end(&mut v).map_err(errno_of)?;
                self.0.lock().unwrap().push((path.to_vec(), v));
                Ok(())
            }
            fn name(&self, path: &[u8]) -> String {
                String::from_utf8_lossy(path).into_owned()
            }
        }
        let log = Arc::new(Mutex::new(Vec::new()));
        let recorder = || Box::new(Recorder(Arc::clone(&log)));
        let key = Cache::key("h:1", b"/top/new");
        let w = cache
            .show_written(b"/h:1/top/new", None, (0o644, false), recorder())
            .unwrap();
        let mut f = File::options().write(true).open(bytes_path(&w)).unwrap();
        f.write_all(b"hello").unwrap();
        cache.flush();
        assert!(
            log.lock().unwrap().is_empty(),
            "nothing goes back before the close"
        );
        drop(f);
        cache.flush();
        assert_eq!(
            *log.lock().unwrap(),
            [(b"/h:1/top/new".to_vec(), b"hello".to_vec())]
        );
        // A small file is not kept (read again, it is fetched); a large one is.
        let v = Version {
            ino: 9,
            size: 5,
            mtime: 1,
        };
        let fetched = std::cell::Cell::new(false);
        let again = cache
            .object((&key, "f"), v, |f| {
                fetched.set(true);
                f.write_all(b"hello").map_err(errno_of)
            })
            .unwrap();
        assert!(fetched.get(), "a small file written back is not kept");
        assert_eq!(read_all(&again), b"hello");
        let large = vec![7u8; KEEP_FROM as usize];
        let w = cache
            .show_written(b"/h:1/top/large", None, (0o644, false), recorder())
            .unwrap();
        std::fs::write(bytes_path(&w), &large).unwrap();
        cache.flush();
        let v = Version {
            size: KEEP_FROM,
            ..v
        };
        let key = Cache::key("h:1", b"/top/large");
        let kept = cache
            .object((&key, "f"), v, |_| panic!("kept after write-back"))
            .unwrap();
        assert_eq!(read_all(&kept), large);

        // Renamed while open: it goes back under its new name; removed: not at all.
        log.lock().unwrap().clear();
        let w = cache
            .show_written(b"/h:1/a/x", None, (0o644, false), recorder())
            .unwrap();
        let f = File::options().write(true).open(bytes_path(&w)).unwrap();
        cache.moved(b"/h:1/a", b"/h:1/b");
        let w2 = cache
            .show_written(b"/h:1/gone", None, (0o644, false), recorder())
            .unwrap();
        let f2 = File::options().write(true).open(bytes_path(&w2)).unwrap();
        cache.dropped(b"/h:1/gone");
        drop((f, f2));
        cache.flush();
        let sent: Vec<Vec<u8>> = log.lock().unwrap().iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(sent, [b"/h:1/b/x".to_vec()]);

        // Opened to append: what was added goes back as an append; cut shorter than it
        // was, the whole copy goes back.
        log.lock().unwrap().clear();
        let old = dir.join("old");
        std::fs::write(&old, b"old\n").unwrap();
        for (cut, expected) in [(false, &b"append:new\n"[..]), (true, b"o")] {
            let w = cache
                .show_written(b"/h:1/log", Some(&old), (0o644, true), recorder())
                .unwrap();
            let mut f = File::options().append(true).open(bytes_path(&w)).unwrap();
            if cut {
                f.set_len(0).unwrap();
                f.write_all(b"o").unwrap();
            } else {
                f.write_all(b"new\n").unwrap();
            }
            drop(f);
            cache.flush();
            assert_eq!(
                log.lock().unwrap().pop(),
                Some((b"/h:1/log".to_vec(), expected.to_vec()))
            );
        }
        cache.close();
        assert!(!bytes_path(cache.mirror()).exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn mirrors_of_dead_agents_are_removed_and_live_ones_kept() {
        let dir = tmp("abandoned");
        let live = Cache::new(&dir, DEFAULT_LIMIT, false);
        live.show_dir(b"/h:1", &[]).unwrap();
        // No process has this id (above any pid_max).
        let dead = dir.join(format!("agents/{}.0.0", i32::MAX));
        std::fs::create_dir_all(dead.join("h:1")).unwrap();
        // An agent of a live process that has made its mirror and not yet locked it.
        let starting = dir.join(format!("agents/{}.1.99", std::process::id()));
        std::fs::create_dir_all(&starting).unwrap();
        let other = Cache::new(&dir, DEFAULT_LIMIT, false);
        other.show_dir(b"/h:1", &[]).unwrap();
        assert!(
            !dead.exists(),
            "an unlocked mirror of a dead process is removed"
        );
        assert!(starting.exists(), "a live process's unlocked mirror stays");
        assert!(
            bytes_path(live.mirror()).exists(),
            "a live agent's mirror stays"
        );
        live.close();
        other.close();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
