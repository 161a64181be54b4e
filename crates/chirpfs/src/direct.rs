//! Files used in place on a Chirp server (direct mode, [`OpenFile`]). A Chirp descriptor
//! belongs to the connection that opened it, so each file is bound to one of the server's
//! *lines* ([`Line`]): up to [`MAX_LINES`] connections that the run's direct-mode files
//! share (an unused one is taken first, a new one made while there are fewer, else the one
//! with the fewest files), rather than a connection per open file.
//!
//! Failures: a lost connection is re-established as [`Server::retrying`] does for any
//! call, and the file is opened again by name, on a line that still works; if the name now
//! leads to another file (device or inode changed) or to none, the descriptor is stale:
//! this call and every later one fail with ESTALE, and the program's other files carry on.
//! A line lost to one file's call is lost to all of its files, which open themselves again
//! at their next call; the server's other lines carry on. Every retried call is safe to
//! make twice — reads, `pwrite` at an explicit offset, truncate, chmod, chown, fsync and
//! stat — except an append, which the server makes at the end as it finds it: see
//! [`DirectFile::append`] for how a lost one is settled before it is sent again.

use crate::{Failure, Server};
use roost_client::{Client, Error as ClientError, OpenFlags};
use roost_vfs::driver::{OpenFile, OpenMode, Stat, StatFs};
use roost_vfs::Errno;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

/// The most connections to one server that direct-mode files are spread over.
pub(crate) const MAX_LINES: usize = 4;

/// A connection direct-mode files share.
pub(crate) struct Line {
    /// `None` once given up.
    client: Mutex<Option<Client>>,
    /// Given up after a failure: its files open themselves again elsewhere.
    lost: AtomicBool,
    /// Files open on it.
    files: AtomicUsize,
}

impl Line {
    fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    fn files(&self) -> usize {
        self.files.load(Ordering::Relaxed)
    }

    /// Of `lines` (lost ones dropped first), the one a file opened now takes: an unused
    /// one, or the least used once there are [`MAX_LINES`]; `None`: make another.
    fn pick(lines: &mut Vec<Arc<Line>>) -> Option<Arc<Line>> {
        lines.retain(|l| !l.is_lost());
        let least = lines.iter().min_by_key(|l| l.files())?;
        (least.files() == 0 || lines.len() >= MAX_LINES).then(|| Arc::clone(least))
    }

    /// The line a file opened now goes on.
    fn choose(server: &Server) -> Result<Arc<Line>, Failure> {
        if let Some(line) = Line::pick(&mut server.lines.lock().expect("lines lock")) {
            return Ok(line);
        }
        // Connecting may take a while: not under the lock, so another open may have made
        // a line meanwhile (then this connection goes to the pool).
        let client = server.connection()?;
        let mut lines = server.lines.lock().expect("lines lock");
        if let Some(line) = Line::pick(&mut lines) {
            drop(lines);
            server.give_back(client);
            return Ok(line);
        }
        let line = Arc::new(Line {
            client: Mutex::new(Some(client)),
            lost: AtomicBool::new(false),
            files: AtomicUsize::new(0),
        });
        lines.push(Arc::clone(&line));
        Ok(line)
    }

    /// Runs `op` on the line's connection: `None` when the line was given up before
    /// (nothing was sent); a failure that breaks the connection gives the line up.
    fn call<T>(
        &self,
        op: impl FnOnce(&mut Client) -> Result<T, ClientError>,
    ) -> Option<Result<T, Failure>> {
        let mut held = self.lock()?;
        Some(op(&mut held).map_err(|e| self.failed(&mut held, e)))
    }

