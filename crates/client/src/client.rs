//! A connection to one Chirp server: connect, authenticate, send requests, read replies. The
//! RPC methods live in `rpc.rs` and `xattr.rs`, data transfers in `bulk.rs` and `batch.rs`.
//!
//! A connection that fails at the transport level (I/O error, timeout, malformed reply) is
//! marked broken and every later call fails fast with `ENOTCONN`; open descriptors die with
//! it, so recovery (reconnecting and reopening) belongs to the caller, which knows the paths.

use std::io::{self, BufReader, IoSlice, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use roost_wire::auth::Subject;
use roost_wire::{listing, Request, Stat, StatFs};

use crate::auth::{authenticate, Credentials};
use crate::error::{Error, Result};
use crate::lines::{read_line, read_result, REPLY_LINE_MAX};
use crate::receive::Receiver;
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
    /// How long a wait for a reply polls the socket before sleeping (zero: never; see
    /// [`crate::receive`]). Defaults to `ROOST_SPIN_US` microseconds, or 100 µs.
    pub spin: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            connect_timeout: Duration::from_secs(15),
            io_timeout: Some(Duration::from_secs(60)),
            keepalive: Some(Keepalive::default()),
            credentials: Credentials::new(),
            spin: crate::receive::spin_from_env(),
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
    pub(crate) reader: BufReader<Receiver>,
    stream: TcpStream,
    out: Vec<u8>,
    authority: String,
    subject: Subject,
    broken: bool,
    /// Requests sent whose answers nobody waits for: the next call reads them first.
    unanswered: usize,
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
        let mut reader =
            BufReader::with_capacity(64 * 1024, Receiver::new(stream.try_clone()?, opts.spin));
        let mut writer = &stream;
        // The handshake answers at once from any live server: it gets the connect timeout
        // (if shorter), so that a silent peer is given up on as soon as an unreachable one.
        let handshake = opts
            .io_timeout
            .map_or(opts.connect_timeout, |io| io.min(opts.connect_timeout));
        stream.set_read_timeout(Some(handshake))?;
        let subject = match authenticate(&mut reader, &mut writer, &opts.credentials, local) {
            Err(e) if e.errno() == libc::ETIMEDOUT => return Err(Error::Silent(handshake)),
            other => other?,
        };
        stream.set_read_timeout(opts.io_timeout)?;
        Ok(Client {
            reader,
            stream,
            out: Vec::with_capacity(4096),
            authority,
            subject,
            broken: false,
            unanswered: 0,
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

    /// Closes the connection at once, discarding whatever the kernel has not sent yet (a
    /// reset instead of an orderly close): a request the caller gave up on — it timed out,
    /// and the caller will retry it on a new connection — must never reach the server
    /// later, when the network comes back, and be carried out after the retry.
    pub fn abort(self) {
        use std::os::fd::AsRawFd;
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: a valid socket and a plain-data option of the size given.
        unsafe {
            libc::setsockopt(
                self.stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
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

    /// Reads a result line: the non-negative value, or the server's error (after the
    /// answers of requests sent without waiting, which are dropped).
    pub(crate) fn finish(&mut self) -> Result<u64> {
        while self.unanswered > 0 {
            read_result(&mut self.reader)?;
            self.unanswered -= 1;
        }
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

    /// Sends a request whose only answer is a result line nobody needs, without waiting
    /// for it: the next call on this connection reads it first (and drops it), so the
    /// connection is free again at once.
    pub(crate) fn unanswered(&mut self, req: Request) -> Result<()> {
        debug_assert_eq!(req.reply_body(), roost_wire::ReplyBody::None);
        self.guard(|c| {
            c.send(&req, &[])?;
            c.flush()?;
            c.unanswered += 1;
            Ok(())
        })
    }

    /// A request whose only answer is the result line.
    pub(crate) fn simple(&mut self, req: Request) -> Result<u64> {
        self.guard(|c| c.call(&req, &[]))
    }

    /// A request answered by `result` bytes of data, at most `max`.
    pub(crate) fn data(&mut self, req: Request, max: u64) -> Result<Vec<u8>> {
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
    pub(crate) fn stat_reply(&mut self, req: Request) -> Result<(u64, Stat)> {
        self.guard(|c| {
            let n = c.call(&req, &[])?;
            Ok((n, c.stat_line()?))
        })
    }

    /// The stat line that follows a successful result.
    pub(crate) fn stat_line(&mut self) -> Result<Stat> {
        let line = read_line(&mut self.reader, REPLY_LINE_MAX)?;
        Ok(Stat::parse(&line)?)
    }

    /// A request answered by a statfs line.
    pub(crate) fn statfs_reply(&mut self, req: Request) -> Result<StatFs> {
        self.guard(|c| {
            c.call(&req, &[])?;
            let line = read_line(&mut c.reader, REPLY_LINE_MAX)?;
            Ok(StatFs::parse(&line)?)
        })
    }

    /// Reads list lines up to the empty line that ends them.
    pub(crate) fn list_lines(&mut self) -> Result<Vec<Vec<u8>>> {
        let mut lines = Vec::new();
        loop {
            let line = read_line(&mut self.reader, REPLY_LINE_MAX)?;
            if listing::is_end(&line) {
                return Ok(lines);
            }
            lines.push(line);
        }
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

    /// Sends any request with its inline payload and returns the data that follows the
    /// result line (at most `max` bytes), for extension RPCs answered by a block of data
    /// (`group_open`, `group_op`).
    pub fn data_call(&mut self, req: &Request, payload: &[u8], max: u64) -> Result<Vec<u8>> {
        if req.reply_body() != roost_wire::ReplyBody::Data
            || req.inline_payload_len() != payload.len() as u64
        {
            return Err(Error::BadRequest(roost_wire::WireError::BadArgument(
                "request shape",
            )));
        }
        self.guard(|c| {
            let n = c.call(req, payload)?;
            if n > max {
                return Err(Error::Protocol(roost_wire::WireError::BadReply(
                    "more data than allowed",
                )));
            }
            c.read_bytes(n)
        })
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
