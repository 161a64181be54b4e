//! One client's session: authenticate, then read request lines and answer them until the
//! client leaves, goes quiet for too long, or breaks the protocol.
//!
//! Replies are buffered and flushed only when no further request is already waiting, so a
//! client that pipelines many requests gets its answers in few packets.

use crate::export::{Export, OpError, OpResult};
use crate::jail::JailPath;
use crate::listener::Shared;
use crate::log::{self, Level};
use crate::output::Output;
use roost_wire::{listing, reply, ErrorCode, OpenFlags, Request, Rights, Stat, StatFs, WireError};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// Buffer sizes for each direction of a connection.
const READ_BUFFER: usize = 32 * 1024;

/// Chunk size for streaming payloads between the socket and files.
const CHUNK: usize = 256 * 1024;

/// Most files one connection may hold open.
const MAX_OPEN_FILES: usize = 1024;

/// How a session ended, for the disconnect log line.
pub struct Summary {
    pub subject: Option<String>,
    pub requests: u64,
    pub reason: String,
}

/// An open file of the session, with how it was opened.
struct OpenFile {
    file: File,
    writable: bool,
}

/// Why the request loop stops.
enum Stop {
    /// The client closed the connection (or a stream RPC finished).
    Closed,
    /// The connection cannot continue: a timeout, an I/O error or a protocol violation.
    Broken(String),
}

impl From<io::Error> for Stop {
    fn from(e: io::Error) -> Stop {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Stop::Broken("stalled".into()),
            io::ErrorKind::UnexpectedEof => Stop::Broken("disconnected mid-message".into()),
            _ => Stop::Broken(e.to_string()),
        }
    }
}

type Step = Result<(), Stop>;

struct Session<'a> {
    export: &'a Export,
    shared: &'a Shared,
    subject: String,
    reader: BufReader<&'a TcpStream>,
    writer: Output<'a>,
    files: BTreeMap<i64, OpenFile>,
    /// Scratch space for reads and writes, grown on demand.
    buffer: Vec<u8>,
    /// Why the last refused request was refused, for the `explain` extension.
    last_refusal: Option<String>,
}

/// Serves one connection to the end.
pub fn serve(shared: &Shared, stream: TcpStream, peer: SocketAddr) -> Summary {
    let mut summary = Summary {
        subject: None,
        requests: 0,
        reason: String::new(),
    };
    // Reads wake up at least once per idle timeout, so idleness is noticed in time; a stall
    // mid-message is therefore never tolerated longer than the idle timeout either.
    let wake = shared
        .limits
        .stall_timeout
        .min(shared.limits.idle_timeout)
        .max(Duration::from_millis(100));
    let _ = stream.set_read_timeout(Some(wake));
    let _ = stream.set_write_timeout(Some(shared.limits.stall_timeout));
    // Both directions share the one socket descriptor: a thousand clients cost a thousand fds.
    let mut reader = BufReader::with_capacity(READ_BUFFER, &stream);
    let mut writer = Output::new(&stream);
    let subject = match crate::auth::accept(&shared.auth, peer.ip(), &mut reader, &mut writer) {
        Ok(Some(subject)) => subject,
        Ok(None) => {
            summary.reason = "authentication failed".into();
            return summary;
        }
        Err(e) => {
            summary.reason = format!("authentication failed: {e}");
            return summary;
        }
    };
    log::event(
        Level::Info,
        "connect",
        &[("peer", &peer), ("subject", &subject)],
    );
    summary.subject = Some(subject.clone());
    let mut session = Session {
        export: &shared.export,
        shared,
        subject,
        reader,
        writer,
        files: BTreeMap::new(),
        buffer: Vec::new(),
        last_refusal: None,
    };
    let stop = session.run(&mut summary.requests);
    let _ = session.writer.flush();
    summary.reason = match stop {
        Stop::Closed => "closed".into(),
        Stop::Broken(why) => why,
    };
    summary
}