    /// The connection, for one call; `None` if the line was given up. Another file's call
    /// may hold it: waiting for it is blocking, which the agent must hear of first.
    fn lock(&self) -> Option<Held<'_>> {
        let mut guard = match self.client.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::WouldBlock) => {
                roost_vfs::about_to_block();
                self.client.lock().unwrap_or_else(|e| self.poisoned(e))
            }
            Err(TryLockError::Poisoned(e)) => self.poisoned(e),
        };
        if self.is_lost() || guard.as_ref().map_or(true, Client::is_broken) {
            self.give_up(&mut guard);
            return None;
        }
        Some(Held(guard))
    }

    /// Gives the line up: its files open themselves again elsewhere, and its connection is
    /// aborted (a request may sit unsent in the kernel, and it must not reach the server
    /// after a retry).
    fn give_up(&self, client: &mut Option<Client>) {
        self.lost.store(true, Ordering::Relaxed);
        if let Some(client) = client.take() {
            client.abort();
        }
    }

    /// A call panicked half-way with the line held: what it left unread is not to be read
    /// as another call's answer.
    fn poisoned<'a>(
        &self,
        e: std::sync::PoisonError<MutexGuard<'a, Option<Client>>>,
    ) -> MutexGuard<'a, Option<Client>> {
        self.lost.store(true, Ordering::Relaxed);
        e.into_inner()
    }

    /// A call on the line failed with `e`: the server's answer, or a lost connection,
    /// which gives the line up.
    fn failed(&self, held: &mut Held<'_>, e: ClientError) -> Failure {
        if !e.breaks_connection() {
            return Failure::Answer(e.errno());
        }
        self.give_up(&mut held.0);
        Failure::Lost(e)
    }

    /// Runs `op` on a line [`Line::choose`] gives, on another if that one was given up
    /// before anything was sent: the line it ran on, and what it answered.
    fn run_on_one<T>(
        server: &Server,
        mut op: impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Result<(Arc<Line>, T), Failure> {
        loop {
            let line = Line::choose(server)?;
            if let Some(answer) = line.call(&mut op) {
                return answer.map(|v| (line, v));
            }
        }
    }
}

/// A line's connection, held for one call ([`Line::lock`] saw it there).
struct Held<'a>(MutexGuard<'a, Option<Client>>);

impl std::ops::Deref for Held<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.0.as_ref().expect("a held line has its connection")
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.0.as_mut().expect("a held line has its connection")
    }
}

/// A file open on a line: the server's descriptor for it there.
struct Opened {
    line: Arc<Line>,
    fd: i64,
}

