//! The reply side of a connection: small replies collect in a buffer and leave in one send;
//! a large block of data leaves together with whatever is buffered in a single `writev`, so a
//! reply costs one system call, not one for its result line and one for its bytes. File data
//! (large `pread` replies, `getfile`, `getstream`) leaves by `sendfile`, never copied here.

use std::io::{self, IoSlice, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};

/// Buffered bytes beyond this are sent at once.
const CAPACITY: usize = 64 * 1024;
/// Writes at least this large skip the buffer.
const DIRECT: usize = 16 * 1024;
/// Most bytes one `sendfile` call is asked for (whole files go in several).
const SENDFILE_CHUNK: u64 = 1 << 20;

pub struct Output<'a> {
    socket: &'a TcpStream,
    buf: Vec<u8>,
}

impl<'a> Output<'a> {
    pub fn new(socket: &'a TcpStream) -> Output<'a> {
        Output {
            socket,
            buf: Vec::with_capacity(4096),
        }
    }

    /// Sends the buffered bytes, then up to `limit` bytes of `file` from `offset` by
    /// `sendfile` (the file's pages go to the socket without passing through this process);
    /// returns how many of the file's bytes were sent, fewer than `limit` only at end of file.
    /// The buffered bytes leave with `MSG_MORE`, so a result line and the data after it can
    /// share a segment.
    pub fn send_file(&mut self, file: RawFd, offset: u64, limit: u64) -> io::Result<u64> {
        if limit == 0 {
            // Nothing would follow to push the buffered bytes out: a line sent with
            // MSG_MORE waits in the kernel for the cork timer (200 ms).
            self.flush()?;
            return Ok(0);
        }
        self.flush_more()?;
        let socket = self.socket.as_raw_fd();
        let mut at = offset as libc::off_t;
        let mut sent = 0u64;
        while sent < limit {
            let want = (limit - sent).min(SENDFILE_CHUNK) as usize;
            // SAFETY: both descriptors are open for the whole call; `at` is a valid offset.
            match unsafe { libc::sendfile(socket, file, &mut at, want) } {
                0 => break,
                n if n > 0 => sent += n as u64,
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
        Ok(sent)
    }

    /// Sends the buffered bytes telling the kernel more follows at once (`MSG_MORE`).
    fn flush_more(&mut self) -> io::Result<()> {
        let mut sent = 0;
        while sent < self.buf.len() {
            let rest = &self.buf[sent..];
            // SAFETY: a send from a live buffer on the live socket.
            let n = unsafe {
                libc::send(
                    self.socket.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_MORE | libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            sent += n as usize;
        }
        self.buf.clear();
        Ok(())
    }

    /// Sends the buffered bytes and `data` with as few system calls as the kernel allows.
    fn send_with(&mut self, data: &[u8]) -> io::Result<()> {
        let (mut head, mut tail) = (0, 0);
        while head < self.buf.len() || tail < data.len() {
            let slices = [IoSlice::new(&self.buf[head..]), IoSlice::new(&data[tail..])];
            let n = match (&*self.socket).write_vectored(&slices) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let from_head = n.min(self.buf.len() - head);
            head += from_head;
            tail += n - from_head;
        }
        self.buf.clear();
        Ok(())
    }
}

impl Write for Output<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.len() >= DIRECT {
            self.send_with(data)?;
        } else {
            self.buf.extend_from_slice(data);
            if self.buf.len() >= CAPACITY {
                self.send_with(&[])?;
            }
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.send_with(&[])?;
        }
        Ok(())
    }
}

impl Drop for Output<'_> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    #[test]
    fn small_and_large_writes_arrive_in_order() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            (&client).read_to_end(&mut all).unwrap();
            all
        });
        let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let mut expected = Vec::new();
        {
            let mut out = Output::new(&server);
            for i in 0..5 {
                let line = format!("{i}\n");
                out.write_all(line.as_bytes()).unwrap();
                out.write_all(&big).unwrap();
                expected.extend_from_slice(line.as_bytes());
                expected.extend_from_slice(&big);
            }
            out.write_all(b"end").unwrap();
            expected.extend_from_slice(b"end");
        }
        server.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(reader.join().unwrap(), expected);
    }

    /// Bytes the kernel holds for `socket` and has not sent yet (`SIOCOUTQNSD`).
    fn unsent(socket: &TcpStream) -> i32 {
        const SIOCOUTQNSD: libc::c_ulong = 0x894B;
        let mut n: libc::c_int = 0;
        // SAFETY: the ioctl fills one int for a live socket.
        let asked = unsafe { libc::ioctl(socket.as_raw_fd(), SIOCOUTQNSD, &mut n) };
        assert_eq!(asked, 0);
        n
    }

    /// The reply to a `getfile` of an empty file (a result line and no bytes) leaves at
    /// once: sent with `MSG_MORE` and no data after it, it sat corked in the kernel for
    /// 200 ms, which every `> /chirp/...` in a shell paid (its copy fetches the emptied file).
    #[test]
    fn a_result_line_with_no_file_bytes_after_it_is_not_held_back() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nodelay(true).unwrap();
        let empty = tempfile::tempfile().unwrap();
        let mut out = Output::new(&server);
        out.write_all(b"0\n").unwrap();
        assert_eq!(out.send_file(empty.as_raw_fd(), 0, 0).unwrap(), 0);
        assert_eq!(unsent(&server), 0, "the result line is held back");
    }
}
