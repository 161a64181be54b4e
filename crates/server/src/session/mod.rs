//! One client's session: authenticate, then read request lines and answer them until the
//! client leaves, goes quiet for too long, or breaks the protocol.
//!
//! Replies are buffered and flushed only when no further request is already waiting, so a
//! client that pipelines many requests gets its answers in few packets.

mod descriptors;
mod dispatch;
mod jobs;
mod transfers;

use crate::export::{Export, OpError, OpResult};
use crate::input::Input;
use crate::jail::JailPath;
use crate::listener::Shared;
use crate::log::{self, Level};
use crate::output::Output;
use roost_wire::{listing, reply, ErrorCode, OpenFlags, Request, Rights, Stat, StatFs, WireError};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// Read buffer of a connection.
const READ_BUFFER: usize = 32 * 1024;

/// Chunk size for streaming payloads between the socket and files.
const CHUNK: usize = 256 * 1024;

/// Scratch space an idle connection keeps; more is released before waiting.
const KEEP_BUFFER: usize = 1 << 20;

/// The largest extended attribute value Linux stores (XATTR_SIZE_MAX).
const XATTR_VALUE_MAX: u64 = 64 * 1024;

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
    readable: bool,
    writable: bool,
    /// Opened with `a` (`O_APPEND`): every write lands at the end.
    appends: bool,
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

/// Whether a read gave up waiting: the socket's timeout (which Linux reports as `EAGAIN`) or
/// a deadline.
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

