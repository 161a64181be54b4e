//! The Chirp driver: `/chirp/HOST[:PORT]/PATH` (driver paths `/HOST[:PORT]/PATH`) on any
//! Chirp server, through `roost-client`. One driver serves every server; each server gets a
//! pool of authenticated connections shared by all the program's threads and processes
//! (and a few more that its direct-mode files share: [`crate::direct`]), and
//! a short-lived attribute cache (filled by directory listings too, so `ls -l` costs one
//! RPC). Files are opened through local copies ([`roost_vfs::cache`]): read whole into the
//! shared cache, validated against the server's attributes on every open; written copies
//! go back when closed.
//!
//! Failures: a server never reached in this run fails at once (the connect's errno); once
//! reached, a lost connection is a transient failure: roost reconnects with exponential
//! back-off (re-authenticating) until `timeout`, then fails the call with EIO. Every retry
//! is safe: whole-file reads and writes, stats and attribute changes are idempotent; a
//! retried mkdir, symlink or link that finds its name present, or unlink, rmdir or rename
//! that finds its source gone, counts as done (the first attempt's effect).

// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

use crate::content_check::{ContentCheck, ServerDigest};
use crate::nodes::Nodes;
use roost_base::errno_of;
use roost_client::{Client, Error as ClientError, OpenFlags};
use roost_vfs::cache::shown::{Attrs, Shown};
use roost_vfs::cache::{Cache, Destination, Version};
use roost_vfs::driver::{Driver, Intent, LocalDriver, OpenFile, OpenMode, Stat, StatFs};
use roost_vfs::Errno;
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod content_check;
mod direct;
mod nodes;

/// How the driver reaches servers.
#[derive(Clone, Debug)]
pub struct ChirpOptions {
    /// Connection, timeout and authentication settings of each connection.
    pub client: roost_client::Options,
    /// How long a server that was reached may stay unreachable before calls fail (EIO).
    pub timeout: Duration,
    /// How long an attribute answer is trusted.
    pub attr_ttl: Duration,
    /// Say reconnects and cache hits/misses on stderr.
    pub verbose: bool,
}

impl Default for ChirpOptions {
    fn default() -> ChirpOptions {
        ChirpOptions {
            client: roost_client::Options::default(),
            timeout: Duration::from_secs(3600),
            attr_ttl: Duration::from_secs(1),
            verbose: false,
        }
    }
}

/// Every Chirp server, as one driver.
pub struct ChirpNet {
    cache: Arc<Cache>,
    options: ChirpOptions,
    servers: Mutex<HashMap<String, Arc<Server>>>,
    /// The cached copies whose content this run has checked.
    checked: ContentCheck,
    /// The files shown for reading, to show again at the cost of a stat.
    shown: Shown,
    /// The FIFOs and sockets the run made on servers.
    nodes: Nodes,
}

impl ChirpNet {
    pub fn new(cache: Arc<Cache>, options: ChirpOptions) -> ChirpNet {
        // The client waits for replies itself: the agent's threads' hook goes there too.
        static HOOKED: std::sync::Once = std::sync::Once::new();
        HOOKED.call_once(|| roost_vfs::also_before_blocking(roost_client::receive::when_slow));
        ChirpNet {
            cache,
            options,
            servers: Mutex::new(HashMap::new()),
            checked: ContentCheck::default(),
            shown: Shown::default(),
            nodes: Nodes::default(),
        }
    }

    /// The local FIFO or socket standing for `path`, if the run made one there
    /// ([`crate::nodes`]).
    fn node(&self, path: &[u8]) -> Option<std::path::PathBuf> {
        if !self.nodes.any() {
            return None;
        }
        let (server, rest) = self.server(path).ok()?;
        self.nodes.local(server.authority(), &rest)
    }