impl Session<'_> {
    fn run(&mut self, requests: &mut u64) -> Stop {
        let mut line = Vec::with_capacity(256);
        loop {
            if self.reader.buffer().is_empty() {
                if let Err(e) = self.writer.flush() {
                    return e.into();
                }
            }
            line.clear();
            match self.read_request_line(&mut line) {
                Ok(true) => {}
                Ok(false) => return Stop::Closed,
                Err(stop) => return stop,
            }
            *requests += 1;
            let started = Instant::now();
            let request = Request::parse(&line);
            let outcome = match &request {
                Ok(request) => self.handle(request),
                Err(WireError::Empty) => continue,
                Err(e) => self.refuse_line(e),
            };
            if log::enabled(Level::Debug) {
                let shown = String::from_utf8_lossy(roost_wire::strip_newline(&line)).into_owned();
                log::event(
                    Level::Debug,
                    "rpc",
                    &[("line", &shown), ("us", &started.elapsed().as_micros())],
                );
            }
            if let Err(stop) = outcome {
                return stop;
            }
        }
    }

    /// Reads one request line of at most `max_line` bytes. Waits up to the idle timeout for
    /// the line to start. A line that is too long is consumed and answered with an error.
    fn read_request_line(&mut self, line: &mut Vec<u8>) -> Result<bool, Stop> {
        let max = self.shared.limits.max_line;
        let idle_since = Instant::now();
        loop {
            let mut limited = (&mut self.reader).take((max + 1 - line.len()) as u64);
            match limited.read_until(b'\n', line) {
                Ok(0) if line.is_empty() => return Ok(false),
                Ok(0) => return Err(Stop::Broken("disconnected mid-line".into())),
                Ok(_) if line.last() == Some(&b'\n') => return Ok(true),
                Ok(_) if line.len() > max => {
                    self.discard_rest_of_line()?;
                    log::event(
                        Level::Error,
                        "refused",
                        &[
                            ("subject", &self.subject),
                            ("reason", &"request line too long"),
                        ],
                    );
                    self.send_error(ErrorCode::TooBig)?;
                    self.writer.flush()?;
                    line.clear();
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if !line.is_empty() {
                        return Err(Stop::Broken("stalled mid-line".into()));
                    }
                    if idle_since.elapsed() >= self.shared.limits.idle_timeout {
                        return Err(Stop::Broken("idle timeout".into()));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn discard_rest_of_line(&mut self) -> Step {
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                return Err(Stop::Closed);
            }
            match buf.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.reader.consume(i + 1);
                    return Ok(());
                }
                None => {
                    let n = buf.len();
                    self.reader.consume(n);
                }
            }
        }
    }

    /// Answers a line that does not parse. Unknown RPCs and bad arguments get an error code;
    /// the connection stays usable because no payload can follow a line we cannot read.
    fn refuse_line(&mut self, error: &WireError) -> Step {
        log::event(
            Level::Error,
            "bad-request",
            &[("subject", &self.subject), ("error", error)],
        );
        self.send_error(error.code())
    }

    // ---- replies --------------------------------------------------------------------------

    fn send_result(&mut self, n: i64) -> Step {
        self.writer.write_all(&reply::format_result(n))?;
        Ok(())
    }

    fn send_error(&mut self, code: ErrorCode) -> Step {
        self.writer.write_all(&reply::error_line(code))?;
        Ok(())
    }

    fn send_failure(&mut self, error: &OpError) -> Step {
        if let Some(why) = error.explain() {
            log::event(
                Level::Info,
                "denied",
                &[("subject", &self.subject), ("why", &why)],
            );
            self.last_refusal = Some(why);
        }
        self.writer.write_all(&reply::errno_line(error.errno))?;
        Ok(())
    }

    /// Sends `result` as-is: nothing after success, the error code after failure.
    fn send_unit(&mut self, result: OpResult<()>) -> Step {
        match result {
            Ok(()) => self.send_result(0),
            Err(e) => self.send_failure(&e),
        }
    }

    /// Sends a length-prefixed block of data, or the failure.
    fn send_data(&mut self, result: OpResult<Vec<u8>>) -> Step {
        match result {
            Ok(data) => {
                self.send_result(data.len() as i64)?;
                self.writer.write_all(&data)?;
                Ok(())
            }
            Err(e) => self.send_failure(&e),
        }
    }

    /// Sends `result` as `0` and the line `to_line` makes of it, or the failure.
    fn send_line<T>(&mut self, result: OpResult<T>, to_line: impl FnOnce(&T) -> Vec<u8>) -> Step {
        match result {
            Ok(value) => {
                self.send_result(0)?;
                self.writer.write_all(&to_line(&value))?;
                Ok(())
            }
            Err(e) => self.send_failure(&e),
        }
    }

    fn send_stat(&mut self, result: OpResult<libc::stat>) -> Step {
        self.send_line(result, |st| Stat::from(st).to_line())
    }

    fn send_statfs(&mut self, result: OpResult<libc::statfs>) -> Step {
        self.send_line(result, |st| StatFs::from(st).to_line())
    }

    // ---- payloads -------------------------------------------------------------------------

    /// Reads exactly `len` payload bytes into the scratch buffer.
    fn read_payload(&mut self, len: u64) -> Result<&[u8], Stop> {
        let len = len as usize;
        if self.buffer.len() < len {
            self.buffer.resize(len, 0);
        }
        self.reader.read_exact(&mut self.buffer[..len])?;
        Ok(&self.buffer[..len])
    }

    /// Reads and drops `len` payload bytes, keeping the stream in step.
    fn discard_payload(&mut self, len: u64) -> Step {
        let copied = io::copy(&mut (&mut self.reader).take(len), &mut io::sink())?;
        if copied < len {
            return Err(Stop::Broken("disconnected mid-message".into()));
        }
        Ok(())
    }

    /// Refuses an inline payload bigger than the server accepts, after consuming it.
    fn payload_too_big(&mut self, len: u64) -> Result<bool, Stop> {
        if len <= self.shared.limits.max_message {
            return Ok(false);
        }
        self.discard_payload(len)?;
        self.send_error(ErrorCode::TooBig)?;
        Ok(true)
    }

    // ---- dispatch -------------------------------------------------------------------------

    fn handle(&mut self, request: &Request) -> Step {
        // Path arguments are collapsed and checked before anything else happens; a path the
        // jail refuses must still have its payload consumed.
        match request {
            Request::Open { path, flags, mode } => self.open(path, *flags, *mode),
            Request::Close { fd } => {
                let result = self
                    .files
                    .remove(fd)
                    .map(drop)
                    .ok_or(OpError::errno(libc::EBADF));
                self.send_unit(result)
            }
            Request::Pread { fd, length, offset } => self.pread(*fd, *length, *offset),
            Request::Pwrite { fd, length, offset } => self.pwrite(*fd, *length, *offset),
            Request::Sread {
                fd,
                length,
                stride_length,
                stride_skip,
                offset,
            } => self.sread(*fd, *length, *stride_length, *stride_skip, *offset),
            Request::Swrite {
                fd,
                length,
                stride_length,
                stride_skip,
                offset,
            } => self.swrite(*fd, *length, *stride_length, *stride_skip, *offset),
            Request::Fstat { fd } => {
                let result = self
                    .file(*fd)
                    .and_then(|f| Ok(crate::export::fstat(f.file.as_raw_fd())?));
                self.send_stat(result)
            }
            Request::Fstatfs { fd } => {
                let result = self.file(*fd).and_then(|f| {
                    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
                    crate::jail::cvt(unsafe { libc::fstatfs(f.file.as_raw_fd(), &mut buf) })?;
                    Ok(buf)
                });
                self.send_statfs(result)
            }
            Request::Fsync { fd } => {
                let result = self.file(*fd).and_then(|f| Ok(f.file.sync_all()?));
                self.send_unit(result)
            }
            Request::Fchmod { fd, mode } => {
                let result = self.writable_file(*fd).and_then(|f| {
                    crate::jail::cvt(unsafe { libc::fchmod(f.file.as_raw_fd(), mode & 0o7777) })?;
                    Ok(())
                });
                self.send_unit(result)
            }
            // Ownership stays with the server's user (see Export::chown).
            Request::Fchown { fd, .. } => {
                let result = self.writable_file(*fd).map(drop);
                self.send_unit(result)
            }
            Request::Ftruncate { fd, length } => {
                let result = self
                    .writable_file(*fd)
                    .and_then(|f| Ok(f.file.set_len(*length)?));
                self.send_unit(result)
            }
            Request::Stat { path } => {
                let result = self.with_path(path, |e, s, p| e.stat(s, p));
                self.send_stat(result)
            }
            Request::Lstat { path } => {
                let result = self.with_path(path, |e, s, p| e.lstat(s, p));
                self.send_stat(result)
            }
            Request::Statfs { path } => {
                let result = self.with_path(path, |e, s, p| e.statfs(s, p));
                self.send_statfs(result)
            }
            Request::Access { path, mode } => {
                let result = self.with_path(path, |e, s, p| e.access(s, p, *mode as i32));
                self.send_unit(result)
            }
            Request::Chmod { path, mode } => {
                let result = self.with_path(path, |e, s, p| e.chmod(s, p, *mode));
                self.send_unit(result)
            }
            Request::Chown { path, .. } => {
                let result = self.with_path(path, |e, s, p| e.chown(s, p, true));
                self.send_unit(result)
            }
            Request::Lchown { path, .. } => {
                let result = self.with_path(path, |e, s, p| e.chown(s, p, false));
                self.send_unit(result)
            }
            Request::Truncate { path, length } => {
                let length = i64::try_from(*length).unwrap_or(i64::MAX);
                let result = self.with_path(path, |e, s, p| e.truncate(s, p, length));
                self.send_unit(result)
            }
            Request::Utime {
                path,
                actime,
                modtime,
            } => {
                let result = self.with_path(path, |e, s, p| e.utime(s, p, *actime, *modtime));
                self.send_unit(result)
            }
            Request::Unlink { path } => {
                let result = self.with_path(path, |e, s, p| e.unlink(s, p));
                self.send_unit(result)
            }
            Request::Rmdir { path } => {
                let result = self.with_path(path, |e, s, p| e.rmdir(s, p));
                self.send_unit(result)
            }
            Request::Rmall { path } => {
                let result = self.with_path(path, |e, s, p| e.rmall(s, p));
                self.send_unit(result)
            }
            Request::Mkdir { path, mode } => {
                let result = self.with_path(path, |e, s, p| e.mkdir(s, p, *mode));
                self.send_unit(result)
            }
            Request::Rename { path, new_path } => {
                let result = self.with_two_paths(path, new_path, |e, s, a, b| e.rename(s, a, b));
                self.send_unit(result)
            }
            Request::Link { path, new_path } => {
                let result = self.with_two_paths(path, new_path, |e, s, a, b| e.link(s, a, b));
                self.send_unit(result)
            }
            Request::Symlink { target, path } => {
                let result = self.with_path(path, |e, s, p| e.symlink(s, target, p));
                self.send_unit(result)
            }
            Request::Readlink { path, length } => {
                let result = self
                    .with_path(path, |e, s, p| e.readlink(s, p))
                    .map(|mut target| {
                        target.truncate(usize::try_from(*length).unwrap_or(usize::MAX));
                        target
                    });
                self.send_data(result)
            }
            Request::Getdir { path } => self.getdir(path, false),
            Request::Getlongdir { path } => self.getdir(path, true),
            Request::Getfile { path } => self.getfile(path),
            Request::Putfile { path, mode, length } => self.putfile(path, *mode, *length),
            Request::Getstream { path } => self.getstream(path),
            Request::Putstream { path } => self.putstream(path),
            Request::Md5 { path } => {
                let result = self.digest(path, "md5");
                self.send_data(result)
            }
            Request::Hash { algorithm, path } => {
                let result = self.digest(path, algorithm);
                self.send_data(result)
            }
            Request::Whoami { length } => {
                let mut me = self.subject.clone().into_bytes();
                me.truncate(usize::try_from(*length).unwrap_or(usize::MAX));
                self.send_data(Ok(me))
            }
            Request::Explain {} => {
                let why = self.last_refusal.clone().unwrap_or_default().into_bytes();
                self.send_data(Ok(why))
            }
            Request::Whoareyou { host, length } => {
                let result = whoareyou(host).map(|mut me| {
                    me.truncate(usize::try_from(*length).unwrap_or(usize::MAX));
                    me
                });
                match result {
                    Ok(me) => self.send_data(Ok(me)),
                    Err(code) => self.send_error(code),
                }
            }
            Request::Getacl { path } => self.getacl(path),
            Request::Setacl {
                path,
                subject,
                rights,
            } => {
                let result = parse_rights(rights)
                    .and_then(|r| self.with_path(path, |e, s, p| e.setacl(s, p, subject, r)));
                self.send_unit(result)
            }
            Request::Resetacl { path, rights } => {
                let result = parse_rights(rights)
                    .and_then(|r| self.with_path(path, |e, s, p| e.resetacl(s, p, r)));
                self.send_unit(result)
            }
            Request::Getxattr { path, name } | Request::Lgetxattr { path, name } => {
                let follow = matches!(request, Request::Getxattr { .. });
                let result = xattr_name(name)
                    .and_then(|n| self.with_path(path, |e, s, p| e.getxattr(s, p, follow, &n)));
                self.send_data(result)
            }
            Request::Listxattr { path } | Request::Llistxattr { path } => {
                let follow = matches!(request, Request::Listxattr { .. });
                let result = self.with_path(path, |e, s, p| e.listxattr(s, p, follow));
                self.send_data(result)
            }
            Request::Setxattr {
                path,
                name,
                length,
                flags,
            }
            | Request::Lsetxattr {
                path,
                name,
                length,
                flags,
            } => {
                let follow = matches!(request, Request::Setxattr { .. });
                if self.payload_too_big(*length)? {
                    return Ok(());
                }
                self.read_payload(*length)?;
                let value = std::mem::take(&mut self.buffer);
                let value_bytes = &value[..*length as usize];
                let result = xattr_name(name).and_then(|n| {
                    self.with_path(path, |e, s, p| {
                        e.setxattr(s, p, follow, &n, value_bytes, *flags)
                    })
                });
                self.buffer = value;
                self.send_unit(result)
            }
            Request::Removexattr { path, name } | Request::Lremovexattr { path, name } => {
                let follow = matches!(request, Request::Removexattr { .. });
                let result = xattr_name(name)
                    .and_then(|n| self.with_path(path, |e, s, p| e.removexattr(s, p, follow, &n)));
                self.send_unit(result)
            }
            Request::Fgetxattr { fd, name } => {
                let result = xattr_name(name).and_then(|n| fd_xattr_get(self.file(*fd)?, &n));
                self.send_data(result)
            }
            Request::Flistxattr { fd } => {
                let result = self.file(*fd).and_then(fd_xattr_list);
                self.send_data(result)
            }
            Request::Fsetxattr {
                fd,
                name,
                length,
                flags,
            } => {
                if self.payload_too_big(*length)? {
                    return Ok(());
                }
                self.read_payload(*length)?;
                let value = std::mem::take(&mut self.buffer);
                let result = xattr_name(name).and_then(|n| {
                    let f = self.writable_file(*fd)?;
                    let v = &value[..*length as usize];
                    crate::jail::cvt(unsafe {
                        libc::fsetxattr(
                            f.file.as_raw_fd(),
                            n.as_ptr(),
                            v.as_ptr().cast(),
                            v.len(),
                            *flags,
                        )
                    })?;
                    Ok(())
                });
                self.buffer = value;
                self.send_unit(result)
            }
            Request::Fremovexattr { fd, name } => {
                let result = xattr_name(name).and_then(|n| {
                    let f = self.writable_file(*fd)?;
                    crate::jail::cvt(unsafe {
                        libc::fremovexattr(f.file.as_raw_fd(), n.as_ptr())
                    })?;
                    Ok(())
                });
                self.send_unit(result)
            }
            Request::Unsupported { payload, .. } => {
                self.discard_payload(*payload)?;
                self.send_error(ErrorCode::NotSupported)
            }
        }
    }

    // ---- helpers for path and fd arguments ------------------------------------------------

    fn with_path<T>(
        &self,
        path: &[u8],
        op: impl FnOnce(&Export, &str, &JailPath) -> OpResult<T>,
    ) -> OpResult<T> {
        let path = JailPath::new(path)?;
        op(self.export, &self.subject, &path)
    }

    fn with_two_paths<T>(
        &self,
        a: &[u8],
        b: &[u8],
        op: impl FnOnce(&Export, &str, &JailPath, &JailPath) -> OpResult<T>,
    ) -> OpResult<T> {
        let (a, b) = (JailPath::new(a)?, JailPath::new(b)?);
        op(self.export, &self.subject, &a, &b)
    }

    fn file(&self, fd: i64) -> OpResult<&OpenFile> {
        self.files.get(&fd).ok_or(OpError::errno(libc::EBADF))
    }

    fn writable_file(&self, fd: i64) -> OpResult<&OpenFile> {
        let f = self.file(fd)?;
        if f.writable {
            Ok(f)
        } else {
            Err(OpError::errno(libc::EBADF))
        }
    }

    // ---- file descriptors -----------------------------------------------------------------

    fn open(&mut self, path: &[u8], flags: OpenFlags, mode: u32) -> Step {
        if self.files.len() >= MAX_OPEN_FILES {
            return self.send_error(ErrorCode::TooManyOpen);
        }
        let libc_flags = flags.to_libc();
        let result = self.with_path(path, |e, s, p| e.open(s, p, libc_flags, mode));
        match result {
            Ok(file) => {
                let stat = match crate::export::fstat(file.as_raw_fd()) {
                    Ok(st) => st,
                    Err(e) => return self.send_failure(&e.into()),
                };
                let fd = (0..)
                    .find(|n| !self.files.contains_key(n))
                    .expect("a free number");
                let writable = libc_flags & libc::O_ACCMODE != libc::O_RDONLY;
                self.files.insert(fd, OpenFile { file, writable });
                self.send_result(fd)?;
                self.writer.write_all(&Stat::from(&stat).to_line())?;
                Ok(())
            }
            Err(e) => self.send_failure(&e),
        }
    }

    fn pread(&mut self, fd: i64, length: u64, offset: u64) -> Step {
        let length = length.min(roost_wire::MAX_BLOCK) as usize;
        let Some(open) = self.files.get(&fd) else {
            return self.send_error(ErrorCode::BadFd);
        };
        if self.buffer.len() < length {
            self.buffer.resize(length, 0);
        }
        let result = pread_full(&open.file, &mut self.buffer[..length], offset);
        match result {
            Ok(n) => {
                self.send_result(n as i64)?;
                self.writer.write_all(&self.buffer[..n])?;
                Ok(())
            }
            Err(e) => self.send_failure(&e.into()),
        }
    }

    /// Writes the payload in chunks as it arrives, so a large write needs no large buffer.
    fn pwrite(&mut self, fd: i64, length: u64, offset: u64) -> Step {
        // The file leaves the table while the payload streams in (the scratch buffer and the
        // table are both parts of the session); it goes back whatever the outcome.
        let open = match self.files.remove(&fd) {
            Some(open) if open.writable => open,
            other => {
                if let Some(open) = other {
                    self.files.insert(fd, open);
                }
                self.discard_payload(length)?;
                return self.send_error(ErrorCode::BadFd);
            }
        };
        let outcome = self.write_payload_at(&open.file, length, offset);
        self.files.insert(fd, open);
        let (done, failure) = outcome?;
        match failure {
            Some(e) if done == 0 => self.send_failure(&e.into()),
            _ => self.send_result(done as i64),
        }
    }

    /// Streams `length` payload bytes into `file` at `offset`; returns the bytes written and
    /// the error that stopped writing, if any (the rest of the payload is consumed).
    fn write_payload_at(
        &mut self,
        file: &File,
        length: u64,
        offset: u64,
    ) -> Result<(u64, Option<io::Error>), Stop> {
        let mut done: u64 = 0;
        while done < length {
            let chunk = (length - done).min(CHUNK as u64);
            self.read_payload(chunk)?;
            if let Err(e) = file.write_all_at(&self.buffer[..chunk as usize], offset + done) {
                self.discard_payload(length - done - chunk)?;
                return Ok((done, Some(e)));
            }
            done += chunk;
        }
        Ok((done, None))
    }

    fn sread(
        &mut self,
        fd: i64,
        length: u64,
        stride_length: u64,
        stride_skip: u64,
        offset: u64,
    ) -> Step {
        if stride_length == 0 || stride_skip < stride_length {
            return self.send_error(ErrorCode::InvalidRequest);
        }
        let length = length.min(roost_wire::MAX_BLOCK) as usize;
        let Some(open) = self.files.get(&fd) else {
            return self.send_error(ErrorCode::BadFd);
        };
        if self.buffer.len() < length {
            self.buffer.resize(length, 0);
        }
        let mut done = 0usize;
        let mut at = offset;
        let mut failure = None;
        while done < length {
            let want = (length - done).min(stride_length as usize);
            match pread_full(&open.file, &mut self.buffer[done..done + want], at) {
                Ok(n) => {
                    done += n;
                    if n < want {
                        break;
                    }
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
            at += stride_skip;
        }
        match failure {
            Some(e) if done == 0 => self.send_failure(&e.into()),
            _ => {
                self.send_result(done as i64)?;
                self.writer.write_all(&self.buffer[..done])?;
                Ok(())
            }
        }
    }

    fn swrite(
        &mut self,
        fd: i64,
        length: u64,
        stride_length: u64,
        stride_skip: u64,
        offset: u64,
    ) -> Step {
        if self.payload_too_big(length)? {
            return Ok(());
        }
        self.read_payload(length)?;
        if stride_length == 0 || stride_skip < stride_length {
            return self.send_error(ErrorCode::InvalidRequest);
        }
        let file = match self.writable_file(fd) {
            Ok(f) => &f.file,
            Err(e) => return self.send_failure(&e),
        };
        let data = &self.buffer[..length as usize];
        let mut done = 0usize;
        let mut at = offset;
        let mut failure = None;
        for piece in data.chunks(stride_length as usize) {
            if let Err(e) = file.write_all_at(piece, at) {
                failure = Some(e);
                break;
            }
            done += piece.len();
            at += stride_skip;
        }
        match failure {
            Some(e) if done == 0 => self.send_failure(&e.into()),
            _ => self.send_result(done as i64),
        }
    }

    // ---- directories and ACLs -------------------------------------------------------------

    fn getdir(&mut self, path: &[u8], long: bool) -> Step {
        let result = self.with_path(path, |e, s, p| e.list(s, p, long));
        match result {
            Ok(entries) => {
                self.send_result(0)?;
                for (name, stat) in entries {
                    let lines = match stat {
                        Some(st) => listing::long_entry_lines(&name, &Stat::from(&st)),
                        None => listing::name_line(&name),
                    };
                    if let Some(lines) = lines {
                        self.writer.write_all(&lines)?;
                    }
                }
                self.writer.write_all(listing::END)?;
                Ok(())
            }
            Err(e) => self.send_failure(&e),
        }
    }

    fn getacl(&mut self, path: &[u8]) -> Step {
        let result = self.with_path(path, |e, _, p| e.getacl(p));
        match result {
            Ok(acl) => {
                self.send_result(0)?;
                self.writer.write_all(acl.to_text().as_bytes())?;
                self.writer.write_all(listing::END)?;
                Ok(())
            }
            Err(e) => self.send_failure(&e),
        }
    }

    // ---- whole files ----------------------------------------------------------------------

    fn getfile(&mut self, path: &[u8]) -> Step {
        let (file, stat) = match self.with_path(path, |e, s, p| e.open_read(s, p)) {
            Ok(pair) => pair,
            Err(e) => return self.send_failure(&e),
        };
        let size = stat.st_size as u64;
        self.send_result(size as i64)?;
        self.send_file_bytes(&file, size)?;
        Ok(())
    }

    /// Copies `size` bytes of `file` to the client (by sendfile where the kernel can). A file
    /// that shrank under us cannot keep the promise made in the result line: the connection
    /// is closed so the client sees a short transfer rather than misread data.
    fn send_file_bytes(&mut self, file: &File, size: u64) -> Step {
        self.writer.flush()?;
        let mut socket = self.writer.socket();
        let sent = io::copy(&mut file.take(size), &mut socket)?;
        if sent < size {
            return Err(Stop::Broken(format!(
                "file shrank during transfer ({sent} of {size} bytes)"
            )));
        }
        Ok(())
    }

    fn putfile(&mut self, path: &[u8], mode: u32, length: u64) -> Step {
        let upload = match self.with_path(path, |e, s, p| e.begin_put(s, p, mode)) {
            Ok(upload) => upload,
            Err(e) => return self.send_failure(&e),
        };
        self.send_result(0)?;
        self.writer.flush()?;
        let mut upload = upload;
        let copied = io::copy(&mut (&mut self.reader).take(length), &mut upload.file);
        match copied {
            Ok(n) if n == length => {}
            // The client left mid-transfer: dropping the upload removes its temporary file.
            Ok(_) => return Err(Stop::Broken("disconnected during putfile".into())),
            Err(e) if is_socket_error(&e) => return Err(e.into()),
            Err(e) => {
                // The disk refused: consume what is left, answer the error, keep the old file.
                let left =
                    length.saturating_sub(upload.file.metadata().map(|m| m.len()).unwrap_or(0));
                drop(upload);
                self.discard_payload(left)?;
                return self.send_failure(&e.into());
            }
        }
        match upload.commit() {
            Ok(()) => self.send_result(length as i64),
            Err(e) => self.send_failure(&e),
        }
    }

    fn getstream(&mut self, path: &[u8]) -> Step {
        let (file, _) = match self.with_path(path, |e, s, p| e.open_read(s, p)) {
            Ok(pair) => pair,
            Err(e) => return self.send_failure(&e),
        };
        self.send_result(0)?;
        self.writer.flush()?;
        io::copy(&mut &file, &mut self.writer.socket())?;
        Err(Stop::Closed)
    }

    fn putstream(&mut self, path: &[u8]) -> Step {
        let mut upload = match self.with_path(path, |e, s, p| e.begin_put(s, p, 0o644)) {
            Ok(upload) => upload,
            Err(e) => return self.send_failure(&e),
        };
        self.send_result(0)?;
        self.writer.flush()?;
        io::copy(&mut self.reader, &mut upload.file)?;
        match upload.commit() {
            Ok(()) => Err(Stop::Closed),
            Err(e) => Err(Stop::Broken(format!(
                "putstream could not be committed: {e}"
            ))),
        }
    }

    fn digest(&mut self, path: &[u8], algorithm: &str) -> OpResult<Vec<u8>> {
        let mut hasher =
            crate::digest::Hasher::new(algorithm).ok_or(OpError::errno(libc::EINVAL))?;
        let (file, _) = self.with_path(path, |e, s, p| e.open_read(s, p))?;
        if self.buffer.len() < CHUNK {
            self.buffer.resize(CHUNK, 0);
        }
        let mut reader = &file;
        loop {
            let n = reader.read(&mut self.buffer[..CHUNK])?;
            if n == 0 {
                break;
            }
            hasher.update(&self.buffer[..n]);
        }
        Ok(hasher.finish())
    }
}

/// How long `whoareyou` may spend reaching the other server.
const WHOAREYOU_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The subject this server is given by the Chirp server at `host` (`host[:port]`), found by
/// connecting to it as a client: what a third party needs to write an ACL for this server.
fn whoareyou(host: &str) -> Result<Vec<u8>, ErrorCode> {
    let options = roost_client::Options {
        connect_timeout: WHOAREYOU_TIMEOUT,
        io_timeout: Some(WHOAREYOU_TIMEOUT),
        ..roost_client::Options::default()
    };
    let mut client = roost_client::Client::connect(host, &options).map_err(|e| e.code())?;
    client
        .whoami()
        .map(String::into_bytes)
        .map_err(|e| e.code())
}

/// Reads until `buf` is full or the file ends.
fn pread_full(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Whether an error from `io::copy` between socket and file came from the socket side.
fn is_socket_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock
            | io::ErrorKind::TimedOut
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::UnexpectedEof
    )
}

fn parse_rights(text: &str) -> OpResult<Rights> {
    Rights::parse(text).map_err(|_| OpError::errno(libc::EINVAL))
}

fn xattr_name(name: &[u8]) -> OpResult<CString> {
    CString::new(name).map_err(|_| OpError::errno(libc::EINVAL))
}

fn fd_xattr_get(f: &OpenFile, name: &CString) -> OpResult<Vec<u8>> {
    let fd = f.file.as_raw_fd();
    let mut buf = vec![0u8; 64 * 1024];
    let n = unsafe { libc::fgetxattr(fd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error().into());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

fn fd_xattr_list(f: &OpenFile) -> OpResult<Vec<u8>> {
    let fd = f.file.as_raw_fd();
    let mut buf = vec![0u8; 64 * 1024];
    let n = unsafe { libc::flistxattr(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error().into());
    }
    buf.truncate(n as usize);
    Ok(buf)
}
