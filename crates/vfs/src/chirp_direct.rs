//! Files used in place on a Chirp server (direct mode, [`OpenFile`]): each open file holds
//! its own connection (taken from the server's pool, given back when closed), because a
//! Chirp descriptor belongs to the connection that opened it.
//!
//! Failures: a lost connection is re-established as [`Server::retrying`] does for any
//! call, and the file is opened again by name; if the name now leads to another file
//! (device or inode changed) or to none, the descriptor is stale: this call and every later
//! one fail with ESTALE, and the program's other files carry on. Every retried call is
//! safe to make twice: reads, `pwrite` at an explicit offset (the agent turns `O_APPEND`
//! into a write at the end it learnt first, so a retry writes the same bytes at the same
//! place), truncate, chmod, chown, fsync and stat.

use crate::chirp::{Failure, Server};
use crate::driver::{OpenFile, OpenMode, Stat, StatFs};
use crate::Errno;
use roost_client::{Client, Error as ClientError, OpenFlags};
use std::sync::{Arc, Mutex};

/// A connection and the server's descriptor for the file on it.
struct Opened {
    client: Client,
    fd: i64,
}

/// One file open in place on a server.
pub struct DirectFile {
    server: Arc<Server>,
    /// The driver path (`/HOST:PORT/PATH`) and the path on the server.
    path: Vec<u8>,
    rest: Vec<u8>,
    /// How to open it again after a lost connection (never creating or truncating).
    reopen: OpenFlags,
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
            ..OpenFlags::default()
        };
        let reopen = OpenFlags {
            create: false,
            truncate: false,
            exclusive: false,
            ..flags
        };
        let mode = how.mode & 0o7777;
        let opened = server.retrying(rest, |retry| {
            let mut client = server.connection()?;
            let first = client.open(rest, flags, mode);
            let answer = match first {
                Err(e) if retry && how.exclusive && e.errno() == libc::EEXIST => {
                    client.open(rest, reopen, mode)
                }
                other => other,
            };
            match answer {
                Ok((fd, st)) => Ok((Opened { client, fd }, st)),
                Err(e) if !e.breaks_connection() => {
                    server.give_back(client);
                    Err(Failure::Answer(e.errno()))
                }
                Err(e) => {
                    client.abort();
                    Err(Failure::Lost(e))
                }
            }
        });
        let (opened, st) = opened?;
        let is = st.mode as u32 & libc::S_IFMT;
        if is != libc::S_IFREG {
            let mut opened = opened;
            let _ = opened.client.close(opened.fd);
            server.give_back(opened.client);
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
        server.retrying(&self.rest, |_| {
            let opened = match &mut *state {
                Err(e) => return Err(Failure::Answer(*e)),
                Ok(opened) => opened,
            };
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
            let o = opened.as_mut().expect("opened above");
            match op(&mut o.client, o.fd) {
                Ok(v) => Ok(v),
                Err(e) if !e.breaks_connection() => Err(Failure::Answer(e.errno())),
                Err(e) => {
                    opened.take().expect("opened").client.abort();
                    Err(Failure::Lost(e))
                }
            }
        })
    }

    /// Opens the file again on a new connection; ESTALE if its name leads elsewhere now.
    fn reopen(&self) -> Result<Opened, Failure> {
        let mut client = self.server.connection()?;
        match client.open(&self.rest, self.reopen, 0) {
            Ok((fd, st)) if (st.dev, st.ino) == self.identity => Ok(Opened { client, fd }),
            Ok((fd, _)) => {
                let _ = client.close(fd);
                self.server.give_back(client);
                Err(Failure::Answer(libc::ESTALE))
            }
            Err(e) if !e.breaks_connection() => {
                self.server.give_back(client);
                Err(Failure::Answer(match e.errno() {
                    libc::ENOENT | libc::ENOTDIR => libc::ESTALE,
                    other => other,
                }))
            }
            Err(e) => {
                client.abort();
                Err(Failure::Lost(e))
            }
        }
    }

    /// Attributes changed through this file are no longer those the server's cache holds.
    fn changed(&self) {
        self.server.forget_attrs(&self.rest);
    }
}

impl Drop for DirectFile {
    fn drop(&mut self) {
        let state = std::mem::replace(
            self.state.get_mut().unwrap_or_else(|e| e.into_inner()),
            Ok(None),
        );
        if let Ok(Some(mut o)) = state {
            // The connection goes back to the pool at once, for the next open to use.
            if o.client.close_unanswered(o.fd).is_ok() {
                self.server.give_back(o.client);
            }
        }
    }
}

impl OpenFile for DirectFile {
    fn pread(&self, offset: u64, len: usize) -> Result<Vec<u8>, Errno> {
        self.with(|c, fd| {
            let mut buf = vec![0u8; len];
            let mut got = 0;
            // One request for a small read; a large one keeps several in flight.
            if len > BLOCK {
                let mut sink = std::io::Cursor::new(&mut buf[..]);
                got = c.read_pipelined(fd, offset, len as u64, BLOCK, DEPTH, &mut sink)? as usize;
            } else {
                while got < len {
                    let n = c.pread(fd, &mut buf[got..], offset + got as u64)?;
                    if n == 0 {
                        break;
                    }
                    got += n;
                }
            }
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
        self.with(|c, fd| c.fstat(fd))
            .map(|st| crate::chirp::stat_of(&st))
    }

    fn ftruncate(&self, len: u64) -> Result<(), Errno> {
        let r = self.with(|c, fd| c.ftruncate(fd, len));
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
            .map(|fs| crate::chirp::statfs_of(&fs))
    }

    fn path(&self) -> &[u8] {
        &self.path
    }
}

/// Reads and writes larger than one block keep `DEPTH` blocks in flight.
const BLOCK: usize = 64 * 1024;
const DEPTH: usize = 8;