    /// Whether cached copy `object` of `rest` still has the server's content (see
    /// [`crate::content_check`]).
    fn same_content(&self, server: &Server, rest: &[u8], object: &Path) -> Result<bool, Errno> {
        self.checked.matches(object, &server.no_digest, || {
            match server.call(rest, |c, _| c.hash("sha256", rest)) {
                Ok(digest) => Ok(ServerDigest::Digest(digest)),
                Err(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => {
                    Ok(ServerDigest::Unsupported)
                }
                Err(e) => Err(e),
            }
        })
    }

    /// The server a driver path names and the path on it; ENOENT for a first component
    /// that is no `host[:port]`. Files the program closed are sent back first, so every
    /// call — a stat of a file just written included — sees them.
    fn server(&self, path: &[u8]) -> Result<(Arc<Server>, Vec<u8>), Errno> {
        self.cache.flush();
        let (authority, rest) = roost_vfs::path::split_first(path);
        let authority = std::str::from_utf8(authority).map_err(|_| libc::ENOENT)?;
        let (host, port) = roost_client::split_host_port(authority).ok_or(libc::ENOENT)?;
        let key = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let mut servers = self.servers.lock().expect("servers lock");
        let server = servers
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Server::new(key, self.options.clone())));
        Ok((Arc::clone(server), roost_vfs::path::normalize(rest)))
    }

    /// Whether `path` is the driver's root (`/chirp` itself), which lists the servers used.
    fn is_root(path: &[u8]) -> bool {
        roost_vfs::path::split_first(path).0.is_empty()
    }

    fn root_stat() -> Stat {
        Stat {
            mode: libc::S_IFDIR | 0o555,
            nlink: 2,
            blksize: 4096,
            ..Stat::default()
        }
    }

    /// Runs a name operation on the server of `path`, after sending back closed files.
    fn on<T>(
        &self,
        path: &[u8],
        op: impl FnOnce(&Server, &[u8]) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        if Self::is_root(path) {
            return Err(libc::EROFS);
        }
        let (server, rest) = self.server(path)?;
        op(&server, &rest)
    }

    fn localize_file(
        &self,
        path: &[u8],
        server: &Arc<Server>,
        rest: &[u8],
        intent: Intent,
    ) -> Result<Vec<u8>, Errno> {
        if let Some(copy) = self.cache.unsent_copy(path) {
            return match intent {
                Intent::Write {
                    create: true,
                    exclusive: true,
                    ..
                } => Err(libc::EEXIST),
                // The copy the run writes now: what it wrote shows, as on one host.
                _ => Ok(copy),
            };
        }
        let key = Cache::key(&server.authority, rest);
        let name = format!(
            "chirp://{}{}",
            server.authority,
            String::from_utf8_lossy(rest)
        );
        // Reading validates the copy against attributes learnt within the attribute TTL
        // (the walk that led here usually just asked); writing asks the server now.
        let current = match intent {
            Intent::Read => server.lstat(rest),
            Intent::Write { .. } => server.stat_in_call(rest),
        };
        let fetch_into = |f: &mut std::fs::File| {
            server
                .call(rest, |c, _| {
                    f.set_len(0).map_err(ClientError::Local)?;
                    std::io::Seek::rewind(f).map_err(ClientError::Local)?;
                    c.getfile(rest, f)
                })
                .map(drop)
        };
        let fetch = |st: &roost_client::Stat| -> Result<Fetched, Errno> {
            let version = version_of(st);
            if too_recent(st) {
                // Changed in the last seconds: another change within the same second
                // would keep (inode, size, mtime), so this copy is never reused.
                return self
                    .cache
                    .object_once(&name, version, fetch_into)
                    .map(Fetched::Once);
            }
            let fetched_now = std::cell::Cell::new(false);
            let object = self.cache.object((&key, &name), version, |f| {
                fetched_now.set(true);
                fetch_into(f)
            })?;
            if fetched_now.get() {
                self.cache.stamp(&object, st.ctime);
                self.checked.fetched(&object);
                return Ok(Fetched::Kept(object));
            }
            // The file's change time moves with every change to its content (and with
            // chmod, chown, link): unchanged since the copy was made, nothing to check.
            if self.cache.stamp_of(&object) == Some(st.ctime) {
                return Ok(Fetched::Kept(object));
            }
            if self.same_content(server, rest, &object)? {
                self.cache.stamp(&object, st.ctime);
                return Ok(Fetched::Kept(object));
            }
            eprintln!(
                "roost: {name}: the cached copy differs from the server's content (same \
                 inode, size and mtime: rewritten in place?); fetching it again"
            );
            self.cache.discard(&object);
            let object = self.cache.object((&key, &name), version, fetch_into)?;
            self.cache.stamp(&object, st.ctime);
            self.checked.fetched(&object);
            Ok(Fetched::Kept(object))
        };
        match intent {
            Intent::Read => {
                let st = current?;
                match st.mode as u32 & libc::S_IFMT {
                    libc::S_IFDIR => self.localize_dir(path, server, rest),
                    libc::S_IFREG => {
                        if let Some(at) = self.shown.again(path, attrs_of(&st), Cache::touch) {
                            self.cache.hit(&name);
                            return Ok(at);
                        }
                        // A file rewritten while it was fetched is fetched again, as the
                        // version it has now.
                        let mut st = st;
                        let mut object = fetch(&st);
                        for _ in 0..3 {
                            if !matches!(object, Err(libc::ESTALE)) {
                                break;
                            }
                            st = server.stat_fresh(rest)?;
                            object = fetch(&st);
                        }
                        let object = object?;
                        let at = self
                            .cache
                            .show_file(path, &object, st.mode as u32, st.mtime)?;
                        if let Fetched::Kept(kept) = &object {
                            self.shown.note(path, attrs_of(&st), &at, kept);
                        }
                        Ok(at)
                    }
                    libc::S_IFLNK => Err(libc::ELOOP),
                    _ => Err(libc::EOPNOTSUPP),
                }
            }
            Intent::Write {
                create,
                exclusive,
                truncate,
                append,
                mode,
            } => {
                let (content, mode) = match current {
                    Ok(_) if create && exclusive => return Err(libc::EEXIST),
                    Ok(st) if st.mode as u32 & libc::S_IFMT == libc::S_IFDIR => {
                        return Err(libc::EISDIR)
                    }
                    // A final symlink left unfollowed: O_NOFOLLOW.
                    Ok(st) if st.mode as u32 & libc::S_IFMT == libc::S_IFLNK => {
                        return Err(libc::ELOOP)
                    }
                    Ok(st) if truncate => (None, st.mode as u32),
                    // What others append while it is fetched changes the file: the copy
                    // starts from whatever one fetch found.
                    Ok(st) if append => (
                        Some(Fetched::Once(self.cache.snapshot(fetch_into)?)),
                        st.mode as u32,
                    ),
                    Ok(st) => (Some(fetch(&st)?), st.mode as u32),
                    Err(libc::ENOENT) if create => {
                        server.create(rest, mode)?;
                        (None, mode)
                    }
                    Err(e) => return Err(e),
                };
                let to = Box::new(WriteTo {
                    server: Arc::clone(server),
                    mode,
                });
                self.cache
                    .show_written(path, content.as_deref(), (mode, append), to)
            }
        }
    }

    fn localize_dir(&self, path: &[u8], server: &Server, rest: &[u8]) -> Result<Vec<u8>, Errno> {
        let mut entries = server.list(rest)?;
        let nodes = self.nodes.in_dir(server.authority(), rest);
        entries.extend(nodes.iter().map(|(name, _, kind)| (name.clone(), *kind)));
        let at = self.cache.show_dir(path, &entries)?;
        // Each node's entry is the node itself (a hard link), for getdents' type and inode.
        for (name, local, _) in nodes {
            let entry = std::path::Path::new(std::ffi::OsStr::from_bytes(&at))
                .join(std::ffi::OsStr::from_bytes(&name));
            let _ = std::fs::remove_file(&entry);
            let _ = std::fs::hard_link(&local, &entry);
        }
        Ok(at)
    }

    /// The servers this run has used, as the entries of `/chirp`.
    fn servers_listed(&self) -> Vec<(Vec<u8>, u32)> {
        let servers = self.servers.lock().expect("servers lock");
        servers
            .keys()
            .map(|k| (k.as_bytes().to_vec(), libc::S_IFDIR))
            .collect()
    }
}

/// Where a file written through this driver goes back: its server, with the file's mode.
struct WriteTo {
    server: Arc<Server>,
    mode: u32,
}

impl Destination for WriteTo {
    fn send(&self, path: &[u8], file: &mut std::fs::File) -> Result<(String, Version), Errno> {
        let rest = roost_vfs::path::split_first(path).1;
        let version = self.server.put(rest, sent_mode(self.mode, file), file)?;
        Ok((Cache::key(&self.server.authority, rest), version))
    }
    /// Through a descriptor opened to append, as a direct-mode file's writes go (each
    /// block of up to a server's block made once, even across a lost connection).
    fn append(&self, path: &[u8], file: &mut std::fs::File, from: u64) -> Result<(), Errno> {
        use roost_vfs::driver::OpenFile;
        use std::io::Read;
        let rest = roost_vfs::path::split_first(path).1;
        let how = roost_vfs::driver::OpenMode {
            write: true,
            append: true,
            ..Default::default()
        };
        let remote = crate::direct::DirectFile::open(Arc::clone(&self.server), path, rest, how)?;
        std::io::Seek::seek(file, std::io::SeekFrom::Start(from)).map_err(errno_of)?;
        let mut block = Vec::new();
        loop {
            block.clear();
            let got = file
                .by_ref()
                .take(roost_wire::MAX_BLOCK)
                .read_to_end(&mut block)
                .map_err(errno_of)?;
            if got == 0 {
                return Ok(());
            }
            if remote.append(&block)?.0 < got {
                return Err(libc::EIO);
            }
        }
    }
    fn name(&self, path: &[u8]) -> String {
        let rest = roost_vfs::path::split_first(path).1;
        format!(
            "chirp://{}{}",
            self.server.authority,
            String::from_utf8_lossy(rest)
        )
    }
}

