//! A connection to one Chirp server: connect, authenticate, send requests, read replies, and
//! one method per RPC with typed results. Bulk transfers live in `bulk.rs`.
//!
//! A connection that fails at the transport level (I/O error, timeout, malformed reply) is
//! marked broken and every later call fails fast with `ENOTCONN`; open descriptors die with
//! it, so recovery (reconnecting and reopening) belongs to the caller, which knows the paths.

use std::io::{self, BufReader, IoSlice, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use roost_wire::auth::Subject;
use roost_wire::{listing, AclEntry, DirEntry, OpenFlags, Request, Stat, StatFs};

use crate::auth::{authenticate, Credentials};
use crate::error::{Error, Result};
use crate::lines::{read_line, read_result, REPLY_LINE_MAX};
use crate::socket::{self, Keepalive};

/// Payloads at least this large are written straight from the caller's buffer.
const DIRECT_PAYLOAD: usize = 16 * 1024;

/// How to connect.
#[derive(Clone, Debug)]
pub struct Options {
    /// Time allowed for the TCP connection to be established.
    pub connect_timeout: Duration,
    /// Time any single read or write on the socket may block (`None`: forever).
    pub io_timeout: Option<Duration>,
    /// TCP keepalive timing (`None`: system default, usually off).
    pub keepalive: Option<Keepalive>,
    /// Authentication methods and secrets.
    pub credentials: Credentials,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            connect_timeout: Duration::from_secs(15),
            io_timeout: Some(Duration::from_secs(60)),
            keepalive: Some(Keepalive::default()),
            credentials: Credentials::new(),
        }
    }
}

impl Options {
    /// The defaults, with an `hmac` key from the environment if one is configured.
    pub fn from_env() -> Result<Options> {
        Ok(Options {
            credentials: Credentials::from_env()?,
            ..Options::default()
        })
    }
}

/// An authenticated connection to a Chirp server.
pub struct Client {
    pub(crate) reader: BufReader<TcpStream>,
    stream: TcpStream,
    out: Vec<u8>,
    authority: String,
    subject: Subject,
    broken: bool,
    options: Options,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.authority)
            .field("subject", &self.subject)
            .finish()
    }
}

impl Client {
    /// Connects to `authority` (`host:port`, `host` for port 9094, `[v6]:port`) and
    /// authenticates.
    pub fn connect(authority: &str, opts: &Options) -> Result<Client> {
        let (host, port) = crate::url::split_host_port(authority)
            .ok_or_else(|| Error::BadAddress(format!("{authority}: expected host[:port]")))?;
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let stream = socket::connect(
            &authority,
            opts.connect_timeout,
            opts.io_timeout,
            opts.keepalive,
        )?;
        let local = socket::peer_is_local(&stream);
        let mut reader = BufReader::with_capacity(64 * 1024, stream.try_clone()?);
        let mut writer = &stream;
        let subject = authenticate(&mut reader, &mut writer, &opts.credentials, local)?;
        Ok(Client {
            reader,
            stream,
            out: Vec::with_capacity(4096),
            authority,
            subject,
            broken: false,
            options: opts.clone(),
        })
    }

    /// Replaces the connection with a fresh, authenticated one to the same server, with the
    /// same options. Descriptors opened on the old connection are gone; callers that keep
    /// files open reopen them by path.
    pub fn reconnect(&mut self) -> Result<()> {
        *self = Client::connect(&self.authority, &self.options)?;
        Ok(())
    }

    /// The subject the server assigned, e.g. `unix:alice`.
    pub fn subject(&self) -> &Subject {
        &self.subject
    }

    /// The server's `host:port`.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// True once a transport failure has made this connection unusable.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// The connection's TCP keepalive settings (`None` if off).
    pub fn keepalive(&self) -> Result<Option<Keepalive>> {
        Ok(socket::keepalive(&self.stream)?)
    }

    /// Changes the per-operation socket timeout.
    pub fn set_timeout(&mut self, timeout: Option<Duration>) -> Result<()> {
        self.stream.set_read_timeout(timeout)?;
        self.stream.set_write_timeout(timeout)?;
        Ok(())
    }

