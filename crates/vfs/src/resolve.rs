//! Logical path resolution: walks an absolute logical path component by component in the
//! logical namespace (`..` climbs logical directories; a symlink's absolute target is logical),
//! asking the mapped driver whether each component is a symlink, and whether a name that a
//! `.` or `..` follows is a directory (as the kernel insists). Answers are cached by logical
//! path, so a warm lookup costs hash probes and no system calls. The agent drops the answers
//! for names a traced call may change (unlink, rename, symlink, ...); an answer also expires
//! after [`TTL`], so a change made by a process roost does not trace (or through another
//! name of the same file) is seen within that time, as a network file system's attribute
//! cache would.

use crate::mount::{Mapped, MountTable};
use crate::path::components;
use crate::{Driver, Errno};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most symlinks one walk follows before failing with ELOOP (as Linux).
const MAX_LINKS: usize = 40;
/// `/proc` means something else for every process (`self`, `PID/fd/N`, `PID/cwd`), so the
/// walk asks no driver inside it: `.` and `..` apply by name, and a magic link is followed
/// only as [`ProcLinks`] says; everything else there is left to the kernel.
const PROC: &[u8] = b"/proc";
/// The cache is cleared rather than grown past this many entries.
const CACHE_LIMIT: usize = 1 << 16;
/// A working directory's logical name, when it was learnt and the generation then.
type LearntCwd = (Vec<u8>, Instant, u64);
/// What the kernel appends to the name of a deleted directory or file.
const DELETED: &[u8] = b" (deleted)";

/// The working directories' names are forgotten rather than kept past this many.
const CWD_CACHE_LIMIT: usize = 1 << 10;
/// How long a cached answer is trusted by default (FUSE's default entry timeout).
pub const TTL: Duration = Duration::from_secs(1);

/// What a logical name is, for the walk.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    /// A symlink with this target.
    Link(Vec<u8>),
    /// Known to be a directory.
    Dir,
    /// Anything else, including nothing at all (the kernel reports that later).
    Plain,
}

/// Why a question about a logical name got no answer.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Refusal {
    /// The name lies under a `DENY` mapping.
    Deny,
    /// The name lies under an `ENOENT` mapping.
    Enoent,
    /// The driver's own error.
    Driver(Errno),
}

impl Refusal {
    fn errno(self) -> Errno {
        match self {
            Refusal::Deny => libc::EACCES,
            Refusal::Enoent => libc::ENOENT,
            Refusal::Driver(e) => e,
        }
    }
}

/// What a `/proc` magic link names, for a walk made on behalf of one process.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkTarget {
    /// A logical path (the caller's logical cwd, its root `/`).
    Logical(Vec<u8>),
    /// A kernel path, named logically through the mount table's reverse mapping.
    Physical(Vec<u8>),
}

/// The calling process's view of `/proc`: what a magic link (`/proc/self/root`,
/// `/proc/PID/cwd`, `/proc/self/fd/N`, ...) stands for in the logical namespace, so a path
/// through one resolves where the same path through its logical target would (DENY and
/// ENOENT hold whichever way a file is reached).
pub trait ProcLinks {
    /// The target of the magic link `link` (an absolute `/proc` path), followed because
    /// more components come after it or the call follows a final link; `last` when nothing
    /// comes after it. `None` leaves the link to the kernel.
    fn target(&self, link: &[u8], last: bool) -> Option<LinkTarget>;
}

/// No process's view: every `/proc` name is left to the kernel.
pub struct KernelProc;

impl ProcLinks for KernelProc {
    fn target(&self, _link: &[u8], _last: bool) -> Option<LinkTarget> {
        None
    }
}

/// A walked path.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    /// The absolute logical path with every symlink followed (except a final one not
    /// followed) and every `.`/`..` applied.
    pub logical: Vec<u8>,
    /// True when the walk followed at least one symlink.
    pub followed_symlink: bool,
    /// True when some name on the way (or the result) lies under a mount: otherwise the
    /// kernel, resolving the same path physically, finds the same object.
    pub via_mount: bool,
    /// True when the walk followed a `/proc` magic link as [`ProcLinks`] said: the kernel,
    /// resolving the path in another process (roost's), would not find the same object.
    pub via_proc_link: bool,
}

/// An object on a driver the kernel cannot reach, for operations made through the driver
/// itself after the namespace is no longer at hand.
#[derive(Clone)]
pub struct Remote {
    pub driver: std::sync::Arc<dyn Driver>,
    /// The driver's path of the object.
    pub path: Vec<u8>,
    /// Its mount uses files in place on the server (direct mode), not local copies.
    pub direct: bool,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}",
            self.driver.name(),
            String::from_utf8_lossy(&self.path)
        )
    }
}

impl PartialEq for Remote {
    fn eq(&self, other: &Remote) -> bool {
        std::ptr::addr_eq(
            std::sync::Arc::as_ptr(&self.driver),
            std::sync::Arc::as_ptr(&other.driver),
        ) && self.path == other.path
    }
}

/// A walked path: where the kernel finds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Located {
    pub logical: Vec<u8>,
    /// The kernel path of the object; for a remote object, where its local copy goes
    /// ([`Driver::localize`] makes it).
    pub physical: Vec<u8>,
    /// The object on a remote driver (`None`: a local file the kernel reaches at `physical`).
    pub remote: Option<Remote>,
    pub followed_symlink: bool,
    pub via_mount: bool,
    pub via_proc_link: bool,
}