/// The mode a written copy goes back with: the one it was opened with, unless the program
/// changed the copy's since (fchmod on its descriptor: `cp -a` creates a file with the
/// group and other bits off and sets them once written). The copy is made with the
/// owner's read and write bits on, whatever the mode (`Cache::show_written`).
fn sent_mode(opened: u32, copy: &std::fs::File) -> u32 {
    use std::os::unix::fs::MetadataExt;
    match copy.metadata() {
        Ok(m) if m.mode() & 0o7777 != (opened | 0o600) & 0o7777 => m.mode() & 0o7777,
        _ => opened,
    }
}

/// An extended-attribute call a server cannot make (cctools' chirp_server built without
/// xattr support answers `UNKNOWN`): ENOTSUP, as a local file system without xattrs says.
fn unsupported(e: ClientError) -> ClientError {
    match e {
        ClientError::Remote { code, .. }
            if matches!(
                code,
                roost_client::ErrorCode::Unknown | roost_client::ErrorCode::NotSupported
            ) =>
        {
            ClientError::Remote {
                code,
                errno: libc::ENOTSUP,
            }
        }
        other => other,
    }
}

/// A fetched file: an object the cache keeps, or a copy for this open only.
enum Fetched {
    Kept(std::path::PathBuf),
    Once(roost_vfs::cache::OnceObject),
}

impl std::ops::Deref for Fetched {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        match self {
            Fetched::Kept(p) => p,
            Fetched::Once(o) => o,
        }
    }
}

/// Whether `name` is a POSIX ACL. A Chirp server keeps its own ACLs, not these, and
/// refuses `system.` attributes: an ACL set is answered as a file system without ACLs
/// answers it (ENOTSUP), so `cp -a`, `mv` and libacl fall back to the permission bits
/// instead of failing.
fn is_posix_acl(name: &[u8]) -> bool {
    name == b"system.posix_acl_access" || name == b"system.posix_acl_default"
}

/// A version for the cache from a server's attributes.
fn version_of(st: &roost_client::Stat) -> Version {
    Version {
        ino: st.ino as u64,
        size: st.size as u64,
        mtime: st.mtime,
    }
}

/// What a shown copy stands for: the server's attributes that move with its content.
fn attrs_of(st: &roost_client::Stat) -> Attrs {
    Attrs {
        version: version_of(st),
        change: st.ctime,
        mode: st.mode as u32,
    }
}

/// Seconds since the epoch, now.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Whether a file changed so recently that its (size, mtime) could change again unseen.
fn too_recent(st: &roost_client::Stat) -> bool {
    let now = unix_now();
    st.mtime >= now - 2 || st.ctime >= now - 2
}

pub(crate) fn statfs_of(fs: &roost_client::StatFs) -> StatFs {
    StatFs {
        kind: fs.fs_type,
        bsize: fs.bsize,
        blocks: fs.blocks as u64,
        bfree: fs.bfree as u64,
        bavail: fs.bavail as u64,
        files: fs.files as u64,
        ffree: fs.ffree as u64,
    }
}

/// The smallest preferred I/O size a remote file reports (`st_blksize`): the size of a read
/// the client makes in one request (larger ones keep several in flight). A server's own
/// file system says 4 KiB, which sizes the buffers of stdio, Python and coreutils for a disk,
/// not for a round trip; NFS reports its read size likewise.
pub const REMOTE_BLKSIZE: i64 = 64 * 1024;

pub(crate) fn stat_of(st: &roost_client::Stat) -> Stat {
    Stat {
        dev: st.dev as u64,
        ino: st.ino as u64,
        mode: st.mode as u32,
        nlink: st.nlink as u64,
        uid: st.uid as u32,
        gid: st.gid as u32,
        rdev: st.rdev as u64,
        size: st.size as u64,
        blksize: st.blksize.max(REMOTE_BLKSIZE),
        blocks: st.blocks,
        atime: (st.atime, 0),
        mtime: (st.mtime, 0),
        ctime: (st.ctime, 0),
    }
}