    /// Runs `f`, failing fast on a broken connection and marking it broken on transport errors.
    pub(crate) fn guard<T>(&mut self, f: impl FnOnce(&mut Client) -> Result<T>) -> Result<T> {
        if self.broken {
            return Err(Error::Io(io::Error::from_raw_os_error(libc::ENOTCONN)));
        }
        let result = f(self);
        if let Err(e) = &result {
            if e.breaks_connection() {
                self.broken = true;
            }
        }
        result
    }

    /// Marks the connection unusable (a transfer was abandoned half-way).
    pub(crate) fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// Queues a request and its inline payload; large payloads are written at once, straight
    /// from `payload`, together with everything queued before them.
    pub(crate) fn send(&mut self, req: &Request, payload: &[u8]) -> Result<()> {
        let line = req.to_line().map_err(Error::BadRequest)?;
        self.out.extend_from_slice(&line);
        if payload.len() < DIRECT_PAYLOAD {
            self.out.extend_from_slice(payload);
            return Ok(());
        }
        let mut stream = &self.stream;
        let mut head = &self.out[..];
        let mut tail = payload;
        while !head.is_empty() {
            let n = match stream.write_vectored(&[IoSlice::new(head), IoSlice::new(tail)]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => other?,
            };
            if n == 0 {
                return Err(Error::Io(io::Error::from(io::ErrorKind::WriteZero)));
            }
            let from_head = n.min(head.len());
            head = &head[from_head..];
            tail = &tail[n - from_head..];
        }
        stream.write_all(tail)?;
        self.out.clear();
        Ok(())
    }

    /// Sends everything queued.
    pub(crate) fn flush(&mut self) -> Result<()> {
        if !self.out.is_empty() {
            (&self.stream).write_all(&self.out)?;
            self.out.clear();
        }
        Ok(())
    }