/// The mount table plus the resolution cache. Shared by both delivery paths with no lock
/// around it: the cache and the entered names lock only around a hash probe or insert, so a
/// walk that asks a (remote) driver holds nothing while it waits.
pub struct Namespace {
    table: MountTable,
    /// Each answer with when it was learnt.
    cache: Mutex<HashMap<Vec<u8>, (Node, Instant)>>,
    /// Bumped by every invalidation: an answer a driver gave while a change was being made
    /// is not kept (it may predate the change).
    generation: AtomicU64,
    /// How long an answer is trusted.
    ttl: Duration,
    /// Working directories some thread entered by a logical name other than their physical
    /// path (`cd /data` with `/data` mapped): physical → logical.
    entered: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
    /// (device, inode) of the directories in `entered`: one renamed since (its entry names
    /// its old path) is still known to have been entered through a mapping, and is named by
    /// reverse mapping its new path.
    entered_dirs: Mutex<HashSet<(u64, u64)>>,
    /// Answers of [`Namespace::logical_cwd`] (physical → logical), with when and in which
    /// generation each was learnt: one costs a stat while any directory was entered, and the
    /// notification thread asks for every relative path.
    cwds: Mutex<HashMap<Vec<u8>, LearntCwd>>,
    /// The local mappings' directories last opened or entered through a mapping, by their
    /// physical root: that mapping's index. One absent was last reached by its own physical
    /// name (or never): see [`Namespace::note_reached`].
    views: Mutex<HashMap<Vec<u8>, usize>>,
    /// Set once a walk has led to a remote object (whose local copy a descriptor may then
    /// hold: see [`Namespace::remote_met`]).
    remote_met: std::sync::atomic::AtomicBool,
    /// Lookups answered from the cache, and by asking a driver.
    hits: AtomicU64,
    misses: AtomicU64,
    /// Logical names of descriptors the kernel knows only as sockets (direct-mode files),
    /// by the socket's inode: set once by whoever hands such descriptors out.
    descriptor_names: std::sync::OnceLock<Box<DescriptorNames>>,
    /// Told whenever names may have changed, a mapped directory was reached another way,
    /// or a remote object was met (the agent's in-process fast path republishes its table).
    watcher: std::sync::OnceLock<Box<Watcher>>,
}

/// What [`Namespace::watch`] calls: with the logical name at and under which names changed
/// (a file made, removed or renamed), or `None` for any other change.
pub type Watcher = dyn Fn(&Namespace, Option<&[u8]>) + Send + Sync;

/// The logical name of a descriptor the kernel shows as `socket:[INODE]`, by that inode.
pub type DescriptorNames = dyn Fn(u64) -> Option<Vec<u8>> + Send + Sync;

impl Namespace {
    pub fn new(table: MountTable) -> Namespace {
        Namespace {
            table,
            cache: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
            ttl: TTL,
            entered: Mutex::new(HashMap::new()),
            entered_dirs: Mutex::new(HashSet::new()),
            cwds: Mutex::new(HashMap::new()),
            views: Mutex::new(HashMap::new()),
            remote_met: std::sync::atomic::AtomicBool::new(false),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            descriptor_names: std::sync::OnceLock::new(),
            watcher: std::sync::OnceLock::new(),
        }
    }

    /// Sets what is told of changes (once): see [`Watcher`].
    pub fn watch(&self, watcher: Box<Watcher>) {
        let _ = self.watcher.set(watcher);
    }

    fn tell_watcher(&self, names_under: Option<&[u8]>) {
        if let Some(watcher) = self.watcher.get() {
            watcher(self, names_under);
        }
    }

    /// The local mapping a local root was last reached through (see
    /// [`Namespace::note_reached`]); None: by its own physical name, or never.
    pub fn view_of(&self, root: &[u8]) -> Option<usize> {
        self.views.lock().expect("views lock").get(root).copied()
    }

    /// Says where the logical names of socket-backed descriptors come from (once).
    pub fn set_descriptor_names(&self, names: Box<DescriptorNames>) {
        let _ = self.descriptor_names.set(names);
    }

    /// The logical name of the descriptor the kernel shows as `socket:[ino]`, if it stands
    /// for a file.
    pub fn descriptor_name(&self, ino: u64) -> Option<Vec<u8>> {
        self.descriptor_names.get().and_then(|names| names(ino))
    }

    /// Whether a walk has led to a remote object yet: until then no descriptor a program
    /// holds is on a remote object's local copy.
    pub fn remote_met(&self) -> bool {
        self.remote_met.load(Ordering::Relaxed)
    }

    /// Lookups answered from the cache so far, and by asking a driver.
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    pub fn table(&self) -> &MountTable {
        &self.table
    }