impl Driver for ChirpNet {
    fn name(&self) -> &'static str {
        "chirp"
    }
    /// `HOST[:PORT]/PATH` (or `HOST+PORT`), optionally ending in `:direct` or `:cached`.
    fn mount_target(&self, rest: &str, direct: bool) -> Option<(Vec<u8>, bool)> {
        let (rest, direct) = match rest.rsplit_once(':') {
            Some((r, "cached")) => (r, false),
            Some((r, "direct")) => (r, true),
            _ => (rest, direct),
        };
        let authority = rest.split('/').next().unwrap_or("");
        roost_client::split_host_port(authority)?;
        Some((format!("/{rest}").into_bytes(), direct))
    }
    fn mirror(&self) -> Option<&[u8]> {
        Some(self.cache.mirror())
    }
    fn volume<'p>(&self, path: &'p [u8]) -> &'p [u8] {
        roost_vfs::path::split_first(path).0
    }
    fn flush(&self) {
        self.cache.flush();
    }
    /// Sends back what is pending and removes this agent's local copies.
    fn close(&self) {
        self.cache.close();
    }
    fn report(&self) -> Option<String> {
        let servers = self.servers.lock().expect("servers lock");
        if servers.is_empty() {
            return None;
        }
        let mut names: Vec<&String> = servers.keys().collect();
        names.sort();
        let mut out = String::new();
        for name in names {
            let s = &servers[name];
            let calls = s.calls.load(Ordering::Relaxed);
            let micros = s.call_micros.load(Ordering::Relaxed);
            out.push_str(&format!(
                "chirp://{name}: {calls} calls, {:.3} ms, {:.1} µs each, {} reconnects\n",
                micros as f64 / 1e3,
                micros as f64 / calls.max(1) as f64,
                s.reconnects.load(Ordering::Relaxed),
            ));
        }
        let c = &self.cache;
        out.push_str(&format!(
            "remote cache: {} hits, {} misses, {} files written back\n",
            c.hits.load(Ordering::Relaxed),
            c.misses.load(Ordering::Relaxed),
            c.written_back.load(Ordering::Relaxed),
        ));
        Some(out)
    }
    fn readlink(&self, path: &[u8]) -> Result<Vec<u8>, Errno> {
        if Self::is_root(path) {
            return Err(libc::EINVAL);
        }
        let (server, rest) = self.server(path)?;
        server.readlink(&rest)
    }
    fn lock_object(&self, path: &[u8]) -> Result<std::fs::File, Errno> {
        let (server, rest) = self.server(path)?;
        self.cache
            .lock_object(&Cache::key(&server.authority, &rest))
    }

    fn lstat(&self, path: &[u8]) -> Result<Stat, Errno> {
        if Self::is_root(path) {
            return Ok(Self::root_stat());
        }
        let (server, rest) = self.server(path)?;
        if let Some((_, st)) = self.nodes.stat(server.authority(), &rest) {
            return Ok(st);
        }
        server.lstat(&rest).map(|st| stat_of(&st))
    }
    fn stat(&self, path: &[u8]) -> Result<Stat, Errno> {
        if Self::is_root(path) {
            return Ok(Self::root_stat());
        }
        let (server, rest) = self.server(path)?;
        if let Some((_, st)) = self.nodes.stat(server.authority(), &rest) {
            return Ok(st);
        }
        match server.lstat(&rest)? {
            st if st.mode as u32 & libc::S_IFMT == libc::S_IFLNK => server
                .call(&rest, |c, _| c.stat(&rest))
                .map(|st| stat_of(&st)),
            st => Ok(stat_of(&st)),
        }
    }
    fn access(&self, path: &[u8], mode: i32) -> Result<(), Errno> {
        if Self::is_root(path) {
            return if mode & libc::W_OK != 0 {
                Err(libc::EACCES)
            } else {
                Ok(())
            };
        }
        if let Some(local) = self.node(path) {
            return LocalDriver.access(local.as_os_str().as_bytes(), mode);
        }
        let (server, rest) = self.server(path)?;
        server.call(&rest, |c, _| c.access(&rest, mode as u32))
    }
    fn open_read(&self, path: &[u8]) -> Result<Box<dyn roost_vfs::ReadAt>, Errno> {
        let local = self.localize(path, Intent::Read)?;
        roost_vfs::LocalDriver.open_read(&local)
    }
    fn mkdir(&self, path: &[u8], mode: u32) -> Result<(), Errno> {
        if self.node(path).is_some() {
            return Err(libc::EEXIST);
        }
        self.on(path, |s, p| {
            s.change(&[p], |c, retry| match c.mkdir(p, mode) {
                Err(e) if retry && e.errno() == libc::EEXIST => Ok(()),
                r => r,
            })
        })
    }
    fn rmdir(&self, path: &[u8]) -> Result<(), Errno> {
        if self.nodes.any() {
            let (server, rest) = self.server(path)?;
            if !self.nodes.in_dir(server.authority(), &rest).is_empty() {
                return Err(libc::ENOTEMPTY);
            }
        }
        self.on(path, |s, p| {
            s.change(&[p], |c, retry| match c.rmdir(p) {
                Err(e) if retry && e.errno() == libc::ENOENT => Ok(()),
                r => r,
            })?;
            s.remember(p, Err(libc::ENOENT));
            Ok(())
        })?;
        self.cache.dropped(path);
        Ok(())
    }
    fn unlink(&self, path: &[u8]) -> Result<(), Errno> {
        if self.nodes.any() {
            let (server, rest) = self.server(path)?;
            if self.nodes.remove(server.authority(), &rest) {
                return Ok(());
            }
        }
        self.on(path, |s, p| {
            s.change(&[p], |c, retry| match c.unlink(p) {
                Err(e) if retry && e.errno() == libc::ENOENT => Ok(()),
                r => r,
            })?;
            // Gone as this run made it: the next lookup (a compiler's output made again
            // after it removed it) need not ask.
            s.remember(p, Err(libc::ENOENT));
            Ok(())
        })?;
        // A copy the program still writes is its alone now: it must not bring the name back.
        self.cache.dropped(path);
        Ok(())
    }
    fn rename(&self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        let (to_server, to_rest) = self.server(to)?;
        if self.node(from).is_some() {
            return self.rename_node(from, &to_server, &to_rest);
        }
        self.on(from, |s, p| {
            s.change(&[p, &to_rest], |c, retry| match c.rename(p, &to_rest) {
                Err(e) if retry && e.errno() == libc::ENOENT && c.lstat(&to_rest).is_ok() => Ok(()),
                r => r,
            })
        })?;
        // A FIFO or socket the new name held is replaced.
        self.nodes.remove(to_server.authority(), &to_rest);
        // What replaced `to` is gone; copies still being written below `from` follow it.
        self.cache.dropped(to);
        self.cache.moved(from, to);
        Ok(())
    }
    fn link(&self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        if self.node(to).is_some() {
            return Err(libc::EEXIST);
        }
        if self.node(from).is_some() {
            // Its pipe is this host's: a second name for it cannot be made on the server.
            return Err(libc::EXDEV);
        }
        let (_, to_rest) = self.server(to)?;
        self.on(from, |s, p| {
            s.change(&[p, &to_rest], |c, retry| match c.link(p, &to_rest) {
                Err(e) if retry && e.errno() == libc::EEXIST => Ok(()),
                r => r,
            })
        })
    }
    fn symlink(&self, target: &[u8], path: &[u8]) -> Result<(), Errno> {
        if self.node(path).is_some() {
            return Err(libc::EEXIST);
        }
        self.on(path, |s, p| {
            s.change(&[p], |c, retry| match c.symlink(target, p) {
                Err(e) if retry && e.errno() == libc::EEXIST => Ok(()),
                r => r,
            })
        })
    }
    fn chmod(&self, path: &[u8], mode: u32) -> Result<(), Errno> {
        if let Some(local) = self.node(path) {
            return LocalDriver.chmod(local.as_os_str().as_bytes(), mode);
        }
        self.on(path, |s, p| {
            s.change(&[p], |c, _| c.chmod(p, mode & 0o7777))
        })
    }
    fn chown(&self, path: &[u8], uid: u32, gid: u32, follow: bool) -> Result<(), Errno> {
        if self.node(path).is_some() {
            return Ok(()); // as the server answers for its own files
        }
        let id = |v: u32| if v == u32::MAX { -1 } else { i64::from(v) };
        self.on(path, |s, p| {
            s.change(&[p], |c, _| {
                if follow {
                    c.chown(p, id(uid), id(gid))
                } else {
                    c.lchown(p, id(uid), id(gid))
                }
            })
        })
    }
    fn truncate(&self, path: &[u8], len: u64) -> Result<(), Errno> {
        self.on(path, |s, p| s.change(&[p], |c, _| c.truncate(p, len)))
    }
    fn utime(&self, path: &[u8], atime: Option<i64>, mtime: Option<i64>) -> Result<(), Errno> {
        if let Some(local) = self.node(path) {
            return LocalDriver.utime(local.as_os_str().as_bytes(), atime, mtime);
        }
        self.on(path, |s, p| {
            let (a, m) = s.times(p, atime, mtime)?;
            s.change(&[p], |c, _| c.utime(p, a, m))
        })
    }
    fn lutime(&self, path: &[u8], atime: Option<i64>, mtime: Option<i64>) -> Result<(), Errno> {
        if self.node(path).is_some() {
            return self.utime(path, atime, mtime);
        }
        self.on(path, |s, p| {
            let (a, m) = s.times(p, atime, mtime)?;
            // A server without roost's `lutime` answers "invalid request": it cannot.
            match s.change(&[p], |c, _| c.lutime(p, a, m)) {
                Err(libc::EINVAL) => Err(libc::EOPNOTSUPP),
                r => r,
            }
        })
    }
    fn statfs(&self, path: &[u8]) -> Result<StatFs, Errno> {
        if Self::is_root(path) {
            return Ok(StatFs::default());
        }
        let (server, rest) = self.server(path)?;
        server
            .call(&rest, |c, _| c.statfs(&rest))
            .map(|fs| statfs_of(&fs))
    }
    fn readdir(&self, path: &[u8]) -> Result<Vec<(Vec<u8>, u32)>, Errno> {
        if Self::is_root(path) {
            return Ok(self.servers_listed());
        }
        let (server, rest) = self.server(path)?;
        let mut entries = server.list(&rest)?;
        let nodes = self.nodes.in_dir(server.authority(), &rest);
        entries.extend(nodes.into_iter().map(|(name, _, kind)| (name, kind)));
        Ok(entries)
    }
    fn getxattr(&self, path: &[u8], name: &[u8], follow: bool) -> Result<Vec<u8>, Errno> {
        if Self::is_root(path) {
            return Err(libc::ENODATA);
        }
        let (server, rest) = self.server(path)?;
        server.call(&rest, |c, _| {
            if follow {
                c.getxattr(&rest, name)
            } else {
                c.lgetxattr(&rest, name)
            }
            .map_err(unsupported)
        })
    }
    fn listxattr(&self, path: &[u8], follow: bool) -> Result<Vec<u8>, Errno> {
        if Self::is_root(path) {
            return Ok(Vec::new());
        }
        let (server, rest) = self.server(path)?;
        let names = server.call(&rest, |c, _| {
            if follow {
                c.listxattr(&rest)
            } else {
                c.llistxattr(&rest)
            }
            .map_err(unsupported)
        })?;
        Ok(names
            .into_iter()
            .flat_map(|mut n| {
                n.push(0);
                n
            })
            .collect())
    }
    fn setxattr(
        &self,
        path: &[u8],
        name: &[u8],
        value: &[u8],
        flags: i32,
        follow: bool,
    ) -> Result<(), Errno> {
        if is_posix_acl(name) {
            return Err(libc::ENOTSUP);
        }
        self.on(path, |s, p| {
            s.change(&[p], |c, _| {
                if follow {
                    c.setxattr(p, name, value, flags)
                } else {
                    c.lsetxattr(p, name, value, flags)
                }
                .map_err(unsupported)
            })
        })
    }
    fn removexattr(&self, path: &[u8], name: &[u8], follow: bool) -> Result<(), Errno> {
        self.on(path, |s, p| {
            s.change(&[p], |c, _| {
                if follow {
                    c.removexattr(p, name)
                } else {
                    c.lremovexattr(p, name)
                }
                .map_err(unsupported)
            })
        })
    }
    fn open_file(&self, path: &[u8], how: OpenMode) -> Result<Box<dyn OpenFile>, Errno> {
        if Self::is_root(path) {
            return Err(libc::EISDIR);
        }
        let (server, rest) = self.server(path)?;
        let file = crate::direct::DirectFile::open(server, path, &rest, how)?;
        Ok(Box::new(file))
    }
    fn localize(&self, path: &[u8], intent: Intent) -> Result<Vec<u8>, Errno> {
        if Self::is_root(path) {
            if intent != Intent::Read {
                return Err(libc::EISDIR);
            }
            return self.cache.show_dir(path, &self.servers_listed());
        }
        let (server, rest) = self.server(path)?;
        if let Some(local) = self.nodes.local(server.authority(), &rest) {
            return Ok(local.into_os_string().into_encoded_bytes());
        }
        self.localize_file(path, &server, &rest, intent)
    }
    fn mkfifo(&self, path: &[u8], mode: u32) -> Result<(), Errno> {
        let (server, rest) = self.server(path)?;
        self.may_make(&server, &rest).map_err(|e| match e {
            libc::EADDRINUSE => libc::EEXIST,
            e => e,
        })?;
        let dir = self.cache.private_dir("nodes")?;
        self.nodes.make(&dir, server.authority(), &rest, mode)
    }
    fn unix_socket(&self, path: &[u8], bind: bool) -> Result<Vec<u8>, Errno> {
        let (server, rest) = self.server(path)?;
        let local = if bind {
            self.may_make(&server, &rest)?;
            let dir = self.cache.private_dir("nodes")?;
            self.nodes.reserve(&dir, server.authority(), &rest)?
        } else {
            match self.nodes.local(server.authority(), &rest) {
                Some(local) => local,
                // A file there is no socket (as the kernel answers a connect to one).
                None => {
                    return Err(server
                        .lstat(&rest)
                        .map_or_else(|e| e, |_| libc::ECONNREFUSED))
                }
            }
        };
        Ok(local.into_os_string().into_encoded_bytes())
    }
}

