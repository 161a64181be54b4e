//! Requests on open descriptors: open, the read and write family, strided I/O.

use super::*;
use crate::splice::{Pipe, SpliceError};

/// Payloads at least this large move from the socket to the file by splice.
const SPLICE_FROM: u64 = 64 * 1024;
/// Reads at least this large leave a regular file by sendfile (one copy instead of two).
const SENDFILE_FROM: usize = 64 * 1024;

impl Session<'_> {
    // ---- file descriptors -----------------------------------------------------------------

    pub(super) fn open(&mut self, path: &[u8], flags: OpenFlags, mode: u32) -> Step {
        if self.files.len() >= MAX_OPEN_FILES {
            return self.send_error(ErrorCode::TooManyOpen);
        }
        let libc_flags = flags.to_libc();
        let result = self.with_path(path, |e, s, p| e.open(s, p, libc_flags, mode));
        match result {
            Ok(file) => {
                let stat = match crate::export::fstat(file.as_fd()) {
                    Ok(st) => st,
                    Err(e) => return self.send_failure(&e.into()),
                };
                let fd = (0..)
                    .find(|n| !self.files.contains_key(n))
                    .expect("a free number");
                let mode = libc_flags & libc::O_ACCMODE;
                self.files.insert(
                    fd,
                    OpenFile {
                        file,
                        readable: mode != libc::O_WRONLY,
                        writable: mode != libc::O_RDONLY,
                        appends: flags.append,
                    },
                );
                self.send_result(fd)?;
                self.writer.write_all(&Stat::from(&stat).to_line())?;
                Ok(())
            }
            Err(e) => self.send_failure(&e),
        }
    }

    pub(super) fn pread(&mut self, fd: i64, length: u64, offset: u64) -> Step {
        let length = length.min(roost_wire::MAX_BLOCK) as usize;
        let Some(open) = self.files.get(&fd) else {
            return self.send_error(ErrorCode::BadFd);
        };
        if length >= SENDFILE_FROM && open.readable {
            // (An empty reply is a line alone, and a descriptor not open for reading fails
            // before any byte is promised: both take the ordinary path.)
            if let Some(n) = regular_span(&open.file, offset, length).filter(|&n| n > 0) {
                let file = open.file.as_raw_fd();
                self.send_result(n as i64)?;
                self.meter.read(n);
                return self.send_file_bytes(file, offset, n);
            }
        }
        if self.buffer.len() < length {
            self.buffer.resize(length, 0);
        }
        match pread_full(&open.file, &mut self.buffer[..length], offset) {
            Ok(n) => self.send_read(n, None),
            Err(e) => self.send_read(0, Some(e)),
        }
    }

    /// Answers a read that produced `done` bytes in the scratch buffer: the bytes, unless it
    /// failed before producing any.
    fn send_read(&mut self, done: usize, failure: Option<io::Error>) -> Step {
        match failure {
            Some(e) if done == 0 => self.send_failure(&e.into()),
            _ => {
                self.send_result(done as i64)?;
                self.meter.read(done as u64);
                self.writer.write_all(&self.buffer[..done])?;
                Ok(())
            }
        }
    }

    /// Answers a write that stored `done` bytes: the count, unless it failed before any.
    fn send_written(&mut self, done: u64, failure: Option<io::Error>) -> Step {
        self.meter.written(done);
        match failure {
            Some(e) if done == 0 => self.send_failure(&e.into()),
            _ => self.send_result(done as i64),
        }
    }

    /// Writes the payload in chunks as it arrives, so a large write needs no large buffer.
    pub(super) fn pwrite(&mut self, fd: i64, length: u64, offset: u64) -> Step {
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
        let outcome = if open.appends && length <= self.shared.limits.max_message {
            self.append_payload(&open.file, length)
        } else {
            self.write_payload_at(&open.file, length, offset)
        };
        self.files.insert(fd, open);
        let (done, failure) = outcome?;
        self.send_written(done, failure)
    }

    /// Appends `length` payload bytes to `file` (opened `O_APPEND`) in one write, so the
    /// record lands whole however many connections append at once (the kernel holds the
    /// file's lock across one write, not across the several a streamed payload takes).
    /// Nothing is written if the client reset the connection meanwhile: it gave the request
    /// up and may be retrying it on another connection, where it must not be made twice
    /// (its reset leaves the request readable here, after a stall of this server).
    fn append_payload(
        &mut self,
        file: &File,
        length: u64,
    ) -> Result<(u64, Option<io::Error>), Stop> {
        self.read_payload(length)?;
        if peer_reset(self.reader.socket()) {
            return Err(Stop::Broken(
                "the client reset the connection before its append was made".into(),
            ));
        }
        match file.write_all_at(&self.buffer[..length as usize], 0) {
            Ok(()) => Ok((length, None)),
            Err(e) => Ok((0, Some(e))),
        }
    }

    /// Streams `length` payload bytes into `file` at `offset`; returns the bytes written and
    /// the error that stopped writing, if any (the rest of the payload is consumed).
    pub(super) fn write_payload_at(
        &mut self,
        file: &File,
        length: u64,
        offset: u64,
    ) -> Result<(u64, Option<io::Error>), Stop> {
        if length >= SPLICE_FROM && !appends(file) {
            return self.splice_payload_at(file, length, offset);
        }
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

    /// Like [`Session::write_payload_at`] for large payloads: what the reader already holds is
    /// written from there, the rest is spliced from the socket into the file.
    fn splice_payload_at(
        &mut self,
        file: &File,
        length: u64,
        offset: u64,
    ) -> Result<(u64, Option<io::Error>), Stop> {
        let buffered = self.reader.buffer().len().min(length as usize);
        let head = file.write_all_at(&self.reader.buffer()[..buffered], offset);
        self.reader.consume(buffered);
        if let Err(e) = head {
            self.discard_payload(length - buffered as u64)?;
            return Ok((0, Some(e)));
        }
        if self.pipe.is_none() {
            self.pipe = Some(Pipe::new().map_err(Stop::from)?);
        }
        let pipe = self.pipe.as_ref().expect("just made");
        let socket = self.reader.socket().as_fd();
        let rest = length - buffered as u64;
        match pipe.socket_to_file(socket, file.as_fd(), offset + buffered as u64, rest) {
            Ok(()) => {
                // Another large write most likely follows: read its line without its payload.
                self.reader.short_fills(true);
                Ok((length, None))
            }
            Err(SpliceError::Socket(e)) => Err(e.into()),
            Err(SpliceError::File {
                written,
                taken,
                error,
            }) => {
                self.discard_payload(rest - taken)?;
                Ok((buffered as u64 + written, Some(error)))
            }
        }
    }

    pub(super) fn sread(
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
        self.send_read(done, failure)
    }

    pub(super) fn swrite(
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
        self.send_written(done as u64, failure)
    }
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

/// For a regular file, how many of `length` bytes from `offset` it holds now; `None` for
/// other files (pipes, devices), whose reads take the copying path.
fn regular_span(file: &File, offset: u64, length: usize) -> Option<u64> {
    let st = crate::export::fstat(file.as_fd()).ok()?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    Some(
        (st.st_size as u64)
            .saturating_sub(offset)
            .min(length as u64),
    )
}

/// Whether the client has reset the connection (an error is pending on the socket): it
/// gave up every request it had not seen answered.
fn peer_reset(socket: &std::net::TcpStream) -> bool {
    let mut pfd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd; a zero timeout only looks.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    n > 0 && pfd.revents & libc::POLLERR != 0
}

/// Whether `file` was opened for appending (splice cannot write to such files).
fn appends(file: &File) -> bool {
    // SAFETY: a descriptor borrowed from `file` for the call.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    flags >= 0 && flags & libc::O_APPEND != 0
}