    /// Maps a walked logical path to its driver and physical path.
    pub fn map(&self, logical: &[u8]) -> Mapped<'_> {
        self.table.map(logical)
    }

    /// Notes that a thread made the directory the kernel holds at `physical` its working
    /// directory under the name `logical` (see [`Namespace::logical_cwd`]).
    pub fn entered(&self, physical: &[u8], logical: &[u8]) {
        let id = file_id(physical);
        let mut entered = self.entered.lock().expect("entered lock");
        let mut dirs = self.entered_dirs.lock().expect("entered lock");
        let changed = if physical == logical {
            let removed = entered.remove(physical).is_some();
            id.is_some_and(|id| dirs.remove(&id)) || removed
        } else {
            if entered.len() >= CACHE_LIMIT {
                entered.clear();
                dirs.clear();
            }
            let before = entered.insert(physical.to_vec(), logical.to_vec());
            id.is_some_and(|id| dirs.insert(id)) || before.as_deref() != Some(logical)
        };
        if changed {
            // Working directories' names learnt before are not kept (see `logical_cwd`).
            self.generation.fetch_add(1, Ordering::AcqRel);
            drop((entered, dirs));
            self.tell_watcher(None);
        }
    }

    /// The working directories entered by a logical name other than their physical path
    /// that the name still leads to (physical, logical): [`Namespace::logical_cwd`]'s first
    /// answer for each.
    pub fn entered_names(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let entered: Vec<_> = {
            let entered = self.entered.lock().expect("entered lock");
            entered
                .iter()
                .map(|(p, l)| (p.clone(), l.clone()))
                .collect()
        };
        entered
            .into_iter()
            .filter(|(physical, logical)| self.leads_to(logical, physical))
            .collect()
    }

    /// Whether logical name `logical` maps to the kernel's path `physical`.
    fn leads_to(&self, logical: &[u8], physical: &[u8]) -> bool {
        self.kernel_path(logical).as_deref() == Some(physical)
    }

    /// The logical name of a working directory the kernel holds at `physical` (for the
    /// notification thread, which sees only that, and for a cwd whose name changed): the name
    /// a thread entered it by, while that name still maps there; else the physical path
    /// itself where it names the same directory (a cwd reached physically stays physical,
    /// so `..` climbs where it would natively); else the path through the mount with the
    /// longest matching physical root. A deleted directory keeps its kernel name.
    pub fn logical_cwd(&self, physical: &[u8]) -> Vec<u8> {
        let (now, generation) = (Instant::now(), self.generation.load(Ordering::Acquire));
        if let Some((logical, at, learnt_in)) = self.cwds.lock().expect("cwds lock").get(physical) {
            if *learnt_in == generation && now.duration_since(*at) < self.ttl {
                return logical.clone();
            }
        }
        let logical = self.find_logical_cwd(physical);
        let mut cwds = self.cwds.lock().expect("cwds lock");
        if cwds.len() >= CWD_CACHE_LIMIT {
            cwds.clear();
        }
        cwds.insert(physical.to_vec(), (logical.clone(), now, generation));
        logical
    }

    /// [`Namespace::logical_cwd`], found afresh.
    fn find_logical_cwd(&self, physical: &[u8]) -> Vec<u8> {
        if let Some(live) = physical.strip_suffix(DELETED) {
            // Gone: named as it was entered, whatever that name maps to now.
            let entered = self
                .entered
                .lock()
                .expect("entered lock")
                .get(live)
                .cloned();
            let mut name = entered.unwrap_or_else(|| self.logical_dir(live));
            name.extend_from_slice(DELETED);
            return name;
        }
        let maps_to = |logical: &[u8]| self.leads_to(logical, physical);
        let entered = self
            .entered
            .lock()
            .expect("entered lock")
            .get(physical)
            .cloned();
        if let Some(logical) = entered {
            if maps_to(&logical) {
                return logical;
            }
        }
        let renamed = || {
            let dirs = self.entered_dirs.lock().expect("entered lock");
            !dirs.is_empty() && file_id(physical).is_some_and(|id| dirs.contains(&id))
        };
        if self.table.in_mirror(physical) || renamed() {
            return self.table.reverse(physical);
        }
        if maps_to(physical) {
            return physical.to_vec();
        }
        self.table.reverse(physical)
    }

    /// The logical name of what the kernel holds at `physical` (a descriptor's directory or
    /// file; a cwd is named by [`Namespace::logical_cwd`]), as a bind mount names it: by the
    /// way it was reached. roost cannot tell that per descriptor, so the namespace keeps, for
    /// each local mapping's directory, whether it was last reached through the mapping or by
    /// its own physical name ([`Namespace::locate_as`] notes it), and names everything under it
    /// so. A physical name no mapping hides is thus its own until the mapping is used, and
    /// `..` from the physical directory climbs physically (`find`, `du` and `rm -rf` climb
    /// out of directories with `openat(fd, "..")`). A physical name a mapping hides (`/`
    /// remapped) and a remote mount's local copies are named through the mount.
    pub fn logical_dir(&self, physical: &[u8]) -> Vec<u8> {
        if let Some(live) = physical.strip_suffix(DELETED) {
            let mut name = self.logical_dir(live);
            name.extend_from_slice(DELETED);
            return name;
        }
        if self.table.in_mirror(physical) || self.kernel_path(physical).as_deref() != Some(physical)
        {
            return self.table.reverse(physical);
        }
        let roots = self.table.local_roots_of(physical);
        if roots.is_empty() {
            return physical.to_vec();
        }
        let views = self.views.lock().expect("views lock");
        roots
            .iter()
            .find_map(|(root, rest)| Some(self.table.name_through(*views.get(root)?, rest)))
            .unwrap_or_else(|| physical.to_vec())
    }

    /// Notes that a descriptor or a working directory was just made for the walked logical
    /// path `logical`: the way it reached a local mapping's directory, through the mapping
    /// or by the directory's own physical name, names what is under that directory from now
    /// on (see [`Namespace::logical_dir`]). Only the calls that make descriptors or enter
    /// directories say so: a stat or an access of the other name leaves descriptors as they
    /// are.
    pub fn note_reached(&self, logical: &[u8]) {
        let mapped = self.table.map(logical);
        if mapped.local_path().is_none() {
            return;
        }
        match mapped.mount() {
            Some(i) => {
                let Some(root) = self.table.local_root(i) else {
                    return;
                };
                let changed = {
                    let mut views = self.views.lock().expect("views lock");
                    views.insert(root, i) != Some(i)
                };
                if changed {
                    self.tell_watcher(None);
                }
            }
            None => {
                if self.views.lock().expect("views lock").is_empty() {
                    return;
                }
                let roots = self.table.local_roots_of(logical);
                let changed = {
                    let mut views = self.views.lock().expect("views lock");
                    roots
                        .iter()
                        .fold(false, |any, (root, _)| views.remove(root).is_some() || any)
                };
                if changed {
                    self.tell_watcher(None);
                }
            }
        }
    }

    /// Where the kernel finds the object a walked logical path maps to: its local path, or
    /// the place of a remote object's local copy.
    pub fn kernel_path(&self, logical: &[u8]) -> Option<Vec<u8>> {
        match self.table.map(logical) {
            Mapped::At { driver, path, .. } if driver.is_local() => Some(path),
            Mapped::At { driver, path, .. } => driver
                .mirror()
                .map(|m| crate::path::normalize(&[m, path.as_slice()].concat())),
            _ => None,
        }
    }

    /// Sets how long a cached answer is trusted.
    pub fn set_ttl(&mut self, ttl: Duration) {
        self.ttl = ttl;
    }

    /// Forgets every cached answer.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.cache.lock().expect("cache lock").clear();
        self.tell_watcher(None);
    }

    /// Forgets the cached answers for `logical` and every name below it (after a call that
    /// changed that name: unlink, rename, symlink, ...).
    pub fn invalidate_under(&self, logical: &[u8]) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        // A mapping's target renamed by this name follows its directory.
        if let Some(physical) = self.kernel_path(logical) {
            self.table.changed(&physical);
        }
        {
            let mut cache = self.cache.lock().expect("cache lock");
            if cache.len() > CACHE_LIMIT / 4 {
                // Scanning a large cache costs more than rebuilding the few names in use.
                cache.clear();
            } else {
                cache.retain(|k, _| crate::path::strip_prefix(k, logical).is_none());
            }
        }
        self.tell_watcher(Some(logical));
    }

    /// Whether `logical` is a symlink (with its target), from the cache while fresh.
    fn lookup(&self, logical: &[u8], now: Instant) -> Result<Node, Errno> {
        if let Some((node, at)) = self.cache.lock().expect("cache lock").get(logical) {
            if now.duration_since(*at) < self.ttl {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(node.clone());
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let generation = self.generation.load(Ordering::Acquire);
        let node = match self.ask(logical, |driver, path| driver.readlink(path)) {
            Err(e @ (Refusal::Deny | Refusal::Enoent)) => return Err(e.errno()),
            answer => answer.map_or(Node::Plain, Node::Link),
        };
        self.remember(logical, &node, now, generation);
        Ok(node)
    }

    /// Fails unless `logical` (not a symlink) is a directory: what the kernel checks before
    /// it applies a `.` or `..` after a name. Only a positive answer is cached.
    fn require_dir(&self, logical: &[u8], node: &Node, now: Instant) -> Result<(), Errno> {
        if *node == Node::Dir || logical.is_empty() {
            return Ok(());
        }
        let generation = self.generation.load(Ordering::Acquire);
        let stat = self
            .ask(logical, |driver, path| driver.lstat(path))
            .map_err(Refusal::errno)?;
        if !stat.is_dir() {
            return Err(libc::ENOTDIR);
        }
        self.remember(logical, &Node::Dir, now, generation);
        Ok(())
    }

    /// Whether the walked logical path names a directory (its final symlink not followed),
    /// asked of its driver.
    pub fn is_dir(&self, logical: &[u8]) -> Result<bool, Errno> {
        self.ask(logical, |driver, path| driver.lstat(path))
            .map(|st| st.is_dir())
            .map_err(Refusal::errno)
    }

    /// Asks the driver `logical` maps to (the local file system where nothing maps it).
    fn ask<T>(
        &self,
        logical: &[u8],
        question: impl FnOnce(&dyn Driver, &[u8]) -> Result<T, Errno>,
    ) -> Result<T, Refusal> {
        if !self.table.covers(logical) {
            return question(&crate::LocalDriver, logical).map_err(Refusal::Driver);
        }
        match self.table.map(logical) {
            Mapped::Deny => Err(Refusal::Deny),
            Mapped::Enoent => Err(Refusal::Enoent),
            Mapped::At { driver, path, .. } => question(driver, &path).map_err(Refusal::Driver),
        }
    }

    /// Keeps a driver's answer, unless names were invalidated since `generation` (when
    /// the question was asked): the answer may then describe the state before a change.
    fn remember(&self, logical: &[u8], node: &Node, now: Instant, generation: u64) {
        let mut cache = self.cache.lock().expect("cache lock");
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(logical.to_vec(), (node.clone(), now));
    }

    /// Walks `path` (absolute, logical). `follow_last` says whether a final symlink is
    /// followed (stat, open) or named itself (lstat, unlink, O_NOFOLLOW). `/proc` magic links
    /// are left to the kernel; [`Namespace::walk_as`] follows them for a process.
    pub fn walk(&self, path: &[u8], follow_last: bool) -> Result<Resolved, Errno> {
        self.walk_as(b"/", path, follow_last, &KernelProc)
    }

    /// Walks `path` as [`Namespace::walk`] does, a relative one from the directory `start`
    /// (an absolute logical path already walked: the cwd or a dirfd's name, which is taken
    /// as it is, as the kernel takes the directory it holds, even deleted or renamed), and
    /// follows `/proc` magic links as `proc` (the calling process's view) says.
    pub fn walk_as(
        &self,
        start: &[u8],
        path: &[u8],
        follow_last: bool,
        proc: &dyn ProcLinks,
    ) -> Result<Resolved, Errno> {
        let mut pending: Vec<Vec<u8>> = components(path).rev().map(<[u8]>::to_vec).collect();
        let trailing_slash = path.len() > 1 && path.ends_with(b"/");
        let mut resolved: Vec<u8> = Vec::with_capacity(start.len() + path.len() + 1);
        if path.first() != Some(&b'/') && start != b"/" {
            resolved.extend_from_slice(start);
        }
        let mut links = 0;
        let mut followed = false;
        let mut via_mount = self.table.covers(&resolved);
        let mut via_proc_link = false;
        let now = Instant::now();
        while let Some(comp) = pending.pop() {
            match comp.as_slice() {
                b"." => continue,
                b".." => {
                    let cut = resolved.iter().rposition(|&b| b == b'/').unwrap_or(0);
                    resolved.truncate(cut);
                    continue;
                }
                _ => {}
            }
            let base = resolved.len();
            resolved.push(b'/');
            resolved.extend_from_slice(&comp);
            if crate::path::strip_prefix(&resolved, PROC).is_some() {
                let last = pending.is_empty();
                let followed_here = !last || follow_last || trailing_slash;
                let target = followed_here
                    .then(|| proc.target(&resolved, last))
                    .flatten();
                if let Some(target) = target {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(libc::ELOOP);
                    }
                    followed = true;
                    via_proc_link = true;
                    let target = match target {
                        LinkTarget::Logical(t) => t,
                        LinkTarget::Physical(p) => self.logical_dir(&p),
                    };
                    resolved.clear();
                    pending.extend(components(&target).rev().map(<[u8]>::to_vec));
                }
                continue;
            }
            via_mount = via_mount || self.table.covers(&resolved);
            // A name followed only by `.` components is followed, as before a slash.
            if pending.is_empty() && !follow_last && !trailing_slash {
                // Still refuse names below a DENY/ENOENT mount.
                self.check_reachable(&resolved)?;
                break;
            }
            let node = self.lookup(&resolved, now)?;
            if let Node::Link(target) = node {
                links += 1;
                if links > MAX_LINKS {
                    return Err(libc::ELOOP);
                }
                followed = true;
                if target.first() == Some(&b'/') {
                    resolved.clear();
                } else {
                    resolved.truncate(base);
                }
                pending.extend(components(&target).rev().map(<[u8]>::to_vec));
            } else if matches!(pending.last().map(Vec::as_slice), Some(b"." | b"..")) {
                self.require_dir(&resolved, &node, now)?;
            }
        }
        if resolved.is_empty() {
            resolved.push(b'/');
        }
        via_mount = via_mount || self.table.covers(&resolved);
        Ok(Resolved {
            logical: resolved,
            followed_symlink: followed,
            via_mount,
            via_proc_link,
        })
    }

    /// Walks `path` and maps the result to a kernel path: EACCES under `DENY`, ENOENT under
    /// `ENOENT`; a remote object is named by its driver path and the place of its local copy
    /// (ENOSYS for a remote driver that keeps no copies).
    pub fn locate(&self, path: &[u8], follow_last: bool) -> Result<Located, Errno> {
        self.locate_as(b"/", path, follow_last, &KernelProc)
    }

    /// [`Namespace::locate`] for a walk made as a process (see [`Namespace::walk_as`]).
    pub fn locate_as(
        &self,
        start: &[u8],
        path: &[u8],
        follow_last: bool,
        proc: &dyn ProcLinks,
    ) -> Result<Located, Errno> {
        let walked = self.walk_as(start, path, follow_last, proc)?;
        let (physical, remote) = match self.table.map(&walked.logical) {
            Mapped::Deny => return Err(libc::EACCES),
            Mapped::Enoent => return Err(libc::ENOENT),
            Mapped::At { driver, path, .. } if driver.is_local() => (path, None),
            Mapped::At {
                driver,
                path,
                mount,
            } => {
                let mirror = driver.mirror().ok_or(libc::ENOSYS)?;
                let physical = crate::path::normalize(&[mirror, path.as_slice()].concat());
                let driver = mount
                    .and_then(|i| self.table.driver(i))
                    .ok_or(libc::ENOSYS)?;
                let direct = mount.is_some_and(|i| self.table.is_direct(i));
                if !self.remote_met.swap(true, Ordering::Relaxed) {
                    self.tell_watcher(None);
                }
                (
                    physical,
                    Some(Remote {
                        driver,
                        path,
                        direct,
                    }),
                )
            }
        };
        Ok(Located {
            logical: walked.logical,
            physical,
            remote,
            followed_symlink: walked.followed_symlink,
            via_mount: walked.via_mount,
            via_proc_link: walked.via_proc_link,
        })
    }

    fn check_reachable(&self, logical: &[u8]) -> Result<(), Errno> {
        match self.table.map(logical) {
            Mapped::Deny => Err(libc::EACCES),
            Mapped::Enoent => Err(libc::ENOENT),
            Mapped::At { .. } => Ok(()),
        }
    }
}

