//! The request side of a connection: a read buffer over the socket whose fills can be kept
//! short.
//!
//! An ordinary buffered read of a request line drags up to a buffer's worth of whatever
//! follows it into memory. When that is the payload of a large `pwrite`, those bytes cost a
//! second copy on their way into the file, where the rest of the payload is spliced from the
//! socket without passing through the server's memory. So right after a spliced payload, when
//! the next request is most likely another large write, fills stop after a few hundred bytes:
//! enough for a request line, leaving nearly all of the next payload in the socket.
//!
//! A deadline ([`Input::set_deadline`]) bounds how long reads may take in all, not each: a
//! client that sends one byte at a time cannot stretch a login or a request line forever.

use roost_client::receive::{recv_now, Spin};
use std::io::{self, BufRead, Read};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Most bytes a short fill asks for: a typical request line and a little more.
const SHORT_FILL: usize = 256;

pub struct Input<'a> {
    socket: &'a TcpStream,
    /// Received bytes; `buf.len()` is how far the buffer is filled, its capacity the most
    /// one fill takes. Only what the kernel writes is ever touched, so an idle connection's
    /// buffer costs almost no memory.
    buf: Vec<u8>,
    /// How much of `buf` has been consumed.
    pos: usize,
    short: bool,
    /// Polling for the next bytes before a read blocks (none until [`Input::poll_for`]).
    spin: Spin,
    /// The socket's read timeout between deadlines.
    timeout: Option<Duration>,
    /// When reads must be done by, if they must.
    deadline: Option<Instant>,
    /// Whether the socket's timeout was shortened for the deadline.
    shortened: bool,
}

impl<'a> Input<'a> {
    pub fn new(socket: &'a TcpStream, capacity: usize) -> Input<'a> {
        Input {
            socket,
            buf: Vec::with_capacity(capacity),
            pos: 0,
            short: false,
            spin: Spin::new(Duration::ZERO),
            timeout: socket.read_timeout().ok().flatten(),
            deadline: None,
            shortened: false,
        }
    }

    /// How long one read may wait for the client, outside a deadline.
    pub fn set_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.timeout = timeout;
        self.shortened = false;
        self.socket.set_read_timeout(timeout)
    }

    /// From now on reads fail with `TimedOut` once `deadline` has passed; `None` lifts it.
    pub fn set_deadline(&mut self, deadline: Option<Instant>) -> io::Result<()> {
        self.deadline = deadline;
        if deadline.is_none() && self.shortened {
            self.set_timeout(self.timeout)?;
        }
        Ok(())
    }

    /// Whether a deadline is in force.
    pub fn has_deadline(&self) -> bool {
        self.deadline.is_some()
    }