struct Session<'a> {
    export: &'a Export,
    shared: &'a Shared,
    subject: String,
    reader: Input<'a>,
    writer: Output<'a>,
    files: BTreeMap<i64, OpenFile>,
    /// Scratch space for reads and writes, grown on demand.
    buffer: Vec<u8>,
    /// Why the last refused request was refused, for the `explain` extension.
    last_refusal: Option<String>,
    /// A pipe for splicing large writes, made on first use.
    pipe: Option<crate::splice::Pipe>,
    /// Group file operations open on this connection.
    groups: crate::relay::Groups,
    /// This subject's requests and bytes, for the ledger (and `--metrics`).
    meter: crate::accounting::Meter,
    /// Whether the request being answered was answered with an error (for `--metrics`).
    failed: bool,
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
    // The handshake gets short reads and a deadline of its own, so silent or dribbling
    // clients cannot hold connection slots before they have even said who they are.
    let _ = stream.set_read_timeout(Some(crate::auth::HANDSHAKE_READ_TIMEOUT));
    let _ = stream.set_write_timeout(Some(shared.limits.stall_timeout));
    // Both directions share the one socket descriptor: a thousand clients cost a thousand fds.
    let mut reader = Input::new(&stream, READ_BUFFER);
    let mut writer = Output::new(&stream);
    let _ = reader.set_deadline(Some(Instant::now() + crate::auth::HANDSHAKE_DEADLINE));
    let ends = crate::auth::Endpoints {
        peer,
        local: stream
            .local_addr()
            .map(crate::listener::canonical)
            .unwrap_or(peer),
    };
    let subject = match crate::auth::accept(&shared.auth, ends, &mut reader, &mut writer) {
        Ok(Some(subject)) => subject,
        Ok(None) => {
            summary.reason = "authentication failed".into();
            return summary;
        }
        Err(e) => {
            summary.reason = if is_timeout(&e) {
                "authentication failed: the client took too long".into()
            } else {
                format!("authentication failed: {e}")
            };
            return summary;
        }
    };
    let _ = reader.set_deadline(None);
    let _ = reader.set_timeout(Some(wake));
    reader.poll_for(shared.limits.request_poll);
    log::event(
        Level::Info,
        "connect",
        &[("peer", &peer), ("subject", &subject)],
    );
    summary.subject = Some(subject.clone());
    let meter =
        crate::accounting::Meter::new(shared.accounting.clone(), shared.metrics.clone(), &subject);
    let mut session = Session {
        export: &shared.export,
        shared,
        subject,
        reader,
        writer,
        files: BTreeMap::new(),
        buffer: Vec::new(),
        last_refusal: None,
        pipe: None,
        groups: Default::default(),
        meter,
        failed: false,
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
                self.meter.idle();
                // About to wait for the client: give back a scratch buffer a large request
                // grew, so idle connections stay small.
                if self.buffer.capacity() > KEEP_BUFFER {
                    self.buffer = Vec::new();
                }
            }
            line.clear();
            match self.read_request_line(&mut line) {
                Ok(true) => {}
                Ok(false) => return Stop::Closed,
                Err(stop) => return stop,
            }
            *requests += 1;
            self.meter.request();
            let started = Instant::now();
            let request = Request::parse(&line);
            // Full-sized fills again, unless this request splices a payload (see `Input`).
            self.reader.short_fills(false);
            self.failed = false;
            let outcome = match &request {
                Ok(request) => self.handle(request),
                Err(WireError::Empty) => continue,
                Err(e) => self.refuse_line(&line, e),
            };
            let rpc = request.as_ref().map_or("invalid", |r| r.name());
            let failed = self.failed;
            self.shared.count(|m| m.rpc(rpc, failed));
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
    /// the line to start; once it has, the whole line must arrive within the line timeout.
    /// A line that is too long is consumed and answered with an error.
    fn read_request_line(&mut self, line: &mut Vec<u8>) -> Result<bool, Stop> {
        let read = self.read_line_within_deadline(line);
        if self.reader.has_deadline() {
            self.reader.set_deadline(None)?;
        }
        read
    }

    fn read_line_within_deadline(&mut self, line: &mut Vec<u8>) -> Result<bool, Stop> {
        let max = self.shared.limits.max_line;
        let idle_since = Instant::now();
        loop {
            if line.is_empty() {
                // Wait (up to the idle timeout) for the line's first bytes; if they are not
                // the whole line, the rest has the line timeout from now.
                match self.reader.fill_buf() {
                    Ok([]) => return Ok(false),
                    Ok(buffered) if !buffered.contains(&b'\n') => {
                        let deadline = Instant::now() + self.shared.limits.line_timeout;
                        self.reader.set_deadline(Some(deadline))?;
                    }
                    Ok(_) => {}
                    Err(e) if is_timeout(&e) => {
                        if idle_since.elapsed() >= self.shared.limits.idle_timeout {
                            return Err(Stop::Broken("idle timeout".into()));
                        }
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            let mut limited = (&mut self.reader).take((max + 1 - line.len()) as u64);
            match limited.read_until(b'\n', line) {
                Ok(0) if line.is_empty() => return Ok(false),
                Ok(0) => return Err(Stop::Broken("disconnected mid-line".into())),
                Ok(_) if line.last() == Some(&b'\n') => return Ok(true),
                Ok(_) if line.len() > max => {
                    self.discard_rest_of_line()?;
                    if Request::announced_payload(line).is_some() {
                        // Its length was cut off with the line: the stream cannot go on.
                        self.send_error(ErrorCode::TooBig)?;
                        self.writer.flush()?;
                        return Err(Stop::Broken("payload of unknown length".into()));
                    }
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
                    self.reader.set_deadline(None)?;
                }
                Ok(_) => {}
                Err(e) if is_timeout(&e) => {
                    return Err(Stop::Broken("request line too slow".into()));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Skips the rest of a line that was too long (within the line's deadline).
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

    /// Answers a line that does not parse with an error code. The payload its RPC announces
    /// is read past first, so that data is never taken for requests (a `pwrite` whose offset
    /// is bad must not run `unlink /f` written as its data); when the length itself cannot
    /// be read, nothing says where the next request starts and the connection ends.
    fn refuse_line(&mut self, line: &[u8], error: &WireError) -> Step {
        log::event(
            Level::Error,
            "bad-request",
            &[("subject", &self.subject), ("error", error)],
        );
        match Request::announced_payload(line) {
            None => self.send_error(error.code()),
            Some(Ok(length)) => {
                self.discard_payload(length)?;
                self.send_error(error.code())
            }
            Some(Err(_)) => {
                self.send_error(error.code())?;
                self.writer.flush()?;
                Err(Stop::Broken("payload of unknown length".into()))
            }
        }
    }

    // ---- replies --------------------------------------------------------------------------

    fn send_result(&mut self, n: i64) -> Step {
        self.writer.write_all(&reply::format_result(n))?;
        Ok(())
    }

    fn send_error(&mut self, code: ErrorCode) -> Step {
        self.failed = true;
        self.writer.write_all(&reply::error_line(code))?;
        Ok(())
    }

    fn send_failure(&mut self, error: &OpError) -> Step {
        self.failed = true;
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
        self.payload_over(len, self.shared.limits.max_message)
    }

    /// Refuses an inline payload over `limit` bytes, after consuming it.
    fn payload_over(&mut self, len: u64, limit: u64) -> Result<bool, Stop> {
        if len <= limit {
            return Ok(false);
        }
        self.discard_payload(len)?;
        self.send_error(ErrorCode::TooBig)?;
        Ok(true)
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
}