/// (device, inode) of what local path `path` names, symlinks followed (as the kernel's
/// `/proc/PID/{exe,cwd,root}` links are).
pub fn file_id(path: &[u8]) -> Option<(u64, u64)> {
    use std::os::unix::{ffi::OsStrExt, fs::MetadataExt};
    let meta = std::fs::metadata(std::ffi::OsStr::from_bytes(path)).ok()?;
    Some((meta.dev(), meta.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount::Target;
    use std::path::PathBuf;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("roost-vfs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn bytes(p: &std::path::Path) -> Vec<u8> {
        p.as_os_str().as_encoded_bytes().to_vec()
    }

    #[test]
    fn absolute_symlink_targets_are_logical() {
        let phys = tmpdir("abs");
        std::fs::create_dir(phys.join("real")).unwrap();
        std::fs::write(phys.join("real/f"), b"x").unwrap();
        // /data/link -> /data/real: meaningful only in the logical namespace.
        std::os::unix::fs::symlink("/data/real", phys.join("link")).unwrap();
        let mut t = MountTable::new();
        t.add(b"/data", Target::local(bytes(&phys)));
        let ns = Namespace::new(t);
        let r = ns.walk(b"/data/link/f", true).unwrap();
        assert_eq!(r.logical, b"/data/real/f");
        assert!(r.followed_symlink);
        assert!(r.via_mount);
        assert!(!ns.walk(b"/usr/bin", true).unwrap().via_mount);
        let phys_f = ns.map(&r.logical).local_path().unwrap().to_vec();
        assert_eq!(phys_f, bytes(&phys.join("real/f")));
        // Not following the last component names the link itself, unless a `.` follows
        // it (as a slash would).
        assert_eq!(
            ns.walk(b"/data/link", false).unwrap().logical,
            b"/data/link"
        );
        assert_eq!(
            ns.walk(b"/data/link/.", false).unwrap().logical,
            b"/data/real"
        );
        assert_eq!(
            ns.walk(b"/data/link/./", false).unwrap().logical,
            b"/data/real"
        );
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn dotdot_climbs_logically_across_mounts() {
        let phys = tmpdir("dotdot");
        let mut t = MountTable::new();
        t.add(b"/data", Target::local(bytes(&phys)));
        let ns = Namespace::new(t);
        assert_eq!(
            ns.walk(b"/data/../etc/./hosts", true).unwrap().logical,
            b"/etc/hosts"
        );
        assert_eq!(ns.walk(b"/..", true).unwrap().logical, b"/");
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn relative_symlinks_and_loops() {
        let phys = tmpdir("loop");
        std::os::unix::fs::symlink("sub/../other", phys.join("rel")).unwrap();
        std::fs::create_dir(phys.join("sub")).unwrap();
        std::os::unix::fs::symlink("a", phys.join("b")).unwrap();
        std::os::unix::fs::symlink("b", phys.join("a")).unwrap();
        let mut t = MountTable::new();
        t.add(b"/m", Target::local(bytes(&phys)));
        let ns = Namespace::new(t);
        assert_eq!(ns.walk(b"/m/rel", true).unwrap().logical, b"/m/other");
        assert_eq!(ns.walk(b"/m/a", true), Err(libc::ELOOP));
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn cache_answers_repeat_lookups_until_invalidated() {
        let phys = tmpdir("cache");
        let mut t = MountTable::new();
        t.add(b"/c", Target::local(bytes(&phys)));
        let ns = Namespace::new(t);
        ns.walk(b"/c/x", true).unwrap();
        let misses = ns.hits_and_misses().1;
        ns.walk(b"/c/x", true).unwrap();
        assert_eq!(ns.hits_and_misses().1, misses, "a warm walk asks no driver");
        std::os::unix::fs::symlink("/elsewhere", phys.join("x")).unwrap();
        assert_eq!(
            ns.walk(b"/c/x", true).unwrap().logical,
            b"/c/x",
            "stale until invalidated"
        );
        ns.invalidate();
        assert_eq!(ns.walk(b"/c/x", true).unwrap().logical, b"/elsewhere");
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn cached_answers_expire() {
        let phys = tmpdir("ttl");
        let mut t = MountTable::new();
        t.add(b"/c", Target::local(bytes(&phys)));
        let mut ns = Namespace::new(t);
        ns.set_ttl(Duration::from_millis(50));
        assert_eq!(ns.walk(b"/c/x", true).unwrap().logical, b"/c/x");
        // Made by someone roost does not see: trusted stale for the TTL, then seen.
        std::os::unix::fs::symlink("/elsewhere", phys.join("x")).unwrap();
        assert_eq!(ns.walk(b"/c/x", true).unwrap().logical, b"/c/x");
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(ns.walk(b"/c/x", true).unwrap().logical, b"/elsewhere");
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn dots_follow_only_directories() {
        let phys = tmpdir("dots");
        std::fs::create_dir(phys.join("dir")).unwrap();
        std::fs::write(phys.join("file"), b"x").unwrap();
        std::os::unix::fs::symlink("/d/dir", phys.join("link")).unwrap();
        let mut t = MountTable::new();
        t.add(b"/d", Target::local(bytes(&phys)));
        let mut ns = Namespace::new(t);
        let walk = |ns: &mut Namespace, p: &[u8]| ns.walk(p, false).map(|r| r.logical);
        assert_eq!(walk(&mut ns, b"/d/dir/../file"), Ok(b"/d/file".to_vec()));
        assert_eq!(walk(&mut ns, b"/d/link/.."), Ok(b"/d".to_vec()));
        assert_eq!(walk(&mut ns, b"/d/file/../dir"), Err(libc::ENOTDIR));
        assert_eq!(walk(&mut ns, b"/d/file/."), Err(libc::ENOTDIR));
        assert_eq!(walk(&mut ns, b"/d/missing/../dir"), Err(libc::ENOENT));
        assert_eq!(walk(&mut ns, b"/.."), Ok(b"/".to_vec()));
        // A directory made after a failed check is found at once (no negative caching).
        std::fs::create_dir(phys.join("missing")).unwrap();
        assert_eq!(walk(&mut ns, b"/d/missing/../dir"), Ok(b"/d/dir".to_vec()));
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn locate_maps_to_kernel_paths_or_errors() {
        struct Remote;
        impl Driver for Remote {
            fn name(&self) -> &'static str {
                "remote"
            }
        }
        let mut t = MountTable::new();
        t.add(b"/d", Target::local("/phys"));
        t.add(b"/no", Target::Deny);
        let remote = Target::remote(std::sync::Arc::new(Remote), &b"/"[..], false);
        t.add(b"/net", remote);
        let ns = Namespace::new(t);
        assert_eq!(ns.locate(b"/d/x", true).unwrap().physical, b"/phys/x");
        assert_eq!(ns.locate(b"/no/x", true), Err(libc::EACCES));
        assert_eq!(ns.locate(b"/net/x", true), Err(libc::ENOSYS));
    }

    #[test]
    fn proc_is_opaque_and_links_into_mounts_are_followed() {
        let phys = tmpdir("opaque");
        let outside = tmpdir("opaque-out");
        std::os::unix::fs::symlink("/m/real", outside.join("link")).unwrap();
        let mut t = MountTable::new();
        t.add(b"/m", Target::local(bytes(&phys)));
        let ns = Namespace::new(t);
        // /dev/fd -> /proc/self/fd: /proc is not looked into (self would be roost itself).
        let r = ns.walk(b"/dev/fd/3", true).unwrap();
        assert_eq!(r.logical, b"/proc/self/fd/3");
        assert!(!r.via_mount);
        // but `..` applies there by name, as the kernel's does.
        let r = ns.walk(b"/dev/fd/../../../m/x", true).unwrap();
        assert_eq!(r.logical, b"/m/x");
        assert!(r.via_mount);
        // A link outside every mount that points into one lands in the mount.
        let mut link = bytes(&outside);
        link.extend_from_slice(b"/link/f");
        let r = ns.walk(&link, true).unwrap();
        assert_eq!(r.logical, b"/m/real/f");
        assert!(r.via_mount);
        std::fs::remove_dir_all(phys).unwrap();
        std::fs::remove_dir_all(outside).unwrap();
    }

    #[test]
    fn magic_links_follow_the_callers_view() {
        struct Caller(Vec<u8>);
        impl ProcLinks for Caller {
            fn target(&self, link: &[u8], last: bool) -> Option<LinkTarget> {
                let mut dir = self.0.clone();
                dir.extend_from_slice(b"/d");
                match link {
                    b"/proc/self/root" => Some(LinkTarget::Logical(b"/".to_vec())),
                    b"/proc/self/cwd" => Some(LinkTarget::Logical(b"/m/sub".to_vec())),
                    b"/proc/self/fd/5" if !last => Some(LinkTarget::Physical(dir)),
                    _ => None,
                }
            }
        }
        let phys = tmpdir("magic");
        std::fs::create_dir(phys.join("sub")).unwrap();
        let mut t = MountTable::new();
        t.add(b"/m", Target::local(bytes(&phys)));
        t.add(b"/m/sec", Target::Deny);
        let ns = Namespace::new(t);
        let caller = Caller(bytes(&phys));
        let walk = |p: &[u8], follow| ns.walk_as(b"/", p, follow, &caller);
        let logical = |r: Result<Resolved, Errno>| r.map(|r| r.logical);
        assert_eq!(
            logical(walk(b"/proc/self/root/m/f", true)),
            Ok(b"/m/f".to_vec())
        );
        assert_eq!(
            logical(walk(b"/proc/self/root/m/sec/s", true)),
            Err(libc::EACCES)
        );
        assert_eq!(
            logical(walk(b"/proc/self/cwd/../sec/s", true)),
            Err(libc::EACCES)
        );
        // A descriptor's directory is named as its mapping's directory was last reached:
        // by its own physical name until a descriptor is made through the mapping.
        let mut physical_f = bytes(&phys.join("d/f"));
        assert_eq!(logical(walk(b"/dev/fd/5/f", true)), Ok(physical_f.clone()));
        ns.note_reached(b"/m/sub");
        assert_eq!(logical(walk(b"/dev/fd/5/f", true)), Ok(b"/m/d/f".to_vec()));
        physical_f.truncate(physical_f.len() - 4);
        ns.note_reached(&physical_f);
        assert_eq!(
            logical(walk(b"/dev/fd/5/x", true)),
            Ok([&physical_f[..], b"/d/x"].concat())
        );
        ns.note_reached(b"/m");
        // A final fd link is the open file itself (the kernel reopens it), and an lstat of
        // a magic link names the link.
        assert_eq!(
            logical(walk(b"/dev/fd/5", true)),
            Ok(b"/proc/self/fd/5".to_vec())
        );
        assert_eq!(
            logical(walk(b"/proc/self/cwd", false)),
            Ok(b"/proc/self/cwd".to_vec())
        );
        assert_eq!(
            logical(walk(b"/proc/self/cwd", true)),
            Ok(b"/m/sub".to_vec())
        );
        let r = walk(b"/proc/self/root/m/f", true).unwrap();
        assert!(r.followed_symlink && r.via_mount && r.via_proc_link);
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn a_cwd_keeps_the_name_it_was_entered_by_while_that_name_maps_there() {
        let mut t = MountTable::new();
        t.add(b"/m", Target::local("/tmp/r2/a"));
        t.add(b"/tmp", Target::local("/scratch"));
        t.add(b"/scratch", Target::Deny);
        let ns = Namespace::new(t);
        // Reached physically: stays physical, unless that name maps elsewhere.
        assert_eq!(ns.logical_cwd(b"/home/u"), b"/home/u");
        assert_eq!(ns.logical_cwd(b"/scratch/x"), b"/tmp/x");
        ns.entered(b"/tmp/r2/a/sub", b"/m/sub");
        assert_eq!(ns.logical_cwd(b"/tmp/r2/a/sub"), b"/m/sub");
        // Entered by a name that does not map there (any more): not that name.
        ns.entered(b"/tmp/r2/b", b"/m/b");
        assert_eq!(ns.logical_cwd(b"/tmp/r2/b"), b"/tmp/r2/b");
        assert_eq!(ns.logical_cwd(b"/gone (deleted)"), b"/gone (deleted)");
    }

    #[test]
    fn a_cwd_entered_through_a_mapping_keeps_the_mapping_when_renamed() {
        let phys = tmpdir("renamed-cwd");
        std::fs::create_dir_all(phys.join("d")).unwrap();
        let mut t = MountTable::new();
        t.add(b"/m", Target::local(bytes(&phys)));
        let ns = Namespace::new(t);
        let d = bytes(&phys.join("d"));
        ns.entered(&d, b"/m/d");
        std::fs::rename(phys.join("d"), phys.join("e")).unwrap();
        let e = bytes(&phys.join("e"));
        assert_eq!(ns.logical_cwd(&e), b"/m/e");
        // Entered by its physical name since: physical it stays.
        ns.entered(&e, &e);
        std::fs::rename(phys.join("e"), phys.join("f")).unwrap();
        let f = bytes(&phys.join("f"));
        assert_eq!(ns.logical_cwd(&f), f);
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn a_relative_walk_starts_at_its_directory_as_given() {
        let phys = tmpdir("start");
        let mut t = MountTable::new();
        t.add(b"/m", Target::local(bytes(&phys)));
        let ns = Namespace::new(t);
        // A start that no longer exists (a deleted or renamed cwd) is taken as it is.
        let r = ns
            .walk_as(b"/nowhere/d", b"../x/y", true, &KernelProc)
            .unwrap();
        assert_eq!(r.logical, b"/nowhere/x/y");
        assert!(!r.via_mount);
        let r = ns.walk_as(b"/m/gone", b"f", true, &KernelProc).unwrap();
        assert_eq!(
            (r.logical.as_slice(), r.via_mount),
            (&b"/m/gone/f"[..], true)
        );
        assert_eq!(
            ns.walk_as(b"/m", b"/etc", true, &KernelProc)
                .unwrap()
                .logical,
            b"/etc"
        );
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn a_cwd_entered_under_another_name_is_named_so_at_once() {
        let phys = tmpdir("cwd-names");
        let mut t = MountTable::new();
        t.add(b"/a", Target::local(bytes(&phys)));
        t.add(b"/b", Target::local(bytes(&phys)));
        let ns = Namespace::new(t);
        let p = bytes(&phys);
        ns.entered(&p, b"/a");
        assert_eq!(ns.logical_cwd(&p), b"/a");
        assert_eq!(ns.logical_cwd(&p), b"/a", "kept");
        ns.entered(&p, b"/b");
        assert_eq!(ns.logical_cwd(&p), b"/b", "not the name learnt before");
        ns.entered(&p, &p);
        assert_eq!(ns.logical_cwd(&p), p, "entered by its own path");
    }

    #[test]
    fn invalidate_under_forgets_a_subtree_only() {
        let phys = tmpdir("inval");
        std::fs::create_dir(phys.join("a")).unwrap();
        let mut t = MountTable::new();
        t.add(b"/c", Target::local(bytes(&phys)));
        let ns = Namespace::new(t);
        ns.walk(b"/c/a/x", true).unwrap();
        ns.walk(b"/c/b", true).unwrap();
        std::os::unix::fs::symlink("/elsewhere", phys.join("b")).unwrap();
        ns.invalidate_under(b"/c/a");
        assert_eq!(
            ns.walk(b"/c/b", true).unwrap().logical,
            b"/c/b",
            "untouched entry kept"
        );
        ns.invalidate_under(b"/c/b");
        assert_eq!(ns.walk(b"/c/b", true).unwrap().logical, b"/elsewhere");
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn deny_and_enoent_stop_the_walk() {
        let mut t = MountTable::new();
        t.add(b"/secret", Target::Deny);
        t.add(b"/gone", Target::Enoent);
        let ns = Namespace::new(t);
        assert_eq!(ns.walk(b"/secret/a/b", true), Err(libc::EACCES));
        assert_eq!(ns.walk(b"/gone", false), Err(libc::ENOENT));
    }
}