impl Opened {
    fn new(line: Arc<Line>, fd: i64) -> Opened {
        line.files.fetch_add(1, Ordering::Relaxed);
        Opened { line, fd }
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.line.files.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One file open in place on a server.
pub struct DirectFile {
    server: Arc<Server>,
    /// The driver path (`/HOST:PORT/PATH`) and the path on the server.
    path: Vec<u8>,
    rest: Vec<u8>,
    /// How to open it again after a lost connection (never creating or truncating; its
    /// `append` is [`DirectFile::appends`]).
    reopen: OpenFlags,
    /// The server's descriptor appends (opened with `a`): changed by
    /// [`OpenFile::set_append`], which has the file opened again.
    appends: AtomicBool,
    /// Where the file ended after this descriptor's last append (its size when opened,
    /// before the first): how a lost append is told made or not.
    end: AtomicU64,
    /// The file's identity when first opened.
    identity: (i64, i64),
    /// `None` after a lost connection, until the next call opens the file again; `Err`
    /// once the name leads elsewhere.
    state: Mutex<Result<Option<Opened>, Errno>>,
}

impl DirectFile {
    /// Opens `rest` on `server` as `how` asks. A retried exclusive create that finds the
    /// file made counts as done (the first attempt made it).
    pub(crate) fn open(
        server: Arc<Server>,
        path: &[u8],
        rest: &[u8],
        how: OpenMode,
    ) -> Result<DirectFile, Errno> {
        let flags = OpenFlags {
            read: how.read,
            write: how.write,
            create: how.create,
            truncate: how.truncate,
            exclusive: how.exclusive,
            append: how.append,
            ..OpenFlags::default()
        };
        let reopen = OpenFlags {
            create: false,
            truncate: false,
            exclusive: false,
            ..flags
        };
        let mode = how.mode & 0o7777;
        // An open was sent and its answer lost: a retried exclusive create that finds the
        // file counts as done (that open made it).
        let mut sent = false;
        let (opened, st) = server.retrying(rest, |_| {
            let (line, (fd, st)) = Line::run_on_one(&server, |c| {
                let sent_before = std::mem::replace(&mut sent, true);
                match c.open(rest, flags, mode) {
                    Err(e) if sent_before && how.exclusive && e.errno() == libc::EEXIST => {
                        c.open(rest, reopen, mode)
                    }
                    other => other,
                }
            })?;
            Ok((Opened::new(line, fd), st))
        })?;
        let is = st.mode as u32 & libc::S_IFMT;
        if is != libc::S_IFREG {
            close(opened);
            return Err(if is == libc::S_IFDIR {
                libc::EISDIR
            } else {
                libc::EOPNOTSUPP
            });
        }
        if how.create || how.truncate {
            server.forget_attrs(rest);
        }
        Ok(DirectFile {
            server,
            path: path.to_vec(),
            rest: rest.to_vec(),
            reopen,
            appends: AtomicBool::new(how.append),
            end: AtomicU64::new(st.size as u64),
            identity: (st.dev, st.ino),
            state: Mutex::new(Ok(Some(opened))),
        })
    }

    /// Runs `op` on the file, opening it again first after a lost connection.
    fn with<T>(
        &self,
        mut op: impl FnMut(&mut Client, i64) -> Result<T, ClientError>,
    ) -> Result<T, Errno> {
        let mut state = self.state.lock().expect("direct file lock");
        let server = &self.server;
        server.retrying(&self.rest, |_| loop {
            let opened = match &mut *state {
                Err(e) => return Err(Failure::Answer(*e)),
                Ok(opened) => opened,
            };
            if opened.as_ref().is_some_and(|o| o.line.is_lost()) {
                *opened = None;
            }
            if opened.is_none() {
                match self.reopen() {
                    Ok(o) => *opened = Some(o),
                    Err(Failure::Answer(libc::ESTALE)) => {
                        eprintln!(
                            "roost: chirp://{}{}: replaced or removed on the server while \
                             open; its descriptor is stale (ESTALE)",
                            server.authority(),
                            String::from_utf8_lossy(&self.rest)
                        );
                        *state = Err(libc::ESTALE);
                        return Err(Failure::Answer(libc::ESTALE));
                    }
                    Err(f) => return Err(f),
                }
            }
            let o = opened.as_ref().expect("opened above");
            match o.line.call(|c| op(c, o.fd)) {
                // The line went before the call was sent: open the file again elsewhere.
                None => *opened = None,
                Some(Err(Failure::Lost(e))) => {
                    *opened = None;
                    return Err(Failure::Lost(e));
                }
                Some(r) => return r,
            }
        })
    }

    /// Opens the file again, on a line that works; ESTALE if its name leads elsewhere now.
    fn reopen(&self) -> Result<Opened, Failure> {
        let flags = OpenFlags {
            append: self.appends.load(Ordering::Relaxed),
            ..self.reopen
        };
        let found = Line::run_on_one(&self.server, |c| match c.open(&self.rest, flags, 0)? {
            (fd, st) if (st.dev, st.ino) == self.identity => Ok(Some(fd)),
            (fd, _) => c.close_unanswered(fd).map(|()| None),
        });
        match found {
            Ok((line, Some(fd))) => Ok(Opened::new(line, fd)),
            Ok((_, None)) | Err(Failure::Answer(libc::ENOENT | libc::ENOTDIR)) => {
                Err(Failure::Answer(libc::ESTALE))
            }
            Err(f) => Err(f),
        }
    }

    /// Attributes changed through this file are no longer those the server's cache holds.
    fn changed(&self) {
        self.server.forget_attrs(&self.rest);
    }

    /// One append of at most a server's block, made exactly once: see [`OpenFile::append`]
    /// on this type for the argument.
    fn append_once(&self, data: &[u8]) -> Result<(usize, u64), Errno> {
        // Of `data`, what is known to be in the file (`done`), and where the file ended
        // before the rest was sent (`base`); `sent`: a try of the rest may have been made
        // and its answer lost.
        let (mut done, mut base, mut sent) = (0, self.end.load(Ordering::Relaxed), false);
        let r = self.with(|c, fd| {
            if std::mem::take(&mut sent) {
                match landed(c, (fd, &self.rest), base, &data[done..])? {
                    Landed::Whole(end) => return Ok((data.len(), end)),
                    Landed::Head(n) => {
                        done += n;
                        base += n as u64;
                    }
                }
            }
            sent = true;
            let (n, st) = c.append(fd, &data[done..])?;
            Ok((done + n, st.size as u64))
        });
        if let Ok((_, end)) = r {
            self.end.store(end, Ordering::Relaxed);
        }
        self.changed();
        r
    }
}

/// What of an append whose answer was lost is in the file.
enum Landed {
    /// The first `n` bytes, at the end the file had (`n` may be 0, or all of them).
    Head(usize),
    /// All of it, found among what others appended too; the file now ends at the value.
    Whole(u64),
}

/// Settles an append of `data` sent when the file ended at `base` (as far as this
/// descriptor knew) whose answer was lost. The server makes an append in one write and
/// never makes one whose connection the client reset (this client resets a connection it
/// gives up), so by the time a new connection asks, the append is in the file or never
/// will be. With no other writer, the file then ends at `base` (not made) or holds a head
/// of `data` from `base` (a server killed half-way through a write of several pages
/// leaves a head; the rest is sent). With other writers the bytes after `base` are theirs
/// too: the record found whole among the last [`SEARCH`] bytes counts as made, else it is
/// sent again. Two writers appending identical records at the moment of a failure can
/// thus be taken for each other (one record too few), and a head left by a server killed
/// mid-write among other writers' records stays there; neither happens with one writer.
/// The bytes are read through a descriptor of their own (the writer's may be write-only);
/// a file this client may not read is judged by its size alone, as one writer's.
fn landed(
    c: &mut Client,
    (fd, path): (i64, &[u8]),
    base: u64,
    data: &[u8],
) -> Result<Landed, ClientError> {
    let size = c.fstat(fd)?.size as u64;
    if size == base {
        return Ok(Landed::Head(0));
    }
    let single = size > base && size - base <= data.len() as u64;
    let reader = match c.open(path, OpenFlags::READ, 0) {
        Ok((reader, _)) => reader,
        Err(e) if e.breaks_connection() => return Err(e),
        Err(_) if single => return Ok(Landed::Head((size - base) as usize)),
        Err(_) => return Ok(Landed::Head(0)),
    };
    let found = (|| {
        if single {
            let since = read_span(c, reader, base, size - base)?;
            if data.starts_with(&since) {
                return Ok(Landed::Head(since.len()));
            }
        }
        let from = if size > base { base } else { 0 };
        let from = from.max(size.saturating_sub(SEARCH + data.len() as u64));
        let tail = read_span(c, reader, from, size - from)?;
        let whole = !data.is_empty() && tail.windows(data.len()).any(|w| w == data);
        Ok(if whole {
            Landed::Whole(size)
        } else {
            Landed::Head(0)
        })
    })();
    c.close_unanswered(reader)?;
    found
}

/// How far back from the end a lost append is looked for among other writers' records.
const SEARCH: u64 = 16 << 20;

/// `len` bytes of the file from `offset` (fewer where it ends).
fn read_span(c: &mut Client, fd: i64, offset: u64, len: u64) -> Result<Vec<u8>, ClientError> {
    let mut buf = vec![0u8; len as usize];
    let mut got = 0;
    while got < buf.len() {
        let n = c.pread(fd, &mut buf[got..], offset + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    buf.truncate(got);
    Ok(buf)
}

impl Drop for DirectFile {
    fn drop(&mut self) {
        let state = std::mem::replace(
            self.state.get_mut().unwrap_or_else(|e| e.into_inner()),
            Ok(None),
        );
        if let Ok(Some(opened)) = state {
            close(opened);
        }
    }
}

/// Closes a file on its line without waiting for the answer: the line's next call reads it.
fn close(opened: Opened) {
    let _ = opened.line.call(|c| c.close_unanswered(opened.fd));
}

impl OpenFile for DirectFile {
    fn pread(&self, offset: u64, len: usize) -> Result<Vec<u8>, Errno> {
        self.with(|c, fd| {
            // One request for a small read; a large one keeps several in flight.
            if len <= BLOCK {
                return read_span(c, fd, offset, len as u64);
            }
            let mut buf = vec![0u8; len];
            let mut sink = std::io::Cursor::new(&mut buf[..]);
            let got = c.read_pipelined(fd, offset, len as u64, BLOCK, DEPTH, &mut sink)? as usize;
            buf.truncate(got);
            Ok(buf)
        })
    }

    fn pwrite(&self, data: &[u8], offset: u64) -> Result<usize, Errno> {
        let written = self.with(|c, fd| {
            if data.len() > BLOCK {
                let mut source = data;
                c.write_pipelined(fd, offset, &mut source, BLOCK, DEPTH)
                    .map(|n| n as usize)
            } else {
                let mut done = 0;
                while done < data.len() {
                    let n = c.pwrite(fd, &data[done..], offset + done as u64)?;
                    if n == 0 {
                        break;
                    }
                    done += n;
                }
                Ok(done)
            }
        });
        self.changed();
        written
    }

    fn fstat(&self) -> Result<Stat, Errno> {
        self.with(|c, fd| c.fstat(fd)).map(|st| crate::stat_of(&st))
    }

    fn ftruncate(&self, len: u64) -> Result<(), Errno> {
        let r = self.with(|c, fd| c.ftruncate(fd, len));
        if r.is_ok() {
            self.end.store(len, Ordering::Relaxed);
        }
        self.changed();
        r
    }

    fn fsync(&self) -> Result<(), Errno> {
        self.with(|c, fd| c.fsync(fd))
    }

    fn fchmod(&self, mode: u32) -> Result<(), Errno> {
        let r = self.with(|c, fd| c.fchmod(fd, mode & 0o7777));
        self.changed();
        r
    }

    fn fchown(&self, uid: u32, gid: u32) -> Result<(), Errno> {
        let id = |v: u32| if v == u32::MAX { -1 } else { i64::from(v) };
        let r = self.with(|c, fd| c.fchown(fd, id(uid), id(gid)));
        self.changed();
        r
    }

    fn fstatfs(&self) -> Result<StatFs, Errno> {
        self.with(|c, fd| c.fstatfs(fd))
            .map(|fs| crate::statfs_of(&fs))
    }

    fn path(&self) -> &[u8] {
        &self.path
    }

    /// An append made at the server, in one step, so that writers on other descriptors,
    /// connections and hosts never overwrite each other (a record of up to a server's block
    /// lands whole); the answer carries where the file then ends. A retry after a lost
    /// connection first settles whether the lost try was made ([`landed`]), so a record is
    /// in the file once.
    fn append(&self, data: &[u8]) -> Result<(usize, u64), Errno> {
        if !self.appends.load(Ordering::Relaxed) {
            let at = self.fstat()?.size;
            let n = self.pwrite(data, at)?;
            return Ok((n, at + n as u64));
        }
        let (mut done, mut end) = (0, self.end.load(Ordering::Relaxed));
        for block in data.chunks(roost_wire::MAX_BLOCK as usize) {
            let (n, at) = self.append_once(block)?;
            (done, end) = (done + n, at);
            if n < block.len() {
                break;
            }
        }
        Ok((done, end))
    }

    /// The server's descriptor appends or not as the program's does: it is closed, and
    /// the next call opens the file again with the new flags (as after a lost connection:
    /// ESTALE if its name now leads elsewhere).
    fn set_append(&self, on: bool) -> Result<(), Errno> {
        if self.appends.swap(on, Ordering::Relaxed) == on {
            return Ok(());
        }
        let mut state = self.state.lock().expect("direct file lock");
        if let Ok(opened) = &mut *state {
            if let Some(o) = opened.take() {
                close(o);
            }
        }
        Ok(())
    }
}

/// Reads and writes larger than one block keep `DEPTH` blocks in flight.
const BLOCK: usize = 64 * 1024;
const DEPTH: usize = 8;