    /// Before a read that may block: fails once the deadline has passed, and otherwise
    /// makes the socket give up no later than the deadline.
    fn before_blocking(&mut self) -> io::Result<()> {
        let Some(deadline) = self.deadline else {
            return Ok(());
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took too long",
            ));
        }
        let wait = self.timeout.map_or(left, |t| t.min(left));
        self.shortened = true;
        self.socket.set_read_timeout(Some(wait))
    }

    /// Polls for up to `budget` for the next bytes before a read blocks (adaptive, as
    /// `roost_client::receive` says): a client that sends its next request right after an
    /// answer finds this thread awake, not asleep on a CPU that must be woken first.
    pub fn poll_for(&mut self, budget: Duration) {
        self.spin = Spin::new(budget);
    }

    /// Makes the following fills short (see the module comment) or full-sized again.
    pub fn short_fills(&mut self, short: bool) {
        self.short = short;
    }

    /// The bytes received but not consumed yet.
    pub fn buffer(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// The socket itself, for splicing; take what [`Input::buffer`] holds first.
    pub fn socket(&self) -> &'a TcpStream {
        self.socket
    }

    /// Reads into the spare room of the emptied buffer, at most `max` bytes.
    fn refill(&mut self, max: usize) -> io::Result<()> {
        self.buf.clear();
        self.pos = 0;
        let want = max.min(self.buf.capacity());
        let (fd, spare) = (self.socket.as_raw_fd(), self.buf.as_mut_ptr());
        // SAFETY: `spare` is valid for writes of `want` bytes, the vector's capacity.
        if let Some(done) = self.spin.poll(|| unsafe { recv_now(fd, spare, want) }) {
            // SAFETY: the kernel wrote that many bytes into the spare capacity.
            unsafe { self.buf.set_len(done?) };
            return Ok(());
        }
        self.before_blocking()?;
        loop {
            // SAFETY: the kernel writes at most `want` bytes into the vector's spare capacity,
            // which holds at least that many; only the bytes it reports written become part
            // of the vector.
            let n =
                unsafe { libc::read(self.socket.as_raw_fd(), self.buf.as_mut_ptr().cast(), want) };
            if n >= 0 {
                // SAFETY: read wrote n <= want bytes, all within the capacity, from the start.
                unsafe { self.buf.set_len(n as usize) };
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Read for Input<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        // A large read with nothing buffered goes straight from the socket.
        if self.pos == self.buf.len() && out.len() >= self.buf.capacity() {
            self.before_blocking()?;
            return (&*self.socket).read(out);
        }
        let buffered = self.fill_buf()?;
        let n = buffered.len().min(out.len());
        out[..n].copy_from_slice(&buffered[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Input<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.buf.len() {
            let max = if self.short {
                SHORT_FILL
            } else {
                self.buf.capacity()
            };
            self.refill(max)?;
        }
        Ok(self.buffer())
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    #[test]
    fn short_fills_leave_the_rest_in_the_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let mut data = b"first line\n".to_vec();
        data.extend((0..5000u32).map(|i| i as u8));
        client.write_all(&data).unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();

        let mut input = Input::new(&server, 32 * 1024);
        input.short_fills(true);
        let mut line = Vec::new();
        input.read_until(b'\n', &mut line).unwrap();
        assert_eq!(line, b"first line\n");
        assert!(input.buffer().len() <= SHORT_FILL - line.len());
        input.short_fills(false);
        let mut rest = Vec::new();
        input.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, data[line.len()..]);
    }

    #[test]
    fn polled_reads_get_every_byte_whenever_it_comes() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let mut input = Input::new(&server, 64);
        input.poll_for(Duration::from_millis(20));
        // A request there at once, one that comes within the budget, one after it (the
        // poll gives up and the read blocks), each whole and in order, short fills too.
        let writer = std::thread::spawn(move || {
            client.write_all(b"one\n").unwrap();
            std::thread::sleep(Duration::from_millis(5));
            client.write_all(b"two\n").unwrap();
            std::thread::sleep(Duration::from_millis(60));
            client.write_all(&[b'x'; 300]).unwrap();
            client.write_all(b"\nthree\n").unwrap();
        });
        let mut lines = Vec::new();
        for _ in 0..4 {
            let mut line = Vec::new();
            input.read_until(b'\n', &mut line).unwrap();
            lines.push(line);
        }
        writer.join().unwrap();
        assert_eq!(lines[0], b"one\n");
        assert_eq!(lines[1], b"two\n");
        assert_eq!(lines[2].len(), 301);
        assert_eq!(lines[3], b"three\n");
    }

    #[test]
    fn a_deadline_bounds_a_dribble_however_often_bytes_come() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let mut input = Input::new(&server, 64);
        input.set_timeout(Some(Duration::from_secs(5))).unwrap();
        let started = Instant::now();
        input
            .set_deadline(Some(started + Duration::from_millis(300)))
            .unwrap();
        let dribble = std::thread::spawn(move || {
            for _ in 0..40 {
                if client.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let mut line = Vec::new();
        let err = input.read_until(b'\n', &mut line).unwrap_err();
        // The deadline itself, or the socket timeout shortened to it.
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            ),
            "{err}"
        );
        let took = started.elapsed();
        assert!(took < Duration::from_millis(1500), "{took:?}");
        assert!(took >= Duration::from_millis(300), "{took:?}");
        input.set_deadline(None).unwrap();
        assert_eq!(server.read_timeout().unwrap(), Some(Duration::from_secs(5)));
        drop(input);
        drop(server);
        dribble.join().unwrap();
    }
}