    /// Writes raw bytes (after anything queued) straight to the socket.
    pub(crate) fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.flush()?;
        (&self.stream).write_all(bytes)?;
        Ok(())
    }

    /// Sends anything queued and closes the sending half of the connection.
    pub(crate) fn shutdown_write(&mut self) -> Result<()> {
        self.flush()?;
        self.stream.shutdown(std::net::Shutdown::Write)?;
        Ok(())
    }

    /// Reads a result line: the non-negative value, or the server's error.
    pub(crate) fn finish(&mut self) -> Result<u64> {
        let n = read_result(&mut self.reader)?;
        roost_wire::reply::check(n).map_err(Error::remote)
    }

    /// Sends one request (with its inline payload) and reads its result.
    pub(crate) fn call(&mut self, req: &Request, payload: &[u8]) -> Result<u64> {
        self.send(req, payload)?;
        self.flush()?;
        self.finish()
    }

    /// Reads `n` payload bytes that follow a result line.
    pub(crate) fn read_bytes(&mut self, n: u64) -> Result<Vec<u8>> {
        let n = usize::try_from(n)
            .map_err(|_| Error::Protocol(roost_wire::WireError::BadReply("length")))?;
        let mut buf = vec![0u8; n];
        self.reader.read_exact(&mut buf)?;
        Ok(buf)
    }

    /// A request whose only answer is the result line.
    fn simple(&mut self, req: Request) -> Result<u64> {
        self.guard(|c| c.call(&req, &[]))
    }

    /// A request answered by `result` bytes of data, at most `max`.
    fn data(&mut self, req: Request, max: u64) -> Result<Vec<u8>> {
        self.guard(|c| {
            let n = c.call(&req, &[])?;
            if n > max {
                return Err(Error::Protocol(roost_wire::WireError::BadReply(
                    "more data than asked for",
                )));
            }
            c.read_bytes(n)
        })
    }

    /// A request answered by a stat line.
    fn stat_reply(&mut self, req: Request) -> Result<(u64, Stat)> {
        self.guard(|c| {
            let n = c.call(&req, &[])?;
            let line = read_line(&mut c.reader, REPLY_LINE_MAX)?;
            Ok((n, Stat::parse(&line)?))
        })
    }

    /// A request answered by a statfs line.
    fn statfs_reply(&mut self, req: Request) -> Result<StatFs> {
        self.guard(|c| {
            c.call(&req, &[])?;
            let line = read_line(&mut c.reader, REPLY_LINE_MAX)?;
            Ok(StatFs::parse(&line)?)
        })
    }

    /// Reads list lines up to the empty line that ends them.
    fn list_lines(&mut self) -> Result<Vec<Vec<u8>>> {
        let mut lines = Vec::new();
        loop {
            let line = read_line(&mut self.reader, REPLY_LINE_MAX)?;
            if listing::is_end(&line) {
                return Ok(lines);
            }
            lines.push(line);
        }
    }

    // ---- descriptors ----

    /// Opens a file; returns the descriptor and the file's stat.
    pub fn open(
        &mut self,
        path: impl AsRef<[u8]>,
        flags: OpenFlags,
        mode: u32,
    ) -> Result<(i64, Stat)> {
        let (fd, st) = self.stat_reply(Request::Open {
            path: path.as_ref().to_vec(),
            flags,
            mode,
        })?;
        Ok((fd as i64, st))
    }

    /// Closes a descriptor.
    pub fn close(&mut self, fd: i64) -> Result<()> {
        self.simple(Request::Close { fd }).map(drop)
    }

    /// Stats an open file.
    pub fn fstat(&mut self, fd: i64) -> Result<Stat> {
        self.stat_reply(Request::Fstat { fd }).map(|(_, st)| st)
    }

    /// Statfs of an open file's file system.
    pub fn fstatfs(&mut self, fd: i64) -> Result<StatFs> {
        self.statfs_reply(Request::Fstatfs { fd })
    }

    /// Flushes an open file to disk.
    pub fn fsync(&mut self, fd: i64) -> Result<()> {
        self.simple(Request::Fsync { fd }).map(drop)
    }

    /// Changes an open file's mode.
    pub fn fchmod(&mut self, fd: i64, mode: u32) -> Result<()> {
        self.simple(Request::Fchmod { fd, mode }).map(drop)
    }

    /// Changes an open file's owner (servers may ignore it).
    pub fn fchown(&mut self, fd: i64, uid: i64, gid: i64) -> Result<()> {
        self.simple(Request::Fchown { fd, uid, gid }).map(drop)
    }

    /// Truncates an open file.
    pub fn ftruncate(&mut self, fd: i64, length: u64) -> Result<()> {
        self.simple(Request::Ftruncate { fd, length }).map(drop)
    }

    // ---- names ----

    /// Stats a path, following symlinks.
    pub fn stat(&mut self, path: impl AsRef<[u8]>) -> Result<Stat> {
        self.stat_reply(Request::Stat {
            path: path.as_ref().to_vec(),
        })
        .map(|(_, st)| st)
    }

    /// Stats a path without following a final symlink.
    pub fn lstat(&mut self, path: impl AsRef<[u8]>) -> Result<Stat> {
        self.stat_reply(Request::Lstat {
            path: path.as_ref().to_vec(),
        })
        .map(|(_, st)| st)
    }

    /// Statfs of the file system holding a path.
    pub fn statfs(&mut self, path: impl AsRef<[u8]>) -> Result<StatFs> {
        self.statfs_reply(Request::Statfs {
            path: path.as_ref().to_vec(),
        })
    }

    /// Checks access (`mode`: `R_OK|W_OK|X_OK` or `F_OK`).
    pub fn access(&mut self, path: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        self.simple(Request::Access {
            path: path.as_ref().to_vec(),
            mode,
        })
        .map(drop)
    }

    /// Changes a path's mode.
    pub fn chmod(&mut self, path: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        self.simple(Request::Chmod {
            path: path.as_ref().to_vec(),
            mode,
        })
        .map(drop)
    }

    /// Changes a path's owner (servers may ignore it).
    pub fn chown(&mut self, path: impl AsRef<[u8]>, uid: i64, gid: i64) -> Result<()> {
        self.simple(Request::Chown {
            path: path.as_ref().to_vec(),
            uid,
            gid,
        })
        .map(drop)
    }

    /// Changes a symlink's owner (servers may ignore it).
    pub fn lchown(&mut self, path: impl AsRef<[u8]>, uid: i64, gid: i64) -> Result<()> {
        self.simple(Request::Lchown {
            path: path.as_ref().to_vec(),
            uid,
            gid,
        })
        .map(drop)
    }

    /// Truncates a path.
    pub fn truncate(&mut self, path: impl AsRef<[u8]>, length: u64) -> Result<()> {
        self.simple(Request::Truncate {
            path: path.as_ref().to_vec(),
            length,
        })
        .map(drop)
    }

    /// Sets access and modification times (seconds since the epoch).
    pub fn utime(&mut self, path: impl AsRef<[u8]>, actime: i64, modtime: i64) -> Result<()> {
        self.simple(Request::Utime {
            path: path.as_ref().to_vec(),
            actime,
            modtime,
        })
        .map(drop)
    }

    /// Removes a file.
    pub fn unlink(&mut self, path: impl AsRef<[u8]>) -> Result<()> {
        self.simple(Request::Unlink {
            path: path.as_ref().to_vec(),
        })
        .map(drop)
    }

    /// Renames a path.
    pub fn rename(&mut self, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) -> Result<()> {
        self.simple(Request::Rename {
            path: from.as_ref().to_vec(),
            new_path: to.as_ref().to_vec(),
        })
        .map(drop)
    }

    /// Hard-links `from` as `to`.
    pub fn link(&mut self, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) -> Result<()> {
        self.simple(Request::Link {
            path: from.as_ref().to_vec(),
            new_path: to.as_ref().to_vec(),
        })
        .map(drop)
    }

    /// Creates a symlink at `path` pointing to `target`.
    pub fn symlink(&mut self, target: impl AsRef<[u8]>, path: impl AsRef<[u8]>) -> Result<()> {
        self.simple(Request::Symlink {
            target: target.as_ref().to_vec(),
            path: path.as_ref().to_vec(),
        })
        .map(drop)
    }

    /// Reads a symlink's target.
    pub fn readlink(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        let max = 4096;
        self.data(
            Request::Readlink {
                path: path.as_ref().to_vec(),
                length: max,
            },
            max,
        )
    }

    /// Makes a directory.
    pub fn mkdir(&mut self, path: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        self.simple(Request::Mkdir {
            path: path.as_ref().to_vec(),
            mode,
        })
        .map(drop)
    }

    /// Removes an empty directory.
    pub fn rmdir(&mut self, path: impl AsRef<[u8]>) -> Result<()> {
        self.simple(Request::Rmdir {
            path: path.as_ref().to_vec(),
        })
        .map(drop)
    }

    /// Removes a file or a whole tree.
    pub fn rmall(&mut self, path: impl AsRef<[u8]>) -> Result<()> {
        self.simple(Request::Rmall {
            path: path.as_ref().to_vec(),
        })
        .map(drop)
    }

    /// Lists a directory's names (including `.` and `..` if the server lists them).
    pub fn getdir(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<Vec<u8>>> {
        let req = Request::Getdir {
            path: path.as_ref().to_vec(),
        };
        self.guard(|c| {
            c.call(&req, &[])?;
            c.list_lines()
        })
    }

    /// Lists a directory with each entry's stat.
    pub fn getlongdir(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<DirEntry>> {
        let req = Request::Getlongdir {
            path: path.as_ref().to_vec(),
        };
        self.guard(|c| {
            c.call(&req, &[])?;
            let mut entries = Vec::new();
            loop {
                let name = read_line(&mut c.reader, REPLY_LINE_MAX)?;
                if listing::is_end(&name) {
                    return Ok(entries);
                }
                let st = Stat::parse(&read_line(&mut c.reader, REPLY_LINE_MAX)?)?;
                entries.push(DirEntry {
                    name,
                    stat: Some(st),
                });
            }
        })
    }

    /// MD5 digest of a file.
    pub fn md5(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        self.data(
            Request::Md5 {
                path: path.as_ref().to_vec(),
            },
            64,
        )
    }

    /// Digest of a file with a named algorithm (`md5`, `sha1`, `sha256`).
    pub fn hash(&mut self, algorithm: &str, path: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        self.data(
            Request::Hash {
                algorithm: algorithm.to_string(),
                path: path.as_ref().to_vec(),
            },
            64,
        )
    }

    // ---- identity and ACLs ----

    /// The subject the server sees for this connection.
    pub fn whoami(&mut self) -> Result<String> {
        let max = 1024;
        let bytes = self.data(Request::Whoami { length: max }, max)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Why the server refused this connection's last refused request (a roost extension);
    /// `None` when the server does not say (nothing refused yet, or not a roost server).
    pub fn explain(&mut self) -> Result<Option<String>> {
        match self.data(Request::Explain {}, 4096) {
            Ok(bytes) if !bytes.is_empty() => {
                Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
            }
            Ok(_) => Ok(None),
            Err(e) if !e.breaks_connection() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The subject this server has when it connects to `host`.
    pub fn whoareyou(&mut self, host: &str) -> Result<String> {
        let max = 1024;
        let bytes = self.data(
            Request::Whoareyou {
                host: host.to_string(),
                length: max,
            },
            max,
        )?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A directory's ACL.
    pub fn getacl(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<AclEntry>> {
        let req = Request::Getacl {
            path: path.as_ref().to_vec(),
        };
        self.guard(|c| {
            c.call(&req, &[])?;
            let lines = c.list_lines()?;
            lines
                .iter()
                .map(|l| AclEntry::parse(l).map_err(Error::Protocol))
                .collect()
        })
    }

    /// Sets `subject`'s rights on a directory (`n` removes the entry).
    pub fn setacl(&mut self, path: impl AsRef<[u8]>, subject: &str, rights: &str) -> Result<()> {
        let req = Request::Setacl {
            path: path.as_ref().to_vec(),
            subject: subject.into(),
            rights: rights.into(),
        };
        self.simple(req).map(drop)
    }

    /// Resets a directory's ACL to the caller with `rights` (plus admin).
    pub fn resetacl(&mut self, path: impl AsRef<[u8]>, rights: &str) -> Result<()> {
        self.simple(Request::Resetacl {
            path: path.as_ref().to_vec(),
            rights: rights.into(),
        })
        .map(drop)
    }

    // ---- extended attributes ----

    /// An xattr call whose server errors use the xattr reading of `INVALID_REQUEST`.
    fn xattr<T>(&mut self, f: impl FnOnce(&mut Client) -> Result<T>) -> Result<T> {
        f(self).map_err(|e| match e {
            Error::Remote { code, .. } => Error::remote_xattr(code),
            other => other,
        })
    }

    /// Gets an extended attribute (`ENODATA` if missing).
    pub fn getxattr(&mut self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        let req = Request::Getxattr {
            path: path.as_ref().to_vec(),
            name: name.as_ref().to_vec(),
        };
        self.xattr(|c| c.data(req, roost_wire::MAX_BLOCK))
    }

    /// Gets an extended attribute of an open file.
    pub fn fgetxattr(&mut self, fd: i64, name: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        let req = Request::Fgetxattr {
            fd,
            name: name.as_ref().to_vec(),
        };
        self.xattr(|c| c.data(req, roost_wire::MAX_BLOCK))
    }

    /// Gets an extended attribute without following a final symlink.
    pub fn lgetxattr(&mut self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        let req = Request::Lgetxattr {
            path: path.as_ref().to_vec(),
            name: name.as_ref().to_vec(),
        };
        self.xattr(|c| c.data(req, roost_wire::MAX_BLOCK))
    }

    fn names(bytes: Vec<u8>) -> Vec<Vec<u8>> {
        bytes
            .split(|&b| b == 0)
            .filter(|n| !n.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    }

    /// Lists extended attribute names.
    pub fn listxattr(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<Vec<u8>>> {
        let req = Request::Listxattr {
            path: path.as_ref().to_vec(),
        };
        self.xattr(|c| c.data(req, roost_wire::MAX_BLOCK))
            .map(Client::names)
    }

    /// Lists extended attribute names of an open file.
    pub fn flistxattr(&mut self, fd: i64) -> Result<Vec<Vec<u8>>> {
        self.xattr(|c| c.data(Request::Flistxattr { fd }, roost_wire::MAX_BLOCK))
            .map(Client::names)
    }

    /// Lists extended attribute names without following a final symlink.
    pub fn llistxattr(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<Vec<u8>>> {
        let req = Request::Llistxattr {
            path: path.as_ref().to_vec(),
        };
        self.xattr(|c| c.data(req, roost_wire::MAX_BLOCK))
            .map(Client::names)
    }

    fn set_xattr(&mut self, req: Request, value: &[u8]) -> Result<()> {
        self.xattr(|c| c.guard(|c| c.call(&req, value).map(drop)))
    }

    /// Sets an extended attribute (`flags`: `XATTR_CREATE`, `XATTR_REPLACE` or 0).
    pub fn setxattr(
        &mut self,
        path: impl AsRef<[u8]>,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: i32,
    ) -> Result<()> {
        let (path, name, length) = (
            path.as_ref().to_vec(),
            name.as_ref().to_vec(),
            value.len() as u64,
        );
        self.set_xattr(
            Request::Setxattr {
                path,
                name,
                length,
                flags,
            },
            value,
        )
    }

    /// Sets an extended attribute of an open file.
    pub fn fsetxattr(
        &mut self,
        fd: i64,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: i32,
    ) -> Result<()> {
        let req = Request::Fsetxattr {
            fd,
            name: name.as_ref().to_vec(),
            length: value.len() as u64,
            flags,
        };
        self.set_xattr(req, value)
    }

    /// Sets an extended attribute without following a final symlink.
    pub fn lsetxattr(
        &mut self,
        path: impl AsRef<[u8]>,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: i32,
    ) -> Result<()> {
        let (path, name, length) = (
            path.as_ref().to_vec(),
            name.as_ref().to_vec(),
            value.len() as u64,
        );
        self.set_xattr(
            Request::Lsetxattr {
                path,
                name,
                length,
                flags,
            },
            value,
        )
    }

    /// Removes an extended attribute.
    pub fn removexattr(&mut self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> Result<()> {
        let req = Request::Removexattr {
            path: path.as_ref().to_vec(),
            name: name.as_ref().to_vec(),
        };
        self.xattr(|c| c.simple(req)).map(drop)
    }

    /// Removes an extended attribute of an open file.
    pub fn fremovexattr(&mut self, fd: i64, name: impl AsRef<[u8]>) -> Result<()> {
        self.xattr(|c| {
            c.simple(Request::Fremovexattr {
                fd,
                name: name.as_ref().to_vec(),
            })
        })
        .map(drop)
    }

    /// Removes an extended attribute without following a final symlink.
    pub fn lremovexattr(&mut self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> Result<()> {
        let req = Request::Lremovexattr {
            path: path.as_ref().to_vec(),
            name: name.as_ref().to_vec(),
        };
        self.xattr(|c| c.simple(req)).map(drop)
    }

    /// Sends any request and returns its raw result, for RPCs without a typed method (the
    /// server's error becomes `Err`). Only for requests whose reply is the result line alone.
    pub fn raw_call(&mut self, req: &Request, payload: &[u8]) -> Result<u64> {
        if req.reply_body() != roost_wire::ReplyBody::None
            || req.inline_payload_len() != payload.len() as u64
        {
            return Err(Error::BadRequest(roost_wire::WireError::BadArgument(
                "request shape",
            )));
        }
        self.guard(|c| c.call(req, payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::{Behaviour, Mock};
    use crate::Method;
    use std::net::TcpListener;
    use std::time::Instant;

    #[test]
    fn a_silent_server_times_out_instead_of_hanging() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let opts = Options {
            io_timeout: Some(Duration::from_millis(200)),
            credentials: Credentials::only(&[Method::Address]),
            ..Options::default()
        };
        let started = Instant::now();
        let err = Client::connect(&addr, &opts).unwrap_err();
        assert_eq!(err.errno(), libc::ETIMEDOUT, "{err:?}");
        assert_eq!(err.code(), roost_wire::ErrorCode::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(5));
        drop(listener);
    }

    #[test]
    fn a_server_that_hangs_up_breaks_the_connection() {
        let mock = Mock::start(Vec::new(), Behaviour::default());
        let mut c = mock.client();
        // The mock answers requests it does not know with NOT_SUPPORTED...
        assert!(c
            .stat("/")
            .unwrap_err()
            .is(roost_wire::ErrorCode::NotSupported));
        assert!(!c.is_broken());
        // ...and a half-closed connection makes it hang up.
        c.shutdown_write().unwrap();
        let err = c.fstat(0).unwrap_err();
        assert!(err.breaks_connection(), "{err:?}");
        assert!(c.is_broken());
    }

    #[test]
    fn bad_addresses_are_refused_before_connecting() {
        for bad in ["", ":9094", "host:notaport", "[::1"] {
            assert!(
                matches!(
                    Client::connect(bad, &Options::default()),
                    Err(Error::BadAddress(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn unsendable_requests_leave_the_connection_usable() {
        let mock = Mock::start(vec![1, 2, 3], Behaviour::default());
        let mut c = mock.client();
        let err = c.stat("/a\0b").unwrap_err();
        assert!(matches!(err, Error::BadRequest(_)));
        assert!(!c.is_broken());
        assert_eq!(c.fstat(0).unwrap().size, 3);
    }
}