impl ChirpNet {
    /// Whether a FIFO or socket may be made at `rest` on `server`: no name there
    /// (EADDRINUSE, as bind says), in a directory.
    fn may_make(&self, server: &Server, rest: &[u8]) -> Result<(), Errno> {
        if self.nodes.local(server.authority(), rest).is_some() || server.lstat(rest).is_ok() {
            return Err(libc::EADDRINUSE);
        }
        match server.lstat(roost_vfs::path::parent(rest)) {
            Ok(st) if st.mode as u32 & libc::S_IFMT == libc::S_IFDIR => Ok(()),
            Ok(_) => Err(libc::ENOTDIR),
            Err(e) => Err(e),
        }
    }

    /// rename of a FIFO or socket the run made: the name moves, and what `to` named on
    /// the server (a file; a directory refuses) is removed, as a rename replaces it.
    fn rename_node(&self, from: &[u8], to_server: &Server, to: &[u8]) -> Result<(), Errno> {
        let (server, rest) = self.server(from)?;
        if server.authority() != to_server.authority() {
            return Err(libc::EXDEV);
        }
        match server.lstat(to) {
            Ok(st) if st.mode as u32 & libc::S_IFMT == libc::S_IFDIR => return Err(libc::EISDIR),
            Ok(_) => server.change(&[to], |c, retry| match c.unlink(to) {
                Err(e) if retry && e.errno() == libc::ENOENT => Ok(()),
                r => r,
            })?,
            Err(libc::ENOENT) => match server.lstat(roost_vfs::path::parent(to)) {
                Ok(st) if st.mode as u32 & libc::S_IFMT == libc::S_IFDIR => {}
                Ok(_) => return Err(libc::ENOTDIR),
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        }
        self.nodes.rename(server.authority(), &rest, to);
        Ok(())
    }
}

/// Why an attempt of [`Server::retrying`] failed.
pub(crate) enum Failure {
    /// The server's answer (or a local verdict): the call fails with this errno.
    Answer(Errno),
    /// The connection was lost or never made: try again.
    Lost(ClientError),
}

/// Adds the time since its start to a counter of microseconds when dropped (a call's time,
/// however it returns).
struct Elapsed<'a>(Instant, &'a AtomicU64);

impl Drop for Elapsed<'_> {
    fn drop(&mut self) {
        self.1
            .fetch_add(self.0.elapsed().as_micros() as u64, Ordering::Relaxed);
    }
}

/// Answers by path, each with when it was learnt.
type Learnt<T> = HashMap<Vec<u8>, (T, Instant)>;

/// One server: its connections and attribute cache.
pub struct Server {
    authority: String,
    options: ChirpOptions,
    /// Idle authenticated connections.
    pool: Mutex<Vec<Client>>,
    /// The connections direct-mode files are open on ([`crate::direct::Line`]).
    pub(crate) lines: Mutex<Vec<Arc<crate::direct::Line>>>,
    /// lstat answers (and symlink targets) by path, with when they were learnt.
    attrs: Mutex<Learnt<Result<roost_client::Stat, Errno>>>,
    links: Mutex<Learnt<Vec<u8>>>,
    /// Reached at least once in this run: from then on a lost connection is retried.
    reached: AtomicBool,
    /// Calls made, their total time in microseconds, and reconnections, for `--summary`.
    calls: AtomicU64,
    call_micros: AtomicU64,
    reconnects: AtomicU64,
    /// A failure has been said and not yet followed by a success.
    said_down: AtomicBool,
    /// The server has no SHA-256 `hash` RPC: cached copies are trusted on their version.
    no_digest: AtomicBool,
}

impl Server {
    fn new(authority: String, options: ChirpOptions) -> Server {
        Server {
            authority,
            options,
            pool: Mutex::new(Vec::new()),
            lines: Mutex::new(Vec::new()),
            attrs: Mutex::new(HashMap::new()),
            links: Mutex::new(HashMap::new()),
            reached: AtomicBool::new(false),
            calls: AtomicU64::new(0),
            call_micros: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            said_down: AtomicBool::new(false),
            no_digest: AtomicBool::new(false),
        }
    }

    /// An idle connection, or a new one.
    fn take(&self) -> Result<Client, ClientError> {
        if let Some(c) = self.pool.lock().expect("pool lock").pop() {
            return Ok(c);
        }
        // Connecting may take up to the connect timeout (a reply that is slow to come
        // says so by itself: `roost_client::receive::when_slow`).
        roost_vfs::about_to_block();
        let c = Client::connect(&self.authority, &self.options.client)?;
        let was_reached = self.reached.swap(true, Ordering::Relaxed);
        let was_down = self.said_down.swap(false, Ordering::Relaxed);
        if was_reached && was_down {
            self.reconnects.fetch_add(1, Ordering::Relaxed);
            eprintln!("roost: chirp://{}: reconnected", self.authority);
        } else if self.options.verbose {
            eprintln!(
                "roost: chirp://{}: connected as {}",
                self.authority,
                c.subject()
            );
        }
        Ok(c)
    }

    pub(crate) fn authority(&self) -> &str {
        &self.authority
    }

    pub(crate) fn give_back(&self, c: Client) {
        if !c.is_broken() {
            self.pool.lock().expect("pool lock").push(c);
        }
    }

    /// Runs `op` on a connection (`retry` tells it whether an earlier attempt may have
    /// reached the server), reconnecting after transport failures with exponential
    /// back-off until the timeout. A server error is the call's answer.
    pub fn call<T>(
        &self,
        path: &[u8],
        mut op: impl FnMut(&mut Client, bool) -> Result<T, ClientError>,
    ) -> Result<T, Errno> {
        self.retrying(path, |retry| {
            let mut c = self.connection()?;
            match op(&mut c, retry) {
                Ok(v) => {
                    self.give_back(c);
                    Ok(v)
                }
                Err(e) if !e.breaks_connection() => {
                    self.give_back(c);
                    Err(Failure::Answer(e.errno()))
                }
                Err(e) => {
                    // The request may sit unsent in the kernel: it must not reach the
                    // server after the retry.
                    c.abort();
                    Err(Failure::Lost(e))
                }
            }
        })
    }

    /// An idle connection or a new one, as an attempt of [`Server::retrying`] needs it:
    /// refused authentication is the answer (EACCES, said once), anything else is lost.
    pub(crate) fn connection(&self) -> Result<Client, Failure> {
        match self.take() {
            Ok(c) => Ok(c),
            Err(e @ ClientError::AuthFailed(_)) => {
                eprintln!("roost: chirp://{}: {e}", self.authority);
                Err(Failure::Answer(libc::EACCES))
            }
            Err(e) => Err(Failure::Lost(e)),
        }
    }

    /// Makes attempts (`retry`: an earlier one may have reached the server) until one
    /// answers: after a lost connection, again with exponential back-off until the
    /// timeout, then EIO with one line naming the server and the cause. A server never
    /// reached in this run fails at once.
    pub(crate) fn retrying<T>(
        &self,
        path: &[u8],
        mut attempt: impl FnMut(bool) -> Result<T, Failure>,
    ) -> Result<T, Errno> {
        let started = Instant::now();
        let deadline = started + self.options.timeout;
        let mut delay = Duration::from_millis(50);
        let mut retry = false;
        self.calls.fetch_add(1, Ordering::Relaxed);
        let _timed = Elapsed(started, &self.call_micros);
        loop {
            let failure = match attempt(retry) {
                Ok(v) => return Ok(v),
                Err(Failure::Answer(e)) => return Err(e),
                Err(Failure::Lost(e)) => e,
            };
            retry = true;
            let name = String::from_utf8_lossy(path);
            if !self.reached.load(Ordering::Relaxed) {
                // Never reached in this run: a wrong address or port, or no server there.
                if !self.said_down.swap(true, Ordering::Relaxed) {
                    eprintln!("roost: chirp://{}{name}: {failure}", self.authority);
                }
                return Err(failure.errno());
            }
            self.pool.lock().expect("pool lock").clear();
            if Instant::now() + delay > deadline {
                eprintln!(
                    "roost: chirp://{}{name}: {failure}; gave up after {} s (--timeout)",
                    self.authority,
                    self.options.timeout.as_secs()
                );
                return Err(libc::EIO);
            }
            if !self.said_down.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "roost: chirp://{}: {failure}; reconnecting until --timeout",
                    self.authority
                );
            }
            std::thread::sleep(delay);
            delay = (delay * 2).min(Duration::from_secs(5));
        }
    }

    /// A name or attribute change on `paths` (the first is named in messages): made, then
    /// the cached attributes of those names, of everything below them and of their parent
    /// directories (whose times and link counts change) are dropped. Other names of a
    /// changed file (hard links) keep theirs until they expire.
    fn change<T>(
        &self,
        paths: &[&[u8]],
        op: impl FnMut(&mut Client, bool) -> Result<T, ClientError>,
    ) -> Result<T, Errno> {
        let r = self.call(paths[0], op);
        self.forget(paths);
        r
    }

    /// Drops what is cached about `path` (changed through an open file).
    /// The times to set on `path` (the namespace followed any symlinks before it): each
    /// left `None` stays as it is.
    fn times(
        &self,
        path: &[u8],
        atime: Option<i64>,
        mtime: Option<i64>,
    ) -> Result<(i64, i64), Errno> {
        if let (Some(a), Some(m)) = (atime, mtime) {
            return Ok((a, m));
        }
        let old = self.lstat(path)?;
        Ok((atime.unwrap_or(old.atime), mtime.unwrap_or(old.mtime)))
    }

    pub(crate) fn forget_attrs(&self, path: &[u8]) {
        self.forget(&[path]);
    }

    fn forget(&self, paths: &[&[u8]]) {
        let stale = |name: &[u8]| {
            paths.iter().any(|p| {
                roost_vfs::path::strip_prefix(name, p).is_some()
                    || roost_vfs::path::parent(p) == name
            })
        };
        self.attrs
            .lock()
            .expect("attrs lock")
            .retain(|name, _| !stale(name));
        self.links
            .lock()
            .expect("links lock")
            .retain(|name, _| !stale(name));
    }

    /// The attributes of `path` without following a final symlink, cached briefly.
    fn lstat(&self, path: &[u8]) -> Result<roost_client::Stat, Errno> {
        if let Some((answer, at)) = self.attrs.lock().expect("attrs lock").get(path) {
            if at.elapsed() < self.options.attr_ttl {
                return *answer;
            }
        }
        // The root is never a symlink; some servers refuse to look it up in its parent.
        let answer = if path == b"/" {
            self.call(path, |c, _| c.stat(path))
        } else {
            self.call(path, |c, _| c.lstat(path))
        };
        self.remember(path, answer);
        answer
    }

    fn remember(&self, path: &[u8], answer: Result<roost_client::Stat, Errno>) {
        let mut attrs = self.attrs.lock().expect("attrs lock");
        if attrs.len() > 1 << 16 {
            attrs.clear();
        }
        attrs.insert(path.to_vec(), (answer, Instant::now()));
    }

    /// The attributes now, without following a final symlink (for validating a cached
    /// copy; the namespace has followed every symlink a call follows): never from the cache.
    fn stat_fresh(&self, path: &[u8]) -> Result<roost_client::Stat, Errno> {
        let answer = if path == b"/" {
            self.call(path, |c, _| c.stat(path))
        } else {
            self.call(path, |c, _| c.lstat(path))
        };
        self.remember(path, answer);
        answer
    }

    /// [`Server::stat_fresh`] for a write-open, which needs the attributes as of its call:
    /// an answer learnt since the program's call being answered started (the walk that
    /// led here has just asked) is that.
    fn stat_in_call(&self, path: &[u8]) -> Result<roost_client::Stat, Errno> {
        if let (Some(started), Some((answer, at))) = (
            roost_vfs::call_started(),
            self.attrs.lock().expect("attrs lock").get(path),
        ) {
            if *at >= started {
                return *answer;
            }
        }
        self.stat_fresh(path)
    }

    fn readlink(&self, path: &[u8]) -> Result<Vec<u8>, Errno> {
        if self.lstat(path)?.mode as u32 & libc::S_IFMT != libc::S_IFLNK {
            return Err(libc::EINVAL);
        }
        if let Some((target, at)) = self.links.lock().expect("links lock").get(path) {
            if at.elapsed() < self.options.attr_ttl {
                return Ok(target.clone());
            }
        }
        let target = self.call(path, |c, _| c.readlink(path))?;
        self.links
            .lock()
            .expect("links lock")
            .insert(path.to_vec(), (target.clone(), Instant::now()));
        Ok(target)
    }

    /// A directory's entries with their types (`S_IFMT` of each one's lstat); the
    /// attributes are cached on the way, so `ls -l` after `getdents` asks nothing more.
    /// A listing's own attributes follow symlinks (cctools' and roost's servers stat each
    /// entry), so the names come from it and their lstats from one pipelined batch, but
    /// for those whose attributes are known within the TTL (a directory listed again: make
    /// reads each directory it searches, once per run of it).
    fn list(&self, path: &[u8]) -> Result<Vec<(Vec<u8>, u32)>, Errno> {
        let names: Vec<Vec<u8>> = self
            .call(path, |c, _| c.getdir(path))?
            .into_iter()
            .filter(|n| n != b"." && n != b"..")
            .collect();
        let paths: Vec<Vec<u8>> = names
            .iter()
            .map(|n| roost_vfs::path::join(path, n))
            .collect();
        let known: Vec<Option<roost_client::Stat>> = {
            let attrs = self.attrs.lock().expect("attrs lock");
            paths
                .iter()
                .map(|p| match attrs.get(p) {
                    Some((Ok(st), at)) if at.elapsed() < self.options.attr_ttl => Some(*st),
                    _ => None,
                })
                .collect()
        };
        let requests: Vec<roost_wire::Request> = paths
            .iter()
            .zip(&known)
            .filter(|(_, k)| k.is_none())
            .map(|(p, _)| roost_wire::Request::Lstat { path: p.clone() })
            .collect();
        let mut replies = if requests.is_empty() {
            Vec::new()
        } else {
            self.call(path, |c, _| c.pipeline(&requests, 64))?
        }
        .into_iter();
        let now = Instant::now();
        let mut attrs = self.attrs.lock().expect("attrs lock");
        let mut out = Vec::with_capacity(names.len());
        for ((name, full), known) in names.into_iter().zip(paths).zip(known) {
            let answer = match known {
                Some(st) => Ok(st),
                None => {
                    let answer = match replies.next() {
                        Some(Ok(roost_client::Reply::Stat(_, st))) => Ok(st),
                        Some(Ok(_)) | None => Err(libc::EPROTO),
                        Some(Err(e)) => Err(e.errno()),
                    };
                    attrs.insert(full, (answer, now));
                    answer
                }
            };
            match answer {
                Ok(st) => out.push((name, st.mode as u32 & libc::S_IFMT)),
                // Gone since the listing: not listed.
                Err(libc::ENOENT) => {}
                Err(_) => out.push((name, libc::S_IFREG)),
            }
        }
        Ok(out)
    }

    /// Creates an empty file (O_CREAT on a missing name), exclusively: a retry that finds
    /// it made counts as done.
    fn create(&self, path: &[u8], mode: u32) -> Result<(), Errno> {
        let flags = OpenFlags {
            write: true,
            create: true,
            exclusive: true,
            ..OpenFlags::default()
        };
        let made = self.change(&[path], |c, retry| {
            match c.open(path, flags, mode & 0o7777) {
                // Nothing to do if the close fails: its answer is read with the next call.
                Ok((fd, st)) => c.close_unanswered(fd).map(|()| Some(st)),
                Err(e) if retry && e.errno() == libc::EEXIST => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        // The new file's attributes came with the open: the write-back's look at its
        // links, and the next lookup, need not ask again.
        if let Some(st) = made {
            self.remember(path, Ok(st));
        }
        Ok(())
    }

    /// Stores `file` as the whole of `path`; returns the version the server then holds.
    fn put(&self, path: &[u8], mode: u32, file: &mut std::fs::File) -> Result<Version, Errno> {
        use roost_wire::Request;
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata().map_err(errno_of)?;
        // A file with other names is written in place, so they keep seeing it (a putfile
        // replaces the file, atomically); either way its times follow (a program may have
        // set them: `touch` does, through its descriptor), and its new attributes come back
        // in the same round trip.
        let linked = self.lstat(path).is_ok_and(|st| st.nlink > 1);
        let flags = OpenFlags {
            write: true,
            create: true,
            ..OpenFlags::default()
        };
        let st = self.change(&[path], |c, _| {
            std::io::Seek::rewind(file).map_err(ClientError::Local)?;
            let mut last = Vec::new();
            if linked {
                let (fd, _) = c.open(path, flags, mode & 0o7777)?;
                if let Err(e) = c.write_pipelined(fd, 0, file, 64 * 1024, 8) {
                    let _ = c.close(fd);
                    return Err(e);
                }
                last.push(Request::Ftruncate {
                    fd,
                    length: meta.len(),
                });
                last.push(Request::Close { fd });
            } else {
                c.putfile(path, mode & 0o7777, meta.len(), file)?;
            }
            last.push(Request::Utime {
                path: path.to_vec(),
                actime: meta.atime(),
                modtime: meta.mtime(),
            });
            last.push(Request::Lstat {
                path: path.to_vec(),
            });
            let mut replies = c.pipeline(&last, last.len())?;
            let stat = replies.pop().expect("one reply per request");
            replies.into_iter().try_for_each(|r| r.map(drop))?;
            match stat? {
                roost_client::Reply::Stat(_, st) => Ok(st),
                _ => Err(ClientError::Protocol(roost_wire::WireError::BadReply(
                    "lstat",
                ))),
            }
        })?;
        // Read back after the write in the same round trip: what a lookup would be told.
        self.remember(path, Ok(st));
        Ok(version_of(&st))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_paths_name_a_server_and_a_path_on_it() {
        assert_eq!(
            roost_vfs::path::split_first(b"/h:9/a/b"),
            (&b"h:9"[..], &b"/a/b"[..])
        );
        assert_eq!(roost_vfs::path::split_first(b"/h"), (&b"h"[..], &b"/"[..]));
        assert_eq!(roost_vfs::path::split_first(b"/"), (&b""[..], &b"/"[..]));
        assert!(ChirpNet::is_root(b"/"));
        assert!(!ChirpNet::is_root(b"/h"));
    }

    #[test]
    fn mount_targets_name_a_server_a_path_and_a_mode() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path(), roost_vfs::cache::DEFAULT_LIMIT, false);
        let chirp: Arc<dyn Driver> = Arc::new(ChirpNet::new(cache, ChirpOptions::default()));
        let target = |direct: bool, physical: &str| {
            let mut drivers = roost_vfs::Registry::new();
            drivers.add("chirp", Arc::clone(&chirp), direct);
            drivers
                .target(physical)
                .map(|t| t.map(|t| format!("{t:?}")))
        };
        let direct = |physical: &str| target(true, physical).expect("a chirp target");
        assert_eq!(direct("/chirp/h:9/x/").unwrap(), "chirp:/h:9/x:direct");
        assert_eq!(direct("chirp://h/x:cached").unwrap(), "chirp:/h/x");
        assert_eq!(
            direct("chirp://h+9/x:direct").unwrap(),
            "chirp:/h+9/x:direct"
        );
        assert_eq!(target(false, "/chirp/h/x").unwrap().unwrap(), "chirp:/h/x");
        for bad in ["chirp://h:0/x", "/chirp/:9/x", "chirp://a:b:c/x"] {
            assert_eq!(
                direct(bad).unwrap_err(),
                format!("{bad}: expected chirp://HOST[:PORT]/PATH")
            );
        }
    }
}
